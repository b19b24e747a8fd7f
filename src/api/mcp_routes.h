// MCP over Streamable HTTP at /mcp (protocol 2025-11-25 back to 2025-03-26,
// JSON answers, no SSE) and GET /v1/tools, apart from the connection handling
// in server.cc. Each MCP session (Mcp-Session-Id, issued at initialize) is one
// mcp::McpServer bound to the token that opened it.
//
//   McpRoutes routes(service, sessions, options, launch, reap);
//   if (path == "/mcp") {
//     McpHttpReply r = routes.Handle(rq);   // blocking (a tools/call runs the code): a worker thread
//     send(r.status, r.body, r.content_type, r.headers);
//   }
//
//   POST   /mcp   one JSON-RPC message: 200 application/json (a request), 202 (a
//                 notification or response); initialize mints Mcp-Session-Id;
//                 every other message needs it: missing 400, unknown 404
//   GET    /mcp   405 (no server-initiated stream)
//   DELETE /mcp   ends the MCP session and the airlock sessions it created: 200
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mcp/mcp_server.h"
#include "service/service.h"
#include "session/session_manager.h"

namespace airlock::api {

struct McpHttpRequest {
  std::string method;            // "POST", "GET", "DELETE", ...
  std::string client_address;    // for the audit record
  std::string body;
  std::string owner;             // the token's name ("" without tokens)
  std::string session_id;        // the Mcp-Session-Id header
  std::string protocol_version;  // the MCP-Protocol-Version header
  std::string accept;            // the Accept header
};

struct McpHttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

struct McpRouteOptions {
  std::string version;                   // airlock's, in serverInfo
  size_t max_message_bytes = size_t{2} << 20;
  size_t max_depth = 32;
  size_t max_code_bytes = size_t{1} << 20;
  int64_t max_file_bytes = int64_t{32} << 20;
  size_t max_conversations = 256;        // MCP sessions at once; beyond: 503 at initialize
  double conversation_idle_s = 3600;     // an MCP session unused this long is ended
  size_t max_concurrent_runs = 8;        // one-shot execute_python calls at once; beyond: a tool error
  // Each execute_python's audit record (route "/mcp"); may be unset.
  std::function<void(model::AuditRecord)> audit;
  // Holds code its profile keeps for a person (mcp::McpOptions::hold); the
  // owner is the MCP session's token. Unset: such code is refused.
  std::function<StatusOr<mcp::McpOptions::Held>(service::Prepared, const std::string& owner)> hold;
};

// Runs `fn` on the server's launcher thread (the one thread that launches runs).
using LaunchOn = std::function<void(std::function<void()> fn)>;

class McpRoutes {
 public:
  // `launch` runs a function on the launcher thread; `reap` on a thread where
  // a run's teardown may block (the server's reaper), after the answer.
  McpRoutes(const service::Service& service, session::SessionManager& sessions, McpRouteOptions options,
            LaunchOn launch, LaunchOn reap);
  ~McpRoutes();  // ends the MCP sessions (and the airlock sessions they made)

  static bool Matches(std::string_view path) { return path == "/mcp"; }
  static bool IsTools(std::string_view path) { return path == "/v1/tools"; }

  // /mcp. Blocking; thread-safe.
  McpHttpReply Handle(const McpHttpRequest& request);
  // GET /v1/tools?format=openai|openai-responses|anthropic|mcp (default openai). Fast.
  McpHttpReply Tools(std::string_view query) const;

  size_t conversations() const;

 private:
  struct Conversation;
  StatusOr<model::ExecuteResponse> RunOneShot(service::Plan& plan);
  void Sweep();  // ends idle conversations (mu_ held by the caller: no)

  const service::Service& svc_;
  session::SessionManager& sessions_;
  McpRouteOptions opt_;
  LaunchOn launch_;
  LaunchOn reap_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Conversation>> conversations_;
  size_t runs_ = 0;  // one-shot runs under way (mu_)
};

}  // namespace airlock::api
