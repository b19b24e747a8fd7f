// api::SessionCallDriver: one call into a live session (session::LiveCall),
// fed from the event loop like a RunDriver: its fds are waited on
// asynchronously and a timer ticks its deadlines, so a call holds no thread.
// A blocking call on a worker thread cost two thread hops (there and back) on
// top of the runner's round trip: on this 2-core VM they were most of a
// call's latency under load.
//
//   auto d = std::make_shared<SessionCallDriver>(state, std::move(pending), [](RouteReply r) { ... });
//   state.call_drivers.insert(d);
//   d->Start();
//
// Every method is called on the event-loop thread.
#pragma once

#include "api/net.h"

#include <functional>
#include <memory>

#include "api/server_state.h"
#include "api/session_routes.h"
#include "session/session_manager.h"

namespace airlock::api {

class SessionCallDriver : public std::enable_shared_from_this<SessionCallDriver> {
 public:
  using Done = std::function<void(RouteReply)>;
  using Fd = session::LiveCall::Fd;

  SessionCallDriver(ServerState& s, std::unique_ptr<session::PendingCall> pending, Done done);
  // The fds belong to the session: released, never closed, here.
  ~SessionCallDriver();

  void Start();

  // A server stopping with the call under way: the call is dropped here,
  // while the session manager still exists (its sessions are killed next).
  void Abandon();

 private:
  void ReleaseAll();
  // Waits on every fd the call still wants, then concludes once it is done.
  void Continue();
  void Tick();
  void Conclude();
  void Complete(RouteReply reply);

  ServerState& s_;
  std::unique_ptr<session::PendingCall> pending_;
  Done done_;
  net::posix::stream_descriptor desc_[Fd::kFdCount];
  bool waiting_[Fd::kFdCount] = {};
  net::steady_timer timer_;
  bool finishing_ = false;
};

}  // namespace airlock::api
