#include "isolation/record_locks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__x86_64__)
// process_vm_readv below reads the caller's struct flock with our own layout:
// the kernel's, the same in glibc (the program) and musl (this init, built
// against musl where it is installed).
static_assert(sizeof(struct flock) == 32, "the kernel's struct flock on x86-64");
#endif

namespace airlock::isolation::internal {
namespace {

bool IsPosixCommand(int cmd) { return cmd == F_GETLK || cmd == F_SETLK || cmd == F_SETLKW; }

bool ReadCallerFlock(const struct seccomp_notif& req, struct flock* fl) {
  struct iovec local = {fl, sizeof *fl};
  struct iovec remote = {reinterpret_cast<void*>(static_cast<uintptr_t>(req.data.args[2])), sizeof *fl};
  return ::process_vm_readv(static_cast<pid_t>(req.pid), &local, 1, &remote, 1, 0) == sizeof *fl;
}

// F_GETLK's answer into the caller's struct flock; false if the caller is gone
// (the pid could name another process by then) or its memory is not writable.
bool WriteCallerFlock(const LockSupervisor& sup, const struct seccomp_notif& req, struct flock* fl) {
  struct iovec local = {fl, sizeof *fl};
  struct iovec remote = {reinterpret_cast<void*>(static_cast<uintptr_t>(req.data.args[2])), sizeof *fl};
  return LockStillWaiting(sup, req.id) &&
         ::process_vm_writev(static_cast<pid_t>(req.pid), &local, 1, &remote, 1, 0) == sizeof *fl;
}

int OfdCall(int fd, int cmd, struct flock* fl) { return ::fcntl(fd, cmd, fl) == 0 ? 0 : errno; }

// The range as the kernel resolves it when the call is made: SEEK_CUR against
// the caller's file position (init's duplicate shares it), SEEK_END against the
// size. A waiting request keeps the range it had when it was made, as the
// kernel's does. Returns 0 or the errno the kernel gives.
int RangeFromStart(int fd, struct flock* fl) {
  if (fl->l_whence == SEEK_SET) return 0;
  off_t base;
  if (fl->l_whence == SEEK_CUR) {
    base = ::lseek(fd, 0, SEEK_CUR);
    if (base < 0) base = 0;  // not seekable (a FIFO): the kernel's f_pos is 0
  } else if (fl->l_whence == SEEK_END) {
    struct stat st;
    if (::fstat(fd, &st) != 0) return errno;
    base = st.st_size;
  } else {
    return EINVAL;
  }
  off_t start;
  if (__builtin_add_overflow(base, fl->l_start, &start)) return EOVERFLOW;
  fl->l_start = start;
  fl->l_whence = SEEK_SET;
  return 0;
}

bool Gone(const LockSupervisor::Owner& o) {
  struct stat st;
  return ::fstatat(o.proc_dir, "stat", &st, 0) != 0 && (errno == ENOENT || errno == ESRCH);
}

bool Names(int proc_fd_dir, const char* name, dev_t dev, ino_t ino) {
  struct stat st;
  return ::fstatat(proc_fd_dir, name, &st, 0) == 0 && st.st_dev == dev && st.st_ino == ino;
}

// Notes in `o` which of its process's descriptors name its file (the first
// Owner::kWatched). Returns how many there are: 0 when the process is gone, -1
// when its table cannot be read (nothing noted then).
int NoteDescriptors(LockSupervisor::Owner* o) {
  o->n_watched = -1;
  const int dir = ::openat(o->proc_dir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return errno == ENOENT || errno == ESRCH ? 0 : -1;
  int count = 0;
  int n_watched = 0;
  alignas(8) char buf[2048];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0) count = -1;
      break;
    }
    for (long off = 0; off < n;) {
      const struct dirent64* d = reinterpret_cast<const struct dirent64*>(buf + off);
      off += d->d_reclen;
      if (d->d_name[0] == '.' || !Names(dir, d->d_name, o->dev, o->ino)) continue;
      ++count;
      if (n_watched < LockSupervisor::Owner::kWatched) {
        int fd = 0;
        for (const char* c = d->d_name; *c >= '0' && *c <= '9'; ++c) fd = fd * 10 + (*c - '0');
        o->watched[n_watched++] = fd;
      }
    }
  }
  ::close(dir);
  if (count >= 0) o->n_watched = n_watched;
  return count;
}

