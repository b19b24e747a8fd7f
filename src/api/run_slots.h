// The run slots (--max-concurrent runs at once) and the queue for them
// (--max-queue requests waiting), shared by every door's one-shot runs:
// /execute, /v1/execute, MCP's execute_python and approved runs all take a
// slot here, so no door has a limit of its own beside this one. A slot is
// given back only when its run is torn down (api/run_driver.h). Approved runs
// wait ahead of the queue (a person is waiting) and are bounded by the
// approvals book, not by --max-queue. Loop thread only.
//
//   uint64_t ticket = 0;
//   switch (slots.Take([](bool granted) { granted ? start() : refuse(); }, &ticket)) {
//     case RunSlots::kStarted: case RunSlots::kQueued: ...;   // start(true) is or will be called
//     case RunSlots::kFull: answer 429;
//   }
//   slots.Cancel(ticket);   // the client left while queued: start is never called
//   slots.Release();        // a run was torn down
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>

namespace airlock::api {

class RunSlots {
 public:
  // Called once: true when the request has a slot (it must Release() it once
  // its run is torn down), false when it will not get one (the server drains).
  using Start = std::function<void(bool granted)>;
  enum Result { kStarted, kQueued, kFull };
  enum class Priority { kNormal, kApproved };

  RunSlots(size_t max_running, size_t max_queued) : max_running_(max_running), max_queued_(max_queued) {}

  Result Take(Start start, uint64_t* ticket, Priority priority = Priority::kNormal);
  // A queued request left; false when it was not queued (it started, or never was).
  bool Cancel(uint64_t ticket);
  // A run was torn down: the next waiting one starts.
  void Release();
  // The server drains: nothing more starts, every waiting Start gets false.
  void Drain();

  size_t running() const { return running_; }
  size_t queued() const { return queue_.size(); }
  size_t max_running() const { return max_running_; }
  bool draining() const { return draining_; }
  // Called after every change (the gauges, a drain that may now end).
  std::function<void()> on_change;

 private:
  struct Waiter {
    uint64_t ticket;
    Start start;
  };
  void Pump();
  void Changed() {
    if (on_change) on_change();
  }

  size_t max_running_, max_queued_;
  size_t running_ = 0;
  uint64_t next_ticket_ = 0;
  bool draining_ = false;
  std::deque<Waiter> approved_, queue_;
};

}  // namespace airlock::api
