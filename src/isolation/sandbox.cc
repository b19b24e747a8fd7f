// Parent side of a launch: prepare the plan, clone into new namespaces, write
// the id maps, put the child in its cgroup, release it, and wait until the
// program has exec'd (or learn which step failed).
#include "isolation/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "base/fs.h"
#include "base/log.h"
#include "base/sanitizer.h"
#include "isolation/child_plan.h"
#include "isolation/landlock.h"

namespace airlock::isolation {
namespace {

using internal::ChildError;
using internal::ChildPlan;

constexpr const char* kStepNames[] = {
    "?",          "sync with parent", "cgroup namespace", "setgroups",   "setgid",     "setuid",
    "capabilities", "hostname",       "mount propagation", "root tmpfs", "mount",      "pivot_root",
    "read-only root", "fork",         "setsid",           "file descriptors", "rlimits", "chdir",
    "securebits", "drop capabilities", "no_new_privs",    "landlock",    "seccomp",    "execve",
    "ready",       "lock supervision", "user namespace id maps",
};
static_assert(sizeof(kStepNames) / sizeof(kStepNames[0]) == internal::kStepCount);

constexpr int kCloneFlags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
// Where the new root is assembled, inside the child's private mount namespace
// (mounting there hides nothing outside that namespace).
constexpr const char* kStaging = "/tmp";
constexpr int64_t kMiB = 1 << 20;


StatusOr<std::pair<UniqueFd, UniqueFd>> Pipe(bool nonblocking_read) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  UniqueFd r(fds[0]), w(fds[1]);
  if (nonblocking_read && ::fcntl(r.get(), F_SETFL, O_NONBLOCK) != 0) return ErrnoError("fcntl(O_NONBLOCK)");
  return std::make_pair(std::move(r), std::move(w));
}


StatusOr<std::pair<UniqueFd, UniqueFd>> StatusSocket() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) return ErrnoError("socketpair (status)");
  UniqueFd r(fds[0]), w(fds[1]);
  if (::fcntl(r.get(), F_SETFL, O_NONBLOCK) != 0) return ErrnoError("fcntl(O_NONBLOCK)");
  return std::make_pair(std::move(r), std::move(w));
}

}  // namespace


