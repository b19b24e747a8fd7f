#include "session/session_manager.h"

#include "session/session_entry.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include "base/log.h"
#include "base/random.h"
#include "model/runner_protocol.h"

namespace airlock::session {
namespace {

constexpr size_t kMaxTombstones = 4096;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsRouteKey(const std::string& k) {
  return k.size() == 8 && std::all_of(k.begin(), k.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

model::ApiError NotFoundError(const std::string& id) {
  model::ApiError e{model::ErrorKind::kNotFound,
                    "no session '" + id.substr(0, 80) +
                        "' here: it never existed, expired, was deleted, belongs to another token, or lives on "
                        "another instance; create a new one (POST /v1/sessions)",
                    ""};
  e.code = "session_not_found";
  return e;
}

std::string Secs(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

SessionManager::SessionManager(const service::Service& service, SessionOptions options)
    : svc_(service), opt_(options) {
  expiry_ = std::thread([this] { ExpiryLoop(); });
}

SessionManager::~SessionManager() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  expiry_.join();
  CloseAll();
}

std::optional<std::unique_ptr<LiveSession>> SessionManager::NewRun(const std::string& profile_name,
                                                                   const profile::EffectiveLimits& limits,
                                                                   const model::ExecuteRequest& base,
                                                                   model::ApiError* error, isolation::Spec* spec_out) {
  (void)limits;
  model::ExecuteRequest req = base;
  req.code = "pass";
  req.profile = profile_name;
  // The run is the session's Python interpreter whatever its language (a
  // kernel of another starts in its sandbox: StartContext).
  req.language = "python";
  service::Prepared p = svc_.Prepare(req, "session");
  if (p.verdict != service::Verdict::kRun) {
    *error = p.error;
    return std::nullopt;
  }
  service::Plan& plan = *p.plan;
  if (base.limits.disk) {
    *error = {model::ErrorKind::kUnprocessable,
              "limits.disk: a session's disk is its profile's (" + std::to_string(plan.limits.disk_bytes) +
                  " bytes; its warm runs are made with it); leave this field out",
              "limits.disk"};
    return std::nullopt;
  }
  // A warm run when the pool has one (or makes one within its wait), else a
  // cold one: the same layers and limits, a python3 started for it (slower).
  exec::SessionHandOff h;
  if (svc_.pool() != nullptr && svc_.pool()->Serves(plan.profile_name)) {
    model::RunnerConfig first = plan.warm_config;
    first.code = "";
    first.session = true;
    h = svc_.pool()->TakeSession(plan.profile_name, plan.spec, model::RunnerConfigToJson(first));
    if (!h.ok()) {
      svc_.pool()->CountColdFallback(plan.profile_name);
      log::Debug("session of profile " + plan.profile_name + ": cold path: " + h.why_not);
    }
  }
  if (!h.ok()) {
    StatusOr<exec::SessionHandOff> cold = svc_.StartColdSession(plan);
    if (!cold.ok()) {
      log::Error("session of profile " + plan.profile_name + ": " + cold.status().ToString());
      *error = {model::ErrorKind::kUnavailable,
                "a session of profile '" + plan.profile_name + "' could not be started: " + cold.status().message() +
                    "; retry shortly",
                ""};
      error->retry_after_s = 1;
      return std::nullopt;
    }
    h = std::move(*cold);
  }
  *spec_out = plan.spec;
  return std::make_unique<LiveSession>(std::move(h), plan.spec, svc_.max_event_bytes());
}

Created SessionManager::Create(const std::string& owner, const std::string& route_key,
                               const model::SessionCreateRequest& request, profile::Door door) {
  Created out;
  // The profile's limits as this request gets them (validated as /v1/execute validates them).
  model::ExecuteRequest probe = request.base;
  if (!probe.profile) probe.profile = svc_.profiles().DefaultFor(door).name;
  probe.code = "pass";
  probe.session_call = true;
  // The language checked as its calls' will be (the profile allows it, the
  // host has it); the limits are the sandbox's, its Python run's.
  service::Prepared p = svc_.Prepare(probe, "session");
  if (p.verdict != service::Verdict::kRun) {
    out.error = LanguageError(p.error, request.base.language);
    return out;
  }
  const profile::Language language = p.plan->language;
  if (language != profile::Language::kPython) {
    probe.language = "python";
    p = svc_.Prepare(probe, "session");
    if (p.verdict != service::Verdict::kRun) {
      out.error = p.error;
      return out;
    }
  }
  profile::EffectiveLimits limits = p.plan->limits;
  const std::string profile_name = p.plan->profile_name;
  // The profile's lifetimes where it sets them, the server's flags otherwise.
  profile::SessionLifetimes life;
  if (const profile::Profile* prof = svc_.profiles().Find(profile_name)) life = prof->sessions;
  auto pick = [](double profile_value, double server_value) { return profile_value > 0 ? profile_value : server_value; };
  // The server's ceilings bind every profile (an operator's --session-max-ttl
  // is a promise); a profile may only ask for less.
  const double max_idle = std::min(pick(life.max_idle_timeout_s, opt_.max_idle_timeout_s), opt_.max_idle_timeout_s);
  const double max_ttl = std::min(pick(life.max_ttl_s, opt_.max_ttl_s), opt_.max_ttl_s);
  double idle = request.idle_timeout_s.value_or(std::min(pick(life.idle_timeout_s, opt_.idle_timeout_s), max_idle));
  double ttl = request.ttl_s.value_or(std::min(pick(life.ttl_s, opt_.ttl_s), max_ttl));
  if (idle > max_idle) {
    out.error = {model::ErrorKind::kUnprocessable,
                 "idle_timeout: " + Secs(idle) + " s is over the ceiling of " + Secs(max_idle) + " s (profile '" +
                     profile_name + "')",
                 "idle_timeout"};
    return out;
  }
  if (ttl > max_ttl) {
    out.error = {model::ErrorKind::kUnprocessable,
                 "ttl: " + Secs(ttl) + " s is over the ceiling of " + Secs(max_ttl) + " s (profile '" + profile_name + "')",
                 "ttl"};
    return out;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reserved_count_ >= opt_.max_sessions) {
      out.error = {model::ErrorKind::kTooManyRequests,
                   "too many sessions: " + std::to_string(reserved_count_) + " of " +
                       std::to_string(opt_.max_sessions) + " are live; delete one or retry later",
                   ""};
      out.error.retry_after_s = 5;
      return out;
    }
    if (opt_.max_per_owner > 0) {
      size_t mine = reserved_by_owner_.count(owner) ? reserved_by_owner_[owner] : 0;
      if (mine >= opt_.max_per_owner) {
        // One token must not take every session of the server (issue 21).
        out.error = {model::ErrorKind::kTooManyRequests,
                     "quota sessions_per_owner (--max-sessions-per-owner): token '" + owner + "' has " +
                         std::to_string(mine) + " live sessions, the most it may; delete one or retry later",
                     ""};
        out.error.code = "quota_exceeded";
        out.error.quota = "sessions_per_owner";
        out.error.retry_after_s = 5;
        return out;
      }
    }
    // Issue 23.4: a session keeps the zygote it was made from alive, and a
    // replaced zygote is memory of its own (tens to hundreds of MB).
    const auto [retired, retired_bytes] = RetiredZygotesLocked();
    if (opt_.max_retired_zygotes >= 0 && retired >= opt_.max_retired_zygotes) {
      out.error = {model::ErrorKind::kTooManyRequests,
                   "live sessions keep " + std::to_string(retired) +
                       " replaced zygotes alive, this server's cap (--max-retired-zygotes " +
                       std::to_string(opt_.max_retired_zygotes) +
                       "); restart older sessions (POST /v1/sessions/{id}/restart moves one to the current zygote), "
                       "delete some, or retry later",
                   ""};
      out.error.retry_after_s = 5;
      return out;
    }
    if (reserved_memory_ + retired_bytes + limits.memory_bytes > opt_.max_memory_bytes) {
      out.error = {model::ErrorKind::kTooManyRequests,
                   "the live sessions' memory would pass this server's cap of " +
                       std::to_string(opt_.max_memory_bytes) + " bytes (--session-memory: " +
                       std::to_string(reserved_memory_) + " bytes of session limits, " + std::to_string(retired_bytes) +
                       " of the " + std::to_string(retired) + " replaced zygotes they keep alive, " +
                       std::to_string(limits.memory_bytes) +
                       " asked); delete or restart a session, ask for less (limits.memory) or retry later",
                   ""};
      out.error.retry_after_s = 5;
      return out;
    }
    ++reserved_count_;
    ++reserved_by_owner_[owner];
    reserved_memory_ += limits.memory_bytes;
  }
  isolation::Spec spec;
  auto live = NewRun(profile_name, limits, request.base, &out.error, &spec);
  if (!live) {
    std::lock_guard<std::mutex> lock(mu_);
    --reserved_count_;
    Unreserve(owner);
    reserved_memory_ -= limits.memory_bytes;
    return out;
  }
  auto e = std::make_shared<Entry>();
  e->id = "s1-" + (IsRouteKey(route_key) ? route_key : base::RandomHex(4)) + "-" + base::RandomHex(16);
  e->owner = owner;
  e->profile = profile_name;
  e->base = request.base;
  e->base.profile = profile_name;
  e->limits = limits;
  e->created_ms = e->last_used_ms = NowMs();
  e->idle_s = idle;
  e->ttl_s = ttl;
  e->expires_ms = e->created_ms + static_cast<int64_t>(ttl * 1000);
  e->last_used = Clock::now();
  e->expires_at = e->last_used + std::chrono::milliseconds(static_cast<int64_t>(ttl * 1000));
  e->memory_bytes = limits.memory_bytes;
  e->report = (*live)->report();
  e->live = std::move(*live);
  e->language = language;
  if (language != profile::Language::kPython) {
    // Its kernel starts now (not visible yet: no call can come meanwhile), so
    // that a host that cannot start it says so here, and a JVM's start-up
    // overlaps the client's next request.
    std::shared_ptr<Context> c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      c = DefaultContextLocked(*e, language, &out.error);
    }
    if (!c || !StartContext(e, *c, &out.error)) {
      e->live->Kill("its " + std::string(profile::LanguageName(language)) + " interpreter could not be started");
      e->live.reset();
      std::lock_guard<std::mutex> lock(mu_);
      --reserved_count_;
      reserved_memory_ -= limits.memory_bytes;
      return out;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_[e->id] = e;
    ++created_;
    out.view = View(*e);
  }
  out.ok = true;
  return out;
}

std::shared_ptr<SessionManager::Entry> SessionManager::Find(const std::string& id, const std::string& owner,
                                                            model::ApiError* error, bool want_live) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->owner != owner) {
    *error = NotFoundError(id);
    return nullptr;
  }
  if (want_live && it->second->dead) {
    *error = {model::ErrorKind::kGone, "the session has ended: " + it->second->end_reason, ""};
    error->code = "session_ended";
    return nullptr;
  }
  return it->second;
}

model::SessionView SessionManager::View(const Entry& e) const {
  model::SessionView v;
  v.id = e.id;
  v.profile = e.profile;
  v.state = e.dead ? "dead" : e.Busy() ? "busy" : "idle";
  v.end_reason = e.end_reason;
  v.created_at_ms = e.created_ms;
  v.expires_at_ms = e.expires_ms;
  v.last_used_ms = e.last_used_ms;
  v.idle_timeout_s = e.idle_s;
  v.ttl_s = e.ttl_s;
  v.language = std::string(profile::LanguageName(e.language));
  v.execution_count = e.execution_count;
  if (e.language != profile::Language::kPython && e.live) {
    // The count of its own language's context (the one its calls run in).
    for (const std::shared_ptr<Context>& c : e.live->Contexts()) {
      if (c->language == e.language && c->language_default) v.execution_count = c->execution_count;
    }
  }
  v.limits = service::ToView(e.limits);
  for (const auto& l : e.report.layers) v.isolation.layers.push_back({l.name, l.enforced, l.detail});
  v.isolation.landlock_abi = e.report.landlock_abi;
  v.isolation.cgroup_version = e.report.cgroup_version;
  v.isolation.mode = "session";
  v.isolation.host_uid = e.report.host_uid;
  return v;
}

CallReply SessionManager::Execute(const std::string& id, const std::string& owner,
                                  const model::ExecuteRequest& request, const std::string& request_id,
                                  const CallHooks& hooks) {
  CallReply refused;
  std::unique_ptr<PendingCall> p = BeginCall(id, owner, request, request_id, hooks, &refused);
  if (!p) return refused;
  p->call().WaitDone();
  return FinishCall(std::move(p));
}

void SessionManager::ReleaseCall(Entry& e, const Context& c, bool holds_session) {
  std::lock_guard<std::mutex> lock(mu_);
  if (holds_session || c.main) {
    e.busy = false;
    e.call_context.reset();
  }
  if (!c.main) e.busy_contexts.erase(c.id);
  e.last_used = Clock::now();
  e.last_used_ms = NowMs();
}

PendingCall::~PendingCall() {
  // Abandoned before FinishCall (a server stopping): the session takes calls again.
  if (!finished_ && mgr_ && entry_ && context_) {
    mgr_->ReleaseCall(*std::static_pointer_cast<SessionManager::Entry>(entry_), *context_, holds_session_);
  }
}

model::ApiError SessionManager::LanguageError(model::ApiError error, const std::string& language) const {
  std::optional<profile::Language> l = profile::LanguageFromName(language);
  if (error.field == "language" && l && !svc_.languages().Missing(*l).empty()) {
    error.kind = model::ErrorKind::kBadRequest;  // a runtime this host lacks: 400, naming the package
  }
  return error;
}

std::unique_ptr<PendingCall> SessionManager::BeginCall(const std::string& id, const std::string& owner,
                                                       const model::ExecuteRequest& request,
                                                       const std::string& request_id, const CallHooks& hooks,
                                                       CallReply* refused) {
  CallReply& reply = *refused;
  std::shared_ptr<Entry> e;
  model::ExecuteRequest req = request;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = Find(id, owner, &reply.error, /*want_live=*/true);
    if (!e) return nullptr;
    if (e->busy) {
      reply.error = {model::ErrorKind::kConflict,
                     "the session is running another call; a session takes one call at a time (wait for it, or "
                     "use another session)",
                     ""};
      reply.error.code = "session_busy";
      return nullptr;
    }
    e->busy = true;
    if (req.language.empty()) req.language = std::string(profile::LanguageName(e->language));
  }
  // The language checked first (the profile allows it, the host has it), so
  // that a refused one leaves no context behind.
  req.session_call = true;
  req.profile = e->profile;
  req.limits = e->base.limits;
  service::Prepared p = svc_.Prepare(req, request_id);
  std::shared_ptr<Context> c;
  if (p.verdict == service::Verdict::kRun) {
    std::lock_guard<std::mutex> lock(mu_);
    c = e->live ? DefaultContextLocked(*e, p.plan->language, &reply.error) : nullptr;
    if (!e->live) reply.error = {model::ErrorKind::kGone, "the session has ended: " + e->end_reason, ""};
    if (c && !c->main && e->busy_contexts.count(c->id) > 0) {
      reply.error = ContextBusy();
      c.reset();
    }
    if (c) {
      e->call_context = c;
      if (!c->main) e->busy_contexts.insert(c->id);
    } else {
      e->busy = false;
    }
    if (!c) return nullptr;
  }
  return Launch(e, c, /*holds_session=*/true, req, std::move(p), hooks, refused);
}

