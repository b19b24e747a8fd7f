// api::RunDriver: one one-shot run, supervised from the event loop. The run
// is launched on the launcher thread (or handed to a ready warm run right on
// the loop), its pipes, pidfd and result channel are waited on
// asynchronously, a timer checks its deadlines; finishing it (reaping, parsing
// the channel) happens on a worker and tearing it down on the reaper, after
// the answer. Its run slot is released only once the teardown is done.
//
//   auto d = std::make_shared<RunDriver>(state, std::move(plan), [](RunOutcome o) { ... });
//   d->OnStarted([] { /* a streamed response may begin */ });   // optional
//   d->Start();                                                  // the caller holds a run slot
//
// RunWhenSlotFree() below takes the slot and makes the driver: what every
// door's one-shot run goes through.
//   d->Cancel("the client disconnected");                        // any time: kill_reason "cancelled"
//
// Every method is called on the event-loop thread.
#pragma once

#include "api/net.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/server_state.h"
#include "exec/execution.h"
#include "service/service.h"

namespace airlock::api {

struct RunOutcome {
  Status status;  // not ok: the run could not be started
  bool drained = false;  // it never got a slot: the server drains
  model::ExecuteResponse response;
};

class RunDriver : public std::enable_shared_from_this<RunDriver> {
 public:
  using Done = std::function<void(RunOutcome)>;

  RunDriver(ServerState& s, std::unique_ptr<service::Plan> plan, Done done);
  // The fds belong to the Execution and the plan; the stream_descriptors must
  // not close them (a run abandoned at shutdown is killed by ~Execution).
  ~RunDriver();

  // For a driver made before its owner's callback is (an approved run).
  void SetDone(Done done) { done_ = std::move(done); }

  // The run's options, to adjust before Start() (the streaming output hook).
  exec::RunOptions& plan_options() { return plan_->options; }

  void Start();

  // Called once, on the event loop, when the run has been launched (not when
  // the launch failed): a streamed response begins then.
  void OnStarted(std::function<void()> fn) { on_started_ = std::move(fn); }

  // Kills the run (client gone, server draining); it completes as usual, with
  // kill_reason "cancelled".
  void Cancel(const std::string& detail);

 private:
  enum Which { kOut, kErr, kPid, kChan };

  void OnLaunched(StatusOr<std::unique_ptr<exec::Execution>> ex);
  net::posix::stream_descriptor& Desc(Which w);
  void Wait(Which w);
  void OnReady(Which w, const error_code& ec);
  void Tick();
  void CheckExit();
  void Complete(RunOutcome o);

  ServerState& s_;
  std::unique_ptr<service::Plan> plan_;
  Done done_;
  std::function<void()> on_started_;
  std::unique_ptr<exec::Execution> ex_;
  net::posix::stream_descriptor out_, err_, pid_, chan_;
  int fd_[4] = {-1, -1, -1, -1};
  net::steady_timer timer_;
  service::ChannelBuffer channel_;
  bool chan_open_ = true;
  bool finishing_ = false;
  bool cancel_requested_ = false;
  std::string cancel_detail_;
};

// About how many bytes a response's answer will have (its output, results
// and files): a large one is made on a worker, not on the loop.
size_t AnswerBytes(const model::ExecuteResponse& r);

// A one-shot run for any door: `plan` starts under a RunDriver once a run
// slot is free (at once, or from the queue); `before_start` is called with
// the driver just before it starts (to hook a stream, or keep it to cancel
// it), `done` on the loop when the run ended (or with `drained` when it never
// got a slot). kFull: no slot and no room in the queue, nothing kept (429).
// `*ticket` is the queue's, for RunSlots::Cancel.
RunSlots::Result RunWhenSlotFree(ServerState& s, std::unique_ptr<service::Plan> plan,
                                 std::function<void(const std::shared_ptr<RunDriver>&)> before_start,
                                 RunDriver::Done done, uint64_t* ticket);

}  // namespace airlock::api
