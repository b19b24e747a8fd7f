// One MCP conversation (a stdio connection, or one Mcp-Session-Id over HTTP):
// protocol version negotiation, the tools, and the JSON-RPC error answers. It
// goes through service::Service and session::SessionManager like every other
// surface and never reaches into exec/ or isolation/.
//
//   mcp::McpServer server(service, &sessions, {.version = "0.1.0"});
//   std::optional<std::string> reply = server.Handle(line);   // one message in
//   if (reply) write(*reply + "\n");                           // at most one out
//
// Tools (docs/agents.md): execute_python {code, session_id?, timeout_seconds?,
// profile?}, create_session {profile?}, close_session {session_id},
// upload_file {session_id, path, content, encoding?}, download_file
// {session_id, path}, list_profiles. Tool state is an explicit session_id
// argument, which is what the stateless 2026-07-28 revision needs too.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "model/mcp.h"
#include "service/service.h"
#include "session/session_manager.h"

namespace airlock::mcp {

// The revisions this server speaks, newest first; an initialize asking for
// another gets the newest (the client then decides whether to go on).
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

struct McpOptions {
  std::string version;         // airlock's version, in serverInfo
  model::McpCaps caps;
  // The token name that owns the sessions made here ("" without tokens): the
  // same ownership as /v1/sessions (another owner's id is "not found").
  std::string owner;
  int64_t max_file_bytes = int64_t{32} << 20;  // upload_file / download_file
  std::string request_id_prefix = "mcp_";
  // Called once per execute_python that reached the policy (ran, rejected,
  // refused), with the record filled but for `time`, `client_address` and
  // `http_status`: the server writes it to its audit log. May be unset.
  std::function<void(model::AuditRecord)> audit;
  std::string audit_route = "/mcp";
  // Holds a request its profile keeps for a person's approval, as
  // /v1/execute does, and returns the approval's id and its JSON (the 202
  // body). Set by airlock serve's /mcp; unset (`airlock mcp` over stdio has no
  // approvals book) such a request is refused with a tool error.
  struct Held {
    std::string approval_id;
    std::string pending_json;
  };
  std::function<StatusOr<Held>(service::Prepared prepared, const std::string& owner)> hold;
};

// Launches a prepared one-shot run and supervises it to its end, blocking.
// Unset: Service::Start + Service::Supervise on the calling thread (which must
// then be the one thread that launches runs: `airlock mcp`).
using OneShotRunner = std::function<StatusOr<model::ExecuteResponse>(service::Plan& plan)>;

class McpServer {
 public:
  // `sessions` null: the session and file tools are not offered.
  McpServer(const service::Service& service, session::SessionManager* sessions, McpOptions options,
            OneShotRunner run = {});

  // Handles one message; returns the answer (a JSON line without '\n'), or
  // nullopt for notifications and responses. Blocking: a tools/call runs the
  // code to its end. Thread-safe (HTTP clients may send calls concurrently).
  std::optional<std::string> Handle(std::string_view message);

  std::string protocol_version() const;
  const std::string& owner() const { return options_.owner; }
  // Ends the sessions this conversation created and has not closed (an MCP
  // session's end over HTTP). Blocking.
  void CloseSessions();

 private:
  std::string CallTool(const model::McpToolCall& call, const std::string& id);
  std::string CallSessionTool(const model::McpToolCall& call, const std::string& request_id);
  std::string RunOneShot(const model::McpToolCall& call, const std::string& id, const std::string& request_id);
  void Audit(model::AuditRecord record, const std::string& verdict, const model::RunReport* run) const;

  const service::Service& svc_;
  session::SessionManager* sessions_;
  McpOptions options_;
  OneShotRunner run_;
  mutable std::mutex mu_;
  std::string protocol_version_;  // "" until initialize
  std::set<std::string> created_;  // sessions made here, still open
  std::atomic<uint64_t> calls_{0};
};

}  // namespace airlock::mcp
