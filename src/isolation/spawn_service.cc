#include "isolation/spawn_service.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "isolation/init_control.h"
#include "isolation/lock_supervisor.h"
#include "isolation/record_locks.h"  // ReleaseStaleOwners: see SpawnOnPoll
#include "isolation/steps.h"

namespace airlock::isolation::internal {

namespace {

// One process the service started, until init has reaped it.
struct Proc {
  pid_t pid;       // 0: a free slot
  int status_fd;   // the server's status pipe for it (write end)
  int chan;        // while it sets itself up: its end of the setup channel (-1 after)
  uint32_t seq;    // the start request, answered once it exec'd or failed
  bool replied;
  bool started;    // it exec'd (replied with its pid)
};

constexpr size_t kRequestBytes = sizeof(StartRequest) + kMaxStartStrings;
static_assert(kRequestBytes >= sizeof(SandboxRequest) + kMaxPlanBytes, "one buffer takes either request");
constexpr int kMaxFds = 4 + static_cast<int>(kMaxExtraFds);

}  // namespace

// Mapped when the first control message arrives (MAP_NORESERVE: pages cost
// only once touched).
struct SpawnArena {
  alignas(8) char plan[kMaxPlanBytes];
  alignas(8) char request[kRequestBytes];
  char* argv[kMaxStartArgs + 1];
  char* envp[kMaxStartArgs + 1];
  Proc procs[kMaxStartedProcesses];
  bool lock_used[kMaxStartedProcesses];
  LockSupervisor locks[kMaxStartedProcesses];
};

namespace {

int64_t NowMs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void SendReply(const SpawnService& svc, uint32_t seq, int32_t result, int32_t err, int32_t step) {
  Reply r;
  memset(&r, 0, sizeof r);
  r.h = {kControlMagic, kCtlReply, seq, sizeof r};
  r.result = result;
  r.err = err;
  r.step = step;
  // Never blocks: a server that stopped reading has given up on the answer.
  ssize_t unused = ::send(svc.control, &r, sizeof r, MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)unused;
}

void CloseAll(const int* fds, int n) {
  for (int i = 0; i < n; ++i) ::close(fds[i]);
}

// A started process's setup failed: (step, errno) to init on `chan`, then exit.
[[noreturn]] void FailStart(int chan, int step, int err) {
  int32_t e[2] = {step, err};
  ssize_t unused = ::send(chan, e, sizeof e, MSG_NOSIGNAL);
  (void)unused;
  ::_exit(127);
}

// execve, looking argv[0] up in the environment's PATH (as execvpe does) when
// it has no '/'. Returns the errno of the last attempt that counts.
int ExecLookingUp(char* const* argv, char* const* envp) {
  const char* file = argv[0];
  if (strchr(file, '/') != nullptr) {
    ::execve(file, argv, envp);
    return errno;
  }
  const char* path = "/usr/local/bin:/usr/bin:/bin";
  for (char* const* e = envp; *e != nullptr; ++e) {
    if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  }
  const size_t flen = strlen(file);
  char buf[4096];
  int err = ENOENT;
  bool denied = false;
  for (const char* p = path;;) {
    const char* colon = strchr(p, ':');
    const size_t dlen = colon != nullptr ? static_cast<size_t>(colon - p) : strlen(p);
    if (dlen + 1 + flen < sizeof buf) {
      size_t n = 0;
      if (dlen == 0) {
        buf[n++] = '.';
      } else {
        memcpy(buf, p, dlen);
        n = dlen;
      }
      buf[n++] = '/';
      memcpy(buf + n, file, flen + 1);
      ::execve(buf, argv, envp);
      if (errno == EACCES) {
        denied = true;
      } else if (errno != ENOENT && errno != ENOTDIR) {
        return errno;
      }
    }
    if (colon == nullptr) break;
    p = colon + 1;
  }
  return denied ? EACCES : err;
}

// The started process, between fork and execve: what restrict.h's checklist
// asks, in the order RestrictProgram (contain.cc) applies it to a run's
// program. `fds` are what it gets as 0, 1, 2, 3...; `chan` reports to init.
[[noreturn]] void RunStartedProcess(const SpawnService& svc, const int* fds, int n_fds, const char* cwd,
                                    char* const* argv, char* const* envp, int chan) {
  int step = 0;
  const int lock = ::fcntl(chan, F_DUPFD_CLOEXEC, 0);  // InstallLockFilter closes what it is given
  if (lock < 0) FailStart(chan, kStepLocks, errno);
  if (int err = InstallLockFilterFirst(svc.plan, lock, &step)) FailStart(chan, step, err);
  if (int err = StartOwnSession(/*default_signals=*/true)) FailStart(chan, kStepSetsid, err);

  // fds: each wanted one moved to its number through a copy above them all,
  // the setup channel kept (close-on-exec: its end of file tells init that
  // the execve happened), everything else of init's closed: the control
  // socket, the listeners, other processes' pipes.
  int high[kMaxFds];
  for (int i = 0; i < n_fds; ++i) {
    high[i] = ::fcntl(fds[i], F_DUPFD_CLOEXEC, n_fds);
    if (high[i] < 0) FailStart(chan, kStepFds, errno);
  }
  const int report = ::fcntl(chan, F_DUPFD_CLOEXEC, n_fds);
  if (report < 0) FailStart(chan, kStepFds, errno);
  for (int i = 0; i < n_fds; ++i) {
    if (::dup2(high[i], i) < 0) FailStart(report, kStepFds, errno);
  }
  if (::syscall(SYS_close_range, n_fds, report - 1, 0) != 0 ||
      ::syscall(SYS_close_range, report + 1, ~0U, 0) != 0) {
    FailStart(report, kStepFds, errno);
  }

  if (int err = ApplyRlimits(svc.plan)) FailStart(report, kStepRlimits, err);
  if (::chdir(cwd) != 0) FailStart(report, kStepChdir, errno);
  // When the sandbox's memory runs out, the kernel's out-of-memory killer
  // takes a started process before the sandbox's program (a session's
  // interpreter): a command's memory hog must not end the session. Raising
  // one's own oom_score_adj needs no privilege; best effort (without it, the
  // killer still picks by size alone).
  if (int adj = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); adj >= 0) {
    if (::write(adj, "500", 3) != 3) {
      // Nothing else to do: the default score stands.
    }
    ::close(adj);
  }
  if (int err = LockDown(svc.plan, &step)) FailStart(report, step, err);
  FailStart(report, kStepExec, ExecLookingUp(argv, envp));
}

Proc* FindProc(SpawnArena* a, pid_t pid) {
  for (Proc& p : a->procs) {
    if (p.pid == pid && pid > 0) return &p;
  }
  return nullptr;
}

int FreeLockSlot(const SpawnArena* a) {
  for (int i = 0; i < kMaxStartedProcesses; ++i) {
    if (!a->lock_used[i]) return i;
  }
  return -1;
}

// One message from `fd` (non-blocking) into buf, with the fds it carries
// (close-on-exec) in fds[0..*n_fds) (at most kMaxFds; any more are closed).
// recvmsg's result (EINTR retried); *flags gets its msg_flags.
ssize_t RecvWithFds(int fd, void* buf, size_t len, int* fds, int* n_fds, int* flags) {
  struct iovec iov = {buf, len};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  *n_fds = 0;
  *flags = msg.msg_flags;
  if (n < 0) return n;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const int count = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < count; ++i) {
      int got;
      memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
      if (*n_fds < kMaxFds) {
        fds[(*n_fds)++] = got;
      } else {
        ::close(got);
      }
    }
  }
  return n;
}

