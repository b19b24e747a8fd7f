// Internal to isolation/: file locks on shared inodes (issue 15.2).
//
// flock() works on a read-only descriptor, and flock, POSIX and OFD locks
// belong to the inode, not to the mount: without this, a run could take
// exclusive locks on the host's /usr, /etc, the bound devices or the airlock
// binary (blocking host processes) and two runs could signal to each other
// through them. So every lock request of the program goes, by a seccomp
// user-notification filter, to the run's init (pid 1 of the run, airlock's own
// code, started before any user code, not dumpable, not signalable from the
// run), which looks at the file itself:
//  - a file on the run's own tmpfs mounts (working directory, /dev/shm):
//    flock is performed by init on a duplicate of the caller's descriptor
//    (flock locks belong to the open file description, so this IS the caller's
//    lock; a blocking request is retried until it succeeds or the caller gives
//    up); POSIX/OFD record locks are let through to the kernel (CONTINUE),
//    since their owner is the calling process;
//  - anything else (shared with the host or other runs): the request succeeds
//    without locking anything (F_GETLK reports no conflict). A lock on a file
//    nobody in the run can write protects nothing, and read-only SQLite
//    databases under /usr keep working.
// Everything here runs after clone() in the child: no allocation.
//
//   program:  if (int err = InstallLockFilter(program.lock_filter.data(), program.lock_filter.size(), sock))
//               fail(err);  // then the main filter (seccomp_policy.h)
//   init:     LockSupervisor sup; InitLockSupervisor(&sup, ReceiveLockListener(sock), workdir);
//             poll sup.listener: HandleLockNotification(&sup); every LockRetryMs(): RetryPendingLocks(&sup)
//
// C and kernel headers only, like init_loop.h: the init program may be built
// against musl (src/isolation/CMakeLists.txt).
#pragma once

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

namespace airlock::isolation::internal {

// Program side, before any user code: installs the lock filter (`len`
// instructions: SeccompProgram::lock_filter) with a listener and sends the
// listener over `sock` (SCM_RIGHTS) to init, then closes both: the program never
// keeps it (holding its own listener, it could approve its own calls). Needs
// no_new_privs or CAP_SYS_ADMIN. Returns 0 or errno.
int InstallLockFilter(const struct sock_filter* filter, size_t len, int sock);

// Init side: the listener the program sent, or -1 if it ended before sending.
int ReceiveLockListener(int sock);

struct LockSupervisor {
  static constexpr int kMaxPending = 64;
  struct Pending {
    uint64_t id;
    int fd;   // init's duplicate of the caller's descriptor
    int op;   // LOCK_SH or LOCK_EX
  };
  int listener = -1;
  dev_t own_devs[2] = {};  // the run's own tmpfs mounts, read before the program ran
  int n_own = 0;
  Pending pending[kMaxPending] = {};
  int n_pending = 0;
};

// Records which filesystems are the run's own (st_dev of workdir and /dev/shm).
void InitLockSupervisor(LockSupervisor* sup, int listener, const char* workdir);
// The listener is readable: answers one notification.
void HandleLockNotification(LockSupervisor* sup);
// Retries the blocking flock requests still waiting; drops those whose caller is gone.
void RetryPendingLocks(LockSupervisor* sup);
// How often to retry while some request waits (ms), or -1 when none does.
int LockRetryMs(const LockSupervisor& sup);

}  // namespace airlock::isolation::internal
