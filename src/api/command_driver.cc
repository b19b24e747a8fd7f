#include "api/command_driver.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>

#include "base/log.h"

namespace airlock::api {
namespace {

using W = exec::ProcessWatch;

Clock::time_point After(double s) {
  if (s <= 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

}  // namespace

CommandDriver::CommandDriver(ServerState& s, std::unique_ptr<exec::ProcessWatch> watch,
                             std::shared_ptr<exec::Sandbox> sandbox, pid_t pid, Limits limits, Done done)
    : s_(s),
      watch_(std::move(watch)),
      sandbox_(std::move(sandbox)),
      pid_(pid),
      limits_(limits),
      done_(std::move(done)),
      desc_{net::posix::stream_descriptor(*s.io), net::posix::stream_descriptor(*s.io),
            net::posix::stream_descriptor(*s.io)},
      timer_(*s.io) {}

CommandDriver::~CommandDriver() { ReleaseAll(); }

void CommandDriver::ReleaseAll() {
  for (auto& d : desc_) {
    if (d.is_open()) d.release();
  }
}

void CommandDriver::Start() {
  s_.command_drivers.insert(shared_from_this());
  kill_at_ = After(limits_.timeout_s);
  stop_at_ = After(limits_.wait_s);
  for (int i = 0; i < W::kFdCount; ++i) {
    int fd = watch_->fd(static_cast<W::Fd>(i));
    if (fd < 0) continue;
    error_code ec;
    desc_[i].assign(fd, ec);
    if (ec) log::Warn("a command's fd could not be watched: " + ec.message());
  }
  Continue();
  if (!finished_) Tick();
}

void CommandDriver::Continue() {
  if (finished_) return;
  if (watch_->done()) return Conclude(true);
  for (int i = 0; i < W::kFdCount; ++i) {
    if (waiting_[i] || watch_->fd(static_cast<W::Fd>(i)) < 0 || !desc_[i].is_open()) continue;
    waiting_[i] = true;
    desc_[i].async_wait(net::posix::descriptor_base::wait_read, [self = shared_from_this(), i](const error_code& ec) {
      self->waiting_[i] = false;
      if (ec || self->finished_) return;
      self->watch_->OnReady(static_cast<W::Fd>(i));
      self->Continue();
    });
  }
}

void CommandDriver::Tick() {
  if (finished_) return;
  const Clock::time_point now = Clock::now();
  if (now >= kill_at_ && kill_reason_ == exec::KillReason::kNone) {
    char secs[32];
    snprintf(secs, sizeof secs, "%g", limits_.timeout_s);
    Kill(exec::KillReason::kTimeout, std::string("the command ran past its timeout of ") + secs + " s and was killed");
  }
  if (now >= stop_at_) return Conclude(false);
  const Clock::time_point next = std::min(kill_reason_ == exec::KillReason::kNone ? kill_at_ : Clock::time_point::max(),
                                          stop_at_);
  const int64_t ms =
      next == Clock::time_point::max()
          ? 1000
          : std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1, 1, 1000);
  timer_.expires_after(std::chrono::milliseconds(ms));
  timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (!ec) self->Tick();
  });
}

void CommandDriver::Kill(exec::KillReason reason, std::string detail) {
  if (finished_ || kill_reason_ != exec::KillReason::kNone) return;
  kill_reason_ = reason;
  kill_detail_ = std::move(detail);
  // Blocking (an exchange with the sandbox's init): off the loop.
  net::post(*s_.session_pool, [sandbox = sandbox_, pid = pid_] {
    Status st = sandbox->Signal(pid, SIGKILL);
    if (!st.ok() && st.code() != ErrorCode::kNotFound && st.code() != ErrorCode::kUnavailable) {
      log::Warn("killing command " + std::to_string(pid) + ": " + st.ToString());
    }
  });
}

void CommandDriver::Abandon() {
  if (finished_) return;
  finished_ = true;
  timer_.cancel();
  ReleaseAll();
  watch_.reset();
  done_ = nullptr;
}

void CommandDriver::Conclude(bool ended) {
  finished_ = true;
  timer_.cancel();
  ReleaseAll();
  exec::ProcessOutcome o = watch_->Finish();
  // Detached before the answer: a later request may watch it again.
  watch_.reset();
  // A kill of ours that the process did not outlive is why it ended, unless
  // its sandbox ended first (the watch says kLost then).
  if (ended && kill_reason_ != exec::KillReason::kNone && o.kill_reason == exec::KillReason::kNone &&
      !o.exit.exited) {
    o.kill_reason = kill_reason_;
    o.kill_detail = kill_detail_;
  }
  auto self = shared_from_this();
  s_.command_drivers.erase(self);
  if (Done done = std::move(done_)) done(std::move(o), ended);
}

}  // namespace airlock::api