// A started process's lock filter listener arrived: init answers it as it
// answers the program's. No free slot cannot happen (one is kept per process
// before it starts); if it did, the listener is closed and the process's lock
// calls fail (ENOSYS) instead of locking anything.
void AdoptListener(SpawnService* svc, int listener) {
  SpawnArena* a = svc->arena;
  const int i = FreeLockSlot(a);
  if (i < 0) {
    ::close(listener);
    return;
  }
  a->locks[i] = LockSupervisor{};
  InitLockSupervisor(&a->locks[i], listener, svc->workdir);
  a->lock_used[i] = true;
}

// Reads what a starting process sent on its setup channel: its listener, a
// failure, or end of file (it exec'd, or died).
void ReadSetupChannel(SpawnService* svc, Proc* p) {
  while (p->chan >= 0) {
    char buf[16];
    int fds[kMaxFds];
    int n_fds = 0, flags = 0;
    const ssize_t n = RecvWithFds(p->chan, buf, sizeof buf, fds, &n_fds, &flags);
    if (n < 0 && errno == EAGAIN) return;
    if (n == 1 && buf[0] == 'L' && n_fds == 1) {
      AdoptListener(svc, fds[0]);
      continue;
    }
    CloseAll(fds, n_fds);
    if (n == 8 && !p->replied) {
      int32_t e[2];
      memcpy(e, buf, sizeof e);
      SendReply(*svc, p->seq, -1, e[1] != 0 ? e[1] : EIO, e[0]);
      p->replied = true;
      continue;
    }
    if (n > 0) continue;  // nothing else is ever sent
    // End of file (or an error): every copy of its end is closed, by its
    // execve (close on exec) or its death. Which one, a failure message
    // already said.
    ::close(p->chan);
    p->chan = -1;
    if (!p->replied) {
      SendReply(*svc, p->seq, p->pid, 0, 0);
      p->replied = true;
      p->started = true;
    }
  }
}

