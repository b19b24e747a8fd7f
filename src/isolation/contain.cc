// The child's side of Launch(), from clone() to execve(), as one readable
// checklist. Rules here: read only the precomputed ChildPlan, make system calls,
// never allocate, never return; report a failure as (step, errno) and exit.
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "isolation/child_plan.h"
#include "isolation/init_loop.h"
#include "isolation/lock_supervisor.h"
#include "isolation/restrict.h"
#include "isolation/spec.h"

namespace airlock::isolation::internal {
namespace {

constexpr int kExitSetupFailed = 127;

[[noreturn]] void Fail(const ChildPlan& plan, int step, int err, int index = -1) {
  ChildError e{step, err, index};
  ssize_t unused = ::write(plan.err_w, &e, sizeof e);
  (void)unused;
  ::_exit(kExitSetupFailed);
}

int SetAllCaps(bool raise) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  if (raise) {
    if (::syscall(SYS_capget, &hdr, data) != 0) return errno;
    data[0].effective = data[0].permitted;
    data[1].effective = data[1].permitted;
  }
  return ::syscall(SYS_capset, &hdr, data) == 0 ? 0 : errno;
}

// The zygote's only capabilities (in its own user namespace): CAP_SETUID and
// CAP_SETGID, effective, permitted, inheritable and ambient, so that they are
// what it holds after its execve as a non-root uid.
int KeepOnlySetidCaps() {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  const __u32 bits = (1u << CAP_SETUID) | (1u << CAP_SETGID);
  data[0].effective = data[0].permitted = data[0].inheritable = bits;
  if (::syscall(SYS_capset, &hdr, data) != 0) return errno;
  for (int cap : {CAP_SETUID, CAP_SETGID}) {
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0) return errno;
  }
  return 0;
}

// Moves fd to exactly `target` (both may be anything but each other's duplicates).
int MoveFd(int fd, int target) {
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0 ? 0 : errno;  // clear CLOEXEC
  return ::dup2(fd, target) >= 0 ? 0 : errno;
}

// The program: everything after this is the user's. Returns only for a warm
// plan, with every layer in force. lock_sock: where the lock filter's listener
// goes to init (-1: no lock filter, the zygote). The security checklist itself
// is restrict.h's, shared with the processes a sandbox's init starts.
void RestrictProgram(const ChildPlan& plan, int lock_sock) {
  RestrictPlan r;
  if (!RestrictPlanOf(plan, &r)) Fail(plan, kStepLandlock, E2BIG);
  // First, while nothing but our own code runs: every lock request from here on
  // is answered by init (lock_supervisor.h).
  int step = 0;
  if (int err = InstallLockFilterFirst(r, lock_sock, &step)) Fail(plan, step, err);
  // A warm run keeps its interpreter's own dispositions (SIGPIPE ignored,
  // SIGINT handled), which are what a fresh python3 sets up too.
  if (int err = StartOwnSession(/*default_signals=*/!plan.warm)) Fail(plan, kStepSetsid, err);

  // fds: 0 = /dev/null, 1/2 = the output pipes, 3 = the extra channel, err_w
  // kept (close-on-exec) until execve; every other fd closed.
  int high_out = ::fcntl(plan.stdout_w, F_DUPFD_CLOEXEC, 100);
  int high_err = ::fcntl(plan.stderr_w, F_DUPFD_CLOEXEC, 100);
  int high_extra = plan.extra_fd >= 0 ? ::fcntl(plan.extra_fd, F_DUPFD_CLOEXEC, 100) : -1;
  int high_errpipe = ::fcntl(plan.err_w, F_DUPFD_CLOEXEC, 100);
  int high_exec = plan.exec_fd >= 0 ? ::fcntl(plan.exec_fd, F_DUPFD_CLOEXEC, 100) : -1;
  if (high_out < 0 || high_err < 0 || high_errpipe < 0 || (plan.extra_fd >= 0 && high_extra < 0) ||
      (plan.exec_fd >= 0 && high_exec < 0)) {
    Fail(plan, kStepFds, errno);
  }
  ChildPlan* mutable_plan = const_cast<ChildPlan*>(&plan);  // only the fd numbers change
  mutable_plan->err_w = high_errpipe;
  mutable_plan->exec_fd = high_exec;
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) Fail(plan, kStepFds, errno);
  if (int err = MoveFd(devnull, 0)) Fail(plan, kStepFds, err);
  if (int err = MoveFd(high_out, 1)) Fail(plan, kStepFds, err);
  if (int err = MoveFd(high_err, 2)) Fail(plan, kStepFds, err);
  int first_closed = 3;
  if (high_extra >= 0) {
    if (int err = MoveFd(high_extra, 3)) Fail(plan, kStepFds, err);
    first_closed = 4;
  }
  // Close everything else except the error pipe (which closes itself at
  // execve) and the file to execute.
  int keep_lo = high_exec >= 0 ? std::min(high_errpipe, high_exec) : high_errpipe;
  int keep_hi = high_exec >= 0 ? std::max(high_errpipe, high_exec) : high_errpipe;
  if (::syscall(SYS_close_range, first_closed, keep_lo - 1, 0) != 0 ||
      (keep_hi > keep_lo + 1 && ::syscall(SYS_close_range, keep_lo + 1, keep_hi - 1, 0) != 0) ||
      ::syscall(SYS_close_range, keep_hi + 1, ~0U, 0) != 0) {
    Fail(plan, kStepFds, errno);
  }

  if (int err = ApplyRlimits(r)) Fail(plan, kStepRlimits, err);
  if (::chdir(plan.workdir.c_str()) != 0) Fail(plan, kStepChdir, errno);

  if (plan.nested_sandbox_host) {
    // The zygote (spec.h): no capability survives its execve as a non-root
    // uid once the ambient set is empty; its runs need the rest unlocked.
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) Fail(plan, kStepCapsDrop, errno);
    if (plan.keep_setid_caps) {
      if (int err = KeepOnlySetidCaps()) Fail(plan, kStepCapsDrop, err);
    } else if (int err = SetAllCaps(false)) {
      Fail(plan, kStepCapsDrop, err);
    }
    ::syscall(SYS_execveat, plan.exec_fd, "", plan.argv.data(), plan.envp.data(), AT_EMPTY_PATH);
    Fail(plan, kStepExec, errno);
  }

  if (int err = LockDown(r, &step)) Fail(plan, step, err);
  if (plan.warm) return;
  if (plan.exec_fd >= 0) {
    ::syscall(SYS_execveat, plan.exec_fd, "", plan.argv.data(), plan.envp.data(), AT_EMPTY_PATH);
  } else {
    ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  }
  Fail(plan, kStepExec, errno);
}

