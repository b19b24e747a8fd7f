// Internal to the lock supervisor (lock_supervisor.h): fcntl() record locks,
// carried out by the run's init on its own descriptors.
//
// OFD locks (F_OFD_GETLK/SETLK/SETLKW) belong to the open file description, so
// init takes them on its duplicate of the caller's: they are the caller's.
//
// POSIX locks (F_GETLK/SETLK/SETLKW) belong to the calling process (its file
// table), which init cannot act as, and letting the kernel re-run the caller's
// call is the race this replaced. So each (process, file) pair gets one
// description of init's own (the file reopened through init's duplicate, or the
// caller's description where it cannot be reopened), and the process's POSIX
// locks are held as OFD locks on it. The kernel's OFD rules then give POSIX
// semantics: one owner's locks merge, split and never conflict with each other,
// whichever of the process's descriptors named the file; they conflict with any
// other process's and with OFD locks. What differs from the kernel's POSIX
// locks, and why it is acceptable:
//  - release: a POSIX lock goes when its process ends or closes any descriptor
//    of the file. init cannot see a close. When it grants a process a lock it
//    notes which of the process's descriptors name the file (the first four),
//    and it releases the process's locks on the file once the process has
//    ended or one of those descriptors no longer names the file: checked
//    before each new grant to the process and whenever those locks stand in
//    another request's way (every lock request of the run goes through init,
//    so nobody sees a lock the kernel would have released by then). It never
//    releases a lock the kernel would keep; it keeps one the kernel would have
//    released when the process closed a descriptor it had not noted, or closed
//    one and opened the file again under the same number before anyone asked,
//    until the process ends, unlocks, or closes a noted descriptor;
//  - the owner is the thread group (a process made with CLONE_FILES but not
//    CLONE_THREAD is an owner of its own, not one with its parent);
//  - F_GETLK's l_pid names the holding process when one process's locks alone
//    are in the way, else -1 (as for an OFD lock);
//  - F_SETLKW never fails with EDEADLK: a deadlock waits until a signal or the
//    run's timeout.
// A request on a file that is not the run's own locks nothing and succeeds.
#pragma once

#include <linux/seccomp.h>

#include "isolation/lock_supervisor.h"

namespace airlock::isolation::internal {

// Shared with lock_supervisor.cc.
// The thread group of thread `tid`, from /proc; -1 when unknown.
pid_t TgidOf(pid_t tid);
// "PREFIX<n>SUFFIX" into `out` (room for the text and 20 digits): no snprintf.
void PathWithNumber(char* out, const char* prefix, long n, const char* suffix);
bool IsRunsOwn(const LockSupervisor& sup, int fd);
bool LockStillWaiting(const LockSupervisor& sup, uint64_t id);
void AnswerLock(const LockSupervisor& sup, uint64_t id, int error);
// Adds a pending request (takes `p.fd`); false, with `p.fd` not taken, when the
// table is full.
bool AddPending(LockSupervisor* sup, const LockSupervisor::Pending& p);

// fcntl(fd, cmd, &flock) from the notification `req`; `fd` is init's duplicate
// of the caller's descriptor. Returns true when it was taken (kept by a pending
// request), false when the caller of this still owns it. Answers `req` unless
// it now waits.
bool HandleRecordLock(LockSupervisor* sup, const struct seccomp_notif& req, int fd);

// Tries a pending record lock again: 0 when granted, else the errno (EAGAIN:
// still in the way).
int RetryRecordLock(LockSupervisor* sup, const LockSupervisor::Pending& p);

// Releases the POSIX locks of every process that is gone, or that closed one
// of the descriptors of the file noted at its last grant (all files when `dev`
// and `ino` are 0), except those of `keep` (the caller of the request being
// answered).
void ReleaseStaleOwners(LockSupervisor* sup, dev_t dev, ino_t ino, pid_t keep);

}  // namespace airlock::isolation::internal