bool MakeArena(SpawnService* svc) {
  if (svc->arena != nullptr) return true;
  void* m = ::mmap(nullptr, sizeof(SpawnArena), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (m == MAP_FAILED) return false;
  svc->arena = static_cast<SpawnArena*>(m);  // zeroed: every slot free
  return true;
}

void BecomeSandbox(SpawnService* svc, const SandboxRequest& req, size_t n) {
  const uint32_t seq = req.h.seq;
  if (svc->sandbox) return SendReply(*svc, seq, -1, EALREADY, 0);
  if (n != sizeof req + req.plan_size || req.plan_size > kMaxPlanBytes) return SendReply(*svc, seq, -1, EINVAL, 0);
  SpawnArena* a = svc->arena;
  memcpy(a->plan, reinterpret_cast<const char*>(&req) + sizeof req, req.plan_size);
  if (!ParseRestrictPlan(a->plan, req.plan_size, &svc->plan)) return SendReply(*svc, seq, -1, EINVAL, 0);
  svc->sandbox = true;
  svc->end_at_ms = req.lifetime_ms > 0 ? NowMs() + static_cast<int64_t>(req.lifetime_ms) : 0;
  SendReply(*svc, seq, 0, 0, 0);
}

// Checks a start request and points argv/envp into it; the strings are cwd,
// argc arguments, envc entries, each NUL-terminated, filling strings_size.
bool ParseStart(SpawnArena* a, const StartRequest& req, size_t n, const char** cwd) {
  if (n < sizeof req || req.strings_size != n - sizeof req || req.strings_size > kMaxStartStrings ||
      req.argc < 1 || req.argc > kMaxStartArgs || req.envc > kMaxStartArgs - req.argc || req.n_extra > kMaxExtraFds) {
    return false;
  }
  char* p = reinterpret_cast<char*>(const_cast<StartRequest*>(&req)) + sizeof req;
  char* const end = p + req.strings_size;
  const uint32_t total = 1 + req.argc + req.envc;
  for (uint32_t i = 0; i < total; ++i) {
    char* nul = static_cast<char*>(memchr(p, '\0', static_cast<size_t>(end - p)));
    if (nul == nullptr) return false;
    if (i == 0) {
      if (p[0] != '/') return false;
      *cwd = p;
    } else if (i <= req.argc) {
      if (i == 1 && p[0] == '\0') return false;
      a->argv[i - 1] = p;
    } else {
      a->envp[i - 1 - req.argc] = p;
    }
    p = nul + 1;
  }
  a->argv[req.argc] = nullptr;
  a->envp[req.envc] = nullptr;
  return p == end;
}

// Starts one process; `fds` are the request's (closed here, but the status pipe kept).
void StartProcess(SpawnService* svc, const StartRequest& req, size_t n, int* fds, int n_fds) {
  SpawnArena* a = svc->arena;
  const uint32_t seq = req.h.seq;
  const bool stdin_null = (req.flags & kStartStdinNull) != 0;
  const int want_fds = 1 + (stdin_null ? 0 : 1) + 2 + static_cast<int>(req.n_extra);
  const char* cwd = nullptr;
  if (!svc->sandbox || !ParseStart(a, req, n, &cwd) || n_fds != want_fds) {
    CloseAll(fds, n_fds);
    return SendReply(*svc, seq, -1, svc->sandbox ? EINVAL : EPERM, 0);
  }
  Proc* slot = nullptr;
  for (Proc& p : a->procs) {
    if (p.pid == 0) {
      slot = &p;
      break;
    }
  }
  // A listener slot too: a process's listener may outlive it (its children
  // keep its filter), so the two tables fill separately.
  if (slot == nullptr || (svc->plan.lock_filter_len > 0 && FreeLockSlot(a) < 0)) {
    CloseAll(fds, n_fds);
    return SendReply(*svc, seq, -1, EAGAIN, 0);
  }
  int chan[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) != 0) {
    const int err = errno;
    CloseAll(fds, n_fds);
    return SendReply(*svc, seq, -1, err, kStepFds);
  }
  // What the process gets as 0, 1, 2, 3...: stdin (or /dev/null), stdout, stderr, extras.
  int child_fds[kMaxFds];
  int k = 0;
  int devnull = -1;
  if (stdin_null) {
    devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    child_fds[k++] = devnull;
  }
  for (int i = 1; i < n_fds; ++i) child_fds[k++] = fds[i];
  pid_t pid = -1;
  int step = kStepFds;
  if (!stdin_null || devnull >= 0) {
    step = kStepFork;
    pid = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));  // fork(), no atfork handlers
  }
  if (pid == 0) {
    ::close(chan[0]);
    RunStartedProcess(*svc, child_fds, k, cwd, a->argv, a->envp, chan[1]);
  }
  const int err = errno;
  ::close(chan[1]);
  if (devnull >= 0) ::close(devnull);
  CloseAll(fds + 1, n_fds - 1);
  if (pid < 0) {
    ::close(chan[0]);
    ::close(fds[0]);
    return SendReply(*svc, seq, -1, err, step);
  }
  *slot = Proc{pid, fds[0], chan[0], seq, false, false};
}

