// exec::Sandbox: a run made a sandbox (DESIGN §3b, issue 22): one isolated
// environment (its pid, mount, ipc, uts and cgroup namespaces, its cgroup,
// its host uid, its workspace at /home/user and its /tmp) that holds any
// number of processes for its lifetime. The run's own program (a session's
// Python interpreter, the warm fork of today) is one of them; every other
// process is started inside by the sandbox's init on request
// (isolation/init_channel.h), with exactly the restrictions the program has.
// The sandbox's limits are shared by all of them, and nothing outlives it:
// destroying it (or Kill) ends every process, and with them the mounts, the
// cgroup and the host uid lease.
//
//   ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, Sandbox::Make(host, std::move(run), spec, options));
//   ProcessRequest rq;
//   rq.argv = {"/bin/bash", "-c", "echo hi; cat"};
//   rq.stdin_open = true;
//   ASSIGN_OR_RETURN(std::shared_ptr<Process> p, sb->Start(rq));
//   RETURN_IF_ERROR(p->SendInput("typed\n"));
//   p->CloseInput();
//   // its output and end, fed by a loop (process_watch.h), or blocking:
//   ASSIGN_OR_RETURN(auto watch, ProcessWatch::Attach(p, {}));
//   watch->WaitDone();
//   ProcessOutcome o = watch->Finish();        // o.exit.exit_code, o.out.data ...
//   sb->Signal(pid, SIGTERM); sb->List(); sb->Kill("deleted");
//
// Process ids are the processes' pids in the sandbox's pid namespace (what
// `ps` shows inside, what E2B's process API names), unique among the
// processes the sandbox started until Forget() drops an ended one. A pid of
// another sandbox means nothing here (NotFound): each sandbox knows only its
// own processes, and its init signals only its own children.
//
// Thread-safe. Start, Signal and List block for an answer from init (a fork
// and an execve at most, bounded); everything else never blocks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "exec/execution.h"
#include "isolation/init_channel.h"
#include "isolation/sandbox.h"
#include "isolation/spec.h"

namespace airlock::exec {

struct SandboxOptions {
  // The environment every process starts with ("KEY=value"); a request's own
  // entries are laid over it.
  std::vector<std::string> env;
  // The sandbox's lifetime, enforced by its init as well as by whoever owns
  // it (0: none beyond the owner's).
  double lifetime_s = 0;
  // Ended processes kept for List() before the oldest is forgotten.
  size_t max_ended_kept = 256;
};

struct ProcessRequest {
  std::vector<std::string> argv;  // argv[0]: an absolute path or a name looked up in the PATH
  std::vector<std::string> env;   // "KEY=value", laid over SandboxOptions::env
  std::string cwd = isolation::kWorkspaceDir;  // beneath /home/user or /tmp
  bool stdin_open = false;        // a pipe for SendInput; false: /dev/null
  std::string tag;                // the caller's name for it, echoed by List (E2B's tag)
  std::vector<int> extra_fds;     // become fds 3, 4, ... (at most 4; the caller keeps its own)
};

struct ProcessExit {
  bool exited = false;  // exit_code is the process's own
  int exit_code = 0;    // or 128 + signal
  int signal = 0;       // when killed by a signal
  bool sandbox_ended = false;  // it did not end by itself: its sandbox ended under it
};

struct ProcessInfo {
  pid_t pid = -1;
  std::string tag;
  std::vector<std::string> argv;
  std::string cwd;
  bool running = true;
  ProcessExit exit;  // when !running
};

// One process the sandbox started: its stdin and its end. Its output is read
// by one ProcessWatch at a time (process_watch.h); while none is attached a
// process that writes more than a pipe holds (64 KiB) waits, as it would on
// a terminal nobody reads.
class Process {
 public:
  pid_t pid() const { return pid_; }
  const std::string& tag() const { return info_.tag; }
  ProcessInfo Info();

  // Writes all of `data` to its stdin; waits (up to 5 s) while the pipe is
  // full. FailedPrecondition when it has no stdin pipe or it was closed, or
  // the process is gone.
  Status SendInput(std::string_view data);
  // Its stdin reaches end of file.
  void CloseInput();
  // How it ended, once its init reported it (reads its status pipe: never blocks).
  std::optional<ProcessExit> Exit();

  // For a loop: non-blocking read ends (-1 once released), and the fd that
  // becomes readable when it ended.
  int stdout_fd() const { return out_.get(); }
  int stderr_fd() const { return err_.get(); }
  int exit_fd() const { return status_.get(); }

