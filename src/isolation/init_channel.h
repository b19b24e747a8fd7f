// The server's side of a run's control channel (its init's status socket,
// Launched::status_fd; the protocol: init_control.h): makes the run a
// sandbox, then starts and signals processes in it. exec::Sandbox is its one
// user; it knows nothing of the wire.
//
//   InitChannel ch(run.status_fd.get());
//   RETURN_IF_ERROR(ch.BecomeSandbox(host, spec, run.cgroup != nullptr, lifetime_ms));
//   ProcessRequest rq; rq.argv = {"/bin/sh", "-c", "echo hi"}; rq.env = {...}; rq.cwd = "/home/user";
//   ASSIGN_OR_RETURN(StartedProcess p, ch.Start(rq));   // p.pid, p.stdout_r ...
//   RETURN_IF_ERROR(ch.Signal(p.pid, SIGTERM, /*group=*/true));
//
// Calls block until init answers (it never waits on anything but its own
// fork and the started process's execve), bounded by a timeout. Not
// thread-safe: one caller at a time (exec::Sandbox holds a lock).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "isolation/sandbox.h"
#include "isolation/spec.h"

namespace airlock::isolation {

struct ProcessRequest {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in env's PATH
  std::vector<std::string> env;   // the whole environment, "KEY=value"
  std::string cwd = kWorkspaceDir;
  bool stdin_pipe = false;        // false: /dev/null
  std::vector<int> extra_fds;     // become fds 3, 4, ... (the caller keeps its own)
};

struct StartedProcess {
  pid_t pid = -1;      // in the sandbox's pid namespace
  UniqueFd status;     // readable once init reaped it: a ProcessStatus, or end of file (the sandbox ended)
  UniqueFd stdin_w;    // when asked for; non-blocking
  UniqueFd stdout_r;   // non-blocking
  UniqueFd stderr_r;   // non-blocking
};

// How a started process ended, from its status pipe's bytes (8 of them), or
// nullopt when they are not a status.
std::optional<int> ParseProcessStatus(const char* bytes, size_t size);

class InitChannel {
 public:
  explicit InitChannel(int fd) : fd_(fd) {}

  // Makes the run a sandbox: from now on it outlives its program, and every
  // process started in it gets the restrictions a program of `spec` gets on
  // this host (planned here, as Launch plans them; have_cgroup: the run has
  // one, so the rlimits sit above its limits). lifetime_ms: init ends the
  // sandbox after this long even if the server does not (0: never).
  Status BecomeSandbox(const HostSetup& host, const Spec& spec, bool have_cgroup, int64_t lifetime_ms);
  // Starts one process; returns once it has exec'd (or says which step of
  // its setup failed and why: "not found" for a program that does not exist).
  StatusOr<StartedProcess> Start(const ProcessRequest& request);
  // Signals a process Start() returned (and, with group, the group it leads),
  // while init has not reaped it. NotFound once it has.
  Status Signal(pid_t pid, int sig, bool group);

  // What init said without being asked, read now: the run's program's wait
  // status once it ended (from init's report in a sandbox, or the run's
  // final status), waiting up to wait_ms for it.
  std::optional<int> ProgramExit(int wait_ms = 0);
  // Whether init is gone (its final status read, or end of file).
  bool ended() const { return ended_; }

 private:
  struct Answer {
    int32_t result = 0, err = 0, step = 0;
  };
  // Sends one message (its header's seq set here) and fds, then reads until
  // the reply to it.
  StatusOr<Answer> Call(std::string message, const std::vector<int>& fds, const char* what);
  // Reads what is there (waiting up to timeout_ms for something): true once
  // the reply numbered `seq` is in *answer. Other messages are recorded.
  bool Read(int timeout_ms, uint32_t seq, Answer* answer);

  int fd_;
  uint32_t next_seq_ = 1;
  bool ended_ = false;
  std::optional<int> program_exit_;
};

}  // namespace airlock::isolation
