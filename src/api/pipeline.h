// The request pipeline (DESIGN §2b, docs/architecture.md "The request
// pipeline"): the phases every request of every door passes, in this order,
// each one a function. They take the head of the request as plain data (no
// socket), so each is tested on its own (tests/unit/api/pipeline_test.cc).
//
//   1. accept + header   api/connection.cc, the budgets of api/admission.h  (timeouts; closed)
//   2. gate              Gate(): Host, Origin, content type                  421 / 403 / 415
//   3. authenticate      Authenticate(): token -> identity and roles         401
//   4. route             Lookup() (the door's table), then Match()           404 / 405
//   5. authorize         Authorize(): the role, then the target's owner      403 / 404
//   6. admit             CheckBodySize() on the header, Admit() the budgets  413 / 429
//   7. body              api/connection.cc: per the route's body policy (JSON buffered and
//                        capped, duplicate keys refused by the codecs; uploads streamed)
//   8. handle            the route's handler: on the loop, a worker, or a driver
//   9. respond           ReplyHeaders(): the reply policy's headers (sandbox bytes: an
//                        attachment under CSP sandbox), written by the connection
//  10. account           Account(): the metrics and one audit record, from one place
//
// Nothing of the body is read before phase 7, and nothing is answered before
// the phase that allows it: a refusal of phases 2-6 is written at once and the
// connection closed after it when a body was announced (discarded, bounded).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/admission.h"
#include "api/auth.h"
#include "api/request_gate.h"
#include "api/route.h"
#include "model/execute.h"

namespace airlock::api {

class Metrics;

// The head of a request, as the phases see it.
struct RequestHead {
  Door door = Door::kApi;
  std::string method;  // as sent ("GET")
  std::string path;    // the target up to '?'
  std::string query;   // after '?'
  std::string host, origin, content_type, expect;
  std::string authorization, api_key, access_token;  // Authorization, X-API-Key, X-Access-Token
  std::optional<uint64_t> content_length;
  bool has_body = false;  // a Content-Length above 0, or a chunked body
  std::string client;     // "address:port"
  RequestHeaders headers;
};

// A request the phases refuse: its error and, for its shape, the route of its
// path (a JSON-RPC error on /mcp, E2B's body on the E2B ports).
struct Refusal {
  model::ApiError error;
  HeaderList headers;  // Allow (405)
};

// What a server's routes need of the rest of the server to find the owner of
// a target (phase 5). Each returns nullopt when `who` may reach the target,
// else the error to answer (404 when it is another's or does not exist).
struct Owners {
  std::function<std::optional<model::ApiError>(const std::string& id, const std::string& owner)> session;
  std::function<std::optional<model::ApiError>(const std::string& id, const Identity& who)> approval;
  std::function<std::optional<model::ApiError>(const std::string& id, const std::string& owner)> mcp_session;
  std::function<std::optional<model::ApiError>(const std::string& id, const std::string& owner)> context;
};

// The body caps of the routes: --max-body, --max-file.
struct BodyCaps {
  uint64_t json = uint64_t{2} << 20;
  uint64_t upload = uint64_t{32} << 20;  // a file; multipart adds its part headers (kMultipartSlack)
};
// Multipart headers and delimiters an E2B upload may add to its file's bytes.
inline constexpr uint64_t kMultipartSlack = 64 * 1024;
// A route without a body reads at most this much of one (and drops it).
inline constexpr uint64_t kNoBodyCap = 64 * 1024;

// Phase 4's lookup (pure): the door's table, the method and the path.
RouteMatch Lookup(const RouteTable& table, const RequestHead& h);

// Phase 2. The probes (Role::kOpen) are not gated. `json_body`: the route
// takes a JSON body (the content type rule applies).
std::optional<Refusal> Gate(const RequestGate& gate, const RequestHead& h, const RouteMatch& m);
// A CORS preflight (OPTIONS): answered after the gate, before authentication
// (it carries no credentials), from its headers alone.
bool IsPreflight(const RequestHead& h);
Reply PreflightReply(const RequestGate& gate, const RequestHead& h);

// Phase 3. Routes that need no token (Role::kOpen, kNoToken) pass as anyone;
// without tokens configured everyone is "" with every role.
std::optional<Refusal> Authenticate(const Authenticator& auth, const RequestHead& h, const RouteMatch& m,
                                    Identity* who);

// Phase 4: 404 for a path no route has, 405 (Allow) for a method it has not.
std::optional<Refusal> Match(const RouteMatch& m, const RequestHead& h);

// Phase 5: the route's role, then its target's owner (before the body).
std::optional<Refusal> Authorize(const RouteMatch& m, const RequestHead& h, const Identity& who, bool auth_enabled,
                                 const Owners& owners);

// Phase 6: a declared length over the route's cap (413, on the header), then
// the budgets: the body's bytes (its length, or its cap when chunked; an
// upload's buffer) and an upload slot (429, the quota named).
uint64_t BodyCap(const Route& r, const BodyCaps& caps);
std::optional<Refusal> CheckBodySize(const Route& r, const RequestHead& h, const BodyCaps& caps);
std::optional<Refusal> Admit(Admission& budgets, const Route& r, const RequestHead& h, const Identity& who,
                             const BodyCaps& caps, AdmissionTicket* ticket);

// Phase 9: the headers every answer carries (Server, Cache-Control,
// X-Request-Id, nosniff, CORS for an allowed origin) and those of the
// route's reply policy: sandbox bytes go out as an attachment
// (application/octet-stream, Content-Disposition: attachment, CSP sandbox),
// the console's files with their CSP. `route` is null for a refusal before
// routing.
HeaderList ReplyHeaders(const Route* route, const Reply& reply, const std::string& request_id,
                        const HeaderList& cors);
// A refusal as its door answers it: the API's {"error",...} (MakeErrorReply),
// E2B's {"message","code"}, or a JSON-RPC error on a JSON-RPC route.
Reply RefusalReply(Door door, const Route* shape, const model::ApiError& error,
                   const std::vector<model::Violation>& violations, bool compat, const std::string& request_id);

// Phase 10: the metrics of a request and its audit record (type "request"
// unless the handler made it an "execution"), when the route is audited. The
// route label is the match's. Returns whether a record was written.
struct Accounted {
  std::string label;              // the metrics label
  const Route* route = nullptr;  // null before routing
  int status = 0;
  bool client_gone = false;
  bool execution = false;  // the record is an execution record (code ran or was refused)
};
bool Account(Metrics& metrics, const std::function<void(const model::AuditRecord&)>& write, const Accounted& a,
             model::AuditRecord record);

// The metrics label of a refusal (airlock_requests_rejected_total{reason}).
const char* RejectReason(model::ErrorKind kind);

}  // namespace airlock::api
