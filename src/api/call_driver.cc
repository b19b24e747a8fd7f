#include "api/call_driver.h"

#include "api/exchange.h"
#include "base/log.h"

namespace airlock::api {

SessionCallDriver::SessionCallDriver(ServerState& s, std::unique_ptr<session::PendingCall> pending, Format format,
                                     Done done)
    : s_(s),
      pending_(std::move(pending)),
      format_(std::move(format)),
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
    session::CallReply call = s_.session_mgr->FinishCall(std::move(pending_));
    Reply reply = format_(call);
    // Posted, not called: a streamed call's last output pieces were posted
    // to this loop as they were read (CallHooks::on_output), and the end
    // of the stream must come after them.
    net::post(*s_.io, [self = shared_from_this(), call = std::move(call), reply = std::move(reply)]() mutable {
      self->Complete(std::move(call), std::move(reply));
    });
    return;
  }
  net::post(*s_.session_pool, [self = shared_from_this()]() mutable {
    session::CallReply call = self->s_.session_mgr->FinishCall(std::move(self->pending_));
    Reply reply = self->format_(call);
    SessionCallDriver* raw = self.get();
    net::post(*raw->s_.io, [self = std::move(self), call = std::move(call), reply = std::move(reply)]() mutable {
      self->Complete(std::move(call), std::move(reply));
    });
  });
}

void SessionCallDriver::Complete(session::CallReply call, Reply reply) {
  Done done = std::move(done_);
  s_.call_drivers.erase(shared_from_this());
  if (done) done(std::move(call), std::move(reply));
}

session::CallHooks StreamingHooks(const std::shared_ptr<Exchange>& ex, model::StreamFormat format) {
  std::weak_ptr<EventStream> events = ex->MakeEvents(format);
  std::weak_ptr<Exchange> weak = ex;
  net::io_context& io = *ex->s.io;
  session::CallHooks hooks;
  hooks.on_output = [events, &io](exec::Stream which, std::string_view bytes) {
    net::post(io, [events, which, data = std::string(bytes)] {
      if (auto es = events.lock()) es->Output(which == exec::Stream::kStdout ? "stdout" : "stderr", data);
    });
  };
  hooks.on_started = [weak, &io] {
    net::post(io, [weak] {
      if (auto e = weak.lock()) e->BeginEvents();
    });
  };
  return hooks;
}

void StartSessionCall(ServerState& s, SessionCall call, SessionCallDriver::Format format,
                      std::function<void(bool ran, session::CallReply call, Reply reply)> done,
                      std::function<bool()> gone) {
  struct Begun {
    std::unique_ptr<session::PendingCall> pending;
    session::CallReply refused;
  };
  auto begin = [&s](const SessionCall& c) {
    Begun b;
    b.pending = c.context_id.empty()
                    ? s.session_mgr->BeginCall(c.session_id, c.owner, c.request, c.request_id, c.hooks, &b.refused)
                    : s.session_mgr->BeginCallIn(c.session_id, c.owner, c.context_id, c.request, c.request_id,
                                                 c.hooks, &b.refused);
    return b;
  };
  const std::string cancel_key =
      call.context_id.empty() ? call.session_id : session::SessionManager::CallKey(call.session_id, call.context_id);
  auto go = [&s, id = cancel_key, format = std::move(format), done = std::move(done),
             gone = std::move(gone)](Begun b) mutable {
    if (!b.pending) return done(false, std::move(b.refused), Reply());
    auto driver = std::make_shared<SessionCallDriver>(
        s, std::move(b.pending), std::move(format),
        [done = std::move(done)](session::CallReply c, Reply r) mutable { done(true, std::move(c), std::move(r)); });
    s.call_drivers.insert(driver);
    driver->Start();
    if (gone && gone()) s.session_mgr->Cancel(id, "the client disconnected");
  };
  if (call.request.code.size() <= kInlineBytes) return go(begin(call));
  // A large call is analyzed off the loop, then fed from it. `go` (which may
  // hold an exchange) is moved to the loop's function: never released on the worker.
  net::post(*s.session_pool, [&s, begin, call = std::move(call), go = std::move(go)]() mutable {
    Begun b = begin(call);
    net::post(*s.io, [go = std::move(go), b = std::move(b)]() mutable { go(std::move(b)); });
  });
}

}  // namespace airlock::api