void SignalProcess(SpawnService* svc, const SignalRequest& req, size_t n) {
  if (n != sizeof req) return SendReply(*svc, req.h.seq, -1, EINVAL, 0);
  if (!svc->sandbox) return SendReply(*svc, req.h.seq, -1, EPERM, 0);
  // Only a process this init started and has not reaped: its pid (and the
  // group it leads) cannot have been given to another process meanwhile.
  Proc* p = FindProc(svc->arena, req.pid);
  if (p == nullptr || !p->started) return SendReply(*svc, req.h.seq, -1, ESRCH, 0);
  if (req.sig < 0 || req.sig > 64) return SendReply(*svc, req.h.seq, -1, EINVAL, 0);
  int rc = -1;
  if (req.flags & kSignalGroup) rc = ::kill(-p->pid, req.sig);
  if (rc != 0) rc = ::kill(p->pid, req.sig);  // no group of its own (it left it): the process alone
  SendReply(*svc, req.h.seq, 0, rc == 0 ? 0 : errno, 0);
}

// The server's end is closed: a sandbox ends; a one-shot run ignores it.
void ControlClosed(SpawnService* svc) {
  if (svc->sandbox) svc->end = true;
  svc->watch_control = false;
}

void ReadControl(SpawnService* svc) {
  if (svc->arena == nullptr) {
    // A one-shot run's server may close its end before init ends: that
    // costs it no mapping.
    char byte;
    ssize_t n;
    do {
      n = ::recv(svc->control, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n == 0) return ControlClosed(svc);
    if (n < 0) return;
    if (!MakeArena(svc)) {
      svc->watch_control = false;  // cannot serve: a sandbox request then times out on the server
      return;
    }
  }
  SpawnArena* a = svc->arena;
  for (;;) {
    int fds[kMaxFds];
    int n_fds = 0, flags = 0;
    const ssize_t n = RecvWithFds(svc->control, a->request, sizeof a->request, fds, &n_fds, &flags);
    if (n < 0) return;
    if (n == 0) return ControlClosed(svc);
    ControlHeader h;
    memset(&h, 0, sizeof h);
    if (static_cast<size_t>(n) >= sizeof h) memcpy(&h, a->request, sizeof h);
    if ((flags & (MSG_TRUNC | MSG_CTRUNC)) || static_cast<size_t>(n) < sizeof h || h.magic != kControlMagic ||
        h.size != static_cast<uint32_t>(n)) {
      CloseAll(fds, n_fds);
      SendReply(*svc, h.seq, -1, (flags & MSG_TRUNC) ? E2BIG : EBADMSG, 0);
      continue;
    }
    const size_t size = static_cast<size_t>(n);
    if (h.type == kCtlStart && size >= sizeof(StartRequest)) {
      StartProcess(svc, *reinterpret_cast<StartRequest*>(a->request), size, fds, n_fds);
      continue;
    }
    CloseAll(fds, n_fds);
    if (h.type == kCtlSandbox && size >= sizeof(SandboxRequest)) {
      BecomeSandbox(svc, *reinterpret_cast<SandboxRequest*>(a->request), size);
    } else if (h.type == kCtlSignal && size >= sizeof(SignalRequest)) {
      SignalProcess(svc, *reinterpret_cast<SignalRequest*>(a->request), size);
    } else {
      SendReply(*svc, h.seq, -1, EBADMSG, 0);
    }
  }
}

bool SendProgramExit(SpawnService* svc) {
  ProgramExit m;
  memset(&m, 0, sizeof m);
  m.h = {kControlMagic, kCtlProgramExit, 0, sizeof m};
  m.pid = svc->program;
  m.wait_status = svc->program_status;
  return ::send(svc->control, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof m) ||
         errno != EAGAIN;  // anything but a full socket: the server is gone, nothing to retry
}

}  // namespace

