// api::CommandDriver: one process of a session's sandbox (exec::Process)
// watched from the event loop: its output read as it comes, its end, and the
// deadlines of its request. Like SessionCallDriver it holds no thread: the
// ProcessWatch's fds are waited on asynchronously, a timer ticks. Killing it
// (its timeout, its client gone) is a Sandbox::Signal, an exchange with the
// sandbox's init: that is posted to the session pool, never done on the loop.
//
//   auto d = std::make_shared<CommandDriver>(state, std::move(watch), sandbox, pid,
//                                            {.timeout_s = 60, .wait_s = 0},
//                                            [](exec::ProcessOutcome o, bool ended) { ... });  // on the loop
//   d->Start();                     // registered in state.command_drivers until done
//   d->Kill(exec::KillReason::kCancelled, "the client disconnected");
//
// Every method is called on the event-loop thread.
#pragma once

#include "api/net.h"

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "api/server_state.h"
#include "exec/process_watch.h"

namespace airlock::api {

class CommandDriver : public std::enable_shared_from_this<CommandDriver> {
 public:
  struct Limits {
    double timeout_s = 0;  // the process is killed then (kill_reason "timeout"); 0: never
    double wait_s = 0;     // the driver stops watching then, the process running on; 0: until it ends
  };
  // `ended`: false when the wait passed first (the outcome holds what it
  // wrote meanwhile; the watch is detached, another may attach later).
  using Done = std::function<void(exec::ProcessOutcome outcome, bool ended)>;

  CommandDriver(ServerState& s, std::unique_ptr<exec::ProcessWatch> watch, std::shared_ptr<exec::Sandbox> sandbox,
                pid_t pid, Limits limits, Done done);
  // The fds belong to the process: released, never closed, here.
  ~CommandDriver();

  void Start();
  // Kills the process and its group (once); its end is then reported with `reason`.
  void Kill(exec::KillReason reason, std::string detail);
  // A server stopping: the watch is dropped without an answer.
  void Abandon();

 private:
  void Continue();
  void Tick();
  void Conclude(bool ended);
  void ReleaseAll();

  ServerState& s_;
  std::unique_ptr<exec::ProcessWatch> watch_;
  std::shared_ptr<exec::Sandbox> sandbox_;
  pid_t pid_;
  Limits limits_;
  Done done_;
  net::posix::stream_descriptor desc_[exec::ProcessWatch::kFdCount];
  bool waiting_[exec::ProcessWatch::kFdCount] = {};
  net::steady_timer timer_;
  Clock::time_point kill_at_, stop_at_;
  exec::KillReason kill_reason_ = exec::KillReason::kNone;
  std::string kill_detail_;
  bool finished_ = false;
};

}  // namespace airlock::api
