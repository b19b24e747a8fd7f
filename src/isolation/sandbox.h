// Launching one program inside a fresh sandbox (DESIGN §4): namespaces, a new
// root, cgroup limits, rlimits, no capabilities, Landlock and seccomp, in that
// order, before the program's first instruction.
//
//   ASSIGN_OR_RETURN(HostSetup host, PrepareHost(options));   // once per process
//   ASSIGN_OR_RETURN(Launched run, Launch(host, spec));       // per run
//   ... read run.stdout_fd / run.stderr_fd, poll run.pidfd ...
//   ASSIGN_OR_RETURN(ExitInfo exit, Reap(run));
//
// Launch() may be called from a multi-threaded process: the code between
// clone() and execve() only reads data prepared before clone() and does not
// allocate; a failure there reaches the parent as a (step, errno) pair.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "isolation/cgroup.h"
#include "isolation/host_ids.h"
#include "isolation/seccomp_policy.h"
#include "isolation/spec.h"

namespace airlock::isolation {

struct HostOptions {
  // Layers this host may lack without refusing to run (Degradable bits). A
  // missing layer that is not listed here makes PrepareHost() fail.
  uint32_t degradable = 0;
  // The host ids runs get their own from (host_ids.h); unset: the default
  // range. Needs a server running as root; refused when not free.
  std::optional<HostIdRange> id_range;
  // Removes the empty cgroups airlock processes that are gone left behind
  // (SweepStaleCgroups): servers set it, one-shot commands do not.
  bool sweep_stale_cgroups = false;
};

// What this process found out about the host, computed once.
struct HostSetup {
  CgroupSetup cgroups;
  int landlock_abi = 0;
  SeccompProgram seccomp;
  uint32_t degradable = 0;
  bool privileged = false;  // euid 0: maps the sandbox to an unprivileged host uid
  // Root: each run's (and zygote's) uid and gid 1000 is an id of its own from
  // this block of the reserved range. Null when not root: every run is the
  // server's own uid (host_ids_why_not says so in every isolation report).
  std::shared_ptr<HostIdPool> host_ids;
  std::string host_ids_why_not;
  // Where this process's command line lives (from /proc/self/stat): the run's
  // init, a copy of this process, blanks it so /proc/1/cmdline shows nothing.
  uintptr_t arg_start = 0, arg_end = 0;
};

StatusOr<HostSetup> PrepareHost(const HostOptions& options);

// Which layer was in force for one run; echoed in every result.
struct LayerState {
  std::string name;
  bool enforced = false;
  std::string detail;
};
struct IsolationReport {
  std::vector<LayerState> layers;
  int landlock_abi = 0;
  std::string cgroup_version;  // "v2", "v1" or "none"
  std::string mode = "cold";   // "cold": launched for this run; "warm": from a pre-forked pool
  int64_t host_uid = -1;       // the host uid (and gid) of the run's uid 1000; -1 unknown
};

struct Launched {
  pid_t pid = -1;         // the run's init (pid 1 inside), in our pid namespace
  // Made by another process (a warm pool's zygote) and handed to us: we cannot
  // wait for it; Reap() reads how it ended from status_fd once pidfd is readable.
  bool adopted = false;
  UniqueFd pidfd;         // readable when init has exited
  UniqueFd stdout_fd;     // non-blocking read ends
  UniqueFd stderr_fd;
  UniqueFd status_fd;     // init writes the program's wait status here
  pid_t program_pid = -1; // adopted: the program (init's only child when it said it was ready); -1 unknown
  std::unique_ptr<RunCgroup> cgroup;  // null when running without cgroups (degraded)
  IsolationReport report;
  // The run's own host id (empty without a range): given back to the pool once
  // the run's init is gone and reaped, whenever this Launched is destroyed.
  HostIdLease host_id;
};

StatusOr<Launched> Launch(const HostSetup& host, const Spec& spec);

struct ExitInfo {
  bool exited = false;   // the program exited normally
  int exit_code = 0;     // when exited
  int signal = 0;        // when killed by a signal (0 otherwise)
  bool init_killed = false;  // init died before reporting (the run was killed from outside)
  int init_wait_status = 0;  // init's own wait status, when we reaped it
  struct rusage usage {};
};

// Waits for init (blocking) and returns how the program ended. Call after the
// pidfd became readable, or after killing the run.
StatusOr<ExitInfo> Reap(Launched& run);

// Reads how the program ended from run.status_fd (what the run's init wrote);
// init_wait_status is init's own wait status when known (else 0).
StatusOr<ExitInfo> ReadProgramStatus(Launched& run, int init_wait_status);

// Kills every process of the run (init first; the pid namespace takes the rest)
// and waits (bounded, ~2 s) until its cgroup is empty.
void KillRun(Launched& run);
// The same without waiting, for an event loop: SIGKILL to init (its pid
// namespace dies with it) and the CPU limit lifted so that no process of the
// run waits for its quota's next period to die. The cgroup is emptied and
// removed later, when the Launched is destroyed. Falls back to KillRun without
// a pidfd.
void StartKillingRun(Launched& run);

// The children of process `pid` (its main thread's: /proc/PID/task/PID/children),
// zombies included until they are fully released.
StatusOr<std::vector<pid_t>> ChildrenOf(pid_t pid);
// The same for the process a pidfd refers to: read by its pid, then checked
// that the process has not exited meanwhile (so the pid was not recycled: the
// list is that process's children). An error once it has exited.
// `pid`: that process's pid when the caller has it already (PidOfPidfd's, or
// the pid the pidfd was opened for and checked after), which saves reading
// /proc/self/fdinfo (three system calls) on a run's hot path; 0: read it.
StatusOr<std::vector<pid_t>> ChildrenOfPidfd(int pidfd, pid_t pid = 0);
// The pid (in our pid namespace) of the process a pidfd refers to; an error
// once it has been reaped or when it is not visible here.
StatusOr<pid_t> PidOfPidfd(int pidfd);
// Whether that process has started to exit (PF_EXITING): true from the moment
// it handles its SIGKILL, while it still tears its address space down and, as
// a pid namespace's init, waits for the rest of its namespace to die, all of
// which comes before its pidfd is readable. False when unknown.
bool PidfdProcessExiting(int pidfd);

// The host paths a sandbox of `spec` gets its filesystem from (bound, copied or
// recreated as symlinks when it starts). A warm pool watches them: a zygote
// built from a file the host has since replaced (a package upgrade) is replaced.
std::vector<std::string> HostPathsOfPlan(const Spec& spec);

// The isolation report of a run on this host (what Launch() puts in Launched).
// host_uid: the run's host uid (-1: not known, or the server's own).
// shared_network: a warm run in its zygote's network namespace (warm_run.h).
// shared_uts: a warm run in its zygote's UTS namespace (every warm run).
IsolationReport MakeIsolationReport(const HostSetup& host, bool have_cgroup, int64_t host_uid = -1,
                                    bool shared_network = false, bool shared_uts = false);

}  // namespace airlock::isolation
