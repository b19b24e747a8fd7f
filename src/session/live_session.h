// session::LiveSession: one session's run (a warm run made a session, see
// exec::WarmPool::TakeSession and airlock_runner.py "Sessions") and the calls
// into it, one at a time. It owns every process, the cgroup and (through the
// run's mount namespace) the working directory of the session: destroying it
// kills them all.
//
//   auto live = std::make_unique<LiveSession>(std::move(handoff), spec, max_event_bytes);
//   CallOutcome o = live->Call(request_json, /*call=*/1, options);  // blocking
//   if (!o.alive) ... the session is over: o.result.kill_detail says why
//
// Call() blocks its thread for the call's duration (a worker thread of the
// server); Alive(), Interrupt() and Kill() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/unique_fd.h"
#include "exec/execution.h"
#include "exec/run_result.h"
#include "exec/warm_pool.h"
#include "isolation/spec.h"
#include "service/service.h"

namespace airlock::session {

struct CallOptions {
  double timeout_s = 30;
  int64_t output_cap = 1 << 20;  // bytes kept per stream
  // After the timeout (or a cancel) the cell is interrupted (KeyboardInterrupt);
  // if it has not ended this much later, the session is killed.
  double interrupt_grace_s = 2;
  // Each piece of kept output as it arrives (streaming); may be unset.
  std::function<void(exec::Stream, std::string_view)> on_output;
};

struct CallOutcome {
  exec::RunResult result;           // exit code, kill reason, output, duration, CPU of the call
  service::ChannelBuffer channel;   // the call's result events
  bool alive = true;                // the session lives on
  bool interrupted = false;         // the cell was interrupted (timeout or cancel) and stopped
  std::string end_reason;           // when !alive: why the session ended
  explicit CallOutcome(size_t channel_cap) : channel(channel_cap) {}
};

class LiveSession {
 public:
  LiveSession(exec::SessionHandOff handoff, const isolation::Spec& spec, size_t max_event_bytes);
  ~LiveSession();  // Kill(): every process, the cgroup (blocking, bounded)

  // Sends call number `call` (its runner config JSON, code inline) and waits
  // for its end event, the deadline (then interrupt, then kill), a Cancel(),
  // or the session's death.
  CallOutcome Call(std::string_view request, int64_t call, const CallOptions& options);
  // Interrupts the call under way as its timeout would (kill_reason
  // "cancelled"); a no-op between calls. Thread-safe.
  void Cancel(const std::string& detail);

  // Whether the session's init still runs (no blocking).
  bool Alive() const;
  // Why it ended, read from the cgroup and the init's report once !Alive()
  // (or after a kill): "the session ran out of memory (limit N bytes)", ...
  std::string EndReason();
  // Kills every process of the session and removes its cgroup (blocking,
  // bounded ~2 s). Idempotent.
  void Kill(const std::string& reason);

  pid_t init_pid() const { return run_.pid; }
  int pidfd() const { return run_.pidfd.get(); }
  const isolation::IsolationReport& report() const { return run_.report; }
  const isolation::Limits& limits() const { return spec_.limits; }

 private:
  bool SendCall(std::string_view request, int64_t call, Clock::time_point deadline);
  bool SendInterrupt();
  void DrainStale();

  exec::SessionHandOff h_;
  isolation::Launched& run_;
  isolation::Spec spec_;
  size_t max_event_bytes_;
  std::mutex mu_;  // the control socket's writers (Call, Cancel) and kill state
  UniqueFd cancel_event_;  // an eventfd: Cancel() wakes Call()
  // The session's interpreter (its init's only child), for the interrupt
  // (SIGINT); empty when it could not be told, and then a timed-out call ends
  // its session.
  UniqueFd program_pidfd_;
  std::atomic<bool> in_call_{false};
  std::string cancel_detail_;
  bool killed_ = false;
  std::string kill_reason_;
};

}  // namespace airlock::session
