#include "isolation/warm_run.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "base/fs.h"
#include "isolation/child_plan.h"
#include "isolation/landlock.h"

namespace airlock::isolation {
namespace {

// A run's own namespaces; CLONE_NEWNET is added unless runs share the zygote's.
constexpr int kCloneFlags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;

}  // namespace

bool WarmRunsCanShareNetwork(int landlock_abi) {
  // Abstract unix sockets are the network namespace's, not the filesystem's:
  // only the Landlock scope keeps one run from connecting to another's.
  return landlock_abi >= 6;
}

size_t WarmSetupFailureSize() { return sizeof(internal::ChildError); }

Status DescribeWarmSetupFailure(const char* bytes, size_t size) {
  internal::ChildError e{};
  std::memcpy(&e, bytes, std::min(size, sizeof e));
  return Status(ErrorCode::kUnavailable,
                std::string("warm run setup failed at step '") + internal::StepName(e.step) + "'", e.err);
}

WarmRunFactory::~WarmRunFactory() = default;

StatusOr<std::unique_ptr<WarmRunFactory>> WarmRunFactory::Create(const Spec& spec, int landlock_abi,
                                                                  bool share_network) {
  if (share_network && !WarmRunsCanShareNetwork(landlock_abi)) {
    return InvalidArgument("warm runs may share their zygote's network namespace only with Landlock scopes "
                              "(ABI >= 6; this kernel has ABI " + std::to_string(landlock_abi) +
                              "): start the server with --netns-per-run");
  }
  std::unique_ptr<WarmRunFactory> f(new WarmRunFactory());
  f->clone_flags_ = kCloneFlags | (share_network ? 0 : CLONE_NEWNET);
  f->spec_ = spec;
  f->spec_.argv.clear();
  f->spec_.files.clear();
  f->spec_.extra_fd = -1;
  f->spec_.exec_fd = -1;
  f->spec_.nested_sandbox_host = false;
  ASSIGN_OR_RETURN(f->seccomp_, CompileSeccompPolicy({}));
  f->plan_ = std::make_unique<internal::ChildPlan>();
  internal::FillChildPlan(f->plan_.get(), f->spec_, landlock_abi, &f->seccomp_);
  f->plan_->warm = true;
  // The server puts every warm run in a cgroup before it goes on (kWarmGo).
  f->plan_->rlimits = internal::PlanRlimits(f->spec_.limits, /*have_cgroup=*/true);
  return f;
}

void WarmRunFactory::SetArgvArea(uintptr_t start, uintptr_t end) {
  plan_->arg_start = start;
  plan_->arg_end = end;
}

void WarmRunReady(int control) {
  if (::write(control, &kWarmReady, 1) != 1) {
    internal::ChildError e{internal::kStepReady, errno, -1};
    ssize_t unused = ::write(control, &e, sizeof e);
    (void)unused;
    ::_exit(127);
  }
}

namespace {

// Our effective uid and gid become `id` (the namespace the next clone makes is
// then owned by it); *Restore() makes them ours again. Changing the effective
// ids resets the pdeath signal and makes the process not dumpable (a run
// cloned so would inherit that, and its /proc files would be root's): both
// are set back.
Status BecomeOwner(uint32_t id) {
  if (::syscall(SYS_setresgid, -1, id, -1) != 0) return ErrnoError("setresgid to a run's host id " + std::to_string(id));
  if (::syscall(SYS_setresuid, -1, id, -1) != 0) {
    Status s = ErrnoError("setresuid to a run's host id " + std::to_string(id));
    ::syscall(SYS_setresgid, -1, ::getgid(), -1);
    return s;
  }
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  return Status::Ok();
}

void RestoreOwnIds() {
  // Our real ids are the zygote's own: going back needs no capability.
  if (::syscall(SYS_setresuid, -1, ::getuid(), -1) != 0 || ::syscall(SYS_setresgid, -1, ::getgid(), -1) != 0) {
    ::_exit(126);  // a zygote left as a run's id must not go on
  }
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
}

}  // namespace

StatusOr<pid_t> WarmRunFactory::Clone(const Fds& fds, int* control, int64_t host_id) {
  internal::ChildPlan& plan = *plan_;
  plan.sync_r = fds.control;
  plan.err_w = fds.control;
  plan.status_w = fds.status_w;
  plan.stdout_w = fds.stdout_w;
  plan.stderr_w = fds.stderr_w;
  plan.extra_fd = fds.events_w;

  const bool own_id = host_id >= 0;
  if (own_id) RETURN_IF_ERROR(BecomeOwner(static_cast<uint32_t>(host_id)));
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, clone_flags_ | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (pid < 0) {
    Status s = ErrnoError(shares_network() ? "clone(user, pid, mount, ipc, uts namespaces) of a warm run"
                                           : "clone(user, pid, mount, net, ipc, uts namespaces) of a warm run");
    if (own_id) RestoreOwnIds();
    return s;
  }
  if (pid == 0) {
    internal::RunChild(plan);  // returns only in the program, restricted
    *control = plan.err_w;     // RunChild moved it to a high fd in this process
    return 0;
  }
  // The run's user namespace: its kSandboxUid is our effective uid (the run's
  // own host id, or our own), nothing else. The unprivileged form (one id,
  // the namespace owner's; setgroups denied) is all we need: written while
  // we are still that owner (the map files are the run's, and only its
  // owner holds capabilities over its namespace).
  auto abandon = [&](Status s) -> Status {
    if (own_id) RestoreOwnIds();
    ::kill(pid, SIGKILL);
    int st;
    ::waitpid(pid, &st, __WALL);
    return s;
  };
  const std::string proc = "/proc/" + std::to_string(pid);
  if (Status s = WriteFile(proc + "/setgroups", "deny"); !s.ok()) return abandon(s);
  if (Status s = WriteFile(proc + "/uid_map", std::to_string(kSandboxUid) + " " + std::to_string(::geteuid()) + " 1\n");
      !s.ok()) {
    return abandon(s);
  }
  if (Status s = WriteFile(proc + "/gid_map", std::to_string(kSandboxGid) + " " + std::to_string(::getegid()) + " 1\n");
      !s.ok()) {
    return abandon(s);
  }
  if (own_id) RestoreOwnIds();
  return pid;
}

}  // namespace airlock::isolation
