// Internal to isolation/: everything the child needs, prepared in the parent
// before clone() so that the child only reads memory and makes system calls.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <array>
#include <string>
#include <vector>

#include "isolation/init_loop.h"  // ProgramStatus
#include "isolation/landlock.h"
#include "isolation/restrict.h"
#include "isolation/seccomp_policy.h"
#include "isolation/spec.h"
#include "isolation/steps.h"

namespace airlock::isolation::internal {

struct ChildError {
  int step;
  int err;
  int index;  // which mount op, when step == kStepMountOp
};

struct MountOp {
  // kMask: /dev/null over a file, an empty read-only tmpfs over a directory;
  // kReadOnly: a read-only bind of a path onto itself. Both skip a target this
  // kernel does not have. kBind: a writable bind of a directory of the new
  // root (source) at target; kDetach: the mount at target detached and its
  // directory removed.
  // kUnmount: the mount at target detached (its directory stays); kRemountRo:
  // the mount at target made read-only (a template's /dev).
  enum Kind {
    kDir, kBindRo, kBindFile, kSymlink, kFile, kTmpfs, kProc, kMask, kReadOnly, kBind, kDetach, kUnmount, kRemountRo
  } kind;
  std::string target;  // absolute path inside the sandbox
  std::string source;  // bind source, symlink target, or file content
  std::string data;    // tmpfs options
  unsigned long remount_flags = 0;  // for kBindRo: flags for the read-only remount
  unsigned mode = 0755;
};

struct ChildPlan {
  std::string staging;  // where the new root's tmpfs is mounted before pivot_root
  // A warm run whose zygote built a template of its root (kRunTemplate): the
  // root is a bind of it, and ops are PlanRunFromTemplate's ("": built from
  // a tmpfs at staging by PlanMounts' ops).
  std::string run_template;
  std::vector<MountOp> ops;
  std::string hostname;
  std::string workdir;
  std::vector<std::string> argv_storage, env_storage;
  std::vector<char*> argv, envp;  // null-terminated, point into *_storage
  std::vector<std::pair<int, struct rlimit>> rlimits;
  LandlockPlan landlock;
  const SeccompProgram* seccomp = nullptr;
  bool can_setgroups = false;
  uintptr_t arg_start = 0, arg_end = 0;  // the parent's argv memory, blanked in init

  // Spec::nested_sandbox_host: skip seccomp, Landlock, the bounding set and the
  // securebits (see spec.h); capabilities still end empty at execve.
  bool nested_sandbox_host = false;
  // A zygote that gives each run a host id of its own (host_ids.h): it keeps
  // CAP_SETUID and CAP_SETGID (ambient, so they survive its execve) in its own
  // user namespace, to own each run's namespace as that run's id.
  bool keep_setid_caps = false;
  int exec_fd = -1;  // execveat(exec_fd, "") instead of execve(argv[0])
  // A warm run (isolation/warm_run.h): the program does not execve; RunChild
  // returns in it once every layer is in force, with err_w moved to a high fd.
  // The process's signal dispositions (the warm interpreter's) are kept.
  bool warm = false;
  // The run has a UTS namespace of its own (false: a warm run's, which is its
  // zygote's; hostname already set there, and not the run's to change).
  bool own_uts = true;

  // fds (the child's view; all O_CLOEXEC in the parent)
  int sync_r = -1;     // parent writes one byte when ids and cgroup are set
  int err_w = -1;      // ChildError on failure; EOF when the program exec'd
  int status_w = -1;   // init writes the program's wait status
  int stdout_w = -1, stderr_w = -1;
  int extra_fd = -1;   // becomes fd 3
};

// Fills a plan from a spec (parent side; allocates). In place: plan->argv and
// envp point into the plan's own storage, so the plan must not move afterwards.
void FillChildPlan(ChildPlan* plan, const Spec& spec, int landlock_abi, const SeccompProgram* seccomp);
// The rlimits of a run (RLIMIT_AS/NPROC sit above the cgroup limits when there is one).
std::vector<std::pair<int, struct rlimit>> PlanRlimits(const Limits& limits, bool have_cgroup);
// "sync with parent", "mount", ... for a Step.
const char* StepName(int step);

// Builds the mount plan for a spec (parent side; allocates). A zygote's
// (spec.nested_sandbox_host) also builds, when RunTemplateFits, a read-only
// template of its runs' roots at kRunTemplate: the system trees, /etc and /dev
// as every run has them, so that a run only mounts what is its own.
std::vector<MountOp> PlanMounts(const Spec& spec);
extern const char kRunTemplate[];
// Whether a run's root can come from a template: nothing of the spec lies in
// what each run mounts itself (its workspace, /tmp, /dev, /proc).
bool RunTemplateFits(const Spec& spec);
// A warm run's plan when its root comes from its zygote's template: its own
// proc and masks, its workspace, its /dev/shm.
std::vector<MountOp> PlanRunFromTemplate(const Spec& spec);
// Child side: mounts a tmpfs at plan.staging, pivots into it (the host root
// parked at /.oldroot), runs the plan, detaches the host root and makes the
// new root read-only. With plan.run_template: binds the template, pivots into
// it (the zygote's root parked at kWorkspaceDir), runs the plan (which detaches
// that root) and checks the root is read-only.
// Returns 0 or errno; *failed_index names the op that failed.
int ApplyMountsInChild(const ChildPlan& plan, int* failed_index, int* failed_step);

// The child's whole life after clone(). Never returns, except in the program
// process of a warm plan (plan.warm), with every layer in force; the caller
// then runs the code and _exit()s.
void RunChild(const ChildPlan& plan);

// A warm run's program, forked by the run's first process (which then becomes
// the init program, init_loop.h) before any setup: closes every fd but the
// plan's and lock_sock, waits for sync_r, sets the run up as RunChild does and
// returns with every layer in force (lock_sock: where the lock filter's
// listener goes to init; -1 without a lock filter). Fails as RunChild does.
void RunWarmProgram(const ChildPlan& plan, int lock_sock);

// fork() without glibc's atfork handlers (a raw clone(SIGCHLD)).
pid_t RawFork();

// The restrictions of a plan's program as restrict.h's flat plan, pointing
// into `plan` (no allocation: safe after clone()). False when the plan has
// more rlimits or Landlock rules than RestrictPlan holds.
bool RestrictPlanOf(const ChildPlan& plan, RestrictPlan* out);

}  // namespace airlock::isolation::internal
