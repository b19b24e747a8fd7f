// SessionManager's contexts (session_manager.h, "Contexts"): interpreters of
// six languages in one session's sandbox, created, listed, restarted, deleted
// and called.
#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "isolation/sandbox_files.h"
#include "model/runner_protocol.h"
#include "service/kernels.h"
#include "session/session_entry.h"
#include "session/session_manager.h"

namespace airlock::session {
namespace {

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

model::ApiError TooManyContexts(size_t cap) {
  model::ApiError e{model::ErrorKind::kTooManyRequests,
                    "the session holds " + std::to_string(cap) +
                        " contexts (interpreters), this server's cap per session; end one first",
                    ""};
  e.retry_after_s = 1;
  return e;
}

model::ApiError ContextNotFound(const std::string& context_id) {
  model::ApiError e{model::ErrorKind::kNotFound,
                    "no context '" + context_id.substr(0, 80) +
                        "' in this session (GET /v1/sessions/{id}/contexts lists them)",
                    ""};
  e.code = "context_not_found";
  return e;
}

}  // namespace

model::ApiError ContextBusy() {
  model::ApiError e{model::ErrorKind::kConflict,
                    "the context is running another call; a context takes one call at a time (wait for it, or use "
                    "another context)",
                    ""};
  e.code = "context_busy";
  return e;
}

model::ContextView SessionManager::ContextViewOf(const Entry& e, const Context& c) const {
  model::ContextView v;
  v.id = c.id;
  v.language = std::string(profile::LanguageName(c.language));
  v.cwd = c.cwd;
  v.is_default = c.main;
  const bool busy = c.main ? e.busy : e.busy_contexts.count(c.id) > 0;
  v.state = busy ? "busy" : c.started ? "idle" : c.end_reason.empty() ? "not started" : "ended";
  v.end_reason = c.end_reason;
  v.execution_count = c.main ? e.execution_count : c.execution_count;
  v.created_at_ms = c.created_ms;
  for (const auto& [name, value] : c.env) v.env.push_back(name);
  return v;
}

std::shared_ptr<SessionManager::Entry> SessionManager::FindContextLocked(const std::string& id,
                                                                        const std::string& owner,
                                                                        const std::string& context_id,
                                                                        std::shared_ptr<Context>* context,
                                                                        model::ApiError* error) {
  std::shared_ptr<Entry> e = Find(id, owner, error, /*want_live=*/true);
  if (!e) return nullptr;
  *context = e->live->FindContext(context_id);
  if (!*context) {
    *error = ContextNotFound(context_id);
    return nullptr;
  }
  e->last_used = Clock::now();
  e->last_used_ms = UnixMs();
  return e;
}

bool SessionManager::StartContext(const std::shared_ptr<Entry>& e, Context& context, model::ApiError* error) {
  if (svc_.host() == nullptr) {
    *error = {model::ErrorKind::kUnavailable, "this server cannot start processes in a session's sandbox", ""};
    return false;
  }
  // The session's policy for a Python context (its profile's imports), and
  // the language checked as a call's would be: the profile allows it, the
  // host has it.
  model::ExecuteRequest probe;
  probe.code = "pass";
  probe.profile = e->profile;
  probe.language = std::string(profile::LanguageName(context.language));
  probe.session_call = true;
  service::Prepared p = svc_.Prepare(probe, "context");
  if (p.verdict != service::Verdict::kRun && p.verdict != service::Verdict::kNeedsApproval) {
    *error = LanguageError(p.error, probe.language);
    return false;
  }
  exec::SandboxOptions options;
  int64_t memory = 0;
  std::shared_ptr<LiveSession> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    options = SandboxOptionsLocked(*e);
    memory = e->limits.memory_bytes;
    live = e->live;
  }
  if (!live) {
    *error = {model::ErrorKind::kGone, "the session has ended: " + e->end_reason, ""};
    return false;
  }
  // A Python context's own variables are set by its runner, as a session's are.
  model::RunnerConfig python = p.plan->warm_config;
  python.env = context.env;
  const service::KernelLaunch launch =
      service::KernelFor(context.language, context.cwd, svc_.languages(), memory, python);
  if (Status s = live->StartContext(context, *svc_.host(), std::move(options), launch); !s.ok()) {
    const bool full = s.code() == ErrorCode::kResourceExhausted;
    *error = {full ? model::ErrorKind::kTooManyRequests
                   : s.code() == ErrorCode::kUnavailable ? model::ErrorKind::kGone : model::ErrorKind::kUnavailable,
              "the context's interpreter could not be started: " + s.message(), ""};
    if (full) error->retry_after_s = 1;
    return false;
  }
  return true;
}

