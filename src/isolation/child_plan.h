// Internal to isolation/: everything the child needs, prepared in the parent
// before clone() so that the child only reads memory and makes system calls.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <array>
#include <string>
#include <vector>

#include "isolation/landlock.h"
#include "isolation/seccomp_policy.h"
#include "isolation/spec.h"

namespace airlock::isolation::internal {

// Steps the child reports on failure; names in kStepNames (sandbox.cc).
enum Step : int {
  kStepSync = 1,
  kStepCgroupNs,
  kStepSetgroups,
  kStepSetgid,
  kStepSetuid,
  kStepCaps,
  kStepHostname,
  kStepMountPrivate,
  kStepMountRoot,
  kStepMountOp,
  kStepPivotRoot,
  kStepRemountRoot,
  kStepFork,
  kStepSetsid,
  kStepFds,
  kStepRlimits,
  kStepChdir,
  kStepSecurebits,
  kStepCapsDrop,
  kStepNoNewPrivs,
  kStepLandlock,
  kStepSeccomp,
  kStepExec,
  kStepCount,
};

struct ChildError {
  int step;
  int err;
  int index;  // which mount op, when step == kStepMountOp
};

struct MountOp {
  enum Kind { kDir, kBindRo, kBindFile, kSymlink, kFile, kTmpfs, kProc } kind;
  std::string target;  // absolute path inside the sandbox
  std::string source;  // bind source, symlink target, or file content
  std::string data;    // tmpfs options
  unsigned long remount_flags = 0;  // for kBindRo: flags for the read-only remount
  unsigned mode = 0755;
};

struct ChildPlan {
  std::string staging;  // where the new root's tmpfs is mounted before pivot_root
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

  // fds (the child's view; all O_CLOEXEC in the parent)
  int sync_r = -1;     // parent writes one byte when ids and cgroup are set
  int err_w = -1;      // ChildError on failure; EOF when the program exec'd
  int status_w = -1;   // init writes the program's wait status
  int stdout_w = -1, stderr_w = -1;
  int extra_fd = -1;   // becomes fd 3
};

// Builds the mount plan for a spec (parent side; allocates).
std::vector<MountOp> PlanMounts(const Spec& spec);
// Child side: mounts a tmpfs at plan.staging, pivots into it (the host root
// parked at /.oldroot), runs the plan, detaches the host root and makes the
// new root read-only.
// Returns 0 or errno; *failed_index names the op that failed.
int ApplyMountsInChild(const ChildPlan& plan, int* failed_index, int* failed_step);

// The child's whole life after clone(): never returns.
[[noreturn]] void RunChild(const ChildPlan& plan);

}  // namespace airlock::isolation::internal