std::unique_ptr<PendingCall> SessionManager::Launch(const std::shared_ptr<Entry>& e, const std::shared_ptr<Context>& c,
                                                    bool holds_session, const model::ExecuteRequest& req,
                                                    service::Prepared p, const CallHooks& hooks,
                                                    CallReply* refused) {
  CallReply& reply = *refused;
  reply.profile = p.profile_name;
  reply.code_sha256 = p.code_sha256;
  reply.code_bytes = p.code_bytes;
  auto refuse = [&](model::ApiError error) -> std::unique_ptr<PendingCall> {
    if (c) {
      ReleaseCall(*e, *c, holds_session);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      e->busy = false;
    }
    reply.error = std::move(error);
    return nullptr;
  };
  // The analyzer and the import allowlist apply to every Python call, as to a one-shot run.
  if (p.verdict != service::Verdict::kRun) {
    reply.kind = p.verdict == service::Verdict::kRejected ? CallReply::Kind::kRejected : CallReply::Kind::kError;
    reply.violations = std::move(p.violations);
    return refuse(LanguageError(p.error, req.language));
  }
  if (c->language != profile::Language::kPython && !req.files.empty()) {
    return refuse({model::ErrorKind::kUnprocessable,
                   "files: only a Python context takes input files; write them to the session's workspace (PUT "
                   "/v1/sessions/{id}/files/{path}), which every context sees",
                   "files"});
  }
  // A kernel not started yet (a language's first call, or the first after
  // its interpreter ended): started now, one exchange with the sandbox's init.
  // One that ended since its last call (an OOM kill of it, a process of the
  // sandbox that killed it) is started afresh too, and the answer says so.
  std::shared_ptr<LiveSession> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live = e->live;
  }
  std::string ended_before = live ? live->EndedBetweenCalls(*c) : "";
  if (!ended_before.empty()) {
    live->StopContext(*c, ended_before, /*remove=*/false);
    std::lock_guard<std::mutex> lock(mu_);
    c->execution_count = 0;
  }
  model::ApiError start_error;
  if (!c->main && !c->started && !StartContext(e, *c, &start_error)) return refuse(start_error);
  auto pending = std::unique_ptr<PendingCall>(new PendingCall());
  pending->mgr_ = this;
  pending->entry_ = e;
  pending->context_ = c;
  pending->holds_session_ = holds_session;
  pending->reply_ = std::move(reply);
  if (!ended_before.empty()) {
    pending->reply_.call.context_restarted = true;
    pending->reply_.call.context_end_reason = ended_before;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending->n_ = c->main ? ++e->execution_count : ++c->execution_count;
    live = e->live;
  }
  pending->plan_ = std::move(p.plan);
  CallOptions options;
  options.timeout_s = pending->plan_->options.timeout_s;
  options.output_cap = pending->plan_->options.output_cap;
  options.interrupt_grace_s = opt_.interrupt_grace_s;
  options.on_output = hooks.on_output;
  if (hooks.on_started) hooks.on_started();
  // The lean frame: a Python runner has the rest from its first request;
  // every other kernel takes the code and this call's env.
  model::RunnerConfig frame = pending->plan_->warm_config;
  if (c->language != profile::Language::kPython) {
    frame = model::RunnerConfig();
    frame.code = pending->plan_->code;
    frame.env = req.env;
    frame.stream = req.stream_output;
  }
  pending->call_ =
      LiveCall::Start(std::move(live), c, model::RunnerCallFrameToJson(frame, pending->n_), pending->n_, std::move(options));
  return pending;
}