std::optional<model::ContextView> SessionManager::CreateContext(const std::string& id, const std::string& owner,
                                                                const model::ContextCreateRequest& request,
                                                                model::ApiError* error) {
  std::optional<profile::Language> language = profile::LanguageFromName(request.language);
  if (!language) {
    *error = {model::ErrorKind::kUnprocessable, "language: '" + request.language.substr(0, 40) + "' is not supported",
              "language"};
    return std::nullopt;
  }
  for (const auto& [name, value] : request.env) {
    if (std::string why = service::ReservedEnvName(name); !why.empty()) {
      *error = {model::ErrorKind::kUnprocessable, "env: " + name + ": " + why, "env"};
      return std::nullopt;
    }
  }
  std::shared_ptr<Entry> e;
  std::shared_ptr<Context> c;
  std::shared_ptr<LiveSession> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = Find(id, owner, error, /*want_live=*/true);
    if (!e) return std::nullopt;
    live = e->live;
    if (live->context_count() >= opt_.max_contexts) {
      *error = TooManyContexts(opt_.max_contexts);
      return std::nullopt;
    }
    e->last_used = Clock::now();
    e->last_used_ms = UnixMs();
  }
  // The directory must be one of the sandbox's (looked up as the sandbox
  // sees it, no symlink followed): a context may work anywhere it can read.
  if (auto dir = isolation::OpenRunDir(live->init_pid(), live->pidfd(), request.cwd); !dir.ok()) {
    *error = {model::ErrorKind::kBadRequest,
              "cwd '" + request.cwd.substr(0, 200) + "' is not a directory of the sandbox (" + dir.status().message() +
                  "); its workspace is /home/user",
              "cwd"};
    return std::nullopt;
  }
  c = live->AddContext(*language, request.cwd, request.env);
  {
    std::lock_guard<std::mutex> lock(mu_);
    e->busy_contexts.insert(c->id);  // starting: no call, no restart, no idle expiry meanwhile
  }
  const bool started = StartContext(e, *c, error);
  std::lock_guard<std::mutex> lock(mu_);
  e->busy_contexts.erase(c->id);
  if (!started) {
    live->StopContext(*c, "", /*remove=*/true);
    return std::nullopt;
  }
  return ContextViewOf(*e, *c);
}

std::optional<std::vector<model::ContextView>> SessionManager::ListContexts(const std::string& id,
                                                                            const std::string& owner,
                                                                            model::ApiError* error) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Entry> e = Find(id, owner, error, /*want_live=*/true);
  if (!e) return std::nullopt;
  std::vector<model::ContextView> out;
  for (const std::shared_ptr<Context>& c : e->live->Contexts()) out.push_back(ContextViewOf(*e, *c));
  return out;
}

std::optional<model::ContextView> SessionManager::GetContext(const std::string& id, const std::string& owner,
                                                             const std::string& context_id, model::ApiError* error) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Context> c;
  std::shared_ptr<Entry> e = FindContextLocked(id, owner, context_id, &c, error);
  if (!e) return std::nullopt;
  return ContextViewOf(*e, *c);
}

std::optional<model::ContextView> SessionManager::RestartContext(const std::string& id, const std::string& owner,
                                                                 const std::string& context_id,
                                                                 model::ApiError* error) {
  std::shared_ptr<Entry> e;
  std::shared_ptr<Context> c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = FindContextLocked(id, owner, context_id, &c, error);
    if (!e) return std::nullopt;
    bool& busy_main = e->busy;
    if (c->main ? busy_main : e->busy_contexts.count(c->id) > 0) {
      *error = ContextBusy();
      return std::nullopt;
    }
    // No call, and no idle or death check (the main interpreter is replaced), meanwhile.
    if (c->main) busy_main = true;
    e->busy_contexts.insert(c->id);
  }
  const bool started = StartContext(e, *c, error);
  std::lock_guard<std::mutex> lock(mu_);
  e->busy_contexts.erase(c->id);
  if (c->main) {
    e->busy = false;
    if (started) e->execution_count = 0;
  } else if (started) {
    c->execution_count = 0;
  }
  if (!started) return std::nullopt;
  c->end_reason.clear();
  return ContextViewOf(*e, *c);
}

