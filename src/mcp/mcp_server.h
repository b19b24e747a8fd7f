// One MCP conversation (a stdio connection, or one Mcp-Session-Id over HTTP):
// protocol version negotiation, the tools, and the JSON-RPC error answers. It
// goes through service::Service and session::SessionManager like every other
// surface and never reaches into exec/ or isolation/.
//
//   mcp::McpServer server(service, &sessions, {.version = "0.1.0"});
//   std::optional<std::string> reply = server.Handle(line);   // one message in, blocking
//   if (reply) write(*reply + "\n");                           // at most one out
//
// A transport that must not block (airlock serve's /mcp) calls Begin() and
// runs the tool calls it hands back itself, then the Finish functions below.
//
// Tools (docs/agents.md): execute_python {code, session_id?, timeout_seconds?,
// profile?}, create_session {profile?}, close_session {session_id},
// upload_file {session_id, path, content, encoding?}, download_file
// {session_id, path}, run_command {session_id, command, timeout_seconds?},
// list_profiles. Tool state is an explicit session_id
// argument, which is what the stateless 2026-07-28 revision needs too.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "model/command.h"
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

// A tools/call that runs code or blocks, handed back by McpServer::Begin to a
// transport that runs it itself (airlock serve's /mcp drives it from its event
// loop and the server's run slots), then answers it with the Finish functions.
struct ToolCall {
  enum class Kind {
    kOneShot,        // execute_python without session_id: Prepare, OneShotPrepared, run, OneShotDone
    kSessionCall,    // execute_python with session_id: a session call, SessionCallDone
    kCreateSession,  // create_session: SessionManager::Create (retried while no warm run is ready), SessionCreated
    kCommand,        // run_command: CommandRequestOf, a foreground command in the session's sandbox, CommandDone
    kBlocking,       // close_session, upload_file, download_file: RunBlockingTool on a worker thread
  };
  Kind kind = Kind::kOneShot;
  model::McpToolCall call;
  std::string id_json;     // the JSON-RPC id
  std::string request_id;  // in logs and the audit record (never derived from the MCP session id)
  std::chrono::steady_clock::time_point start;
  // The execution's audit record, once the call ran or was refused (code was
  // there): what options.audit is given; `audited` tells it was made.
  model::AuditRecord record;
  bool audited = false;
};

class McpServer {
 public:
  // `sessions` null: the session and file tools are not offered.
  McpServer(const service::Service& service, session::SessionManager* sessions, McpOptions options);

  // Handles one message; returns the answer (a JSON line without '\n'), or
  // nullopt for notifications and responses. Blocking: a tools/call runs the
  // code to its end, on the calling thread (which must then be the one thread
  // that launches runs: `airlock mcp`). Thread-safe.
  std::optional<std::string> Handle(std::string_view message);

  // The same in two halves, for a transport that runs tool calls itself:
  // Begin answers at once (never blocks, never runs code) every message but
  // a tools/call of execute_python, create_session, close_session,
  // upload_file and download_file, which it hands back as `tool`.
  struct Step {
    std::optional<std::string> answer;  // the answer line (nullopt and no tool: nothing to answer)
    std::optional<ToolCall> tool;
    bool invalid = false;  // not a JSON-RPC message we take (`answer` is its error)
    std::string method;    // a request's method ("initialize", "tools/call", ...)
  };
  Step Begin(std::string_view message);
  // kOneShot, once Service::Prepare made `p` (on a thread of the transport's
  // choosing): the answer when the code does not run (rejected, invalid, held
  // for a person through options.hold, refused), or nullopt: run *p.plan,
  // then answer with OneShotDone.
  std::optional<std::string> OneShotPrepared(ToolCall& t, service::Prepared& p);
  std::string OneShotDone(ToolCall& t, const StatusOr<model::ExecuteResponse>& r);
  std::string SessionCallDone(ToolCall& t, const session::CallReply& r);
  std::string SessionCreated(ToolCall& t, const session::Created& made);
  std::string RunBlockingTool(ToolCall& t);
  // run_command: the command it asks for, and its answer (`refused`, or its end).
  static model::CommandRequest CommandRequestOf(const ToolCall& t);
  std::string CommandDone(ToolCall& t, const std::optional<model::ApiError>& refused, const model::CommandEnd& end);

  std::string protocol_version() const;
  const std::string& owner() const { return options_.owner; }
  // Ends the sessions this conversation created and has not closed (an MCP
  // session's end over HTTP). Blocking.
  void CloseSessions();

 private:
  std::string CallResult(const ToolCall& t, const std::string& result) const;
  void Audit(ToolCall& t, const std::string& verdict, const model::RunReport* run, const std::string& error);

  const service::Service& svc_;
  session::SessionManager* sessions_;
  McpOptions options_;
  mutable std::mutex mu_;
  std::string protocol_version_;  // "" until initialize
  std::set<std::string> created_;  // sessions made here, still open
  std::atomic<uint64_t> calls_{0};
};

}  // namespace airlock::mcp
