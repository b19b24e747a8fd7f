// session::LiveSession: one session's run (a warm run made a session, see
// exec::WarmPool::TakeSession, or a cold one, service::Service::
// StartColdSession, when no warm run could be had; airlock_runner.py
// "Sessions") and the calls into it, one at a time. It owns every process, the cgroup and (through the
// run's mount namespace) the working directory of the session: destroying it
// kills them all.
//
//   auto live = std::make_shared<LiveSession>(std::move(handoff), spec, max_event_bytes);
//   CallOutcome o = live->Call(request_json, /*call=*/1, options);  // blocking
//   if (!o.alive) ... the session is over: o.result.kill_detail says why
//
// Or fed by an event loop (the server's), which saves the two thread hops a
// blocking call costs:
//   std::unique_ptr<LiveCall> c = LiveCall::Start(live, request_json, 1, options);
//   until c->done(): wait for c->fd(i) (readable; kControl: writable) or
//                    c->OnTick() ms, then c->OnReady(i) / c->OnTick()
//   CallOutcome o = c->Finish();
//
// Call() blocks its thread for the call's duration (a worker thread); a
// LiveCall never blocks. Alive(), Cancel() and Kill() may be called from any
// thread.
//
// Contexts (issue 22): a session holds one or more interpreters, all in its
// sandbox, sharing its workspace and limits. The first, its main context, is
// the run's own program (the warm fork, or the cold runner); every other one
// is a kernel (service/kernels.h) its sandbox's init starts: a Python runner,
// node (JavaScript, TypeScript), R, a JShell, a bash. Every kernel speaks the
// runner's session protocol, so a call into any context is the same LiveCall:
//   auto ctx = live->AddContext(Language::kR, "/home/user", env);     // not started yet
//   live->StartContext(*ctx, host, sandbox_options, launch);          // blocking (a worker)
//   LiveCall::Start(live, ctx, request, n, options) ...
// A context whose interpreter ends (it exited, was killed, ran past its
// timeout and ignored the interrupt) is left not started, its state gone,
// and the call says so; the next call starts a fresh one. The main
// context's end is the session's, as it always was.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/unique_fd.h"
#include "exec/execution.h"
#include "exec/run_result.h"
#include "exec/sandbox.h"
#include "exec/warm_pool.h"
#include "isolation/spec.h"
#include "profile/profile.h"
#include "service/kernels.h"
#include "service/service.h"

namespace airlock::session {

struct CallOptions {
  double timeout_s = 30;
  int64_t output_cap = 1 << 20;  // bytes kept per stream
  // After the timeout (or a cancel) the cell is interrupted (KeyboardInterrupt);
  // if it has not ended this much later, the session is killed.
  double interrupt_grace_s = 2;
  // Each piece of kept output as it arrives (streaming); may be unset.
  std::function<void(exec::Stream, std::string_view)> on_output;
};

struct CallOutcome {
  exec::RunResult result;           // exit code, kill reason, output, duration, CPU of the call
  service::ChannelBuffer channel;   // the call's result events
  bool alive = true;                // the session lives on
  bool interrupted = false;         // the cell was interrupted (timeout or cancel) and stopped
  std::string end_reason;           // when !alive: why the session ended
  // A context other than the main one: its interpreter ended under the call
  // (the session lives on; the context starts afresh at its next call).
  bool context_ended = false;
  std::string context_end_reason;
  explicit CallOutcome(size_t channel_cap) : channel(channel_cap) {}
};

class LiveCall;

// One interpreter of a session (see "Contexts" above). Fields other than the
// identity are the session's to change (LiveSession's lock, or its call's).
struct Context {
  std::string id;
  profile::Language language = profile::Language::kPython;
  std::string cwd = "/home/user";
  std::map<std::string, std::string> env;  // its own variables, for its whole life
  bool main = false;                       // the session's own interpreter
  int64_t created_ms = 0;
  // The kernel the sandbox started for it (null: the main context's run
  // program, or not started). control: our end of its call pipe; events:
  // our end of its event pipe (both non-blocking).
  std::shared_ptr<exec::Process> process;
  UniqueFd control, events;
  bool started = false;      // it has an interpreter now (main: from the start)
  std::string end_reason;    // why its last interpreter ended ("" if none did)
  UniqueFd cancel_event;     // an eventfd: Cancel() wakes its call
  std::atomic<bool> in_call{false};
  std::string cancel_detail;
  // SessionManager's (under its lock):
  int64_t execution_count = 0;
  bool language_default = false;  // the session's default context of its language (E2B's)
};

class LiveSession {
 public:
  LiveSession(exec::SessionHandOff handoff, const isolation::Spec& spec, size_t max_event_bytes);
  ~LiveSession();  // Kill(): every process, the cgroup (blocking, bounded)

