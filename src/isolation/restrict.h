// Internal to isolation/: the restrictions every process that runs user code
// is put under before its first instruction of it, as ONE checklist shared by
// the places that start such a process:
//  - a cold run's program and a warm run's program (RestrictProgram in
//    contain.cc, in the server's or a zygote's copy);
//  - a process a sandbox's init starts on the server's request
//    (spawn_service.h), in the static init program.
// So the list is written once: rlimits, then the lock-down (securebits locked,
// bounding set emptied, ambient set cleared, every capability dropped,
// no_new_privs, Landlock, seccomp), with the lock filter (lock_supervisor.h)
// installed first of all.
//
// The plan is flat data with pointers: the server and the zygote make it from
// a ChildPlan (RestrictPlanOf, child_plan.h) on the stack; the server also
// serializes it (restrict_blob.h) for a sandbox's init, which parses it into
// the same struct with pointers into its own buffer (ParseRestrictPlan).
//
// Rules: C and kernel headers only (the init program is built against musl),
// system calls only, no allocation (it runs after clone() and fork()).
#pragma once

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

namespace airlock::isolation::internal {

struct RestrictPlan {
  static constexpr int kMaxRlimits = 16;
  static constexpr int kMaxRules = 16;
  struct Rlimit {
    int32_t resource;
    uint64_t cur, max;
  };
  struct Rule {
    const char* path;  // inside the sandbox; a missing path is skipped
    uint64_t access;
  };
  Rlimit rlimits[kMaxRlimits];
  int n_rlimits;
  int landlock_abi;  // 0: no Landlock
  uint64_t handled_fs, handled_net, scoped;
  Rule rules[kMaxRules];
  int n_rules;
  const struct sock_filter* filter;  // the main seccomp filter (required)
  size_t filter_len;
  const struct sock_filter* lock_filter;  // installed first, its listener to init (0: none)
  size_t lock_filter_len;
};

// The start of a process that will run user code: no_new_privs (so that the
// lock filter installs without CAP_SYS_ADMIN), then, when the plan has one and
// lock_sock >= 0, the lock filter with its listener sent to init over lock_sock
// (closed either way). Returns 0 or errno; *step is set to the failing step.
int InstallLockFilterFirst(const RestrictPlan& plan, int lock_sock, int* step);

// A session of its own (setsid), an empty signal mask, the default disposition
// of every signal when `default_signals` (execve keeps ignored signals), and
// SIGKILL when the parent (the run's init) dies. 0 or errno (setsid).
int StartOwnSession(bool default_signals);

// setrlimit for each of the plan's limits. 0 or errno.
int ApplyRlimits(const RestrictPlan& plan);

// The lock-down, in this order: securebits locked (no execve gives a
// capability back), bounding set emptied, ambient set cleared, every
// capability dropped, no_new_privs, Landlock, seccomp (last: after it only the
// allowlisted system calls exist). Needs CAP_SETPCAP in the process's user
// namespace. 0 or errno, *step the failing step (steps.h).
int LockDown(const RestrictPlan& plan, int* step);

// The two steps of LockDown that other callers use alone (landlock.h's and
// seccomp_policy.h's Apply*InChild, the host probe, tests). 0 or errno.
int ApplyLandlock(const RestrictPlan& plan);
int ApplySeccomp(const RestrictPlan& plan);

// Reads a plan serialized by SerializeRestrictPlan (restrict_blob.h) from
// `bytes` (which must stay alive and unchanged: the plan points into it).
// Returns false when the bytes are not a well-formed plan.
bool ParseRestrictPlan(const char* bytes, size_t size, RestrictPlan* out);

// The serialized form's first four bytes.
constexpr uint32_t kRestrictPlanMagic = 0x31505241;  // "ARP1"

}  // namespace airlock::isolation::internal