// Whether every descriptor noted in `o` still names its file (true when its
// process's table cannot be read: its locks stay).
bool NotedStillOpen(const LockSupervisor::Owner& o) {
  for (int i = 0; i < o.n_watched; ++i) {
    char name[24];
    PathWithNumber(name, "fd/", o.watched[i], "");
    struct stat st;
    if (::fstatat(o.proc_dir, name, &st, 0) != 0) {
      if (errno == ENOENT || errno == ESRCH) return false;  // closed, or the process is gone
      continue;  // unreadable: its locks stay
    }
    if (st.st_dev != o.dev || st.st_ino != o.ino) return false;  // the number names another file now
  }
  return true;
}

// Unlocks everything process `o` holds on its file, keeping the entry.
void UnlockAll(const LockSupervisor::Owner& o) {
  struct flock all = {};
  all.l_type = F_UNLCK;
  all.l_whence = SEEK_SET;
  ::fcntl(o.fd, F_OFD_SETLK, &all);
}

void ReleaseOwner(LockSupervisor* sup, int i) {
  LockSupervisor::Owner& o = sup->owners[i];
  if (!o.shares_caller_description) UnlockAll(o);  // a pending request may hold a duplicate: unlock, not only close
  ::close(o.fd);
  ::close(o.proc_dir);
  sup->owners[i] = sup->owners[--sup->n_owners];
}

// The thread group of the calling thread `tid` (alive: it waits on us).
pid_t TgidOfCaller(pid_t tid) {
  const long pidfd = ::syscall(SYS_pidfd_open, tid, 0);  // only a thread group leader has one (without PIDFD_THREAD)
  if (pidfd >= 0) {
    ::close(static_cast<int>(pidfd));
    return tid;
  }
  return TgidOf(tid);
}

