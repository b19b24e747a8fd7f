#include "isolation/lock_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "isolation/record_locks.h"

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS  // Linux 6.6; Debian 12's headers stop at 6.1
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL  // Linux 6.9: a pidfd for a thread, not only a leader
#endif

namespace airlock::isolation::internal {
namespace {

// A pidfd through which the caller's file table is reached. Linux >= 6.9 opens
// the calling thread itself (PIDFD_THREAD). Before, a pidfd names a thread
// group leader only: open the caller's leader and use it only when it shares
// the caller's file table (kcmp KCMP_FILES; threads made by pthreads do), so a
// thread with a table of its own is never checked against another's files.
long PidfdOfCaller(pid_t tid) {
  long pidfd = ::syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
  if (pidfd >= 0 || errno != EINVAL) return pidfd;
  pidfd = ::syscall(SYS_pidfd_open, tid, 0);  // the caller is a leader (or PIDFD_THREAD is unknown)
  if (pidfd >= 0 || errno != EINVAL) return pidfd;
  const pid_t tgid = TgidOf(tid);
  if (tgid <= 0) return -1;
  constexpr int kKcmpFiles = 2;  // linux/kcmp.h KCMP_FILES
  if (::syscall(SYS_kcmp, tgid, tid, kKcmpFiles, 0, 0) != 0) {
    errno = ESRCH;
    return -1;
  }
  return ::syscall(SYS_pidfd_open, tgid, 0);
}

// flock(fd, op): on the run's own file, done here on init's duplicate of the
// caller's open file description (the same lock). Returns true when the
// request now waits in sup->pending (fd kept), false when answered.
bool Flock(LockSupervisor* sup, const struct seccomp_notif& req, int fd) {
  const int op = static_cast<int>(req.data.args[1]);
  const int kind = op & ~LOCK_NB;
  if (kind != LOCK_SH && kind != LOCK_EX && kind != LOCK_UN) {
    AnswerLock(*sup, req.id, EINVAL);
    return false;
  }
  if (!IsRunsOwn(*sup, fd)) {
    AnswerLock(*sup, req.id, 0);  // shared with the host or other runs: lock nothing
    return false;
  }
  if (::flock(fd, kind | LOCK_NB) == 0) {
    AnswerLock(*sup, req.id, 0);
    return false;
  }
  const int err = errno;
  if (err != EWOULDBLOCK || (op & LOCK_NB) || kind == LOCK_UN) {
    AnswerLock(*sup, req.id, err);
    return false;
  }
  LockSupervisor::Pending p = {};
  p.id = req.id;
  p.fd = fd;
  p.op = kind;
  if (AddPending(sup, p)) return true;
  AnswerLock(*sup, req.id, ENOLCK);
  return false;
}

}  // namespace

bool IsRunsOwn(const LockSupervisor& sup, int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  for (int i = 0; i < sup.n_own; ++i) {
    if (st.st_dev == sup.own_devs[i]) return true;
  }
  return false;
}

void PathWithNumber(char* out, const char* prefix, long n, const char* suffix) {
  size_t len = strlen(prefix);
  memcpy(out, prefix, len);
  char digits[24];
  int k = 0;
  for (unsigned long v = static_cast<unsigned long>(n); k == 0 || v > 0; v /= 10) {
    digits[k++] = static_cast<char>('0' + v % 10);
  }
  while (k > 0) out[len++] = digits[--k];
  memcpy(out + len, suffix, strlen(suffix) + 1);
}

// From /proc/TID/status, read into a stack buffer (this runs in a run's init:
// no allocation).
pid_t TgidOf(pid_t tid) {
  char path[48];
  PathWithNumber(path, "/proc/", tid, "/status");
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  ssize_t got = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (got <= 0) return -1;
  buf[got] = '\0';
  const char* line = strstr(buf, "\nTgid:");
  if (line == nullptr) return -1;
  line += 6;
  while (*line == ' ' || *line == '\t') ++line;
  long v = 0;
  for (; *line >= '0' && *line <= '9'; ++line) v = v * 10 + (*line - '0');
  return v > 0 ? static_cast<pid_t>(v) : -1;
}

bool LockStillWaiting(const LockSupervisor& sup, uint64_t id) {
  uint64_t copy = id;
  return ::ioctl(sup.listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &copy) == 0;
}

void AnswerLock(const LockSupervisor& sup, uint64_t id, int error) {
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = id;
  resp.error = error ? -error : 0;
  ::ioctl(sup.listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);  // ENOENT: the caller is gone; nothing to do
}

bool AddPending(LockSupervisor* sup, const LockSupervisor::Pending& p) {
  if (sup->n_pending == LockSupervisor::kMaxPending) return false;
  sup->pending[sup->n_pending++] = p;
  return true;
}

int InstallLockFilter(const struct sock_filter* filter, size_t len, int sock) {
  struct sock_fprog prog;
  prog.len = static_cast<unsigned short>(len);
  prog.filter = const_cast<struct sock_filter*>(filter);
  const long listener = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (listener < 0) {
    const int err = errno;
    ::close(sock);
    return err;
  }
  int fd = static_cast<int>(listener);
  char byte = 'L';
  struct iovec iov = {&byte, 1};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  memset(control, 0, sizeof control);
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  const int err = n == 1 ? 0 : (n < 0 ? errno : EPIPE);
  ::close(fd);
  ::close(sock);
  return err;
}

int ReceiveLockListener(int sock) {
  char byte;
  struct iovec iov = {&byte, 1};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  memset(control, 0, sizeof control);
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n != 1) return -1;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int))) {
    return -1;
  }
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

