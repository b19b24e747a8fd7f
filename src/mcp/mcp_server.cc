#include "mcp/mcp_server.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/log.h"
#include "session/session_commands.h"
#include "session/session_files.h"

namespace airlock::mcp {

McpServer::McpServer(const service::Service& service, session::SessionManager* sessions, McpOptions options)
    : svc_(service), sessions_(sessions), options_(std::move(options)) {}

std::string McpServer::protocol_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return protocol_version_;
}

std::optional<std::string> McpServer::Handle(std::string_view message) {
  Step step = Begin(message);
  if (!step.tool) return step.answer;
  ToolCall& t = *step.tool;
  switch (t.kind) {
    case ToolCall::Kind::kOneShot: {
      service::Prepared p = svc_.Prepare(t.call.execute, t.request_id);
      if (auto answer = OneShotPrepared(t, p)) return answer;
      auto ex = svc_.Start(*p.plan);
      return OneShotDone(t, ex.ok() ? svc_.Supervise(*p.plan, std::move(*ex))
                                    : StatusOr<model::ExecuteResponse>(ex.status()));
    }
    case ToolCall::Kind::kSessionCall:
      return SessionCallDone(t, sessions_->Execute(t.call.session_id, options_.owner, t.call.execute, t.request_id, {}));
    case ToolCall::Kind::kCreateSession: {
      // A session is a warm run: when none is ready right now (the pool is
      // refilling after a call), wait a little for one rather than hand the
      // model a "retry shortly" it may not act on.
      model::SessionCreateRequest req;
      req.base.profile = t.call.execute.profile;
      req.base.env = t.call.execute.env;
      session::Created made = sessions_->Create(options_.owner, "", req, profile::Door::kMcp);
      for (auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
           !made.ok && made.error.kind == model::ErrorKind::kUnavailable &&
           std::chrono::steady_clock::now() < give_up;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        made = sessions_->Create(options_.owner, "", req, profile::Door::kMcp);
      }
      return SessionCreated(t, made);
    }
    case ToolCall::Kind::kCommand: {
      model::ApiError error;
      auto end = session::RunSessionCommand(svc_.profiles(), *sessions_, t.call.session_id, options_.owner,
                                            CommandRequestOf(t), &error);
      return CommandDone(t, end ? std::nullopt : std::optional<model::ApiError>(error), end.value_or(model::CommandEnd()));
    }
    case ToolCall::Kind::kBlocking:
      return RunBlockingTool(t);
  }
  return std::nullopt;
}

