#include "isolation/init_loop.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolation/lock_supervisor.h"

namespace airlock::isolation::internal {
namespace {

constexpr int kExitNoChild = 127;

// The program ended: so does the run. Kill and reap everything else in our pid
// namespace first (a process forked meanwhile is caught by the next round), so
// that when the status is out, no process of the run is left but this one,
// which only exits; what we reaped is everything the run used that is
// accounted to processes.
[[noreturn]] void EndRun(int status_fd, int status) {
  for (;;) {
    ::kill(-1, SIGKILL);
    int ignored;
    pid_t r = ::waitpid(-1, &ignored, __WALL);
    if (r < 0 && errno == ECHILD) break;
  }
  ProgramStatus report{};
  report.wait_status = status;
  ::syscall(SYS_getrusage, RUSAGE_CHILDREN, &report.usage);  // the kernel's layout: no libc struct
  ssize_t unused = ::write(status_fd, &report, sizeof report);
  (void)unused;
  ::_exit(0);
}

// init's life when it answers the program's lock requests: reaps (SIGCHLD by a
// signalfd) and answers the listener in one poll loop.
[[noreturn]] void SuperviseLocksUntilTheEnd(int status_fd, pid_t program, int listener, const char* workdir) {
  LockSupervisor sup;
  InitLockSupervisor(&sup, listener, workdir);
  sigset_t chld;
  ::sigemptyset(&chld);
  ::sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  const int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);  // < 0: poll every 10 ms instead
  bool watch_listener = true;
  for (;;) {
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, __WALL | WNOHANG);
      if (pid == 0) break;
      if (pid < 0) {
        if (errno == EINTR) continue;
        ::_exit(kExitNoChild);  // no children left: cannot happen before the program exits
      }
      if (pid == program) EndRun(status_fd, status);
    }
    struct pollfd fds[2] = {{sfd, POLLIN, 0}, {sup.listener, POLLIN, 0}};
    const nfds_t n = watch_listener ? 2 : 1;
    int timeout = LockRetryMs(sup);
    if (sfd < 0 && (timeout < 0 || timeout > 10)) timeout = 10;
    if (::poll(fds, n, timeout) < 0) continue;
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo info[8];
      while (::read(sfd, info, sizeof info) > 0) {
      }
    }
    if (watch_listener && (fds[1].revents & POLLIN)) {
      HandleLockNotification(&sup);
    } else if (watch_listener && fds[1].revents) {
      watch_listener = false;  // no process of the run is left that could ask
    }
    if (sup.n_pending > 0) RetryPendingLocks(&sup);
  }
}

}  // namespace

void RunInitLoop(int status_fd, pid_t program, int lock_sock, const char* workdir) {
  if (lock_sock >= 0) {
    const int listener = ReceiveLockListener(lock_sock);  // -1: the program ended first
    ::close(lock_sock);
    if (listener >= 0) SuperviseLocksUntilTheEnd(status_fd, program, listener, workdir);
  }
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, __WALL);
    if (pid < 0) {
      if (errno == EINTR) continue;
      ::_exit(kExitNoChild);  // no children left: cannot happen before the program exits
    }
    if (pid == program) EndRun(status_fd, status);
  }
}

}  // namespace airlock::isolation::internal
