// Internal to isolation/: file locks on shared inodes (issue 15.2, issue 23.1).
//
// flock() works on a read-only descriptor, and flock, POSIX and OFD locks
// belong to the inode, not to the mount: without this, a run could take
// exclusive locks on the host's /usr, /etc, the bound devices or the airlock
// binary (blocking host processes) and two runs could signal to each other
// through them. So every lock request of the program goes, by a seccomp
// user-notification filter, to the run's init (pid 1 of the run, airlock's own
// code, started before any user code, not dumpable, not signalable from the
// run). init takes the caller's open file description with pidfd_getfd(),
// looks at the file, and carries the request out itself on that duplicate: the
// kernel never re-runs a call whose descriptor was checked (it used to, with
// SECCOMP_USER_NOTIF_FLAG_CONTINUE, and a thread flipping the descriptor
// number with dup2 between the check and the call won the race at once):
//  - a file on the run's own tmpfs mounts (working directory, /dev/shm), with
//    the kernel's semantics:
//      flock: on init's duplicate (flock locks belong to the open file
//        description, so this IS the caller's lock);
//      OFD record locks (F_OFD_*): likewise, on init's duplicate;
//      POSIX record locks (F_GETLK/F_SETLK/F_SETLKW), whose owner is the
//        calling process, which init cannot act as: held as OFD locks on one
//        description per (process, file) that init opens itself
//        (record_locks.h), so the locks of one process never conflict with each
//        other, merge and split as POSIX locks do, and conflict with every
//        other process's and every OFD lock;
//  - anything else (shared with the host or other runs, or a pipe, socket,
//    memfd): the request succeeds without locking anything (F_GETLK reports no
//    conflict). A lock on a file nobody in the run can write protects nothing,
//    and read-only SQLite databases under /usr keep working.
// init never blocks: a blocking request (F_SETLKW, F_OFD_SETLKW, flock without
// LOCK_NB) that cannot be granted waits in `pending` and is retried after every
// lock request init answers and every LockRetryMs(); one given up on (a
// signal) is dropped. docs/security.md, "File locks on shared files", says why.
// Everything here runs in a run's init: system calls only, no allocation.
//
//   program:  if (int err = InstallLockFilter(program.lock_filter.data(), program.lock_filter.size(), sock))
//               fail(err);  // then the main filter (seccomp_policy.h)
//   init:     LockSupervisor sup; InitLockSupervisor(&sup, ReceiveLockListener(sock), workdir);
//             poll sup.listener: HandleLockNotification(&sup); every LockRetryMs(): RetryPendingLocks(&sup)
//
// C and kernel headers only, like init_loop.h: the init program may be built
// against musl (src/isolation/CMakeLists.txt).
#pragma once

#include <fcntl.h>
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
  // A blocking request that could not be granted yet.
  struct Pending {
    uint64_t id;
    int fd;           // init's descriptor the lock is taken on (its own)
    bool record;      // an fcntl record lock (`fl`), else flock (`op`)
    int op;           // flock: LOCK_SH or LOCK_EX
    struct flock fl;  // record: the request, its range from the file's start
    pid_t owner;      // a POSIX request: the calling process, else 0
  };
  // One process's POSIX locks on one of the run's own files, held as OFD
  // locks on a description of init's own (record_locks.h).
  struct Owner {
    pid_t tgid;
    int proc_dir;      // /proc/TGID, pinned to this process: lookups fail once it is gone
                       // (even if its pid is reused); its fd/ table is read through it
    dev_t dev;
    ino_t ino;
    int fd;            // the description the locks are on
    bool shares_caller_description;  // fd is a duplicate of the caller's (the file could not be reopened)
    // The process's descriptors of the file (their numbers, the first
    // kWatched) when it was granted a lock with none of them closed since:
    // one of them closed means its locks are gone (record_locks.h).
    static constexpr int kWatched = 4;
    int n_watched;     // -1: not looked at yet
    int watched[kWatched];
  };
  // Bounds: init holds one descriptor per pending request and two per owner,
  // under a run's smallest RLIMIT_NOFILE. A request past them fails with
  // ENOLCK, as the kernel's own lock table does when full.
  static constexpr int kMaxPending = 64;
  static constexpr int kMaxOwners = 48;
  int listener = -1;
  dev_t own_devs[2] = {};  // the run's own tmpfs mounts, read before the program ran
  int n_own = 0;
  Pending pending[kMaxPending] = {};
  int n_pending = 0;
  Owner owners[kMaxOwners] = {};
  int n_owners = 0;
};

// Records which filesystems are the run's own (st_dev of workdir and /dev/shm).
void InitLockSupervisor(LockSupervisor* sup, int listener, const char* workdir);
// The listener is readable: answers one notification.
void HandleLockNotification(LockSupervisor* sup);
// Retries the blocking requests still waiting; drops those whose caller is gone.
void RetryPendingLocks(LockSupervisor* sup);
// How often to retry while some request waits (ms), or -1 when none does.
int LockRetryMs(const LockSupervisor& sup);

}  // namespace airlock::isolation::internal