McpServer::Step McpServer::Begin(std::string_view message) {
  Step step;
  model::McpMessage m;
  model::ParseMcpMessage(message, options_.caps, &m);
  switch (m.kind) {
    case model::McpMessage::kInvalid:
      step.invalid = true;
      step.answer = model::McpErrorLine(m.id_json, m.error_code, m.error_message);
      return step;
    case model::McpMessage::kResponse:
    case model::McpMessage::kNotification:
      // notifications/initialized, notifications/cancelled (a call runs to its
      // own timeout), anything else.
      return step;
    case model::McpMessage::kRequest:
      break;
  }
  step.method = m.method;
  if (m.method == "initialize") {
    const auto* begin = std::begin(kProtocolVersions);
    const auto* end = std::end(kProtocolVersions);
    bool known = std::find(begin, end, m.protocol_version) != end;
    std::string version = known ? m.protocol_version : kProtocolVersions[0];
    {
      std::lock_guard<std::mutex> lock(mu_);
      protocol_version_ = version;
    }
    // The client's name and version are its own words: log::Info escapes
    // every control character, so a newline cannot forge a line.
    log::Info("mcp: initialize from '" + m.client_name + "', protocol " + version +
              (known ? "" : " (the client asked for '" + m.protocol_version + "')"));
    model::McpServerInfo info;
    info.protocol_version = version;
    info.version = options_.version;
    info.instructions =
        sessions_ != nullptr
            ? "airlock runs Python in a kernel-isolated sandbox with no network. Use execute_python to run code: "
              "without session_id each call is a fresh interpreter; to keep variables and files between calls, "
              "call create_session and pass its session_id, then close_session when done. upload_file and "
              "download_file move files in and out of a session; run_command runs a shell command in it, over the same "
              "files. list_profiles shows which modules each "
              "profile allows."
            : "airlock runs Python in a kernel-isolated sandbox. Use execute_python to run code (each call is a "
              "fresh interpreter with no network and an empty /tmp); use list_profiles to see which modules each "
              "profile allows.";
    step.answer = model::McpResultLine(m.id_json, model::McpInitializeResult(info));
    return step;
  }
  if (m.method == "ping") {
    step.answer = model::McpResultLine(m.id_json, "{}");
    return step;
  }
  if (m.method == "tools/list") {
    model::McpToolsInfo info;
    info.default_profile = svc_.profiles().DefaultFor(profile::Door::kMcp).name;
    info.profiles = svc_.profiles().Names();
    for (const profile::Profile& p : svc_.profiles().profiles()) {
      info.max_timeout_s = std::max(info.max_timeout_s, p.resources.timeout_max_s);
    }
    info.sessions = sessions_ != nullptr;
    info.max_file_bytes = options_.max_file_bytes;
    step.answer = model::McpResultLine(m.id_json, model::McpToolsListResult(info));
    return step;
  }
  if (m.method == "resources/list") {
    step.answer = model::McpResultLine(m.id_json, R"({"resources":[]})");
    return step;
  }
  if (m.method == "prompts/list") {
    step.answer = model::McpResultLine(m.id_json, R"({"prompts":[]})");
    return step;
  }
  if (m.method != "tools/call") {
    step.answer = model::McpErrorLine(m.id_json, model::kJsonRpcMethodNotFound, "Method not found: " + m.method);
    return step;
  }
  const auto& names = model::McpToolNames(sessions_ != nullptr);
  if (std::find(names.begin(), names.end(), m.call.name) == names.end()) {
    step.answer = model::McpErrorLine(m.id_json, model::kJsonRpcInvalidParams,
                                      "Unknown tool: " + m.call.name + " (tools/list names them)");
    return step;
  }
  if (!m.call.argument_error.empty()) {
    step.answer = model::McpResultLine(m.id_json, model::McpToolErrorResult(m.call.name + ": " + m.call.argument_error));
    return step;
  }
  if (m.call.name == "list_profiles") {
    std::vector<model::ProfileView> views;
    for (const profile::Profile& p : svc_.profiles().profiles()) views.push_back(svc_.View(p, profile::Door::kMcp));
    step.answer = model::McpResultLine(m.id_json, model::McpProfilesResult(views, svc_.profiles().DefaultFor(profile::Door::kMcp).name));
    return step;
  }
  ToolCall t;
  t.call = std::move(m.call);
  t.id_json = m.id_json;
  t.request_id = options_.request_id_prefix + std::to_string(++calls_);
  t.start = std::chrono::steady_clock::now();
  if (t.call.name == "execute_python") {
    t.kind = t.call.session_id.empty() ? ToolCall::Kind::kOneShot : ToolCall::Kind::kSessionCall;
    // A one-shot run without a profile takes the MCP door's default
    // (--mcp-profile), whichever transport carried it.
    if (t.kind == ToolCall::Kind::kOneShot && !t.call.execute.profile) {
      t.call.execute.profile = svc_.profiles().DefaultFor(profile::Door::kMcp).name;
    }
  } else if (t.call.name == "create_session") {
    t.kind = ToolCall::Kind::kCreateSession;
  } else if (t.call.name == "run_command") {
    t.kind = ToolCall::Kind::kCommand;
  } else {
    t.kind = ToolCall::Kind::kBlocking;
  }
  step.tool = std::move(t);
  return step;
}

std::string McpServer::CallResult(const ToolCall& t, const std::string& result) const {
  return model::McpResultLine(t.id_json, result);
}

std::optional<std::string> McpServer::OneShotPrepared(ToolCall& t, service::Prepared& p) {
  model::AuditRecord& a = t.record;
  a.request_id = t.request_id;
  a.profile = p.profile_name;
  a.code_sha256 = p.code_sha256;
  a.code_bytes = p.code_bytes;
  if (p.verdict == service::Verdict::kRejected) {
    a.violations = p.violations;
    Audit(t, "rejected", nullptr, p.error.message);
    return CallResult(t, model::McpRejectedResult(p.violations));
  }
  if (p.verdict == service::Verdict::kInvalid) {
    Audit(t, "invalid", nullptr, p.error.message);
    return CallResult(t, model::McpToolErrorResult(p.error.message));
  }
  // Held for a person: through the server's approvals book when there is one
  // (the agent gets the approval id; a person decides in the console or at
  // /v1/approvals), refused otherwise; never run.
  if (p.verdict == service::Verdict::kNeedsApproval && options_.hold) {
    a.violations = p.violations;
    StatusOr<McpOptions::Held> held = options_.hold(std::move(p), options_.owner);
    if (!held.ok()) {
      Audit(t, "refused", nullptr, held.status().message());
      return CallResult(t, model::McpToolErrorResult(
                               "this code needs a person's approval, and it could not be held for one: " +
                               held.status().message()));
    }
    a.approval_id = held->approval_id;
    Audit(t, "pending_approval", nullptr, "");
    return CallResult(t, model::McpPendingApprovalResult(held->pending_json));
  }
  if (p.verdict != service::Verdict::kRun) {
    std::string why = p.error.message.empty() ? "this profile holds code for a person's approval, which MCP cannot "
                                                "wait for; use /v1/execute and /v1/approvals"
                                              : p.error.message;
    Audit(t, "refused", nullptr, why);
    return CallResult(t, model::McpToolErrorResult(why));
  }
  a.violations = p.plan->warnings;
  return std::nullopt;
}