// Closes every fd but the plan's own. init never execs, so close-on-exec does
// not protect it: without this it would hold the server's sockets and other
// runs' pipes (keeping them from reaching EOF) for as long as the run lives.
void CloseInheritedFds(const ChildPlan& plan, int also_keep) {
  int keep[] = {plan.sync_r,   plan.err_w,    plan.status_w, plan.stdout_w,
                plan.stderr_w, plan.extra_fd, plan.exec_fd,  also_keep};
  constexpr int n = sizeof keep / sizeof keep[0];
  for (int i = 1; i < n; ++i) {  // insertion sort: no allocation
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  }
  unsigned next = 0;  // first fd not yet handled
  for (int fd : keep) {
    if (fd < 0) continue;
    if (static_cast<unsigned>(fd) > next) ::syscall(SYS_close_range, next, fd - 1, 0);
    next = static_cast<unsigned>(fd) + 1;
  }
  ::syscall(SYS_close_range, next, ~0U, 0);
}

// From the launcher's go to the run's filesystem: waits until the launcher has
// written the id maps and put us in the run's cgroup, then the cgroup
// namespace, the sandbox user (capabilities kept), the hostname, the mounts.
void SetUpRun(const ChildPlan& plan) {
  char go = 0;
  ssize_t n;
  do {
    n = ::read(plan.sync_r, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) Fail(plan, kStepSync, n < 0 ? errno : EPIPE);

  // The cgroup namespace is rooted at the run's cgroup (we are in it now).
  if (::unshare(CLONE_NEWCGROUP) != 0) Fail(plan, kStepCgroupNs, errno);

  // Become the sandbox user (kSandboxUid, mapped to an unprivileged host uid)
  // while keeping the namespace capabilities the setup below needs.
  // Raw system calls: glibc's set*id wrappers would try to synchronise the
  // parent's other threads, which do not exist in this copy of the process.
  if (plan.can_setgroups && ::syscall(SYS_setgroups, 0, nullptr) != 0) Fail(plan, kStepSetgroups, errno);
  if (::syscall(SYS_setresgid, kSandboxGid, kSandboxGid, kSandboxGid) != 0) Fail(plan, kStepSetgid, errno);
  if (::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) Fail(plan, kStepSetuid, errno);
  if (::syscall(SYS_setresuid, kSandboxUid, kSandboxUid, kSandboxUid) != 0) Fail(plan, kStepSetuid, errno);
  if (int err = SetAllCaps(true)) Fail(plan, kStepCaps, err);

  if (plan.own_uts && (::sethostname(plan.hostname.data(), plan.hostname.size()) != 0 ||
                        ::setdomainname(plan.hostname.data(), plan.hostname.size()) != 0)) {
    Fail(plan, kStepHostname, errno);
  }

  int index = -1, step = 0;
  if (int err = ApplyMountsInChild(plan, &index, &step)) Fail(plan, step, err, index);
}

}  // namespace

