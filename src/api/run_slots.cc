#include "api/run_slots.h"

#include <utility>

namespace airlock::api {

RunSlots::Result RunSlots::Take(Start start, uint64_t* ticket, Priority priority) {
  *ticket = ++next_ticket_;
  if (draining_) return kFull;
  if (running_ < max_running_ && approved_.empty()) {
    ++running_;
    Changed();
    start(true);
    return kStarted;
  }
  if (priority == Priority::kApproved) {
    approved_.push_back({*ticket, std::move(start)});
  } else if (queue_.size() < max_queued_) {
    queue_.push_back({*ticket, std::move(start)});
  } else {
    return kFull;
  }
  Changed();
  return kQueued;
}

bool RunSlots::Cancel(uint64_t ticket) {
  for (auto* q : {&approved_, &queue_}) {
    for (auto it = q->begin(); it != q->end(); ++it) {
      if (it->ticket != ticket) continue;
      q->erase(it);
      Changed();
      return true;
    }
  }
  return false;
}

void RunSlots::Release() {
  if (running_ > 0) --running_;
  Pump();
  Changed();
}

// Starts what the free slots allow, approved runs first. A Start may itself
// release a slot at once (a launch that failed): each waiter is taken off its
// queue before it is called.
void RunSlots::Pump() {
  while (!draining_ && running_ < max_running_ && (!approved_.empty() || !queue_.empty())) {
    auto& q = approved_.empty() ? queue_ : approved_;
    Waiter w = std::move(q.front());
    q.pop_front();
    ++running_;
    w.start(true);
  }
}

void RunSlots::Drain() {
  draining_ = true;
  std::deque<Waiter> waiting;
  for (auto* q : {&approved_, &queue_}) {
    for (auto& w : *q) waiting.push_back(std::move(w));
    q->clear();
  }
  Changed();
  for (auto& w : waiting) w.start(false);
}

}  // namespace airlock::api