 private:
  friend class Sandbox;
  friend class ProcessWatch;
  Process() = default;
  pid_t pid_ = -1;
  std::mutex mu_;     // info_, the end, watched_ (never held while blocking)
  std::mutex in_mu_;  // in_ (SendInput may wait on a full pipe)
  ProcessInfo info_;
  UniqueFd status_, in_, out_, err_;
  bool stdin_pipe_ = false;
  bool ended_ = false;
  uint64_t end_order_ = 0;  // when its end was seen (0: running)
  bool watched_ = false;    // a ProcessWatch is attached
};

class Sandbox {
 public:
  // Takes `run` (a session's run: its program is the context it serves) and
  // makes it a sandbox (its init's word: isolation::InitChannel): Adopt, then
  // Open. `spec`: what the run was made with (its limits; every started
  // process gets its restrictions). `zygote`: kept while the sandbox lives
  // (a warm run dies with its zygote). On failure the run is killed.
  static StatusOr<std::shared_ptr<Sandbox>> Make(const isolation::HostSetup& host, isolation::Launched run,
                                                 const isolation::Spec& spec, SandboxOptions options,
                                                 std::shared_ptr<const ZygoteLife> zygote = nullptr);
  // Takes `run` without making it a sandbox yet: until Open(), it ends with
  // its program as any run does, and Start() refuses. What a session holds
  // from its start, so that it opens its sandbox only when first asked to.
  static std::shared_ptr<Sandbox> Adopt(isolation::Launched run, const isolation::Spec& spec,
                                        std::shared_ptr<const ZygoteLife> zygote = nullptr);
  // Makes it a sandbox (once; later calls return the first one's status).
  Status Open(const isolation::HostSetup& host, SandboxOptions options);
  bool opened();
  ~Sandbox();  // Kill("closed")

  // Starts a process (blocking until it exec'd). InvalidArgument for a bad
  // request or a program that cannot be executed (its message says why),
  // ResourceExhausted at the sandbox's most processes at once, Unavailable
  // once the sandbox has ended.
  StatusOr<std::shared_ptr<Process>> Start(const ProcessRequest& request);
  // Sends `sig` to a process it started (and to the group it leads, so that
  // a shell's children get it too). NotFound for a pid it did not start or
  // that has ended.
  Status Signal(pid_t pid, int sig);
  // Every process it started, running first, then the ended ones (newest first).
  std::vector<ProcessInfo> List();
  std::shared_ptr<Process> Find(pid_t pid);
  // Drops an ended process from List().
  void Forget(pid_t pid);

  // Whether the sandbox's init still runs (never blocks).
  bool Alive() const;
  // Whether init is gone for all the server knows: its channel ended (its
  // final status read, or end of file) or its pidfd is readable. Never blocks.
  bool InitGone();
  // The run's own program's wait status once it ended (in a sandbox, which
  // lives on, as init reported it; otherwise from the run's final status),
  // waiting up to wait_ms for init to say it.
  std::optional<int> ProgramWaitStatus(int wait_ms = 0);
  // Ends the sandbox now: every process killed, the cgroup emptied (bounded,
  // ~2 s), init gone (reaped when it is this process's child, a cold run;
  // waited for, bounded, when its zygote reaps it). Blocking. Idempotent;
  // `reason` is kept (ended_reason()).
  void Kill(const std::string& reason);
  std::string ended_reason();

  // The run (its init's pidfd, its cgroup, its isolation report): for the
  // context that drives its program (session::LiveSession).
  isolation::Launched& run() { return run_; }
  const isolation::Spec& spec() const { return spec_; }
  const std::shared_ptr<const ZygoteLife>& zygote() const { return zygote_; }

 private:
  Sandbox() = default;
  // Forgets the oldest ended processes beyond SandboxOptions::max_ended_kept.
  void TrimEndedLocked();

  isolation::Launched run_;
  isolation::Spec spec_;
  SandboxOptions options_;
  std::shared_ptr<const ZygoteLife> zygote_;
  std::mutex mu_;  // the channel, the table, the kill state
  std::unique_ptr<isolation::InitChannel> channel_;
  std::map<pid_t, std::shared_ptr<Process>> processes_;
  bool killed_ = false;
  std::string kill_reason_;
  std::optional<Status> opened_;  // Open()'s outcome, once called
  std::atomic<bool> open_{false};  // opened_ is ok (read without the lock: an event loop asks)
};

}  // namespace airlock::exec
