#include "api/run_driver.h"

#include <cstdio>

#include "base/clock.h"
#include "base/log.h"
#include "model/runner_protocol.h"

namespace airlock::api {

RunDriver::RunDriver(ServerState& s, std::unique_ptr<service::Plan> plan, Done done)
    : s_(s),
      plan_(std::move(plan)),
      done_(std::move(done)),
      out_(*s.io),
      err_(*s.io),
      pid_(*s.io),
      chan_(*s.io),
      timer_(*s.io),
      channel_(s.svc.max_event_bytes()) {}

RunDriver::~RunDriver() {
  out_.release();
  err_.release();
  pid_.release();
  chan_.release();
}

void RunDriver::Start() {
  // A ready warm run is handed the code right here (no fork, no wait).
  if (auto ex = s_.svc.TryStartWarmNow(*plan_)) return OnLaunched(std::move(ex));
  net::post(s_.launcher, [self = shared_from_this()] {
    Clock::time_point t0 = Clock::now();
    auto ex = self->s_.svc.Start(*self->plan_);
    char buf[96];
    snprintf(buf, sizeof buf, "%s: launched in %.1f ms", self->plan_->request_id.c_str(), MillisSince(t0));
    log::Debug(buf);
    net::post(*self->s_.io, [self, ex = std::move(ex)]() mutable { self->OnLaunched(std::move(ex)); });
  });
}

void RunDriver::Cancel(const std::string& detail) {
  if (ex_) {
    if (!finishing_) ex_->Cancel(exec::KillReason::kCancelled, detail);
  } else if (!cancel_requested_) {
    cancel_requested_ = true;
    cancel_detail_ = detail;
  }
}

void RunDriver::OnLaunched(StatusOr<std::unique_ptr<exec::Execution>> ex) {
  if (!ex.ok()) {
    Done done = std::move(done_);
    done(RunOutcome{ex.status(), {}});
    s_.slots.Release();  // nothing to tear down
    return;
  }
  ex_ = std::move(*ex);
  if (cancel_requested_) ex_->Cancel(exec::KillReason::kCancelled, cancel_detail_);
  fd_[kOut] = ex_->stdout_fd();
  fd_[kErr] = ex_->stderr_fd();
  fd_[kPid] = ex_->pidfd();
  fd_[kChan] = plan_->events_read.get();
  // The descriptors stay owned by the Execution and the plan: released (not
  // closed) by the stream_descriptors when the run ends.
  out_.assign(fd_[kOut]);
  err_.assign(fd_[kErr]);
  pid_.assign(fd_[kPid]);
  chan_.assign(fd_[kChan]);
  for (Which w : {kOut, kErr, kPid, kChan}) Wait(w);
  if (auto started = std::move(on_started_)) started();
  Tick();
}

net::posix::stream_descriptor& RunDriver::Desc(Which w) {
  switch (w) {
    case kOut: return out_;
    case kErr: return err_;
    case kPid: return pid_;
    case kChan: break;
  }
  return chan_;
}

void RunDriver::Wait(Which w) {
  Desc(w).async_wait(net::posix::descriptor_base::wait_read,
                     [self = shared_from_this(), w](const error_code& ec) { self->OnReady(w, ec); });
}

void RunDriver::OnReady(Which w, const error_code& ec) {
  if (ec || finishing_) return;
  switch (w) {
    case kOut:
      ex_->OnReadable(fd_[kOut]);
      if (ex_->stdout_fd() >= 0) Wait(kOut);
      break;
    case kErr:
      ex_->OnReadable(fd_[kErr]);
      if (ex_->stderr_fd() >= 0) Wait(kErr);
      break;
    case kPid:
      ex_->OnReadable(fd_[kPid]);
      break;
    case kChan:
      chan_open_ = channel_.ReadFrom(fd_[kChan]);
      // A flood: more than the runner protocol allows. The rest is read and
      // dropped until the run is gone.
      if (channel_.overflowed()) ex_->Cancel(exec::KillReason::kChannel, channel_.overflow_detail());
      if (chan_open_) Wait(kChan);
      break;
  }
  CheckExit();
}

void RunDriver::Tick() {
  int ms = ex_->OnTick();
  CheckExit();
  if (finishing_) return;
  timer_.expires_after(std::chrono::milliseconds(std::max(ms, 1)));
  timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec || self->finishing_) return;
    self->Tick();
  });
}