CallReply SessionManager::FinishCall(std::unique_ptr<PendingCall> pending) {
  auto e = std::static_pointer_cast<Entry>(pending->entry_);
  const std::shared_ptr<Context> c = pending->context_;
  CallOutcome o = pending->call_->Finish();
  pending->call_.reset();  // the call's hold on the session
  CallReply reply = std::move(pending->reply_);
  reply.response = svc_.Complete(*pending->plan_, o.result, o.channel);
  reply.kind = CallReply::Kind::kRan;
  reply.call.session_id = e->id;
  reply.call.execution_count = pending->n_;
  reply.call.alive = o.alive;
  reply.call.interrupted = o.interrupted;
  reply.call.end_reason = o.end_reason;
  if (!c->main) {
    reply.call.context_id = c->id;
    reply.call.context_language = std::string(profile::LanguageName(c->language));
  }
  if (o.context_ended && o.alive) {
    // What is left of its interpreter goes; the next call starts a fresh one.
    std::shared_ptr<LiveSession> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      live = e->live;
    }
    if (live) live->StopContext(*c, o.context_end_reason, /*remove=*/false);
    reply.call.context_restarted = true;
    reply.call.context_end_reason = o.context_end_reason;
    std::lock_guard<std::mutex> lock(mu_);
    c->execution_count = 0;
  }
  pending->finished_ = true;
  ReleaseCall(*e, *c, pending->holds_session_);
  if (!o.alive) {
    std::string kind = o.end_reason.substr(0, o.end_reason.find(':'));
    End(e, kind.empty() ? "died" : kind, o.end_reason, /*tombstone=*/true);
  }
  return reply;
}