std::string McpServer::OneShotDone(ToolCall& t, const StatusOr<model::ExecuteResponse>& r) {
  if (!r.ok()) {
    log::Error("mcp: call " + t.id_json + ": " + r.status().ToString());
    Audit(t, "error", nullptr, r.status().ToString());
    return CallResult(t, model::McpToolErrorResult("the sandbox could not run the code: " + r.status().ToString()));
  }
  const bool lost = r->run.kill_reason && *r->run.kill_reason == "lost";
  Audit(t, lost ? "error" : "ran", &r->run, "");
  if (lost) return CallResult(t, model::McpToolErrorResult(r->run.kill_detail));
  return CallResult(t, model::McpToolCallResult(*r));
}

std::string McpServer::SessionCallDone(ToolCall& t, const session::CallReply& r) {
  model::AuditRecord& a = t.record;
  a.request_id = t.request_id;
  a.profile = r.profile;
  a.code_sha256 = r.code_sha256;
  a.code_bytes = r.code_bytes;
  a.violations = r.violations;
  Audit(t,
        r.kind == session::CallReply::Kind::kRan        ? "ran"
        : r.kind == session::CallReply::Kind::kRejected ? "rejected"
                                                        : "error",
        r.kind == session::CallReply::Kind::kRan ? &r.response.run : nullptr,
        r.kind == session::CallReply::Kind::kRan ? "" : r.error.message);
  switch (r.kind) {
    case session::CallReply::Kind::kRejected:
      return CallResult(t, model::McpRejectedResult(r.violations));
    case session::CallReply::Kind::kError:
      return CallResult(t, model::McpToolErrorResult("execute_python: " + r.error.message));
    case session::CallReply::Kind::kRan:
      break;
  }
  return CallResult(t, model::McpSessionCallResult(r.response, t.call.session_id, r.call.alive, r.call.interrupted,
                                                   r.call.execution_count, r.call.end_reason));
}

std::string McpServer::SessionCreated(ToolCall& t, const session::Created& made) {
  if (!made.ok) return CallResult(t, model::McpToolErrorResult("create_session: " + made.error.message));
  {
    std::lock_guard<std::mutex> lock(mu_);
    created_.insert(made.view.id);
  }
  return CallResult(t, model::McpSessionCreatedResult(made.view.id, made.view.profile, made.view.expires_at_ms,
                                                      made.view.idle_timeout_s));
}

std::string McpServer::RunBlockingTool(ToolCall& t) {
  session::SessionManager& mgr = *sessions_;
  const std::string& owner = options_.owner;
  const model::McpToolCall& call = t.call;
  model::ApiError error;
  if (call.name == "close_session") {
    if (!mgr.Delete(call.session_id, owner, &error)) {
      return CallResult(t, model::McpToolErrorResult("close_session: " + error.message));
    }
    std::lock_guard<std::mutex> lock(mu_);
    created_.erase(call.session_id);
    return CallResult(t, model::McpSessionClosedResult(call.session_id));
  }
  if (call.name == "upload_file") {
    if (!session::WriteSessionFile(mgr, call.session_id, owner, call.path, call.content, options_.max_file_bytes,
                                   &error)) {
      return CallResult(t, model::McpToolErrorResult("upload_file: " + error.message));
    }
    return CallResult(t, model::McpFileWrittenResult(call.session_id, call.path,
                                                     static_cast<int64_t>(call.content.size())));
  }
  // download_file
  std::optional<std::string> data =
      session::ReadSessionFile(mgr, call.session_id, owner, call.path, options_.max_file_bytes, &error);
  if (!data) return CallResult(t, model::McpToolErrorResult("download_file: " + error.message));
  return CallResult(t, model::McpFileReadResult(call.session_id, call.path, *data));
}

model::CommandRequest McpServer::CommandRequestOf(const ToolCall& t) {
  model::CommandRequest rq;
  rq.cmd = t.call.command;
  rq.timeout_s = t.call.execute.timeout_s.value_or(model::kCommandDefaultTimeoutS);
  return rq;
}

std::string McpServer::CommandDone(ToolCall& t, const std::optional<model::ApiError>& refused,
                                   const model::CommandEnd& end) {
  if (refused) return CallResult(t, model::McpToolErrorResult("run_command: " + refused->message));
  return CallResult(t, model::McpCommandResult(t.call.session_id, model::CommandEndToJson(end), end.exit_code, end.out,
                                               end.err, end.kill_detail));
}

void McpServer::Audit(ToolCall& t, const std::string& verdict, const model::RunReport* run, const std::string& error) {
  model::AuditRecord& a = t.record;
  a.route = options_.audit_route;
  a.token_name = options_.owner;
  a.verdict = verdict;
  a.error = error;
  a.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t.start).count();
  if (run) model::RecordRunIn(&a, *run);
  t.audited = true;
  if (options_.audit) options_.audit(a);
}

void McpServer::CloseSessions() {
  std::set<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ids.swap(created_);
  }
  for (const std::string& id : ids) {
    model::ApiError ignored;
    sessions_->Delete(id, options_.owner, &ignored);
  }
}

}  // namespace airlock::mcp