// fork() without glibc's atfork handlers: another thread of the parent may have
// held the malloc lock when we were cloned, and we never allocate anyway.
pid_t RawFork() { return static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr)); }

bool RestrictPlanOf(const ChildPlan& plan, RestrictPlan* out) {
  if (plan.rlimits.size() > static_cast<size_t>(RestrictPlan::kMaxRlimits) ||
      plan.landlock.rules.size() > static_cast<size_t>(RestrictPlan::kMaxRules)) {
    return false;
  }
  *out = RestrictPlan{};
  for (const auto& [resource, limit] : plan.rlimits) {
    out->rlimits[out->n_rlimits++] = {resource, static_cast<uint64_t>(limit.rlim_cur),
                                      static_cast<uint64_t>(limit.rlim_max)};
  }
  out->landlock_abi = plan.landlock.abi;
  out->handled_fs = plan.landlock.handled_fs;
  out->handled_net = plan.landlock.handled_net;
  out->scoped = plan.landlock.scoped;
  for (const LandlockPlan::Rule& rule : plan.landlock.rules) {
    out->rules[out->n_rules++] = {rule.path.c_str(), rule.access};
  }
  if (plan.seccomp != nullptr) {
    out->filter = plan.seccomp->filter.data();
    out->filter_len = plan.seccomp->filter.size();
    out->lock_filter = plan.seccomp->lock_filter.empty() ? nullptr : plan.seccomp->lock_filter.data();
    out->lock_filter_len = plan.seccomp->lock_filter.size();
  }
  return true;
}

void RunWarmProgram(const ChildPlan& plan, int lock_sock) {
  CloseInheritedFds(plan, lock_sock);
  // No parent-death signal yet: our parent is the run's init, and until
  // RestrictProgram sets one, its death ends us with the pid namespace.
  SetUpRun(plan);
  RestrictProgram(plan, lock_sock);
}

void RunChild(const ChildPlan& plan) {
  CloseInheritedFds(plan, -1);
  // Die with the process that launched us; then wait until it has written our
  // id maps and put us in the run's cgroup.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  SetUpRun(plan);

  // A zygote is its namespace's init itself (it reaps its runs): no copy of
  // the server's memory stays alive next to it.
  if (plan.nested_sandbox_host) RestrictProgram(plan, -1);  // execs or fails

  // The lock filter's listener goes from the program to init over this pair.
  int lock_sock[2] = {-1, -1};
  if (plan.seccomp != nullptr && !plan.seccomp->lock_filter.empty() &&
      ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lock_sock) != 0) {
    Fail(plan, kStepLocks, errno);
  }

  // We are pid 1 of the run's pid namespace: fork the program and stay as its
  // init, so that when the program ends, the kernel kills everything it left.
  pid_t program = RawFork();
  if (program < 0) Fail(plan, kStepFork, errno);
  if (program == 0) {
    if (lock_sock[0] >= 0) ::close(lock_sock[0]);
    RestrictProgram(plan, lock_sock[1]);
    return;  // a warm run's program: the caller runs the code
  }

  ::close(plan.stdout_w);
  ::close(plan.stderr_w);
  if (plan.extra_fd >= 0) ::close(plan.extra_fd);
  if (plan.exec_fd >= 0) ::close(plan.exec_fd);
  ::close(plan.err_w);
  if (plan.sync_r != plan.err_w) ::close(plan.sync_r);
  // Not dumpable: /proc/1 of the run becomes unreadable to the program. Its
  // cmdline stays readable, so blank the server's argv (paths, options) first.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  for (volatile char* p = reinterpret_cast<char*>(plan.arg_start);
       p && p < reinterpret_cast<char*>(plan.arg_end); ++p) {
    *p = 0;
  }

  if (lock_sock[1] >= 0) ::close(lock_sock[1]);
  RunInitLoop(plan.status_w, program, lock_sock[0], plan.workdir.c_str(), /*join_cgroup_namespace=*/false);
}

}  // namespace airlock::isolation::internal
