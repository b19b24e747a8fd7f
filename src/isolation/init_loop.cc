#include "isolation/init_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolation/lock_supervisor.h"
#include "isolation/spawn_service.h"

namespace airlock::isolation::internal {
namespace {

constexpr int kExitNoChild = 127;

// The run ends (its program ended, or the sandbox it became is over). Kill
// and reap everything else in our pid namespace first (a process forked
// meanwhile is caught by the next round), so that when the status is out, no
// process of the run is left but this one, which only exits; what we reaped
// is everything the run used that is accounted to processes. `program` > 0:
// the program still runs; its status is the one reaped here.
[[noreturn]] void EndRun(int status_fd, int status, pid_t program = 0) {
  for (;;) {
    ::kill(-1, SIGKILL);
    int reaped_status;
    pid_t r = ::waitpid(-1, &reaped_status, __WALL);
    if (r < 0 && errno == ECHILD) break;
    if (r == program && program > 0) status = reaped_status;
  }
  ProgramStatus report{};
  report.wait_status = status;
  ::syscall(SYS_getrusage, RUSAGE_CHILDREN, &report.usage);  // the kernel's layout: no libc struct
  ssize_t unused = ::write(status_fd, &report, sizeof report);
  (void)unused;
  ::_exit(0);
}

// The warm init, once the run is in its cgroup (the program sends its lock
// listener only after the server's go, and after it made its own cgroup
// namespace, rooted there): init joins that namespace, so that every process
// it starts is in the program's cgroup namespace too; then CAP_SYS_ADMIN,
// kept only for this, is dropped for good.
void JoinProgramCgroupNamespace(pid_t program) {
  char path[48] = "/proc/";
  char digits[16];
  int n = 0;
  for (unsigned v = static_cast<unsigned>(program); n == 0 || v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  size_t len = 6;
  while (n > 0) path[len++] = digits[--n];
  memcpy(path + len, "/ns/cgroup", 11);
  const int ns = ::open(path, O_RDONLY | O_CLOEXEC);
  // On failure (the program already gone) the run is ending anyway.
  if (ns >= 0) {
    ::setns(ns, CLONE_NEWCGROUP);
    ::close(ns);
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, CAP_SYS_ADMIN, 0, 0);
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  if (::syscall(SYS_capget, &hdr, data) != 0) return;
  const __u32 bit = 1u << CAP_SYS_ADMIN;  // CAP_SYS_ADMIN < 32: in data[0]
  data[0].effective &= ~bit;
  data[0].permitted &= ~bit;
  data[0].inheritable &= ~bit;
  ::syscall(SYS_capset, &hdr, data);
}

// init's life once the program exists: reaps (SIGCHLD by a signalfd), answers
// the program's lock requests (listener >= 0) and serves the control channel
// (spawn_service.h) in one poll loop, until the run ends.
[[noreturn]] void Serve(int status_fd, pid_t program, int listener, const char* workdir) {
  LockSupervisor sup;
  if (listener >= 0) InitLockSupervisor(&sup, listener, workdir);
  SpawnService svc;
  InitSpawnService(&svc, status_fd, program, workdir, &sup);
  sigset_t chld;
  ::sigemptyset(&chld);
  ::sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  const int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);  // < 0: poll every 10 ms instead
  bool watch_listener = listener >= 0;
  bool program_alive = true;
  int program_status = 0;
  for (;;) {
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, __WALL | WNOHANG);
      if (pid == 0) break;
      if (pid < 0) {
        if (errno == EINTR) continue;
        if (svc.sandbox) break;  // an idle sandbox: nothing to reap
        ::_exit(kExitNoChild);   // no children left: cannot happen before the program exits
      }
      if (pid == program) {
        if (!svc.sandbox) EndRun(status_fd, status);
        program_alive = false;
        program_status = status;
        SpawnOnProgramExit(&svc, status);
      } else {
        SpawnOnReaped(&svc, pid, status);
      }
    }
    if (SpawnShouldEnd(&svc)) EndRun(status_fd, program_status, program_alive ? program : 0);
    struct pollfd fds[2 + kSpawnPollMax];
    fds[0] = {sfd, POLLIN, 0};
    fds[1] = {watch_listener ? sup.listener : -1, POLLIN, 0};
    const int n_spawn = SpawnPollFds(&svc, fds + 2, kSpawnPollMax);
    int timeout = watch_listener ? LockRetryMs(sup) : -1;
    const int spawn_timeout = SpawnTimeoutMs(svc);
    if (spawn_timeout >= 0 && (timeout < 0 || spawn_timeout < timeout)) timeout = spawn_timeout;
    if (sfd < 0 && (timeout < 0 || timeout > 10)) timeout = 10;
    if (::poll(fds, static_cast<nfds_t>(2 + n_spawn), timeout) < 0) continue;
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo info[8];
      while (::read(sfd, info, sizeof info) > 0) {
      }
    }
    if (watch_listener && (fds[1].revents & POLLIN)) {
      HandleLockNotification(&sup);
    } else if (watch_listener && fds[1].revents) {
      watch_listener = false;  // no process under the program's filter is left that could ask
    }
    if (watch_listener && sup.n_pending > 0) RetryPendingLocks(&sup);
    SpawnOnPoll(&svc, fds + 2, n_spawn);
  }
}

}  // namespace

void RunInitLoop(int status_fd, pid_t program, int lock_sock, const char* workdir, bool join_cgroup_namespace) {
  int listener = -1;
  if (lock_sock >= 0) {
    listener = ReceiveLockListener(lock_sock);  // -1: the program ended first
    ::close(lock_sock);
    if (listener >= 0 && join_cgroup_namespace) JoinProgramCgroupNamespace(program);
  }
  Serve(status_fd, program, listener, workdir);
}

}  // namespace airlock::isolation::internal