void SessionManager::Cancel(const std::string& key, const std::string& detail) {
  const size_t slash = key.find('/');
  const std::string id = key.substr(0, slash);
  std::shared_ptr<LiveSession> live;
  std::shared_ptr<Context> c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end() || !it->second->live) return;
    live = it->second->live;
    c = slash == std::string::npos ? it->second->call_context : live->FindContext(key.substr(slash + 1));
  }
  // The session's own route: the context its call runs in.
  if (c) return live->Cancel(*c, detail);
  if (slash == std::string::npos) live->Cancel(detail);
}

std::optional<model::SessionView> SessionManager::Get(const std::string& id, const std::string& owner,
                                                      model::ApiError* error) {
  std::lock_guard<std::mutex> lock(mu_);
  auto e = Find(id, owner, error, /*want_live=*/false);
  if (!e) return std::nullopt;
  return View(*e);
}

std::vector<model::SessionView> SessionManager::List(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<model::SessionView> out;
  for (const auto& [id, e] : sessions_) {
    if (e->owner == owner && !e->dead) out.push_back(View(*e));
  }
  return out;
}

std::shared_ptr<LiveSession> SessionManager::Live(const std::string& id, const std::string& owner,
                                                  model::ApiError* error) {
  std::lock_guard<std::mutex> lock(mu_);
  auto e = Find(id, owner, error, /*want_live=*/true);
  if (!e) return nullptr;
  e->last_used = Clock::now();
  e->last_used_ms = NowMs();
  return e->live;
}

