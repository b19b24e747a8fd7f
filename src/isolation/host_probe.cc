#include "isolation/host_probe.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "isolation/cgroup.h"
#include "isolation/landlock.h"
#include "isolation/seccomp_policy.h"
#include "isolation/spec.h"

namespace airlock::isolation {
namespace {

// Clones a child into the given namespaces; it exits at once. 0 or errno.
int TryClone(int flags) {
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (pid < 0) return errno;
  if (pid == 0) ::_exit(0);
  int st = 0;
  ::waitpid(pid, &st, __WALL);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : ECHILD;
}

std::string ErrText(int err) { return std::string("failed: ") + std::strerror(err); }

// Forks a child that calls `call` and reports through its exit status: 0 when
// the call returned a pid, 1 when it returned an error (errno in the pipe),
// killed by a signal when the host refused the entry itself.
ForeignAbi TryAbi(const char* name, long (*call)()) {
  ForeignAbi abi{name, false, ""};
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    abi.detail = "could not probe: " + ErrText(errno);
    return abi;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);  // a refused entry must not leave a core file
    // The kernel's own answer, not a handler's (a sanitizer build catches
    // SIGSEGV, prints a report on stdout/stderr and exits with a code).
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGSYS}) ::signal(sig, SIG_DFL);
    ::close(STDOUT_FILENO);
    long r = call();
    int err = r < 0 && r > -4096 ? static_cast<int>(-r) : 0;
    ssize_t unused = ::write(p[1], &err, sizeof err);
    (void)unused;
    ::_exit(0);
  }
  ::close(p[1]);
  int err = 0;
  bool got = pid > 0 && ::read(p[0], &err, sizeof err) == sizeof err;
  ::close(p[0]);
  int st = 0;
  if (pid > 0) ::waitpid(pid, &st, 0);
  if (pid < 0) {
    abi.detail = "could not probe: " + ErrText(errno);
  } else if (WIFSIGNALED(st)) {
    abi.detail = std::string("refused by this host (a probe dies of ") + sigabbrev_np(WTERMSIG(st)) +
                 " outside any sandbox); a run dies the same way";
  } else if (got && err == ENOSYS) {
    abi.detail = "not built into this kernel (ENOSYS); seccomp kills a run that tries it (SIGSYS)";
  } else if (got && err != 0) {
    abi.detail = std::string("refused by this host with ") + strerrorname_np(err) +
                 " (outside any sandbox); seccomp kills a run that tries it (SIGSYS)";
  } else if (got) {
    abi.enterable = true;
    abi.detail = "enterable on this host; seccomp kills a run that tries it (SIGSYS)";
  } else {
    abi.detail = "could not probe (the child said nothing)";
  }
  return abi;
}

#if defined(__x86_64__)
long I386Getpid() {
  long ret;
  // int $0x80 enters the i386 ABI; 20 is its getpid.
  __asm__ volatile("int $0x80" : "=a"(ret) : "0"(20L) : "memory", "r8", "r9", "r10", "r11");
  return ret;
}
long X32Getpid() { return ::syscall(0x40000000L | SYS_getpid); }
#endif

}  // namespace

std::vector<ForeignAbi> ProbeForeignAbis() {
#if defined(__x86_64__)
  return {TryAbi("i386 (int $0x80)", I386Getpid), TryAbi("x32", X32Getpid)};
#else
  return {};
#endif
}

std::vector<ProbeItem> ProbeHost(uint32_t degradable) {
  std::vector<ProbeItem> items;
  bool root = ::geteuid() == 0;
  items.push_back({"running as root", true, false,
                   root ? "yes: each run maps to a host uid and gid of its own (per-run host ids, below)"
                        : "no: runs map to your own uid; cgroup limits need a delegated cgroup"});

  int userns = TryClone(CLONE_NEWUSER);
  items.push_back({"user namespace", userns == 0, true,
                   userns == 0 ? "ok"
                               : ErrText(userns) + " (enable user namespaces: sysctl user.max_user_namespaces=15000"
                                                   " and kernel.unprivileged_userns_clone=1 where it exists)"});
  const std::pair<const char*, int> kNamespaces[] = {
      {"pid namespace", CLONE_NEWPID}, {"mount namespace", CLONE_NEWNS}, {"network namespace", CLONE_NEWNET},
      {"ipc namespace", CLONE_NEWIPC}, {"uts namespace", CLONE_NEWUTS},  {"cgroup namespace", CLONE_NEWCGROUP},
  };
  for (auto [name, flag] : kNamespaces) {
    int err = userns == 0 ? TryClone(CLONE_NEWUSER | flag) : userns;
    items.push_back({name, err == 0, true, err == 0 ? "ok" : ErrText(err)});
  }

  int abi = LandlockAbi();
  bool ll_degradable = degradable & static_cast<uint32_t>(Degradable::kLandlock);
  std::string ll = "ABI " + std::to_string(abi) + ": filesystem";
  if (abi >= 4) ll += ", tcp bind/connect";
  if (abi >= 6) ll += ", scopes (abstract unix sockets, signals)";
  items.push_back({"landlock", abi > 0, !ll_degradable,
                   abi > 0 ? ll : "missing (needs Linux >= 5.13 booted with landlock in lsm=); "
                                  "or allow it with --allow-degraded=landlock"});

  auto program = CompileSeccompPolicy({});
  int seccomp_err = program.ok() ? 0 : EINVAL;
  if (program.ok()) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
      ::_exit(ApplySeccompInChild(*program) == 0 ? 0 : 1);
    }
    int st = 0;
    if (pid > 0) ::waitpid(pid, &st, 0);
    seccomp_err = pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : ENOSYS;
  }
  items.push_back({"seccomp filter", seccomp_err == 0, true,
                   seccomp_err == 0 ? "ok: default-deny allowlist installs"
                                    : program.ok() ? "the kernel refused the filter (CONFIG_SECCOMP_FILTER?)"
                                                   : program.status().ToString()});

  bool cg_degradable = degradable & static_cast<uint32_t>(Degradable::kCgroup);
  auto cg = DetectCgroups();
  bool cg_ok = cg.ok() && cg->version != CgroupVersion::kNone;
  std::string cg_detail;
  if (!cg.ok()) {
    cg_detail = cg.status().ToString();
  } else if (cg->version == CgroupVersion::kV2) {
    cg_detail = "v2 at " + cg->v2_parent + ": memory, pids, cpu";
  } else if (cg->version == CgroupVersion::kV1) {
    cg_detail = "v1: memory at " + cg->v1_memory_parent + ", pids at " + cg->v1_pids_parent + ", cpu at " +
                cg->v1_cpu_parent;
  } else {
    cg_detail = cg->why_not + (cg_degradable ? "" : "; or allow rlimits alone with --allow-degraded=cgroup");
  }
  items.push_back({"cgroup limits", cg_ok, !cg_degradable, cg_detail});

  for (const ForeignAbi& foreign : ProbeForeignAbis()) {
    items.push_back({"foreign ABI " + foreign.name, true, false, foreign.detail});
  }
  return items;
}

}  // namespace airlock::isolation