namespace internal {

std::vector<std::pair<int, struct rlimit>> PlanRlimits(const Limits& l, bool have_cgroup) {
  auto lim = [](int64_t soft, int64_t hard) {
    struct rlimit r;
    r.rlim_cur = static_cast<rlim_t>(soft);
    r.rlim_max = static_cast<rlim_t>(hard);
    return r;
  };
  std::vector<std::pair<int, struct rlimit>> out;
  // With a cgroup, the address-space limit only stops absurd single allocations
  // and leaves the real limit (and the "memory" kill reason) to the cgroup;
  // without one it is the memory limit.
  int64_t as = have_cgroup ? l.memory_bytes + 2048 * kMiB : l.memory_bytes;
#if AIRLOCK_ASAN
  // Test builds only: an AddressSanitizer process (a warm pool's zygote and
  // its runs are copies of this binary) reserves terabytes of shadow address
  // space, so an address-space limit would stop it. The cgroup still limits.
  if (!have_cgroup) out.push_back({RLIMIT_AS, lim(as, as)});
#else
  out.push_back({RLIMIT_AS, lim(as, as)});
#endif
  out.push_back({RLIMIT_CORE, lim(0, 0)});
  out.push_back({RLIMIT_NOFILE, lim(l.open_files, l.open_files)});
  // Counted per user namespace level, so this is per run. With a cgroup,
  // pids.max must be what refuses a fork (it is what reports kill_reason
  // "pids"), so the rlimit sits above it.
  int64_t nproc = have_cgroup ? 2 * l.pids + 16 : l.pids;
  out.push_back({RLIMIT_NPROC, lim(nproc, nproc)});
  // Slightly above the tmpfs size so that a full disk shows as ENOSPC, not SIGXFSZ.
  out.push_back({RLIMIT_FSIZE, lim(l.disk_bytes + kMiB, l.disk_bytes + kMiB)});
  out.push_back({RLIMIT_MEMLOCK, lim(0, 0)});
  // Per-user kernel objects are charged up to the user namespace's owner on the
  // host; bound what one run can take (POSIX message queues: none at all).
  out.push_back({RLIMIT_MSGQUEUE, lim(0, 0)});
  out.push_back({RLIMIT_SIGPENDING, lim(1024, 1024)});
  if (l.cpu_time_ms > 0) {
    int64_t s = (l.cpu_time_ms + 999) / 1000;
    out.push_back({RLIMIT_CPU, lim(s, s + 1)});
  }
  return out;
}

void FillChildPlan(ChildPlan* plan, const Spec& spec, int landlock_abi, const SeccompProgram* seccomp) {
  plan->staging = kStaging;
  plan->ops = PlanMounts(spec);
  plan->hostname = spec.hostname;
  plan->workdir = spec.workdir;
  plan->argv_storage = spec.argv;
  plan->env_storage = spec.env;
  for (auto& a : plan->argv_storage) plan->argv.push_back(a.data());
  plan->argv.push_back(nullptr);
  for (auto& e : plan->env_storage) plan->envp.push_back(e.data());
  plan->envp.push_back(nullptr);
  plan->landlock = PlanLandlock(landlock_abi, {"/"}, {kWorkspaceDir, "/tmp", "/dev/shm"},
                                {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"});
  plan->seccomp = seccomp;
  plan->nested_sandbox_host = spec.nested_sandbox_host;
  plan->exec_fd = spec.exec_fd;
}

const char* StepName(int step) {
  return step > 0 && step < kStepCount ? kStepNames[step] : kStepNames[0];
}

}  // namespace internal

IsolationReport MakeIsolationReport(const HostSetup& host, bool have_cgroup, int64_t host_uid, bool shared_network,
                                    bool shared_uts) {
  IsolationReport r;
  r.host_uid = host_uid;
  r.landlock_abi = host.landlock_abi;
  r.cgroup_version = !have_cgroup ? "none" : host.cgroups.version == CgroupVersion::kV2 ? "v2" : "v1";
  auto add = [&](const char* name, bool on, std::string detail) { r.layers.push_back({name, on, std::move(detail)}); };
  add("user_namespace", true,
      "uid " + std::to_string(kSandboxUid) + " mapped to " +
          (host_uid >= 0 ? "host uid and gid " + std::to_string(host_uid) : std::string("an unprivileged host uid")));
  // Per-user kernel pools (pipe buffers, descriptors in flight, queued
  // signals, processes) are per host id: per run only with an id of its own.
  if (host.host_ids && host_uid >= 0) {
    add("host_ids", true,
        "host uid and gid " + std::to_string(host_uid) + " are this run's alone (" + host.host_ids->Describe() +
            "); given back once nothing of the run is left");
  } else {
    add("host_ids", false,
        "degraded: " + (host.host_ids_why_not.empty() ? std::string("no host id of its own") : host.host_ids_why_not));
  }
  add("pid_namespace", true, "its own: init is pid 1 and ends every process left when the program (pid 2) ends; fresh /proc");
  add("mount_namespace", true, "tmpfs root, read-only system binds, pivot_root, old root detached");
  add("network_namespace", true,
      shared_network ? "shared with the other runs of its profile's zygote, never the host's: no interfaces but a "
                       "down loopback, no capability over it, AF_UNIX sockets only (seccomp), abstract unix sockets "
                       "of other runs refused (Landlock scope)"
                     : "its own: no interfaces but a down loopback");
  add("ipc_namespace", true, "");
  add("uts_namespace", true,
      shared_uts ? "hostname sandbox; shared with the other runs of its profile's zygote, never the host's: no "
                   "capability over it (sethostname and setdomainname refused)"
                 : "its own: hostname sandbox");
  add("cgroup_namespace", true, "");
  add("cgroup", have_cgroup,
      have_cgroup ? r.cgroup_version + ": memory, pids, cpu" : "degraded: " + host.cgroups.why_not);
  add("rlimits", true, "AS, CORE, NOFILE, NPROC, FSIZE, MEMLOCK, MSGQUEUE, SIGPENDING, CPU");
  add("capabilities", true, "all dropped (bounding, ambient, effective, permitted); securebits locked");
  add("no_new_privs", true, "");
  std::string ll = "ABI " + std::to_string(host.landlock_abi) + ": filesystem";
  if (host.landlock_abi >= 4) ll += ", tcp";
  if (host.landlock_abi >= 6) ll += ", scopes (abstract unix sockets, signals)";
  add("landlock", host.landlock_abi > 0, host.landlock_abi > 0 ? ll : "degraded: the kernel has no Landlock");
  add("seccomp", true, "default-deny allowlist, native architecture only");
  return r;
}


StatusOr<HostSetup> PrepareHost(const HostOptions& options) {
  HostSetup host;
  host.degradable = options.degradable;
  host.privileged = ::geteuid() == 0;
  if (host.privileged) {
    auto pool = HostIdPool::Claim(options.id_range.value_or(kDefaultHostIdRange));
    if (!pool.ok()) return pool.status();
    host.host_ids = std::move(*pool);
  } else if (options.id_range) {
    return InvalidArgument("--uid-range " + options.id_range->ToString() +
                           ": giving runs host ids of their own needs a server running as root (this one is uid " +
                           std::to_string(::geteuid()) + "); drop the flag to run every run as your own uid");
  } else {
    host.host_ids_why_not = "the server is not root, so every run's uid 1000 is the server's own uid " +
                            std::to_string(::geteuid()) +
                            " and runs share its per-user kernel pools (pipe buffers, descriptors in flight)";
  }
  ASSIGN_OR_RETURN(host.cgroups, DetectCgroups());
  if (options.sweep_stale_cgroups && host.cgroups.version != CgroupVersion::kNone) {
    SweepResult swept = SweepStaleCgroups(host.cgroups);
    if (swept.removed > 0 || swept.busy > 0) {
      log::Info("removed " + std::to_string(swept.removed) +
                " empty cgroup(s) that airlock processes no longer running had left" +
                (swept.busy > 0 ? "; " + std::to_string(swept.busy) + " of theirs still hold processes and were left"
                                : std::string()));
    }
  }
  if (host.cgroups.version == CgroupVersion::kNone &&
      !(options.degradable & static_cast<uint32_t>(Degradable::kCgroup))) {
    return Unavailable("cgroup limits are required but unusable: " + host.cgroups.why_not +
                       " (or allow running on rlimits alone with --allow-degraded=cgroup)");
  }
  host.landlock_abi = LandlockAbi();
  if (host.landlock_abi == 0 && !(options.degradable & static_cast<uint32_t>(Degradable::kLandlock))) {
    return Unavailable(
        "Landlock is required but this kernel does not offer it (needs Linux >= 5.13 with lsm=landlock); "
        "or allow running without it with --allow-degraded=landlock");
  }
  ASSIGN_OR_RETURN(host.seccomp, CompileSeccompPolicy({}));
  // /proc/self/stat fields 48 and 49 (arg_start, arg_end), counted after the
  // ")" that ends the command name (which may itself hold spaces and parens).
  if (auto stat = ReadFile("/proc/self/stat"); stat.ok()) {
    size_t pos = stat->rfind(')');
    std::vector<unsigned long long> fields;
    for (size_t i = pos + 2; pos != std::string::npos && i < stat->size();) {
      size_t end = stat->find(' ', i);
      if (end == std::string::npos) end = stat->size();
      fields.push_back(std::strtoull(stat->c_str() + i, nullptr, 10));
      i = end + 1;
    }
    // fields[0] is field 3 (state).
    if (fields.size() >= 47 && fields[45] < fields[46]) {
      host.arg_start = static_cast<uintptr_t>(fields[45]);
      host.arg_end = static_cast<uintptr_t>(fields[46]);
    }
  }
  return host;
}

StatusOr<Launched> Launch(const HostSetup& host, const Spec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return InvalidArgument("the program must be an absolute path inside the sandbox");
  }
  // Files and binds are created while the host root is reachable at /.oldroot:
  // only plain absolute paths, outside the places the sandbox builds itself.
  auto bad_path = [](const std::string& p) {
    if (p.size() < 2 || p[0] != '/' || p.back() == '/' || p.find("//") != std::string::npos ||
        p.find("/./") != std::string::npos || p.find("/../") != std::string::npos ||
        p.ends_with("/..") || p.ends_with("/.") || p.find('\0') != std::string::npos) {
      return true;
    }
    for (const char* reserved : {"/.oldroot", "/.workspace", "/proc", "/dev", "/etc"}) {
      if (p == reserved || p.starts_with(std::string(reserved) + "/")) return true;
    }
    return false;
  };
  for (const FileEntry& f : spec.files) {
    if (bad_path(f.path)) return InvalidArgument("file path '" + f.path + "' is not allowed in the sandbox");
  }
  for (const std::string& b : spec.ro_binds) {
    if (bad_path(b)) return InvalidArgument("bind path '" + b + "' is not allowed in the sandbox");
  }
  if (spec.workdir != kWorkspaceDir && spec.workdir != "/tmp") {
    return InvalidArgument("the working directory must be " + std::string(kWorkspaceDir) + " or /tmp, not '" +
                           spec.workdir + "'");
  }
  ChildPlan plan;
  internal::FillChildPlan(&plan, spec, host.landlock_abi, &host.seccomp);
  plan.can_setgroups = host.privileged;
  plan.arg_start = host.arg_start;
  plan.arg_end = host.arg_end;
  if (spec.nested_sandbox_host && spec.exec_fd < 0) {
    return InvalidArgument("a nested sandbox host must be given as an open file (exec_fd)");
  }

  Launched run;
  // The run's own host id (and a zygote's): taken before clone, given back
  // once the run's init is gone and reaped (the lease watches its pidfd).
  HostIdLease lease;
  if (host.host_ids && spec.host_uid < 0) {
    ASSIGN_OR_RETURN(lease, HostIdLease::Take(host.host_ids));
  }
  plan.keep_setid_caps = spec.nested_sandbox_host && lease;
  std::unique_ptr<RunCgroup> cgroup;
  if (host.cgroups.version != CgroupVersion::kNone) {
    ASSIGN_OR_RETURN(cgroup, RunCgroup::Create(host.cgroups, UniqueCgroupName("run"), spec.limits));
  }
  plan.rlimits = internal::PlanRlimits(spec.limits, cgroup != nullptr);

  ASSIGN_OR_RETURN(auto sync, Pipe(false));
  ASSIGN_OR_RETURN(auto err, Pipe(false));
  // The status channel is a socket: also the run's control channel
  // (init_control.h), should the run become a sandbox.
  ASSIGN_OR_RETURN(auto status, StatusSocket());
  ASSIGN_OR_RETURN(auto out, Pipe(true));
  ASSIGN_OR_RETURN(auto errout, Pipe(true));
  plan.sync_r = sync.first.get();
  plan.err_w = err.second.get();
  plan.status_w = status.second.get();
  plan.stdout_w = out.second.get();
  plan.stderr_w = errout.second.get();
  plan.extra_fd = spec.extra_fd;

  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, kCloneFlags | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (pid < 0) {
    return ErrnoError("clone(user, pid, mount, net, ipc, uts namespaces) — are user namespaces enabled? "
                      "(sysctl user.max_user_namespaces > 0; kernel.unprivileged_userns_clone=1 where it exists)");
  }
  if (pid == 0) {
    internal::RunChild(plan);  // returns only for warm plans, which this is not
    ::_exit(127);
  }

  run.pid = pid;
  // From here on, a failure must not leave the child behind.
  auto abandon = [&](Status s) -> Status {
    ::kill(pid, SIGKILL);
    int st;
    ::waitpid(pid, &st, __WALL);
    return s;
  };
  sync.first.reset();
  err.second.reset();
  status.second.reset();
  out.second.reset();
  errout.second.reset();

  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return abandon(ErrnoError("pidfd_open"));
  run.pidfd.reset(pidfd);

  const std::string proc = "/proc/" + std::to_string(pid);
  uid_t host_uid = spec.host_uid >= 0 ? static_cast<uid_t>(spec.host_uid)
                   : lease                ? lease.id()
                   : host.privileged      ? 65534
                                          : ::getuid();
  gid_t host_gid = spec.host_gid >= 0 ? static_cast<gid_t>(spec.host_gid)
                   : lease                ? lease.id()
                   : host.privileged      ? 65534
                                          : ::getgid();
  if (!host.privileged) {
    Status s = WriteFile(proc + "/setgroups", "deny");
    if (!s.ok()) return abandon(s);
  }
  // A zygote also gets the rest of this server's block, each id as itself, so
  // that it can make each of its runs that run's id (warm_run.h). Its own id
  // is cut out of it: mapped ranges may not overlap.
  std::string extra;
  if (plan.keep_setid_caps) {
    const HostIdRange& block = host.host_ids->block();
    const uint32_t own = lease.id();
    auto span = [&](uint32_t first, uint32_t end) {
      if (first < end) extra += std::to_string(first) + " " + std::to_string(first) + " " + std::to_string(end - first) + "\n";
    };
    span(block.start, own);
    span(own + 1, block.end());
  }
  for (auto [file, inside, outside] : {std::tuple{"/uid_map", kSandboxUid, host_uid},
                                       std::tuple{"/gid_map", kSandboxGid, host_gid}}) {
    Status s = WriteFile(proc + file, std::to_string(inside) + " " + std::to_string(outside) + " 1\n" + extra);
    if (!s.ok()) return abandon(s);
  }
  lease.Watch(run.pidfd.get());
  run.report = MakeIsolationReport(host, cgroup != nullptr, lease ? static_cast<int64_t>(lease.id()) : -1);
  run.host_id = std::move(lease);
  if (cgroup) {
    Status s = cgroup->AddProcess(pid);
    if (!s.ok()) return abandon(s);
  }
  char go = 'g';
  if (::write(sync.second.get(), &go, 1) != 1) return abandon(ErrnoError("write(sync pipe)"));
  sync.second.reset();

  // EOF on the error pipe: the program exec'd. A ChildError: a step failed.
  ChildError child_error{};
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&child_error);
  for (;;) {
    struct pollfd p = {err.first.get(), POLLIN, 0};
    int r = ::poll(&p, 1, 30000);
    if (r == 0) return abandon(Internal("sandbox setup did not finish within 30 s"));
    if (r < 0) {
      if (errno == EINTR) continue;
      return abandon(ErrnoError("poll(error pipe)"));
    }
    ssize_t n = ::read(err.first.get(), bytes + got, sizeof child_error - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
    if (got == sizeof child_error) break;
  }
  if (got > 0) {
    int step = child_error.step > 0 && child_error.step < internal::kStepCount ? child_error.step : 0;
    std::string what = std::string("sandbox setup failed at step '") + kStepNames[step] + "'";
    if (step == internal::kStepMountOp && child_error.index >= 0 &&
        static_cast<size_t>(child_error.index) < plan.ops.size()) {
      what += " (" + plan.ops[static_cast<size_t>(child_error.index)].target + ")";
    }
    return abandon(Status(ErrorCode::kUnavailable, what, child_error.err));
  }

  run.stdout_fd = std::move(out.first);
  run.stderr_fd = std::move(errout.first);
  run.status_fd = std::move(status.first);
  run.cgroup = std::move(cgroup);
  return run;
}

StatusOr<ExitInfo> Reap(Launched& run) {
  if (run.adopted) {
    // Not our child (its zygote reaps it): the pidfd said it is gone.
    run.pid = -1;
    return ReadProgramStatus(run, 0);
  }
  int st = 0;
  for (;;) {
    pid_t r = ::wait4(run.pid, &st, __WALL, nullptr);
    if (r == run.pid) break;
    if (r < 0 && errno == EINTR) continue;
    return ErrnoError("wait4(sandbox init)");
  }
  run.pid = -1;
  return ReadProgramStatus(run, st);
}

StatusOr<ExitInfo> ReadProgramStatus(Launched& run, int init_wait_status) {
  ExitInfo info;
  info.init_wait_status = init_wait_status;
  // The status is the channel's last message; a sandbox's init may have sent
  // others before it (init_control.h), which are of other sizes.
  internal::ProgramStatus report{};
  ssize_t n;
  do {
    n = ::recv(run.status_fd.get(), &report, sizeof report, MSG_DONTWAIT | MSG_TRUNC);
  } while ((n < 0 && errno == EINTR) || (n > 0 && n != static_cast<ssize_t>(sizeof report)));
  if (n != static_cast<ssize_t>(sizeof report)) {
    info.init_killed = true;
    info.signal = WIFSIGNALED(init_wait_status) ? WTERMSIG(init_wait_status) : SIGKILL;
    return info;
  }
  static_assert(sizeof(info.usage) == sizeof(report.usage), "glibc's struct rusage is the kernel's");
  std::memcpy(&info.usage, &report.usage, sizeof report.usage);
  int program_status = report.wait_status;
  if (WIFEXITED(program_status)) {
    info.exited = true;
    info.exit_code = WEXITSTATUS(program_status);
  } else if (WIFSIGNALED(program_status)) {
    info.signal = WTERMSIG(program_status);
  }
  return info;
}

StatusOr<std::vector<pid_t>> ChildrenOf(pid_t pid) {
  if (pid <= 0) return InvalidArgument("ChildrenOf: pid " + std::to_string(pid) + " is not a process");
  const std::string id = std::to_string(pid);
  ASSIGN_OR_RETURN(std::string text, ReadFile("/proc/" + id + "/task/" + id + "/children"));
  std::vector<pid_t> out;
  std::istringstream in(text);
  long child;
  while (in >> child) out.push_back(static_cast<pid_t>(child));
  return out;
}

StatusOr<std::vector<pid_t>> ChildrenOfPidfd(int pidfd, pid_t pid) {
  if (pid <= 0) {
    ASSIGN_OR_RETURN(pid, PidOfPidfd(pidfd));
  }
  // A pid is recycled only once its process is reaped, which comes after its
  // pidfd turns readable: while the poll below says it has not exited, `pid`
  // is still that process's, however long ago it was read.
  auto exited = [pidfd] {
    struct pollfd p = {pidfd, POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
  };
  if (exited()) return Unavailable("ChildrenOfPidfd: the process has exited");
  ASSIGN_OR_RETURN(std::vector<pid_t> children, ChildrenOf(pid));
  // Still not exited: it held its pid all along, so the list was its own.
  if (exited()) return Unavailable("ChildrenOfPidfd: the process exited while its children were read");
  return children;
}

StatusOr<pid_t> PidOfPidfd(int pidfd) {
  ASSIGN_OR_RETURN(std::string info, ReadFile("/proc/self/fdinfo/" + std::to_string(pidfd)));
  size_t pos = info.find("\nPid:");
  if (pos == std::string::npos) return Internal("no Pid: line in the fdinfo of a pidfd");
  long pid = std::strtol(info.c_str() + pos + 5, nullptr, 10);
  if (pid <= 0) return Internal("the pidfd's process is gone or not visible in this pid namespace");
  return static_cast<pid_t>(pid);
}

bool PidfdProcessExiting(int pidfd) {
  auto pid = PidOfPidfd(pidfd);
  if (!pid.ok()) return false;
  auto stat = ReadFile("/proc/" + std::to_string(*pid) + "/stat");
  if (!stat.ok()) return false;
  // "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may hold
  // anything, the fields after its last ')' are fixed.
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(stat->substr(close + 1));
  std::string field;
  for (int i = 0; i < 7 && (fields >> field); ++i) {
  }
  constexpr unsigned long kPfExiting = 0x4;  // include/linux/sched.h
  return !field.empty() && (std::strtoul(field.c_str(), nullptr, 10) & kPfExiting) != 0;
}

void KillRun(Launched& run) {
  if (run.pidfd) ::syscall(SYS_pidfd_send_signal, run.pidfd.get(), SIGKILL, nullptr, 0);
  if (run.cgroup) {
    // A throttled process handles its SIGKILL only when it next runs.
    if (Status s = run.cgroup->LiftCpuLimit(); !s.ok()) log::Warn("killing a run: " + s.ToString());
    run.cgroup->KillAll();
  }
}

void StartKillingRun(Launched& run) {
  if (!run.pidfd || ::syscall(SYS_pidfd_send_signal, run.pidfd.get(), SIGKILL, nullptr, 0) != 0) {
    return KillRun(run);  // no pidfd, or init is gone already: be thorough
  }
  if (run.cgroup) {
    if (Status s = run.cgroup->LiftCpuLimit(); !s.ok()) log::Warn("killing a run: " + s.ToString());
  }
}

}  // namespace airlock::isolation