std::shared_ptr<exec::Sandbox> SessionManager::OpenSandbox(const std::string& id, const std::string& owner,
                                                           model::ApiError* error) {
  std::shared_ptr<LiveSession> live;
  exec::SandboxOptions options;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto e = Find(id, owner, error, /*want_live=*/true);
    if (!e) return nullptr;
    e->last_used = Clock::now();
    e->last_used_ms = NowMs();
    live = e->live;
    options = SandboxOptionsLocked(*e);
  }
  if (svc_.host() == nullptr) {
    *error = {model::ErrorKind::kUnavailable, "this server cannot start processes in a session's sandbox", ""};
    return nullptr;
  }
  auto sandbox = live->OpenSandbox(*svc_.host(), std::move(options));
  if (!sandbox.ok()) {
    *error = {model::ErrorKind::kUnavailable, "the session's sandbox could not be opened: " + sandbox.status().ToString(),
              ""};
    return nullptr;
  }
  return *sandbox;
}

exec::SandboxOptions SessionManager::SandboxOptionsLocked(const Entry& e) const {
  exec::SandboxOptions options;
  options.env = service::RunEnvironment();
  options.lifetime_s = std::max(0.001, std::chrono::duration<double>(e.expires_at - Clock::now()).count());
  return options;
}

bool SessionManager::Delete(const std::string& id, const std::string& owner, model::ApiError* error) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = Find(id, owner, error, /*want_live=*/false);
    if (!e) return false;
  }
  End(e, "deleted", "deleted: the session was deleted", /*tombstone=*/false);
  return true;
}

