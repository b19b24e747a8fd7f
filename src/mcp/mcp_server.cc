#include "mcp/mcp_server.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/log.h"
#include "session/session_files.h"

namespace airlock::mcp {

McpServer::McpServer(const service::Service& service, session::SessionManager* sessions, McpOptions options,
                     OneShotRunner run)
    : svc_(service), sessions_(sessions), options_(std::move(options)), run_(std::move(run)) {}

std::string McpServer::protocol_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return protocol_version_;
}

std::optional<std::string> McpServer::Handle(std::string_view message) {
  model::McpMessage m;
  model::ParseMcpMessage(message, options_.caps, &m);
  switch (m.kind) {
    case model::McpMessage::kInvalid:
      return model::McpErrorLine(m.id_json, m.error_code, m.error_message);
    case model::McpMessage::kResponse:
    case model::McpMessage::kNotification:
      // notifications/initialized, notifications/cancelled (a call runs to its
      // own timeout), anything else.
      return std::nullopt;
    case model::McpMessage::kRequest:
      break;
  }
  if (m.method == "initialize") {
    const auto* begin = std::begin(kProtocolVersions);
    const auto* end = std::end(kProtocolVersions);
    bool known = std::find(begin, end, m.protocol_version) != end;
    std::string version = known ? m.protocol_version : kProtocolVersions[0];
    {
      std::lock_guard<std::mutex> lock(mu_);
      protocol_version_ = version;
    }
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
              "download_file move files in and out of a session. list_profiles shows which modules each "
              "profile allows."
            : "airlock runs Python in a kernel-isolated sandbox. Use execute_python to run code (each call is a "
              "fresh interpreter with no network and an empty /tmp); use list_profiles to see which modules each "
              "profile allows.";
    return model::McpResultLine(m.id_json, model::McpInitializeResult(info));
  }
  if (m.method == "ping") return model::McpResultLine(m.id_json, "{}");
  if (m.method == "tools/list") {
    model::McpToolsInfo info;
    info.default_profile = svc_.profiles().DefaultFor(profile::Door::kMcp).name;
    info.profiles = svc_.profiles().Names();
    for (const profile::Profile& p : svc_.profiles().profiles()) {
      info.max_timeout_s = std::max(info.max_timeout_s, p.resources.timeout_max_s);
    }
    info.sessions = sessions_ != nullptr;
    info.max_file_bytes = options_.max_file_bytes;
    return model::McpResultLine(m.id_json, model::McpToolsListResult(info));
  }
  if (m.method == "tools/call") {
    const auto& names = model::McpToolNames(sessions_ != nullptr);
    if (std::find(names.begin(), names.end(), m.call.name) == names.end()) {
      return model::McpErrorLine(m.id_json, model::kJsonRpcInvalidParams,
                                 "Unknown tool: " + m.call.name + " (tools/list names them)");
    }
    return model::McpResultLine(m.id_json, CallTool(m.call, m.id_json));
  }
  if (m.method == "resources/list") return model::McpResultLine(m.id_json, R"({"resources":[]})");
  if (m.method == "prompts/list") return model::McpResultLine(m.id_json, R"({"prompts":[]})");
  return model::McpErrorLine(m.id_json, model::kJsonRpcMethodNotFound, "Method not found: " + m.method);
}

std::string McpServer::CallTool(const model::McpToolCall& call, const std::string& id) {
  if (!call.argument_error.empty()) return model::McpToolErrorResult(call.name + ": " + call.argument_error);
  if (call.name == "list_profiles") {
    std::vector<model::ProfileView> views;
    for (const profile::Profile& p : svc_.profiles().profiles()) views.push_back(svc_.View(p, profile::Door::kMcp));
    return model::McpProfilesResult(views, svc_.profiles().DefaultFor(profile::Door::kMcp).name);
  }
  const std::string request_id = options_.request_id_prefix + std::to_string(++calls_);
  if (call.name != "execute_python" || !call.session_id.empty()) return CallSessionTool(call, request_id);
  return RunOneShot(call, id, request_id);
}