  // Sends call number `call` (its runner config JSON, code inline) to the
  // main context and waits for its end event, the deadline (then interrupt,
  // then kill), a Cancel(), or the session's death.
  CallOutcome Call(std::string_view request, int64_t call, const CallOptions& options);
  // The same call, driven by the caller's loop (LiveCall below).
  // Interrupts the call under way in the main context (or in `context`) as
  // its timeout would (kill_reason "cancelled"); a no-op between calls.
  // Thread-safe.
  void Cancel(const std::string& detail);
  void Cancel(Context& context, const std::string& detail);

  // Contexts. The main one, made with the session (its id is random).
  const std::shared_ptr<Context>& main_context() const { return main_; }
  // A new context, not started (StartContext starts it). Thread-safe.
  std::shared_ptr<Context> AddContext(profile::Language language, std::string cwd,
                                      std::map<std::string, std::string> env);
  std::shared_ptr<Context> FindContext(const std::string& id);
  std::vector<std::shared_ptr<Context>> Contexts();  // the main one first, then by creation
  size_t context_count();
  // Starts `context`'s interpreter in the sandbox (opened with `options` if
  // it was not): `launch` with fds 3 (calls), 4 (events) and 5 (its source).
  // A started one is stopped first (a restart in place: for the main
  // context, its warm fork is killed and a kernel takes its place).
  // Blocking (a worker). Errors as exec::Sandbox::Start's.
  Status StartContext(Context& context, const isolation::HostSetup& host, exec::SandboxOptions options,
                      const service::KernelLaunch& launch);
  // Ends `context`'s interpreter (SIGKILL) and leaves it not started, with
  // `reason`. The main context cannot be stopped so (its end is the
  // session's). Blocking, bounded (~2 s). Removes it when `remove`.
  void StopContext(Context& context, const std::string& reason, bool remove);
  // Why a started kernel (not the main context) ended since its last call,
  // or "" when it runs (or is not started). Does not block.
  std::string EndedBetweenCalls(Context& context);

  // Whether the session's init and its main interpreter still run (no blocking).
  bool Alive() const;
  // Why it ended, read from the cgroup and the init's report once !Alive()
  // (or after a kill): "the session ran out of memory (limit N bytes)", ...
  std::string EndReason();
  // Kills every process of the session and removes its cgroup (blocking,
  // bounded ~2 s). Idempotent.
  void Kill(const std::string& reason);

  pid_t init_pid() const { return run_.pid; }
  int pidfd() const { return run_.pidfd.get(); }
  // The session's sandbox (exec/sandbox.h): the environment its interpreter
  // lives in, where commands and other processes can be started. Opened on
  // first use with `options` (the environment processes start with, the
  // session's lifetime); until then the session is a run as any. Once open,
  // the session still ends when its interpreter does (and takes every
  // process of the sandbox with it), but a fork refused at the pids limit no
  // longer ends it, nor an out-of-memory kill that spared the interpreter:
  // the processes share those limits, and a command's excess is its own.
  StatusOr<std::shared_ptr<exec::Sandbox>> OpenSandbox(const isolation::HostSetup& host, exec::SandboxOptions options);
  const isolation::IsolationReport& report() const { return run_.report; }
  const isolation::Limits& limits() const { return spec_.limits; }
  // The zygote the session was made from (null on a pool without one); it
  // lives as long as the session does.
  const exec::ZygoteLife* zygote() const { return h_.zygote.get(); }