// The entry (its index) of the process of the calling thread `tid` for the
// file of `fd`, which holds that process's POSIX locks on it: found, or opened
// and recorded. -1 with *err set when the owner table is full or the process
// is gone.
int OwnerOf(LockSupervisor* sup, pid_t tid, int fd, int* err) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    *err = errno;
    return -1;
  }
  // A thread group leader is found by its tid alone; another thread after one
  // look at /proc.
  pid_t tgid = tid;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < sup->n_owners; ++i) {
      LockSupervisor::Owner& o = sup->owners[i];
      if (o.tgid != tgid || o.dev != st.st_dev || o.ino != st.st_ino) continue;
      if (!Gone(o)) return i;
      ReleaseOwner(sup, i);  // a process that ended, whose pid the caller has now
      break;
    }
    if (pass == 0) {
      tgid = TgidOfCaller(tid);
      if (tgid <= 0) {
        *err = ESRCH;
        return -1;
      }
      if (tgid == tid) break;
    }
  }
  if (sup->n_owners == LockSupervisor::kMaxOwners) ReleaseStaleOwners(sup, 0, 0, tgid);
  if (sup->n_owners == LockSupervisor::kMaxOwners) {
    *err = ENOLCK;
    return -1;
  }
  char path[48];
  PathWithNumber(path, "/proc/", tgid, "");
  const int proc_dir = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc_dir < 0) {
    *err = errno == EMFILE ? ENOLCK : (errno == ENOENT ? ESRCH : errno);
    return -1;
  }
  // A description of our own: opened through our duplicate (the magic link
  // reaches the file even once unlinked), read-write where the file allows it
  // so that both lock types work, else as the caller opened it. Where it
  // cannot be reopened at all (a socket), the caller's description serves.
  PathWithNumber(path, "/proc/self/fd/", fd, "");
  const int accmode = ::fcntl(fd, F_GETFL) & O_ACCMODE;
  bool shared = false;
  int own = ::open(path, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (own < 0 && accmode != O_RDWR) own = ::open(path, accmode | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (own < 0) {
    own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    shared = true;
  }
  if (own < 0) {
    *err = errno == EMFILE ? ENOLCK : errno;
    ::close(proc_dir);
    return -1;
  }
  sup->owners[sup->n_owners] = {tgid, proc_dir, st.st_dev, st.st_ino, own, shared, -1, {}};
  return sup->n_owners++;
}

int FindOwner(const LockSupervisor& sup, pid_t tgid, int fd) {
  struct stat st;
  if (tgid <= 0 || ::fstat(fd, &st) != 0) return -1;
  for (int i = 0; i < sup.n_owners; ++i) {
    const LockSupervisor::Owner& o = sup.owners[i];
    if (o.tgid == tgid && o.dev == st.st_dev && o.ino == st.st_ino) return i;
  }
  return -1;
}

// Takes lock `fl` for owner `i` (a POSIX request): first drops what a close
// since the owner's last grant released (POSIX semantics), then notes the
// owner's descriptors of the file for the next check. Returns 0 or the errno.
int TakeForOwner(LockSupervisor* sup, int i, struct flock* fl) {
  LockSupervisor::Owner& o = sup->owners[i];
  const bool closed = o.n_watched > 0 && !NotedStillOpen(o);
  if (closed) UnlockAll(o);
  const int err = OfdCall(o.fd, F_OFD_SETLK, fl);
  // Noted anew only when nothing noted is known to be open: a full look at the
  // process's table costs a system call per descriptor.
  if (err == 0 && fl->l_type != F_UNLCK && (closed || o.n_watched <= 0)) NoteDescriptors(&o);
  return err;
}

// Who holds `conflict`, for F_GETLK's l_pid: the process whose POSIX locks
// alone are in the way of a write lock over that range, else -1.
pid_t HolderOf(const LockSupervisor& sup, dev_t dev, ino_t ino, int asking_fd, const struct flock& conflict) {
  for (int i = 0; i < sup.n_owners; ++i) {
    const LockSupervisor::Owner& o = sup.owners[i];
    if (o.dev != dev || o.ino != ino || o.fd == asking_fd) continue;
    struct flock probe = {};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    probe.l_start = conflict.l_start;
    probe.l_len = conflict.l_len;
    if (::fcntl(o.fd, F_OFD_GETLK, &probe) == 0 && probe.l_type == F_UNLCK) return o.tgid;
  }
  return -1;
}

// A lock call on a file that is not the run's own: done, locking nothing.
void AnswerElsewhere(const LockSupervisor& sup, const struct seccomp_notif& req, int fd, int cmd,
                     struct flock* fl) {
  if (cmd == F_GETLK || cmd == F_OFD_GETLK) {
    fl->l_type = F_UNLCK;
    AnswerLock(sup, req.id, WriteCallerFlock(sup, req, fl) ? 0 : EFAULT);
    return;
  }
  // The kernel's own checks: a read lock needs a readable, a write lock a writable descriptor.
  const int mode = ::fcntl(fd, F_GETFL) & O_ACCMODE;
  if ((fl->l_type == F_RDLCK && mode == O_WRONLY) || (fl->l_type == F_WRLCK && mode == O_RDONLY)) {
    AnswerLock(sup, req.id, EBADF);
    return;
  }
  AnswerLock(sup, req.id, 0);
}

}  // namespace

