// session::SessionManager: every live session of a server (issue 10): their
// ids, owners, caps, lifetimes (idle expiry, hard TTL) and the calls into them.
// Each session is a LiveSession (live_session.h) made from a warm pool's run,
// or from a cold run when none can be had (no pool, none ready in its wait).
//
//   SessionManager mgr(service, options);       // starts its expiry thread
//   auto made = mgr.Create(owner, route_key, create_request);   // blocking: a worker thread
//   CallReply r = mgr.Execute(id, owner, request, hooks);       // blocking for the call
//   mgr.Delete(id, owner);
//
// Or a call driven by an event loop (no thread of its own; see LiveCall):
//   CallReply refused;
//   std::unique_ptr<PendingCall> p = mgr.BeginCall(id, owner, request, rid, hooks, &refused);
//   if (!p) answer refused;
//   ... feed p->call() until p->call().done() ...
//   CallReply r = mgr.FinishCall(std::move(p));   // blocks only if p->ended()
//
// Every method is thread-safe; Create, Execute, Delete, Restart and CloseAll
// block (a hand-off, a call, a kill) and belong on worker threads. BeginCall
// does not block (the analyzer runs there, as for /v1/execute on the loop),
// but for the first call of a language in a session (or the first after its
// interpreter ended), which starts its kernel: one exchange with the
// sandbox's init (a fork and an execve, bounded).
//
// Languages: a session has one (POST /v1/sessions's "language", default
// python); a call that names another runs in the session's context of that
// language (made on first use), in the same sandbox and workspace.
//
// Ownership: a session belongs to the token name that created it ("" without
// tokens); any other owner gets NotFound, exactly as for an id that never
// existed. Ids are "s1-<route>-<32 hex>" (128 random bits from getrandom;
// docs/deploy.md, "Scaling and session routing").
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/execute.h"
#include "model/session.h"
#include "service/service.h"
#include "session/live_session.h"

namespace airlock::session {

struct SessionOptions {
  size_t max_sessions = 32;                   // live sessions at once (server-wide); beyond: 429
  size_t max_per_owner = 0;                   // of them, one owner's (0: no such quota); beyond: 429
  // Sum of live sessions' memory limits and of the private memory of the
  // replaced zygotes they keep alive; beyond: 429.
  int64_t max_memory_bytes = int64_t{8} << 30;
  // Replaced (retired) zygotes kept alive by live sessions, at most; at it, a
  // new session is refused (429) until sessions end or restart (a restart
  // moves a session to the current zygote). -1: no cap.
  int max_retired_zygotes = 8;
  double idle_timeout_s = 600;                // default; a request may ask for up to max_idle_timeout_s
  double max_idle_timeout_s = 3600;
  double ttl_s = 3600;                        // default hard lifetime; up to max_ttl_s
  double max_ttl_s = 86400;
  double interrupt_grace_s = 2;               // after a call's timeout, before the session is killed
  // Contexts a session may hold at once, its main one included (each is an
  // interpreter in its sandbox, within its one set of limits); beyond: 429.
  size_t max_contexts = 16;
  double tombstone_s = 600;                   // a dead session answers 410 this long, then 404
};

struct Created {
  model::SessionView view;
  model::ApiError error;  // when !ok
  bool ok = false;
};

struct CallReply {
  enum class Kind { kRan, kRejected, kError } kind = Kind::kError;
  model::ApiError error;                    // kError (and kRejected's message)
  std::vector<model::Violation> violations;  // kRejected
  model::ExecuteResponse response;          // kRan
  model::SessionCallView call;              // kRan
  std::string profile, code_sha256;         // for the audit record
  int64_t code_bytes = 0;
};

struct CallHooks {
  // Each piece of output as it arrives (streaming); may be unset.
  std::function<void(exec::Stream, std::string_view)> on_output;
  // The call passed every check and is about to run (a stream may begin); may be unset.
  std::function<void()> on_started;
};

struct SessionStats {
  int64_t live = 0;
  int64_t busy = 0;
  int64_t memory_reserved_bytes = 0;
  int64_t retired_zygotes = 0;           // replaced zygotes kept alive by live sessions
  int64_t retired_zygote_memory_bytes = 0;  // their private memory (counted in the memory cap)
  uint64_t created = 0;
  std::map<std::string, uint64_t> ended;  // reason ("deleted", "idle", "ttl", "memory", ...) -> count
};

// A call BeginCall started: feed call() to done(), then FinishCall.
class PendingCall {
 public:
  LiveCall& call() { return *call_; }
  // Once call().done(): the session ended under the call, so FinishCall will
  // kill what is left of it and may block (~ms; put it on a worker).
  bool ended() const { return call_ && call_->session_ended(); }
  // For the audit record while the call runs.
  const CallReply& meta() const { return reply_; }
  ~PendingCall();

