#include "api/call_driver.h"

#include "base/log.h"

namespace airlock::api {

SessionCallDriver::SessionCallDriver(ServerState& s, std::unique_ptr<session::PendingCall> pending, Done done)
    : s_(s),
      pending_(std::move(pending)),
      done_(std::move(done)),
      desc_{net::posix::stream_descriptor(*s.io), net::posix::stream_descriptor(*s.io),
            net::posix::stream_descriptor(*s.io), net::posix::stream_descriptor(*s.io),
            net::posix::stream_descriptor(*s.io), net::posix::stream_descriptor(*s.io)},
      timer_(*s.io) {}

SessionCallDriver::~SessionCallDriver() { ReleaseAll(); }

void SessionCallDriver::Start() {
  session::LiveCall& c = pending_->call();
  for (int i = 0; i < Fd::kFdCount; ++i) {
    int fd = c.fd(static_cast<Fd>(i));
    if (fd < 0) continue;
    error_code ec;
    desc_[i].assign(fd, ec);
    if (ec) log::Warn("a session call's fd could not be watched: " + ec.message());
  }
  Continue();
  if (!finishing_) Tick();
}

void SessionCallDriver::Abandon() {
  if (finishing_) return;  // being finished on a worker: it completes there
  finishing_ = true;
  timer_.cancel();
  ReleaseAll();
  pending_.reset();
}

void SessionCallDriver::ReleaseAll() {
  for (auto& d : desc_) {
    if (d.is_open()) d.release();
  }
}

void SessionCallDriver::Continue() {
  if (finishing_) return;
  session::LiveCall& c = pending_->call();
  if (c.done()) return Conclude();
  for (int i = 0; i < Fd::kFdCount; ++i) {
    if (waiting_[i] || c.fd(static_cast<Fd>(i)) < 0 || !desc_[i].is_open()) continue;
    waiting_[i] = true;
    auto kind = i == Fd::kControl ? net::posix::descriptor_base::wait_write : net::posix::descriptor_base::wait_read;
    desc_[i].async_wait(kind, [self = shared_from_this(), i](const error_code& ec) {
      self->waiting_[i] = false;
      if (ec || self->finishing_) return;
      self->pending_->call().OnReady(static_cast<Fd>(i));
      self->Continue();
    });
  }
}

void SessionCallDriver::Tick() {
  int ms = pending_->call().OnTick();
  Continue();
  if (finishing_) return;
  timer_.expires_after(std::chrono::milliseconds(std::max(ms, 1)));
  timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec || self->finishing_) return;
    self->Tick();
  });
}

void SessionCallDriver::Conclude() {
  finishing_ = true;
  timer_.cancel();
  ReleaseAll();
  // Small answers are made right here; a session that ended under the
  // call (its remains are killed: blocking) or a large answer (figures,
  // megabytes of output) is finished on a worker.
  constexpr size_t kInlineFinishBytes = 64 * 1024;
  if (!pending_->ended() && pending_->call().bytes_kept() <= kInlineFinishBytes) {
    RouteReply reply = s_.session_routes->FinishCall(std::move(pending_));
    // Posted, not called: a streamed call's last output pieces were posted
    // to this loop as they were read (CallHooks::on_output), and the end
    // of the stream must come after them.
    net::post(*s_.io, [self = shared_from_this(), reply = std::move(reply)]() mutable {
      self->Complete(std::move(reply));
    });
    return;
  }
  net::post(*s_.session_pool, [self = shared_from_this()] {
    RouteReply reply = self->s_.session_routes->FinishCall(std::move(self->pending_));
    net::post(*self->s_.io, [self, reply = std::move(reply)]() mutable { self->Complete(std::move(reply)); });
  });
}

void SessionCallDriver::Complete(RouteReply reply) {
  Done done = std::move(done_);
  s_.call_drivers.erase(shared_from_this());
  if (done) done(std::move(reply));
}

}  // namespace airlock::api
