// The seccomp policy: compiled in the parent with libseccomp into BPF bytes;
// installed in the child with one seccomp(2) call (no allocation after clone).
//
//   ASSIGN_OR_RETURN(SeccompProgram prog, CompileSeccompPolicy({}));
//   ... after fork, in the child, as the very last step before execve:
//   if (int err = ApplySeccompInChild(prog)) report(err);
//
// What the policy does (x86_64 only):
//  - default-deny: a system call not on the allowlist fails with EPERM;
//  - a syscall of another ABI (i386 via int $0x80, x32 numbers >= 0x40000000)
//    kills the whole process with SIGSYS;
//  - clone() with any CLONE_NEW* flag fails with EPERM; clone3() fails with ENOSYS
//    (its flags live in memory where seccomp cannot look), so glibc falls back to clone();
//  - socket()/socketpair() work for AF_UNIX only (EPERM otherwise);
//  - ioctl() works except TIOCSTI and TIOCLINUX (terminal input injection): EPERM;
//  - personality() only queries or sets PER_LINUX; mknod()/mknodat() make FIFOs only;
//  - flock() and fcntl() lock commands are answered by the run's init (lock_filter),
//    fcntl(F_NOTIFY) fails with EPERM.
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace airlock::isolation {

struct SeccompOptions {
  // Nothing to choose yet: the policy is a default-deny allowlist for running an
  // interpreter (CPython, sh) with threads, subprocesses and AF_UNIX sockets.
};

struct SeccompProgram {
  std::vector<sock_filter> filter;
  // Installed before `filter`, with a listener that the run's init keeps: sends
  // flock() and fcntl()'s lock commands to init (isolation/lock_supervisor.h),
  // refuses fcntl(F_NOTIFY) (dnotify sees other runs' reads of shared files,
  // like inotify), allows everything else (`filter` decides).
  std::vector<sock_filter> lock_filter;
};

StatusOr<SeccompProgram> CompileSeccompPolicy(const SeccompOptions& options);

// Child side: installs the filter (needs no_new_privs already set). Returns 0 or errno.
// Allocation-free: safe between clone() and execve().
int ApplySeccompInChild(const SeccompProgram& program);

// The policy as libseccomp's pseudo-filter text (for `airlock check` and for
// reading the policy); the hand-written ioctl prologue is described in a comment.
StatusOr<std::string> DescribeSeccompPolicy(const SeccompOptions& options);

struct SyscallName {
  std::string name;
  int nr = -1;  // this architecture's number
};
// The system calls the policy refuses on purpose (they also fail with EPERM
// because nothing allows them; the list documents the intent and tests check
// each one). personality, mknod and mknodat are on it but keep their narrow
// harmless forms (see above).
StatusOr<std::vector<SyscallName>> SeccompRefusedSyscalls();

}  // namespace airlock::isolation