std::optional<model::SessionView> SessionManager::Restart(const std::string& id, const std::string& owner,
                                                          model::ApiError* error) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = Find(id, owner, error, /*want_live=*/true);
    if (!e) return std::nullopt;
    if (e->Busy()) {
      *error = {model::ErrorKind::kConflict, "the session is running a call; restart it when the call is done", ""};
      error->code = "session_busy";
      return std::nullopt;
    }
    e->busy = true;  // no call may start while the interpreter is replaced
  }
  isolation::Spec spec;
  auto fresh = NewRun(e->profile, e->limits, e->base, error, &spec);
  std::shared_ptr<LiveSession> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e->busy = false;
    if (!fresh) return std::nullopt;  // the old interpreter is untouched
    if (e->dead) {
      *error = {model::ErrorKind::kGone, "the session has ended: " + e->end_reason, ""};
      error->code = "session_ended";
      return std::nullopt;  // fresh is killed on the way out
    }
    old = std::move(e->live);
    e->live = std::move(*fresh);
    e->report = e->live->report();
    e->execution_count = 0;
    e->last_used = Clock::now();
    e->last_used_ms = NowMs();
  }
  old->Kill("restarted: the session's interpreter was replaced");
  old.reset();
  std::lock_guard<std::mutex> lock(mu_);
  return View(*e);
}