std::string McpServer::RunOneShot(const model::McpToolCall& call, const std::string& id,
                                  const std::string& request_id) {
  const auto start = std::chrono::steady_clock::now();
  model::ExecuteRequest request = call.execute;
  if (!request.profile) request.profile = svc_.profiles().DefaultFor(profile::Door::kMcp).name;
  service::Prepared p = svc_.Prepare(request, request_id);
  model::AuditRecord a;
  a.request_id = request_id;
  a.profile = p.profile_name;
  a.code_sha256 = p.code_sha256;
  a.code_bytes = p.code_bytes;
  auto audit = [&](const std::string& verdict, const model::RunReport* run, const std::string& error) {
    a.error = error;
    a.duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    Audit(a, verdict, run);
  };
  if (p.verdict == service::Verdict::kRejected) {
    a.violations = p.violations;
    audit("rejected", nullptr, p.error.message);
    return model::McpRejectedResult(p.violations);
  }
  if (p.verdict == service::Verdict::kInvalid) {
    audit("invalid", nullptr, p.error.message);
    return model::McpToolErrorResult(p.error.message);
  }
  // Held for a person: through the server's approvals book when there is one
  // (the agent gets the approval id; a person decides in the console or at
  // /v1/approvals), refused otherwise; never run.
  if (p.verdict == service::Verdict::kNeedsApproval && options_.hold) {
    a.violations = p.violations;
    StatusOr<McpOptions::Held> held = options_.hold(std::move(p), options_.owner);
    if (!held.ok()) {
      audit("refused", nullptr, held.status().message());
      return model::McpToolErrorResult("this code needs a person's approval, and it could not be held for one: " +
                                       held.status().message());
    }
    a.approval_id = held->approval_id;
    audit("pending_approval", nullptr, "");
    return model::McpPendingApprovalResult(held->pending_json);
  }
  if (p.verdict != service::Verdict::kRun) {
    std::string why = p.error.message.empty() ? "this profile holds code for a person's approval, which MCP cannot "
                                                "wait for; use /v1/execute and /v1/approvals"
                                              : p.error.message;
    audit("refused", nullptr, why);
    return model::McpToolErrorResult(why);
  }
  a.violations = p.plan->warnings;
  StatusOr<model::ExecuteResponse> r = Internal("no run");
  if (run_) {
    r = run_(*p.plan);
  } else {
    auto ex = svc_.Start(*p.plan);
    r = ex.ok() ? svc_.Supervise(*p.plan, std::move(*ex)) : StatusOr<model::ExecuteResponse>(ex.status());
  }
  if (!r.ok()) {
    log::Error("mcp: call " + id + ": " + r.status().ToString());
    audit("error", nullptr, r.status().ToString());
    return model::McpToolErrorResult("the sandbox could not run the code: " + r.status().ToString());
  }
  audit(r->run.kill_reason && *r->run.kill_reason == "lost" ? "error" : "ran", &r->run, "");
  if (r->run.kill_reason && *r->run.kill_reason == "lost") {
    return model::McpToolErrorResult(r->run.kill_detail);
  }
  return model::McpToolCallResult(*r);
}

std::string McpServer::CallSessionTool(const model::McpToolCall& call, const std::string& request_id) {
  session::SessionManager& mgr = *sessions_;
  const std::string& owner = options_.owner;
  model::ApiError error;
  if (call.name == "create_session") {
    model::SessionCreateRequest req;
    req.base.profile = call.execute.profile;
    req.base.env = call.execute.env;
    // A session is a warm run: when none is ready right now (the pool is
    // refilling after a call), wait a little for one rather than hand the
    // model a "retry shortly" it may not act on.
    session::Created made = mgr.Create(owner, "", req, profile::Door::kMcp);
    for (auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
         !made.ok && made.error.kind == model::ErrorKind::kUnavailable && std::chrono::steady_clock::now() < give_up;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      made = mgr.Create(owner, "", req, profile::Door::kMcp);
    }
    if (!made.ok) return model::McpToolErrorResult("create_session: " + made.error.message);
    {
      std::lock_guard<std::mutex> lock(mu_);
      created_.insert(made.view.id);
    }
    return model::McpSessionCreatedResult(made.view.id, made.view.profile, made.view.expires_at_ms,
                                          made.view.idle_timeout_s);
  }
  if (call.name == "close_session") {
    if (!mgr.Delete(call.session_id, owner, &error)) return model::McpToolErrorResult("close_session: " + error.message);
    std::lock_guard<std::mutex> lock(mu_);
    created_.erase(call.session_id);
    return model::McpSessionClosedResult(call.session_id);
  }
  if (call.name == "upload_file") {
    if (!session::WriteSessionFile(mgr, call.session_id, owner, call.path, call.content, options_.max_file_bytes,
                                   &error)) {
      return model::McpToolErrorResult("upload_file: " + error.message);
    }
    return model::McpFileWrittenResult(call.session_id, call.path, static_cast<int64_t>(call.content.size()));
  }
  if (call.name == "download_file") {
    std::optional<std::string> data =
        session::ReadSessionFile(mgr, call.session_id, owner, call.path, options_.max_file_bytes, &error);
    if (!data) return model::McpToolErrorResult("download_file: " + error.message);
    return model::McpFileReadResult(call.session_id, call.path, *data);
  }
  // execute_python in a session.
  const auto start = std::chrono::steady_clock::now();
  session::CallReply r = mgr.Execute(call.session_id, owner, call.execute, request_id, {});
  model::AuditRecord a;
  a.request_id = request_id;
  a.profile = r.profile;
  a.code_sha256 = r.code_sha256;
  a.code_bytes = r.code_bytes;
  a.violations = r.violations;
  a.error = r.kind == session::CallReply::Kind::kRan ? "" : r.error.message;
  a.duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  Audit(a,
        r.kind == session::CallReply::Kind::kRan        ? "ran"
        : r.kind == session::CallReply::Kind::kRejected ? "rejected"
                                                        : "error",
        r.kind == session::CallReply::Kind::kRan ? &r.response.run : nullptr);
  switch (r.kind) {
    case session::CallReply::Kind::kRejected:
      return model::McpRejectedResult(r.violations);
    case session::CallReply::Kind::kError:
      return model::McpToolErrorResult("execute_python: " + r.error.message);
    case session::CallReply::Kind::kRan:
      break;
  }
  return model::McpSessionCallResult(r.response, call.session_id, r.call.alive, r.call.interrupted,
                                     r.call.execution_count, r.call.end_reason);
}

void McpServer::Audit(model::AuditRecord a, const std::string& verdict, const model::RunReport* run) const {
  if (!options_.audit) return;
  a.route = options_.audit_route;
  a.token_name = options_.owner;
  a.verdict = verdict;
  if (run) {
    a.exit_code = run->exit_code;
    if (run->signal) a.signal = run->signal;
    a.kill_reason = run->kill_reason;
    a.run_ms = run->duration_ms;
    a.cpu_ms = run->cpu_ms;
    a.max_rss_kb = run->max_rss_kb;
  }
  options_.audit(std::move(a));
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
