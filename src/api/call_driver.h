// api::SessionCallDriver: one call into a live session (session::LiveCall),
// fed from the event loop like a RunDriver: its fds are waited on
// asynchronously and a timer ticks its deadlines, so a call holds no thread.
// A blocking call on a worker thread cost two thread hops (there and back) on
// top of the runner's round trip: on this 2-core VM they were most of a
// call's latency under load, and a door whose calls held threads (E2B's
// /execute, MCP's tools/call) could hold every one of them.
//
// StartSessionCall() is what every door's session call goes through
// (/v1/sessions/{id}/execute, E2B's /execute, MCP's execute_python with a
// session_id):
//
//   StartSessionCall(state, {id, owner, request_id, request, hooks},
//                    [](const session::CallReply& c) { return DoorsAnswer(c); },   // where the call finishes
//                    [](bool ran, session::CallReply c, Reply r) { ... },         // on the loop
//                    [ex] { return ex->gone(); });
//
// Every method is called on the event-loop thread.
#pragma once

#include "api/net.h"

#include <functional>
#include <memory>
#include <string>

#include "api/route.h"
#include "api/server_state.h"
#include "session/session_manager.h"

namespace airlock::api {

class SessionCallDriver : public std::enable_shared_from_this<SessionCallDriver> {
 public:
  // The door's answer of a finished call: made where the call is finished
  // (on the loop for a small answer, on a worker for a large one).
  using Format = std::function<Reply(const session::CallReply&)>;
  using Done = std::function<void(session::CallReply, Reply)>;
  using Fd = session::LiveCall::Fd;

  SessionCallDriver(ServerState& s, std::unique_ptr<session::PendingCall> pending, Format format, Done done);
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
  void Complete(session::CallReply call, Reply reply);

  ServerState& s_;
  std::unique_ptr<session::PendingCall> pending_;
  Format format_;
  Done done_;
  net::posix::stream_descriptor desc_[Fd::kFdCount];
  bool waiting_[Fd::kFdCount] = {};
  net::steady_timer timer_;
  bool finishing_ = false;
};

class Exchange;

// The hooks of a session call whose answer is streamed on `ex` (its events
// writer made here, in `format`): each piece of output goes to the writer as
// it is read, and the answer begins when the call starts running.
session::CallHooks StreamingHooks(const std::shared_ptr<Exchange>& ex, model::StreamFormat format);

struct SessionCall {
  std::string session_id;
  std::string owner;
  std::string request_id;
  model::ExecuteRequest request;
  session::CallHooks hooks;
  // A context of the session (POST /v1/sessions/{id}/contexts/{ctx}/execute,
  // an E2B context made with createCodeContext); "": the session's own route
  // (its main interpreter, or its default context of request.language).
  std::string context_id;
};

// Begins `call` (its code analyzed on the loop when small, on a worker when
// large), drives it from the loop, and calls `done` on the loop: `ran` false
// with the manager's refusal (not found, busy, rejected by policy), or true
// with the finished call and format's answer. `gone`, when set, is asked once
// the call began: a client that left meanwhile interrupts it (a call handed to
// the interpreter is driven to its end, never dropped half-way).
void StartSessionCall(ServerState& s, SessionCall call, SessionCallDriver::Format format,
                      std::function<void(bool ran, session::CallReply call, Reply reply)> done,
                      std::function<bool()> gone);

}  // namespace airlock::api