void RunDriver::CheckExit() {
  if (finishing_ || !ex_) return;
  // A warm run's program closes every fd right after its end event: with
  // all three streams at end of file, answer now rather than after the
  // program's teardown and its init's report (~2 ms for `print(1)`).
  std::optional<model::ProgramEnd> end;
  if (!ex_->Exited()) {
    if (chan_open_) return;
    end = model::ParseProgramEnd(channel_.data(), channel_.truncated());
    // Closed without a word, or not only init and the program left: the
    // init's report will say (CanFinishOnEnd reads the cgroup and /proc,
    // so it comes last).
    if (!end || !ex_->CanFinishOnEnd()) return;
  }
  finishing_ = true;
  timer_.cancel();
  out_.release();
  err_.release();
  pid_.release();
  // Every process of the run is gone (the pid namespace died with its
  // init), so the channel holds all there is: read it to EOF.
  if (chan_open_) chan_open_ = channel_.ReadFrom(fd_[kChan]);
  chan_.release();
  // The rest is off the loop: Finish may wait for a killed run's init, and
  // the channel (up to the byte cap) is parsed there.
  net::post(s_.workers, [self = shared_from_this(), end] {
    exec::RunResult result =
        end ? self->ex_->FinishOnEnd(end->exit_code, end->max_rss_kb) : self->ex_->Finish();
    RunOutcome o;
    o.response = self->s_.svc.Complete(*self->plan_, result, self->channel_);
    net::post(*self->s_.io, [self, o = std::move(o)]() mutable { self->Complete(std::move(o)); });
  });
}

// Answer early, account late: the response goes now; the run's slot is
// released once the run is torn down (whatever is left of it killed, its
// init gone, its cgroup removed), so that a run answered from its end
// event, forged or not, never outlives its place in the concurrency limit.
void RunDriver::Complete(RunOutcome o) {
  std::unique_ptr<exec::Execution> ex = std::move(ex_);
  Done done = std::move(done_);
  done(std::move(o));
  net::post(s_.reaper, [ex = std::move(ex), &s = s_]() mutable {
    ex.reset();
    net::post(*s.io, [&s] { s.slots.Release(); });
  });
}

size_t AnswerBytes(const model::ExecuteResponse& r) {
  size_t n = r.run.stdout_text.size() + r.run.stderr_text.size();
  for (const auto& d : r.results) n += d.data_json.size();
  for (const auto& f : r.files) n += f.content_base64.size();
  return n;
}

RunSlots::Result RunWhenSlotFree(ServerState& s, std::unique_ptr<service::Plan> plan,
                                 std::function<void(const std::shared_ptr<RunDriver>&)> before_start,
                                 RunDriver::Done done, uint64_t* ticket) {
  auto shared_plan = std::make_shared<std::unique_ptr<service::Plan>>(std::move(plan));
  auto shared_done = std::make_shared<RunDriver::Done>(std::move(done));
  auto start = [&s, shared_plan, shared_done, before_start = std::move(before_start)](bool granted) {
    if (!granted) {
      RunOutcome o;
      o.status = Unavailable("the server is shutting down; retry on another instance");
      o.drained = true;
      return (*shared_done)(std::move(o));
    }
    auto driver = std::make_shared<RunDriver>(s, std::move(*shared_plan), nullptr);
    RunDriver* raw = driver.get();
    driver->SetDone([&s, raw, shared_done](RunOutcome o) {
      for (auto it = s.drivers.begin(); it != s.drivers.end(); ++it) {
        if (it->get() == raw) {
          s.drivers.erase(it);
          break;
        }
      }
      (*shared_done)(std::move(o));
    });
    s.drivers.insert(driver);
    if (before_start) before_start(driver);
    driver->Start();
  };
  return s.slots.Take(std::move(start), ticket);
}

}  // namespace airlock::api