bool SessionManager::DeleteContext(const std::string& id, const std::string& owner, const std::string& context_id,
                                   model::ApiError* error) {
  std::shared_ptr<Entry> e;
  std::shared_ptr<Context> c;
  std::shared_ptr<LiveSession> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = FindContextLocked(id, owner, context_id, &c, error);
    if (!e) return false;
    live = e->live;
    if (c->main) {
      *error = {model::ErrorKind::kBadRequest,
                "the session's main context goes only with its session (DELETE /v1/sessions/{id}); restart it to "
                "start afresh",
                ""};
      return false;
    }
    if (e->busy_contexts.count(c->id) > 0) {
      *error = ContextBusy();
      return false;
    }
    e->busy_contexts.insert(c->id);
  }
  live->StopContext(*c, "deleted", /*remove=*/true);
  std::lock_guard<std::mutex> lock(mu_);
  e->busy_contexts.erase(c->id);
  return true;
}

std::shared_ptr<Context> SessionManager::DefaultContextLocked(Entry& e, profile::Language language,
                                                              model::ApiError* error) {
  std::vector<std::shared_ptr<Context>> all = e.live->Contexts();
  for (const std::shared_ptr<Context>& c : all) {
    if (c->language == language && (c->main || c->language_default)) return c;
  }
  if (all.size() >= opt_.max_contexts) {
    *error = TooManyContexts(opt_.max_contexts);
    return nullptr;
  }
  std::shared_ptr<Context> c = e.live->AddContext(language, isolation::kWorkspaceDir, {});
  c->language_default = true;
  return c;
}

std::optional<model::ContextView> SessionManager::DefaultContext(const std::string& id, const std::string& owner,
                                                                 const std::string& language,
                                                                 model::ApiError* error) {
  std::optional<profile::Language> l = profile::LanguageFromName(language);
  if (!l) {
    *error = {model::ErrorKind::kBadRequest, "language '" + language.substr(0, 40) +
                                                 "' is not supported (python, javascript, typescript, r, java, bash)",
              "language"};
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Entry> e = Find(id, owner, error, /*want_live=*/true);
  if (!e) return std::nullopt;
  std::shared_ptr<Context> c = DefaultContextLocked(*e, *l, error);
  if (!c) return std::nullopt;
  return ContextViewOf(*e, *c);
}

CallReply SessionManager::ExecuteIn(const std::string& id, const std::string& owner, const std::string& context_id,
                                    const model::ExecuteRequest& request, const std::string& request_id,
                                    const CallHooks& hooks) {
  CallReply reply;
  std::unique_ptr<PendingCall> pending = BeginCallIn(id, owner, context_id, request, request_id, hooks, &reply);
  if (!pending) return reply;
  pending->call().WaitDone();
  return FinishCall(std::move(pending));
}

std::unique_ptr<PendingCall> SessionManager::BeginCallIn(const std::string& id, const std::string& owner,
                                                         const std::string& context_id,
                                                         const model::ExecuteRequest& request,
                                                         const std::string& request_id, const CallHooks& hooks,
                                                         CallReply* refused) {
  CallReply& reply = *refused;
  std::shared_ptr<Entry> e;
  std::shared_ptr<Context> c;
  model::ExecuteRequest req = request;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = FindContextLocked(id, owner, context_id, &c, &reply.error);
    if (!e) return nullptr;
    // One call at a time per context; calls in different contexts run side
    // by side (the main one's is the session's own route's).
    if (c->main ? e->busy : e->busy_contexts.count(c->id) > 0) {
      reply.error = ContextBusy();
      return nullptr;
    }
    if (c->main) {
      e->busy = true;
      e->call_context = c;
    } else {
      e->busy_contexts.insert(c->id);
    }
  }
  req.session_call = true;
  req.profile = e->profile;
  req.limits = e->base.limits;
  req.language = std::string(profile::LanguageName(c->language));
  return Launch(e, c, /*holds_session=*/false, req, svc_.Prepare(req, request_id), hooks, &reply);
}

}  // namespace airlock::session