 private:
  friend class SessionManager;
  PendingCall() = default;
  class SessionManager* mgr_ = nullptr;
  std::shared_ptr<void> entry_;  // SessionManager::Entry (busy until FinishCall)
  std::unique_ptr<service::Plan> plan_;
  std::unique_ptr<LiveCall> call_;
  std::shared_ptr<Context> context_;  // the context it runs in (the main one, or a kernel's)
  bool holds_session_ = false;        // it holds the session's busy flag (its own route), not only its context's
  CallReply reply_;
  int64_t n_ = 0;
  bool finished_ = false;
};

class SessionManager {
 public:
  SessionManager(const service::Service& service, SessionOptions options);
  ~SessionManager();  // CloseAll()

  // A request that names no profile gets `door`'s default (profile::ProfileSet::DefaultFor).
  Created Create(const std::string& owner, const std::string& route_key, const model::SessionCreateRequest& request,
                 profile::Door door = profile::Door::kApi);
  CallReply Execute(const std::string& id, const std::string& owner, const model::ExecuteRequest& request,
                    const std::string& request_id, const CallHooks& hooks);
  // Execute() in two halves around a loop-fed call (see the header comment):
  // nullptr with *refused set when the call does not run (not found, busy,
  // rejected by policy, bad limits).
  std::unique_ptr<PendingCall> BeginCall(const std::string& id, const std::string& owner,
                                         const model::ExecuteRequest& request, const std::string& request_id,
                                         const CallHooks& hooks, CallReply* refused);
  CallReply FinishCall(std::unique_ptr<PendingCall> pending);
  // Interrupts the call under way in the session's main context (a
  // streaming client gone), or in one of its contexts when `id` is
  // "<session id>/<context id>" (CallKey).
  void Cancel(const std::string& id, const std::string& detail);
  static std::string CallKey(const std::string& session_id, const std::string& context_id) {
    return session_id + "/" + context_id;
  }

  // Contexts (live_session.h, "Contexts"): interpreters in the session's
  // sandbox, sharing its workspace and limits. Create starts one (blocking:
  // the kernel's start; a worker thread): 422 for a language the session's
  // profile does not allow, 400 for one this host lacks (the Debian package
  // named), a cwd that is not a directory of the sandbox, 429 at
  // max_contexts. The session's main context is listed first (default: true).
  std::optional<model::ContextView> CreateContext(const std::string& id, const std::string& owner,
                                                  const model::ContextCreateRequest& request, model::ApiError* error);
  std::optional<std::vector<model::ContextView>> ListContexts(const std::string& id, const std::string& owner,
                                                              model::ApiError* error);
  std::optional<model::ContextView> GetContext(const std::string& id, const std::string& owner,
                                               const std::string& context_id, model::ApiError* error);
  // Its interpreter replaced by a fresh one in the same sandbox (files kept;
  // the main context's too: a cold Python takes the warm fork's place). 409
  // while it runs a call. Blocking.
  std::optional<model::ContextView> RestartContext(const std::string& id, const std::string& owner,
                                                   const std::string& context_id, model::ApiError* error);
  // Ends and forgets a context (not the main one: 400; delete the session).
  bool DeleteContext(const std::string& id, const std::string& owner, const std::string& context_id,
                     model::ApiError* error);
  // The session's default context of `language` (E2B's: one per language,
  // made on first use, started by its first call): python's is the main one.
  std::optional<model::ContextView> DefaultContext(const std::string& id, const std::string& owner,
                                                   const std::string& language, model::ApiError* error);
  // A call into one context (starting it first when it is not started),
  // blocking for the call (a worker thread). As Execute's, with the reply's
  // call naming the context; one call at a time per context (409), calls in
  // different contexts run side by side.
  CallReply ExecuteIn(const std::string& id, const std::string& owner, const std::string& context_id,
                      const model::ExecuteRequest& request, const std::string& request_id, const CallHooks& hooks);
  // ExecuteIn's first half, for a loop-fed call (as BeginCall): nullptr with
  // *refused set when the call does not run.
  std::unique_ptr<PendingCall> BeginCallIn(const std::string& id, const std::string& owner,
                                           const std::string& context_id, const model::ExecuteRequest& request,
                                           const std::string& request_id, const CallHooks& hooks, CallReply* refused);
  std::optional<model::SessionView> Get(const std::string& id, const std::string& owner, model::ApiError* error);
  std::vector<model::SessionView> List(const std::string& owner);
  bool Delete(const std::string& id, const std::string& owner, model::ApiError* error);
  // A fresh interpreter under the same id (its files are dropped: a new working directory).
  std::optional<model::SessionView> Restart(const std::string& id, const std::string& owner, model::ApiError* error);
  // The session's live interpreter for file access (its init pid and pidfd),
  // or null with *error (404/410).
  std::shared_ptr<LiveSession> Live(const std::string& id, const std::string& owner, model::ApiError* error);
  // The session's sandbox (exec/sandbox.h), opened on first use: where the
  // doors start commands and other processes next to its interpreter, all
  // sharing its workspace, limits and lifetime. They start with the run
  // environment (service::RunEnvironment); init ends the sandbox at the
  // session's hard lifetime even if this manager does not. Null with *error
  // (404/410, or 503 when it could not be opened). Blocking (one exchange
  // with the sandbox's init): a worker thread.
  std::shared_ptr<exec::Sandbox> OpenSandbox(const std::string& id, const std::string& owner, model::ApiError* error);
  // Ends every session (a server's shutdown, after its drain).
  void CloseAll();
  SessionStats Stats() const;