bool HandleRecordLock(LockSupervisor* sup, const struct seccomp_notif& req, int fd) {
  const int cmd = static_cast<int>(static_cast<unsigned>(req.data.args[1]));
  const bool get = cmd == F_GETLK || cmd == F_OFD_GETLK;
  struct flock fl;
  if (!ReadCallerFlock(req, &fl)) {
    AnswerLock(*sup, req.id, EFAULT);
    return false;
  }
  const bool type_ok = fl.l_type == F_RDLCK || fl.l_type == F_WRLCK || (!get && fl.l_type == F_UNLCK);
  if (!type_ok || (fl.l_whence != SEEK_SET && fl.l_whence != SEEK_CUR && fl.l_whence != SEEK_END) ||
      (!IsPosixCommand(cmd) && fl.l_pid != 0)) {  // OFD requests must say l_pid 0 (fcntl(2))
    AnswerLock(*sup, req.id, EINVAL);
    return false;
  }
  if (!IsRunsOwn(*sup, fd)) {
    AnswerElsewhere(*sup, req, fd, cmd, &fl);
    return false;
  }
  struct flock asked = fl;  // F_GETLK without a conflict leaves all but l_type as the caller wrote it
  if (int err = RangeFromStart(fd, &fl)) {
    AnswerLock(*sup, req.id, err);
    return false;
  }
  if (!get) {  // the kernel checks the caller's descriptor, whatever init locks through
    const int mode = ::fcntl(fd, F_GETFL) & O_ACCMODE;
    if ((fl.l_type == F_RDLCK && mode == O_WRONLY) || (fl.l_type == F_WRLCK && mode == O_RDONLY)) {
      AnswerLock(*sup, req.id, EBADF);
      return false;
    }
  }
  int on = fd;  // OFD: the caller's own description
  int owner = -1;
  pid_t keep = 0;
  if (IsPosixCommand(cmd)) {
    int err = 0;
    owner = OwnerOf(sup, static_cast<pid_t>(req.pid), fd, &err);
    if (owner < 0) {
      AnswerLock(*sup, req.id, err);
      return false;
    }
    on = sup->owners[owner].fd;
    keep = sup->owners[owner].tgid;
  }
  struct stat st;
  const bool have_st = ::fstat(fd, &st) == 0;
  fl.l_pid = 0;
  if (get) {
    struct flock probe = fl;
    int err = OfdCall(on, F_OFD_GETLK, &probe);
    if (err == 0 && probe.l_type != F_UNLCK && have_st) {
      ReleaseStaleOwners(sup, st.st_dev, st.st_ino, keep);
      probe = fl;
      err = OfdCall(on, F_OFD_GETLK, &probe);
    }
    if (err != 0) {
      AnswerLock(*sup, req.id, err);
      return false;
    }
    if (probe.l_type == F_UNLCK) {
      asked.l_type = F_UNLCK;
      probe = asked;
    } else {
      probe.l_pid = have_st ? HolderOf(*sup, st.st_dev, st.st_ino, on, probe) : -1;
    }
    AnswerLock(*sup, req.id, WriteCallerFlock(*sup, req, &probe) ? 0 : EFAULT);
    return false;
  }
  // ReleaseStaleOwners keeps `keep`'s entry but may move it: find it again.
  auto take = [&] {
    struct flock copy = fl;
    if (owner < 0) return OfdCall(on, F_OFD_SETLK, &copy);
    owner = FindOwner(*sup, keep, fd);
    return owner < 0 ? ENOLCK : TakeForOwner(sup, owner, &copy);
  };
  int err = take();
  if (err == EAGAIN && have_st) {
    ReleaseStaleOwners(sup, st.st_dev, st.st_ino, keep);
    err = take();
  }
  if (err == EAGAIN && (cmd == F_SETLKW || cmd == F_OFD_SETLKW)) {
    const int held = owner < 0 ? fd : ::fcntl(on, F_DUPFD_CLOEXEC, 0);
    LockSupervisor::Pending p = {req.id, held, true, 0, fl, keep};
    if (held >= 0 && AddPending(sup, p)) return held == fd;
    if (held >= 0 && held != fd) ::close(held);
    err = ENOLCK;
  }
  AnswerLock(*sup, req.id, err);
  return false;
}

int RetryRecordLock(LockSupervisor* sup, const LockSupervisor::Pending& p) {
  auto take = [&] {
    struct flock fl = p.fl;
    if (p.owner == 0) return OfdCall(p.fd, F_OFD_SETLK, &fl);
    int err = 0;
    const int i = OwnerOf(sup, p.owner, p.fd, &err);  // its entry, or a new one if it was released meanwhile
    return i < 0 ? err : TakeForOwner(sup, i, &fl);
  };
  int err = take();
  struct stat st;
  if (err != EAGAIN || ::fstat(p.fd, &st) != 0) return err;
  ReleaseStaleOwners(sup, st.st_dev, st.st_ino, 0);
  return take();
}

void ReleaseStaleOwners(LockSupervisor* sup, dev_t dev, ino_t ino, pid_t keep) {
  for (int i = 0; i < sup->n_owners;) {
    const LockSupervisor::Owner& o = sup->owners[i];
    const bool this_file = (dev == 0 && ino == 0) || (o.dev == dev && o.ino == ino);
    if (!this_file || o.tgid == keep) {
      ++i;
      continue;
    }
    // Gone, or a noted descriptor closed since its last grant, or never granted and no
    // descriptor of the file left (an entry that holds nothing).
    bool stale = Gone(o);
    if (!stale && o.n_watched > 0) stale = !NotedStillOpen(o);
    if (!stale && o.n_watched <= 0) {
      LockSupervisor::Owner probe = o;
      stale = NoteDescriptors(&probe) == 0;
    }
    if (stale) {
      ReleaseOwner(sup, i);  // moves the last entry here
    } else {
      ++i;
    }
  }
}

}  // namespace airlock::isolation::internal
