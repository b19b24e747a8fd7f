#include "session/session_commands.h"

#include <signal.h>

#include <chrono>

namespace airlock::session {
namespace {

model::ApiError Err(model::ErrorKind kind, std::string message, std::string code = "") {
  model::ApiError e{kind, std::move(message), ""};
  e.code = std::move(code);
  return e;
}

}  // namespace

std::optional<model::ApiError> CommandsAllowed(const profile::ProfileSet& profiles, SessionManager& mgr,
                                               const std::string& id, const std::string& owner) {
  model::ApiError error;
  auto view = mgr.Get(id, owner, &error);
  if (!view) return error;
  const profile::Profile* p = profiles.Find(view->profile);
  if (p && p->AllowsLanguage(profile::Language::kBash)) return std::nullopt;
  // A command is a bash run: a profile that confines a session to Python
  // (minimal) confines its commands too, as /v1/execute refuses the language.
  std::string others;
  for (const profile::Profile& q : profiles.profiles()) {
    if (q.AllowsLanguage(profile::Language::kBash)) others += (others.empty() ? "" : ", ") + q.name;
  }
  return Err(model::ErrorKind::kBadRequest,
             "commands run bash, and this session's profile " + view->profile + " does not allow bash (its "
             "\"languages\"); create the session with a profile that does" +
                 (others.empty() ? std::string(": none of this server's profiles does") : ": " + others),
             "language_not_allowed");
}

model::ApiError ProcessError(const Status& st) {
  switch (st.code()) {
    case ErrorCode::kInvalidArgument: return Err(model::ErrorKind::kBadRequest, st.message());
    case ErrorCode::kResourceExhausted: {
      model::ApiError e = Err(model::ErrorKind::kTooManyRequests,
                              st.message() + " (wait for one to end, or signal one: .../commands/{pid}/signal)",
                              "quota_exceeded");
      e.quota = "sandbox_processes";
      e.retry_after_s = 1;
      return e;
    }
    case ErrorCode::kUnavailable:
      return Err(model::ErrorKind::kGone, "the session's sandbox has ended: " + st.message(), "session_ended");
    case ErrorCode::kNotFound: return Err(model::ErrorKind::kNotFound, st.message(), "process_not_found");
    case ErrorCode::kFailedPrecondition: return Err(model::ErrorKind::kConflict, st.message());
    default: return Err(model::ErrorKind::kInternal, st.message());
  }
}

std::optional<StartedCommand> StartSessionCommand(const profile::ProfileSet& profiles, SessionManager& mgr,
                                                  const std::string& id, const std::string& owner,
                                                  const model::CommandRequest& request, model::ApiError* error) {
  if (auto refused = CommandsAllowed(profiles, mgr, id, owner)) {
    *error = *refused;
    return std::nullopt;
  }
  StartedCommand c;
  c.sandbox = mgr.OpenSandbox(id, owner, error);
  if (!c.sandbox) return std::nullopt;
  exec::ProcessRequest p;
  p.argv = request.argv.empty() ? std::vector<std::string>{"/bin/bash", "-l", "-c", request.cmd} : request.argv;
  for (const auto& [k, v] : request.env) p.env.push_back(k + "=" + v);
  if (!request.cwd.empty()) p.cwd = request.cwd;
  p.stdin_open = request.stdin_open;
  p.tag = request.tag;
  c.start = Clock::now();
  auto started = c.sandbox->Start(p);
  if (!started.ok()) {
    *error = ProcessError(started.status());
    return std::nullopt;
  }
  c.process = *started;
  return c;
}

model::CommandEnd CommandEndOf(const exec::ProcessOutcome& o, pid_t pid, const std::string& tag, bool ended) {
  model::CommandEnd e;
  e.pid = pid;
  e.tag = tag;
  e.running = !ended;
  e.exit_code = o.exit.exit_code;
  e.signal = o.exit.exited ? 0 : o.exit.signal;
  e.out = o.out.data;
  e.err = o.err.data;
  e.out_bytes = o.out.total_bytes;
  e.err_bytes = o.err.total_bytes;
  e.out_truncated = o.out.truncated;
  e.err_truncated = o.err.truncated;
  e.output_cap = kCommandOutputCap;
  if (o.kill_reason != exec::KillReason::kNone) {
    e.kill_reason = exec::KillReasonName(o.kill_reason);
    e.kill_detail = o.kill_detail;
  }
  e.duration_ms = o.duration_ms;
  return e;
}

std::optional<model::CommandEnd> RunSessionCommand(const profile::ProfileSet& profiles, SessionManager& mgr,
                                                   const std::string& id, const std::string& owner,
                                                   const model::CommandRequest& request, model::ApiError* error) {
  auto c = StartSessionCommand(profiles, mgr, id, owner, request, error);
  if (!c) return std::nullopt;
  exec::WatchOptions wo;
  wo.output_cap = kCommandOutputCap;
  wo.timeout_s = request.timeout_s;
  auto watch = exec::ProcessWatch::Attach(c->process, c->sandbox, std::move(wo));
  if (!watch.ok()) {
    (void)c->sandbox->Signal(c->process->pid(), SIGKILL);
    *error = ProcessError(watch.status());
    return std::nullopt;
  }
  (*watch)->WaitDone();
  exec::ProcessOutcome o = (*watch)->Finish();
  o.duration_ms = std::chrono::duration<double, std::milli>(Clock::now() - c->start).count();
  return CommandEndOf(o, c->process->pid(), request.tag, true);
}

}  // namespace airlock::session
