// A route is a row of data: what each phase of the request pipeline
// (api/pipeline.h, docs/architecture.md "The request pipeline") needs to know
// of it. Each door has a table of them (api/*_routes.cc); the pipeline walks
// the same phases, in the same order, for every row of every table, so a
// route cannot skip one: adding a route is adding a row and a handler.
//
//   {.method = "GET", .pattern = "/v1/sessions/{id}/files/{path...}",
//    .role = Role::kRun, .owner = OwnerRule::kSession, .body = BodyPolicy::kNone,
//    .runs_on = RunsOn::kWorker, .reply = ReplyPolicy::kSandboxBytes,
//    .account = Accounting::kRequest, .on_worker = &GetSessionFile}
//
// A pattern is literal segments, at most one `{name}` (one segment: an id)
// and at most one trailing `{name...}` (the rest of the path, at least one
// byte). Every field but `name` must be set: tests/unit/api/route_table_test.cc
// walks every table and fails on a row that leaves one unset.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/auth.h"
#include "base/unique_fd.h"
#include "model/execute.h"
#include "model/stream_events.h"

namespace airlock::api {

class Exchange;
class ServerState;
struct Request;
struct Reply;

// Which listener a request came in on: the API, or one of the E2B ports.
enum class Door { kApi, kE2bInterpreter, kE2bEnvd };

// Who may call a route (phase "authorize"; without tokens everyone has every role).
enum class Role : uint8_t {
  kUnset,
  kOpen,     // anyone, and the browser gate does not apply: the probes (a kubelet sends its own Host)
  kNoToken,  // anyone, behind the browser gate: the console's static files (they hold no data)
  kAny,      // a valid token of any role
  kRun,      // a token with the run role
  kApprove,  // a token with the approve role
};

// How the owner of the route's target is found (phase "authorize", before
// any byte of the body is read): another token's target is answered 404,
// exactly as one that does not exist.
enum class OwnerRule : uint8_t {
  kUnset,
  kNone,        // no target (profiles, probes, metrics)
  kCaller,      // the caller's own things only (its lists, its E2B default context), by construction
  kSession,     // the session {id} of the path
  kApproval,    // the approval {id}: its requester, or an approver
  kMcpSession,  // the Mcp-Session-Id header, when present (initialize has none)
  kContext,     // the E2B context {id} of the path
  kInBody,      // named in the JSON body (E2B's context_id): checked by the handler once it is read
};

// What the body phase reads, and its cap.
enum class BodyPolicy : uint8_t {
  kUnset,
  kNone,    // no body: up to 64 KiB is read and dropped, more is 413
  kJson,    // JSON, up to --max-body, buffered (under the body budget), duplicate keys refused
  kUpload,  // bytes streamed to their file as they arrive (up to --max-file), never held whole
};

// Where the handler runs (phase "handle").
enum class RunsOn : uint8_t {
  kUnset,
  kLoop,    // on the event loop: constant time
  kWorker,  // on a worker thread (it blocks: file systems, a session's hand-off or kill)
  kDriver,  // started on the loop, then fed from it (runs, session calls, uploads): no thread held
};

// How the answer is written (phase "respond").
enum class ReplyPolicy : uint8_t {
  kUnset,
  kJson,          // a JSON body
  kText,          // a text body (Prometheus metrics)
  kConsole,       // the console's static files: its Content-Security-Policy and framing rules
  kSandboxBytes,  // bytes that came out of a sandbox: attachment, CSP sandbox, nosniff, streamed
  kRun,           // a run's answer: JSON, or events (NDJSON or SSE) when the client asks or the door streams
  kJsonRpc,       // MCP: JSON-RPC objects, errors included
  // envd's Connect calls (model/connect.h): a unary call's message, or its
  // error as Connect's {"code","message"} with Connect's status.
  kConnect,
  // A server-streaming Connect call: its body is one enveloped message
  // (Content-Type application/connect+json, BodyPolicy::kJson buffers it);
  // its answer enveloped messages, a refusal the stream's end (status 200).
  kConnectStream,
};

// What the account phase writes besides the metrics.
enum class Accounting : uint8_t {
  kUnset,
  kNone,     // metrics only (the probes)
  kRequest,  // an audit record of type "request"
  kRun,      // an audit record of type "execution" when code ran or was refused, else "request"
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// A handler that answers on the loop or drives the request from it (kLoop, kDriver).
using LoopHandler = void (*)(const std::shared_ptr<Exchange>& ex);
// A handler that blocks: called on a worker thread, its Reply written from the loop (kWorker).
using WorkerHandler = Reply (*)(ServerState& s, const Request& rq);

struct Route {
  const char* method = nullptr;   // "GET", "POST", "PUT", "DELETE"
  const char* pattern = nullptr;  // "/v1/sessions/{id}"
  Role role = Role::kUnset;
  OwnerRule owner = OwnerRule::kUnset;
  BodyPolicy body = BodyPolicy::kUnset;
  RunsOn runs_on = RunsOn::kUnset;
  ReplyPolicy reply = ReplyPolicy::kUnset;
  Accounting account = Accounting::kUnset;
  LoopHandler on_loop = nullptr;      // kLoop, kDriver
  WorkerHandler on_worker = nullptr;  // kWorker
  const char* name = nullptr;         // the metrics label; nullptr: the pattern (with the door's prefix)
  // BodyPolicy::kJson: the most a body may be; 0 for --max-body (the routes
  // that carry code). A route whose body is small by nature says so, and a
  // larger one is refused (413) on its header.
  uint64_t max_json = 0;
};

// A row, every field named in order (the tables' files read as the table).
inline Route Row(const char* method, const char* pattern, Role role, OwnerRule owner, BodyPolicy body,
                 RunsOn runs_on, ReplyPolicy reply, Accounting account, LoopHandler on_loop,
                 WorkerHandler on_worker = nullptr) {
  return {method, pattern, role, owner, body, runs_on, reply, account, on_loop, on_worker, nullptr, 0};
}

// A JSON route whose body is small by nature (a decision, a context's
// options): at most `bytes`, so that it is never a large parse on the loop.
inline Route SmallJson(Route r, uint64_t bytes = 16 * 1024) {
  r.max_json = bytes;
  return r;
}

// A door's routes, and the label prefix of its metrics ("" or "e2b:").
struct RouteTable {
  const char* door = "";
  const char* label_prefix = "";
  std::vector<Route> routes;
};

// What the route lookup found for a method and a path.
struct RouteMatch {
  const Route* route = nullptr;  // nullptr: 404, or 405 when `allow` is not empty
  const Route* path_route = nullptr;  // a route of this path (any method): its reply policy shapes a 405
  std::string param;  // the pattern's {name}
  std::string tail;   // the pattern's {name...} (still %-encoded)
  std::string allow;  // the methods this path has ("GET, PUT"), for a 405
  std::string label;  // the metrics label ("other" when none matched)
};

RouteMatch FindRoute(const RouteTable& table, std::string_view method, std::string_view path);

// A table's rows that leave a field unset or contradict themselves (a kWorker
// route without on_worker, an upload that is not driven, two rows with one
// method and pattern...): one line each, "" when the table is sound.
std::string CheckTable(const RouteTable& table);

// Names of the enum values, for the table test and docs/architecture.md.
const char* RoleName(Role r);
const char* OwnerRuleName(OwnerRule o);
const char* BodyPolicyName(BodyPolicy b);
const char* RunsOnName(RunsOn r);
const char* ReplyPolicyName(ReplyPolicy r);
const char* AccountingName(Accounting a);

// The headers a handler may read, taken once by the pipeline (bounded).
struct RequestHeaders {
  std::string accept;        // Accept
  std::string range;         // Range
  std::string route_key;     // X-Airlock-Route
  std::string content_type;  // Content-Type
  std::string mcp_session;   // Mcp-Session-Id
  std::string mcp_version;   // MCP-Protocol-Version
  std::string origin;        // Origin
  std::string connect_timeout_ms;  // Connect-Timeout-Ms (envd's Connect calls: the call's deadline)
  std::string content_encoding;  // Content-Encoding (an upload's: "gzip" is inflated)
  // E2B's file metadata: each X-Metadata-<key> header as (<key> lowercased,
  // value), the first of a repeated key only, in the order sent. Bounded by
  // the header's own cap (16 KiB); isolation::CheckSandboxMetadata checks it.
  std::vector<std::pair<std::string, std::string>> metadata;
};

// A request as its handler sees it: plain data, copied to a worker thread for
// a kWorker route. Everything in it passed the phases before "handle".
struct Request {
  Door door = Door::kApi;
  const Route* route = nullptr;
  std::string id;  // req_<16 hex>, in X-Request-Id and the audit record
  std::string method, path, query;
  std::string param, tail;  // the route pattern's {name} and {name...}
  Identity caller;          // the token's name ("" without tokens) and roles
  bool auth_enabled = false;
  std::string client;       // "address:port"
  RequestHeaders headers;
  std::string body;         // a kJson route's body
};

// What a handler answers. The respond phase adds the headers of the route's
// reply policy; a refusal's body has the door's error shape (ErrorReply).
struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  HeaderList headers;
  // ReplyPolicy::kSandboxBytes: `length` bytes of this open file from
  // `offset`, streamed with a bounded buffer (the file is read a piece at a
  // time as the client takes it); `name` for Content-Disposition.
  struct File {
    UniqueFd fd;
    int64_t offset = 0;
    int64_t length = 0;
    std::string name;
  };
  std::shared_ptr<File> file;
  // A run's answer that may end a stream of events: its last events (before
  // the end event), made where the run or call finished (a worker, for a
  // large one), so that the loop only writes them.
  std::vector<model::StreamEvent> final_events;
  // For metrics and the audit record: the refusal, when the reply is one.
  std::optional<model::ApiError> error;
  std::vector<model::Violation> violations;
};

}  // namespace airlock::api