void InitSpawnService(SpawnService* svc, int control, pid_t program, const char* workdir,
                      LockSupervisor* program_locks) {
  svc->control = control;
  svc->program_locks = program_locks;
  svc->program = program;
  svc->workdir = workdir;
}

int SpawnPollFds(SpawnService* svc, struct pollfd* fds, int max) {
  int n = 0;
  if (svc->watch_control && n < max) {
    fds[n++] = {svc->control, static_cast<short>(POLLIN | (svc->program_exit_unsent ? POLLOUT : 0)), 0};
  }
  SpawnArena* a = svc->arena;
  if (a == nullptr) return n;
  for (const Proc& p : a->procs) {
    if (p.pid > 0 && p.chan >= 0 && n < max) fds[n++] = {p.chan, POLLIN, 0};
  }
  for (int i = 0; i < kMaxStartedProcesses; ++i) {
    if (a->lock_used[i] && n < max) fds[n++] = {a->locks[i].listener, POLLIN, 0};
  }
  return n;
}

void SpawnOnPoll(SpawnService* svc, const struct pollfd* fds, int n) {
  SpawnArena* a = svc->arena;
  for (int i = 0; i < n; ++i) {
    if (fds[i].revents == 0) continue;
    const int fd = fds[i].fd;
    if (fd == svc->control) {
      if (svc->program_exit_unsent && (fds[i].revents & POLLOUT)) svc->program_exit_unsent = !SendProgramExit(svc);
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ReadControl(svc);
      a = svc->arena;
      continue;
    }
    if (a == nullptr) continue;
    bool matched = false;
    for (Proc& p : a->procs) {
      if (p.pid > 0 && p.chan == fd) {
        ReadSetupChannel(svc, &p);
        matched = true;
        break;
      }
    }
    if (matched) continue;
    for (int j = 0; j < kMaxStartedProcesses; ++j) {
      if (!a->lock_used[j] || a->locks[j].listener != fd) continue;
      LockSupervisor& sup = a->locks[j];
      if (fds[i].revents & POLLIN) {
        HandleLockNotification(&sup);
      } else {
        // No process under this filter is left: the locks its processes
        // held are released, its waiting requests dropped (none can still
        // wait), and the slot is free again.
        ReleaseStaleOwners(&sup, 0, 0, 0);
        RetryPendingLocks(&sup);
        ::close(sup.listener);
        a->lock_used[j] = false;
      }
      break;
    }
  }
  if (a == nullptr) return;
  // One sandbox's locks are one table for the kernel but several for init (a
  // supervisor per listener, each with the POSIX locks of its own processes,
  // record_locks.h): a lock left by a process that is gone is released by its
  // supervisor only when a request of its own meets it. So while a request
  // waits anywhere, every supervisor first releases what its gone processes
  // left.
  bool waiting = svc->program_locks != nullptr && svc->program_locks->n_pending > 0;
  for (int j = 0; j < kMaxStartedProcesses; ++j) waiting = waiting || (a->lock_used[j] && a->locks[j].n_pending > 0);
  if (!waiting) return;
  if (svc->program_locks != nullptr) ReleaseStaleOwners(svc->program_locks, 0, 0, 0);
  for (int j = 0; j < kMaxStartedProcesses; ++j) {
    if (a->lock_used[j]) ReleaseStaleOwners(&a->locks[j], 0, 0, 0);
  }
  for (int j = 0; j < kMaxStartedProcesses; ++j) {
    if (a->lock_used[j] && a->locks[j].n_pending > 0) RetryPendingLocks(&a->locks[j]);
  }
}

