// SessionManager's record of one session (session_manager.h), shared by its
// two source files (session_manager.cc: sessions and their calls;
// session_contexts.cc: their contexts). Guarded by SessionManager::mu_.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "base/clock.h"
#include "session/session_manager.h"

namespace airlock::session {

struct SessionManager::Entry {
  std::string id, owner, profile;
  model::ExecuteRequest base;  // profile, language and limits asked at creation (every call's and restart's)
  // What a call naming no language runs in: Python is the main context; any
  // other, the session's default context of it (started with the session,
  // and again by the first call after its interpreter ended or a restart).
  profile::Language language = profile::Language::kPython;
  profile::EffectiveLimits limits;
  int64_t created_ms = 0, expires_ms = 0, last_used_ms = 0;
  double idle_s = 0, ttl_s = 0;
  Clock::time_point expires_at, last_used;
  int64_t execution_count = 0;  // the main context's calls
  // A call through the session's own route runs (or the session is being
  // replaced): one at a time, in whichever context; call_context is it.
  bool busy = false;
  std::shared_ptr<Context> call_context;
  std::set<std::string> busy_contexts;  // other contexts running a call, or starting
  bool dead = false;
  std::string end_reason;
  Clock::time_point dead_at;
  int64_t memory_bytes = 0;
  std::shared_ptr<LiveSession> live;
  isolation::IsolationReport report;

  bool Busy() const { return busy || !busy_contexts.empty(); }
};

// 409 context_busy: a context takes one call at a time.
model::ApiError ContextBusy();

}  // namespace airlock::session