 private:
  friend class LiveCall;
  bool SendInterrupt(Context& context);
  // Kills a started kernel (SIGKILL, through init), waits for its end
  // (bounded), and leaves the context not started. Blocking.
  void KillKernel(Context& context, const std::string& reason);
  void DrainStale(Context& context);
  // The main context's wait status when its interpreter (the run's program,
  // or the kernel that replaced it) ended, waiting up to wait_ms.
  std::optional<int> MainWaitStatus(int wait_ms);

  exec::SessionHandOff h_;           // its run is the sandbox's (sandbox_)
  std::shared_ptr<exec::Sandbox> sandbox_;
  isolation::Launched& run_;         // sandbox_->run()
  isolation::Spec spec_;
  size_t max_event_bytes_;
  std::mutex mu_;  // the control sockets' writers (calls, Cancel), kill state, the contexts
  // The session's interpreter (its init's only child), for the interrupt
  // (SIGINT); empty when it could not be told, and then a timed-out call ends
  // its session.
  UniqueFd program_pidfd_;
  std::shared_ptr<Context> main_;
  std::vector<std::shared_ptr<Context>> contexts_;  // main_ first
  bool killed_ = false;
  std::string kill_reason_;
};

// One call under way in a session, fed by a loop: it never blocks. The
// session (held) must not have another call under way.
class LiveCall {
 public:
  enum Fd { kOut, kErr, kChan, kPid, kCancel, kControl, kFdCount };

  // Drains what the session wrote between calls, and begins sending the call
  // (to its main context, or to `context`, which must be started).
  static std::unique_ptr<LiveCall> Start(std::shared_ptr<LiveSession> session, std::string request, int64_t call,
                                         CallOptions options);
  static std::unique_ptr<LiveCall> Start(std::shared_ptr<LiveSession> session, std::shared_ptr<Context> context,
                                         std::string request, int64_t call, CallOptions options);
  ~LiveCall();

  // The fd to wait on for `which`, or -1: readability for all but kControl,
  // which is waited on for writability while the call is still being sent.
  int fd(Fd which) const;
  // `which` is ready (the loop's wait said so; a spurious call is harmless).
  void OnReady(Fd which);
  // Deadlines (timeout: interrupt; grace: kill) and the cgroup's events;
  // returns milliseconds until it wants to be called again.
  int OnTick();
  bool done() const { return done_; }
  // Whether the session ended under the call (killed, or died), or the
  // context's interpreter did: finishing the call then stops what is left of
  // it (blocking, ~ms: a worker).
  bool session_ended() const { return !o_.alive || o_.context_ended; }
  // What the call has kept so far (output and result events): what turning
  // it into a response will walk through.
  size_t bytes_kept() const { return o_.result.out.data.size() + o_.result.err.data.size() + o_.channel.data().size(); }
  // Drives the call to done() on a poll loop of its own (blocking).
  void WaitDone();
  // Once done(): the call's result (once).
  CallOutcome Finish();

 private:
  friend class LiveSession;  // Call(): the same call, on its own poll loop
  LiveCall(LiveSession& session, std::shared_ptr<LiveSession> keep, std::shared_ptr<Context> context,
           std::string request, int64_t call, CallOptions options);
  // Its interpreter's end seen: the session's (main context) or the context's.
  void EndContext(exec::KillReason reason, const std::string& detail);
  void Send();
  void EndSession(exec::KillReason reason, const std::string& detail);
  void OnOutput(Fd which);
  void OnChannel();
  void OnDeath();
  void OnCancel();

  LiveSession& s_;
  std::shared_ptr<LiveSession> keep_;  // Start(): the session lives as long as the call
  std::shared_ptr<Context> ctx_;
  // The call's fds: the run's own (the main context's warm fork or cold
  // runner) or its kernel's.
  bool kernel_ = false;
  int out_fd_ = -1, err_fd_ = -1, chan_fd_ = -1, control_fd_ = -1, end_fd_ = -1;
  int64_t call_;
  CallOptions options_;
  CallOutcome o_;
  std::string pending_;  // the frame and request not yet sent
  size_t sent_ = 0;
  Clock::time_point start_, deadline_, grace_deadline_, next_stats_;
  uint64_t cpu_before_ = 0;
  bool interrupt_sent_ = false;
  bool done_ = false;
  bool finished_ = false;
  bool out_open_ = true, err_open_ = true, chan_open_ = true;
};

}  // namespace airlock::session