int SpawnTimeoutMs(const SpawnService& svc) {
  int ms = -1;
  auto at_most = [&ms](int v) {
    if (v >= 0 && (ms < 0 || v < ms)) ms = v;
  };
  if (svc.program_exit_unsent) at_most(10);
  if (svc.sandbox && svc.end_at_ms > 0) {
    const int64_t left = svc.end_at_ms - NowMs();
    at_most(left <= 0 ? 0 : left > 60000 ? 60000 : static_cast<int>(left));
  }
  if (svc.arena != nullptr) {
    for (int j = 0; j < kMaxStartedProcesses; ++j) {
      if (svc.arena->lock_used[j]) at_most(LockRetryMs(svc.arena->locks[j]));
    }
  }
  return ms;
}

bool SpawnOnReaped(SpawnService* svc, pid_t pid, int status) {
  if (svc->arena == nullptr) return false;
  Proc* p = FindProc(svc->arena, pid);
  if (p == nullptr) return false;
  // It is gone, so its setup channel holds all it will ever say.
  ReadSetupChannel(svc, p);
  if (p->started) {
    ProcessStatus s = {status, 0};
    ssize_t unused = ::write(p->status_fd, &s, sizeof s);  // a pipe's buffer: never blocks for 8 bytes
    (void)unused;
  }
  ::close(p->status_fd);
  *p = Proc{};
  return true;
}

void SpawnOnProgramExit(SpawnService* svc, int status) {
  svc->program_status = status;
  svc->program_exit_unsent = !SendProgramExit(svc);
}

bool SpawnShouldEnd(SpawnService* svc) {
  if (!svc->sandbox) return false;
  if (!svc->end && svc->end_at_ms > 0 && NowMs() >= svc->end_at_ms) svc->end = true;
  return svc->end;
}

}  // namespace airlock::isolation::internal