void SessionManager::End(const std::shared_ptr<Entry>& e, const std::string& reason, const std::string& detail,
                         bool tombstone) {
  std::shared_ptr<LiveSession> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tombstone) sessions_.erase(e->id);
    if (e->dead) return;
    e->dead = true;
    e->end_reason = detail;
    e->dead_at = Clock::now();
    live = std::move(e->live);
    --reserved_count_;
    Unreserve(e->owner);
    reserved_memory_ -= e->memory_bytes;
    ++ended_[reason];
  }
  if (live) live->Kill(detail);
  // The last reference (here, or a call's still returning) removes the cgroup.
}

void SessionManager::Unreserve(const std::string& owner) {
  auto it = reserved_by_owner_.find(owner);
  if (it == reserved_by_owner_.end()) return;
  if (--it->second == 0) reserved_by_owner_.erase(it);
}

void SessionManager::ExpiryLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (stop_) break;
    Clock::time_point now = Clock::now();
    std::vector<std::pair<std::shared_ptr<Entry>, std::pair<std::string, std::string>>> ending;
    std::vector<std::shared_ptr<Entry>> died;
    size_t tombstones = 0;
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      Entry& e = *it->second;
      if (e.dead) {
        if (now - e.dead_at > std::chrono::milliseconds(static_cast<int64_t>(opt_.tombstone_s * 1000))) {
          it = sessions_.erase(it);
          continue;
        }
        ++tombstones;
      } else if (now >= e.expires_at) {
        ending.push_back({it->second, {"ttl", "ttl: the session reached its lifetime of " + Secs(e.ttl_s) + " s"}});
      } else if (!e.Busy() && now - e.last_used >= std::chrono::milliseconds(static_cast<int64_t>(e.idle_s * 1000))) {
        ending.push_back({it->second, {"idle", "idle: the session was idle for " + Secs(e.idle_s) + " s"}});
      } else if (!e.Busy() && e.live && !e.live->Alive()) {
        died.push_back(it->second);
      }
      ++it;
    }
    if (tombstones > kMaxTombstones) {
      for (auto it = sessions_.begin(); it != sessions_.end() && tombstones > kMaxTombstones;) {
        if (it->second->dead) {
          it = sessions_.erase(it);
          --tombstones;
        } else {
          ++it;
        }
      }
    }
    if (ending.empty() && died.empty()) continue;
    lock.unlock();
    // Expired sessions are gone (404); sessions that died answer 410 a while.
    for (auto& [e, why] : ending) End(e, why.first, why.second, /*tombstone=*/false);
    for (auto& e : died) {
      std::shared_ptr<LiveSession> live;
      {
        std::lock_guard<std::mutex> l(mu_);
        live = e->live;
      }
      if (!live) continue;
      std::string detail = live->EndReason();
      std::string kind = detail.substr(0, detail.find(':'));
      End(e, kind.empty() ? "died" : kind, detail, /*tombstone=*/true);
    }
    lock.lock();
  }
}

void SessionManager::CloseAll() {
  std::vector<std::shared_ptr<Entry>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, e] : sessions_) all.push_back(e);
  }
  for (auto& e : all) End(e, "shutdown", "shutdown: the server is stopping", /*tombstone=*/false);
}

std::pair<int64_t, int64_t> SessionManager::RetiredZygotesLocked() const {
  std::vector<const exec::ZygoteLife*> seen;
  int64_t bytes = 0;
  for (const auto& [id, e] : sessions_) {
    const exec::ZygoteLife* z = e->dead || !e->live ? nullptr : e->live->zygote();
    if (z == nullptr || !z->retired.load() || std::find(seen.begin(), seen.end(), z) != seen.end()) continue;
    seen.push_back(z);
    bytes += z->PrivateMemoryBytes();
  }
  return {static_cast<int64_t>(seen.size()), bytes};
}

SessionStats SessionManager::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SessionStats s;
  std::tie(s.retired_zygotes, s.retired_zygote_memory_bytes) = RetiredZygotesLocked();
  for (const auto& [id, e] : sessions_) {
    if (e->dead) continue;
    ++s.live;
    if (e->Busy()) ++s.busy;
  }
  s.memory_reserved_bytes = reserved_memory_;
  s.created = created_;
  s.ended = ended_;
  return s;
}

}  // namespace airlock::session