 private:
  friend class PendingCall;
  struct Entry;
  // A call's end (or its refusal): the session's busy flag when it held it
  // (or ran in the main context), the context's own otherwise.
  void ReleaseCall(Entry& e, const Context& c, bool holds_session);
  // 400 rather than 422 for a language whose runtime this host lacks.
  model::ApiError LanguageError(model::ApiError error, const std::string& language) const;
  // The session's default context of `language` (the main one for Python),
  // made (not started) when it has none. Called with mu_ held; e.live set.
  std::shared_ptr<Context> DefaultContextLocked(Entry& e, profile::Language language, model::ApiError* error);
  // A call whose busy flag is taken (holds_session: the session's; else its
  // context's) and whose request is prepared (`p`): checked, its kernel
  // started if need be, handed over. nullptr with *refused set, the flag
  // released, when it does not run.
  std::unique_ptr<PendingCall> Launch(const std::shared_ptr<Entry>& e, const std::shared_ptr<Context>& c,
                                      bool holds_session, const model::ExecuteRequest& req, service::Prepared p,
                                      const CallHooks& hooks, CallReply* refused);
  void Unreserve(const std::string& owner);  // mu_ held
  std::shared_ptr<Entry> Find(const std::string& id, const std::string& owner, model::ApiError* error,
                              bool want_live);
  model::SessionView View(const Entry& e) const;
  // The replaced zygotes that live sessions keep alive: how many, and their
  // private memory. Called with mu_ held (reads a /proc file per such zygote).
  std::pair<int64_t, int64_t> RetiredZygotesLocked() const;
  void ExpiryLoop();
  // Moves a session to its end: reason counted, tombstone kept when `tombstone`.
  void End(const std::shared_ptr<Entry>& e, const std::string& reason, const std::string& detail, bool tombstone);
  std::optional<std::unique_ptr<LiveSession>> NewRun(const std::string& profile, const profile::EffectiveLimits& limits,
                                                     const model::ExecuteRequest& base, model::ApiError* error,
                                                     isolation::Spec* spec_out);
  // What opening the session's sandbox takes: the run environment, the
  // session's lifetime left. Called with mu_ held.
  exec::SandboxOptions SandboxOptionsLocked(const Entry& e) const;
  // Starts (or restarts) `context`'s interpreter: the kernel of its language,
  // the session's Python policy for a Python one. Blocking.
  bool StartContext(const std::shared_ptr<Entry>& e, Context& context, model::ApiError* error);
  model::ContextView ContextViewOf(const Entry& e, const Context& c) const;
  // The entry (live) and its context, or null with *error (404/410).
  std::shared_ptr<Entry> FindContextLocked(const std::string& id, const std::string& owner,
                                           const std::string& context_id, std::shared_ptr<Context>* context,
                                           model::ApiError* error);

  const service::Service& svc_;
  SessionOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Entry>> sessions_;
  int64_t reserved_memory_ = 0;
  size_t reserved_count_ = 0;  // live and being created
  std::map<std::string, size_t> reserved_by_owner_;
  uint64_t created_ = 0;
  std::map<std::string, uint64_t> ended_;
  bool stop_ = false;
  std::thread expiry_;
};

}  // namespace airlock::session
