// exec::ProcessWatch: one process of a sandbox (sandbox.h) watched until it
// ends: its output as it comes (streamed to a callback, kept up to a cap),
// an optional timeout (the process and its group are then killed), and how it
// ended. Like session::LiveCall it owns no thread and never blocks: a loop
// feeds it; WaitDone() is the blocking loop for callers without one.
//
//   ASSIGN_OR_RETURN(auto w, ProcessWatch::Attach(process, sandbox, options));
//   until w->done(): wait for w->fd(i) to be readable (or w->OnTick() ms),
//                    then w->OnReady(i) / w->OnTick()
//   ProcessOutcome o = w->Finish();
//
// One watch per process at a time (its pipes are read by one reader);
// destroying a watch before it is done detaches it, and another may attach
// later (E2B's Connect), reading what the pipes held meanwhile.
//
// The process is done when its init reported its end; what it wrote before
// is read then (a child it left behind that still holds its stdout does not
// keep the watch open), or when its sandbox ended.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "exec/execution.h"
#include "exec/run_result.h"
#include "exec/sandbox.h"

namespace airlock::exec {

struct WatchOptions {
  int64_t output_cap = 1 << 20;  // bytes kept per stream (on_output gets every byte)
  // Wall clock from Attach; the process and its group get SIGKILL then
  // (kill_reason "timeout"). 0: none.
  double timeout_s = 0;
  std::function<void(Stream, std::string_view)> on_output;
};

struct ProcessOutcome {
  ProcessExit exit;
  StreamCapture out, err;
  KillReason kill_reason = KillReason::kNone;  // kTimeout, or kLost when the sandbox ended under it
  std::string kill_detail;
  double duration_ms = 0;  // from Attach
};

class ProcessWatch {
 public:
  enum Fd { kOut, kErr, kExit, kFdCount };

  // FailedPrecondition when another watch is attached.
  static StatusOr<std::unique_ptr<ProcessWatch>> Attach(std::shared_ptr<Process> process,
                                                        std::shared_ptr<Sandbox> sandbox, WatchOptions options);
  ~ProcessWatch();

  // The fd to wait on (readable) for `which`, or -1.
  int fd(Fd which) const;
  void OnReady(Fd which);
  // The timeout; milliseconds until it wants to be called again.
  int OnTick();
  bool done() const { return done_; }
  // Drives the watch to done() on a poll loop of its own (blocking).
  void WaitDone();
  // Once done(): the outcome (once).
  ProcessOutcome Finish();

 private:
  ProcessWatch() = default;
  void ReadOut(Fd which, bool drain);
  void OnExit();

  std::shared_ptr<Process> p_;
  std::shared_ptr<Sandbox> sandbox_;
  WatchOptions options_;
  ProcessOutcome o_;
  Clock::time_point start_, deadline_;
  bool out_open_ = true, err_open_ = true;
  bool done_ = false;
  bool killed_ = false;
};

}  // namespace airlock::exec