void InitLockSupervisor(LockSupervisor* sup, int listener, const char* workdir) {
  sup->listener = listener;
  // The caller waits for init and init for the caller: switch to each other
  // directly instead of through the scheduler (Linux 6.6; optional).
  ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
  sup->n_own = 0;
  sup->n_pending = 0;
  struct stat st;
  if (::stat(workdir, &st) == 0) sup->own_devs[sup->n_own++] = st.st_dev;
  if (::stat("/dev/shm", &st) == 0 && (sup->n_own == 0 || st.st_dev != sup->own_devs[0])) {
    sup->own_devs[sup->n_own++] = st.st_dev;
  }
}

void HandleLockNotification(LockSupervisor* sup) {
  struct seccomp_notif req;
  memset(&req, 0, sizeof req);
  if (::ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) return;  // the caller went away
  long pidfd = PidfdOfCaller(static_cast<pid_t>(req.pid));
  if (pidfd < 0) {
    AnswerLock(*sup, req.id, ESRCH);
    return;
  }
  // The pid could name another process if the caller died before pidfd_open.
  if (!LockStillWaiting(*sup, req.id)) {
    ::close(static_cast<int>(pidfd));
    return;
  }
  // From here on, init acts on this duplicate alone: whatever the caller's
  // descriptor number names by now is never looked at again.
  const long fd = ::syscall(SYS_pidfd_getfd, static_cast<int>(pidfd), static_cast<int>(req.data.args[0]), 0);
  const int getfd_err = errno;
  ::close(static_cast<int>(pidfd));
  if (fd < 0) {
    AnswerLock(*sup, req.id, getfd_err == EMFILE ? ENOLCK : getfd_err);
    return;
  }
  const bool kept = req.data.nr == __NR_flock ? Flock(sup, req, static_cast<int>(fd))
                                              : HandleRecordLock(sup, req, static_cast<int>(fd));
  if (!kept) ::close(static_cast<int>(fd));
}

void RetryPendingLocks(LockSupervisor* sup) {
  for (int i = 0; i < sup->n_pending;) {
    LockSupervisor::Pending& p = sup->pending[i];
    bool done = true;
    if (!LockStillWaiting(*sup, p.id)) {
      // gave up (a signal) or gone: drop it
    } else {
      const int err = p.record ? RetryRecordLock(sup, p) : (::flock(p.fd, p.op | LOCK_NB) == 0 ? 0 : errno);
      if (err == EAGAIN || err == EWOULDBLOCK) {
        done = false;
      } else {
        AnswerLock(*sup, p.id, err);
      }
    }
    if (done) {
      ::close(p.fd);
      sup->pending[i] = sup->pending[--sup->n_pending];
    } else {
      ++i;
    }
  }
}

int LockRetryMs(const LockSupervisor& sup) { return sup.n_pending > 0 ? 10 : -1; }

}  // namespace airlock::isolation::internal
