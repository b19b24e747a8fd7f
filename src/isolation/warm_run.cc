#include "isolation/warm_run.h"

#include "base/sanitizer.h"
#if AIRLOCK_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "base/fs.h"
#include "isolation/child_plan.h"
#include "isolation/init_image.h"
#include "isolation/landlock.h"

namespace airlock::isolation {
namespace {

// A run's own namespaces; CLONE_NEWNET is added unless runs share the zygote's.
// The UTS namespace is the zygote's (its hostname is a run's, "sandbox"): a
// run's user namespace is a child of the one that owns it, so no capability
// of the run's reaches it (and seccomp refuses sethostname and setdomainname
// besides): one kernel object fewer to make and tear down per run.
constexpr int kCloneFlags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC;

// The first process's stack is the program's too (it is forked on it), and the
// program runs the interpreter there: as large as a main thread's default.
// Pages never touched cost nothing.
constexpr size_t kStackBytes = size_t{8} << 20;
constexpr size_t kGuardBytes = size_t{64} << 10;

// A sealed memfd holding the init program.
StatusOr<UniqueFd> InitProgramFd() {
  ASSIGN_OR_RETURN(UniqueFd fd, CreateExecMemfd("airlock-init", "the warm runs' init program"));
  RETURN_IF_ERROR(WriteAll(fd.get(), InitImage(), "the warm runs' init program"));
  RETURN_IF_ERROR(SealMemfd(fd.get(), "the warm runs' init program"));
  return fd;
}

// What a run's first process reads and writes while it shares the zygote's
// memory (the zygote waits in clone() until it has exec'd or exited).
struct FirstProcess {
  const internal::ChildPlan* plan;
  int lock_init = -1, lock_program = -1;  // the lock socket pair's ends (-1: no lock filter)
  int init_fd = -1;
  WarmRunFactory::ProgramMain program_main = nullptr;
  void* program_arg = nullptr;
  const char* stack_bottom = nullptr;  // the stack we run on (and the program after us)
  size_t stack_bytes = 0;
  uid_t owner_uid = 0;  // our effective ids: the run's kSandboxUid/Gid map to them
  gid_t owner_gid = 0;
  // Out, when it failed before its execve.
  volatile int step = 0;
  volatile int err = 0;
};

// The capabilities init keeps across its execve, in the run's user namespace
// alone (it created it): CAP_SYS_PTRACE for the lock supervisor's
// pidfd_getfd and kcmp on the program, CAP_KILL for the end of the run,
// CAP_SETPCAP for the processes it starts in a sandbox (spawn_service.h: each
// empties its bounding set and locks its securebits, as the program does),
// and CAP_SYS_ADMIN only until the run is in its cgroup: it then joins the
// program's cgroup namespace, which those processes get, and drops it
// (init_loop.cc).
int KeepInitCaps() {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &hdr, data) != 0) return errno;
  constexpr int kCaps[] = {CAP_SYS_PTRACE, CAP_KILL, CAP_SETPCAP, CAP_SYS_ADMIN};
  __u32 bits = 0;
  for (int cap : kCaps) bits |= 1u << cap;  // all below 32: data[0]
  data[0].inheritable = bits;
  data[1].inheritable = 0;
  if (::syscall(SYS_capset, &hdr, data) != 0) return errno;
  for (int cap : kCaps) {
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0) return errno;
  }
  return 0;
}

// Writes `text` to the /proc/self file `name` (no allocation). 0 or errno.
int WriteSelf(const char* name, const char* text) {
  int fd = ::open(name, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const size_t n = std::strlen(text);
  const ssize_t w = ::write(fd, text, n);
  const int err = w == static_cast<ssize_t>(n) ? 0 : (w < 0 ? errno : EIO);
  ::close(fd);
  return err;
}

int WriteIdMaps(uid_t uid, gid_t gid) {
  char line[64];
  if (int err = WriteSelf("/proc/self/setgroups", "deny")) return err;
  std::snprintf(line, sizeof line, "%u %u 1\n", static_cast<unsigned>(kSandboxUid), static_cast<unsigned>(uid));
  if (int err = WriteSelf("/proc/self/uid_map", line)) return err;
  std::snprintf(line, sizeof line, "%u %u 1\n", static_cast<unsigned>(kSandboxGid), static_cast<unsigned>(gid));
  return WriteSelf("/proc/self/gid_map", line);
}

// The run's first process, pid 1 of its namespaces, on the factory's stack and
// in the zygote's memory: system calls only. It forks the program (a copy of
// the zygote as it waits, so a consistent one), then becomes the init program.
[[noreturn]] int RunFirstProcess(void* raw) {
  FirstProcess& a = *static_cast<FirstProcess*>(raw);
  const internal::ChildPlan& plan = *a.plan;
  // The run's user namespace: its kSandboxUid is our effective uid (the run's
  // own host id, or the zygote's), nothing else. The unprivileged form (one
  // id, the namespace owner's; setgroups denied), written by us, its owner,
  // before anything else: once the init program has made itself not dumpable,
  // its /proc files are no longer ours to write.
  if (int err = WriteIdMaps(a.owner_uid, a.owner_gid)) {
    a.step = internal::kStepIdMaps;
    a.err = err;
    ::_exit(127);
  }
  pid_t program = internal::RawFork();
  if (program < 0) {
    a.step = internal::kStepFork;
    a.err = errno;
    ::_exit(127);
  }
  if (program == 0) {
#if AIRLOCK_ASAN
    // The program runs on this stack from here on (the zygote's main stack is
    // only a copy it never returns to): ASan is told, so that it does not take
    // its frames for a corrupt stack (and say so on the run's stderr).
    __sanitizer_start_switch_fiber(nullptr, a.stack_bottom, a.stack_bytes);
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    if (a.lock_init >= 0) ::close(a.lock_init);
    internal::RunWarmProgram(plan, a.lock_program);  // returns with every layer in force
    a.program_main(a.program_arg, plan.err_w);
    ::_exit(127);
  }
  // From here on a failure leaves the program waiting for a go that never
  // comes: our exit ends our pid namespace, and the program with it.
  auto fail = [&a](int step, int err) {
    a.step = step;
    a.err = err;
    ::_exit(127);
  };
  if (int err = KeepInitCaps()) fail(internal::kStepCaps, err);
  // fd 3: the status pipe; fd 4: init's end of the lock socket pair; every
  // other fd closes at the execve (the init program's own fd too, after use).
  const int status = ::fcntl(plan.status_w, F_DUPFD_CLOEXEC, 100);
  const int lock = a.lock_init >= 0 ? ::fcntl(a.lock_init, F_DUPFD_CLOEXEC, 100) : -1;
  const int image = ::fcntl(a.init_fd, F_DUPFD_CLOEXEC, 100);
  if (status < 0 || image < 0 || (a.lock_init >= 0 && lock < 0)) fail(internal::kStepFds, errno);
  if (::dup2(status, 3) < 0 || (lock >= 0 && ::dup2(lock, 4) < 0)) fail(internal::kStepFds, errno);
  if (::syscall(SYS_close_range, 0, 2, 0) != 0 ||
      ::syscall(SYS_close_range, lock >= 0 ? 5 : 4, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    fail(internal::kStepFds, errno);
  }
  // "/": the program's pivot_root then moves our root and directory too.
  if (::chdir("/") != 0) fail(internal::kStepChdir, errno);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the zygote's death ends the run
  // Its arguments go in the environment: /proc/1/cmdline is readable in the
  // run, /proc/1/environ is not (init is not dumpable).
  char program_env[48];
  std::snprintf(program_env, sizeof program_env, "AIRLOCK_INIT_PROGRAM=%ld", static_cast<long>(program));
  char workdir_env[sizeof "AIRLOCK_INIT_WORKDIR=" + 4096];
  std::snprintf(workdir_env, sizeof workdir_env, "AIRLOCK_INIT_WORKDIR=%s", plan.workdir.c_str());
  char empty[] = "";
  char* argv[] = {empty, nullptr};
  char* envp[] = {program_env, workdir_env, nullptr};
  ::syscall(SYS_execveat, image, "", argv, envp, AT_EMPTY_PATH);
  fail(internal::kStepExec, errno);
  ::_exit(127);
}

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

WarmRunFactory::~WarmRunFactory() {
  if (stack_ != nullptr) ::munmap(stack_, stack_bytes_);
}

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
  // The template our own root was built with (PlanMounts, for a zygote): each
  // run binds it instead of building its root (~45 mounts, ~25 directories,
  // ~10 symlinks and 160 KB of files per run).
  struct stat st;
  if (internal::RunTemplateFits(f->spec_) && ::stat(internal::kRunTemplate, &st) == 0 && S_ISDIR(st.st_mode)) {
    f->plan_->run_template = internal::kRunTemplate;
    f->plan_->ops = internal::PlanRunFromTemplate(f->spec_);
  }
  f->plan_->warm = true;
  f->plan_->own_uts = false;
  // The server puts every warm run in a cgroup before it goes on (kWarmGo).
  f->plan_->rlimits = internal::PlanRlimits(f->spec_.limits, /*have_cgroup=*/true);
  ASSIGN_OR_RETURN(f->init_fd_, InitProgramFd());
  f->stack_bytes_ = kStackBytes + kGuardBytes;
  void* stack = ::mmap(nullptr, f->stack_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stack == MAP_FAILED) return ErrnoError("mmap (a warm run's first stack)");
  f->stack_ = static_cast<char*>(stack);
  if (::mprotect(f->stack_ + kGuardBytes, kStackBytes, PROT_READ | PROT_WRITE) != 0) {
    return ErrnoError("mprotect (a warm run's first stack)");
  }
  return f;
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

// Our real and effective uid and gid become `id` (the namespace the next
// clone makes is then owned by it, and the init program it executes is not a
// set-user-ID transition, which would drop the capabilities init keeps);
// RestoreOwnIds() makes them ours again from the saved ids, which stay ours.
// Changing ids resets the pdeath signal and makes the process not dumpable (a
// run cloned so would inherit that, and its /proc files would be root's):
// both are set back.
Status BecomeOwner(uint32_t id) {
  if (::syscall(SYS_setresgid, id, id, -1) != 0) return ErrnoError("setresgid to a run's host id " + std::to_string(id));
  if (::syscall(SYS_setresuid, id, id, -1) != 0) {
    Status s = ErrnoError("setresuid to a run's host id " + std::to_string(id));
    gid_t r, e, saved;
    ::getresgid(&r, &e, &saved);
    ::syscall(SYS_setresgid, saved, saved, -1);
    return s;
  }
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  return Status::Ok();
}

void RestoreOwnIds() {
  // Our saved ids are the zygote's own: going back needs no capability.
  uid_t ru, eu, su;
  gid_t rg, eg, sg;
  if (::getresuid(&ru, &eu, &su) != 0 || ::getresgid(&rg, &eg, &sg) != 0 ||
      ::syscall(SYS_setresuid, su, su, -1) != 0 || ::syscall(SYS_setresgid, sg, sg, -1) != 0) {
    ::_exit(126);  // a zygote left as a run's id must not go on
  }
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
}

}  // namespace

StatusOr<pid_t> WarmRunFactory::Clone(const Fds& fds, ProgramMain program_main, void* arg, int64_t host_id) {
  internal::ChildPlan& plan = *plan_;
  plan.sync_r = fds.control;
  plan.err_w = fds.control;
  plan.status_w = fds.status_w;
  plan.stdout_w = fds.stdout_w;
  plan.stderr_w = fds.stderr_w;
  plan.extra_fd = fds.events_w;

  // The lock filter's listener goes from the program to init over this pair.
  int lock[2] = {-1, -1};
  if (plan.seccomp != nullptr && !plan.seccomp->lock_filter.empty() &&
      ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lock) != 0) {
    return ErrnoError("socketpair (a warm run's lock supervision)");
  }
  UniqueFd lock_init(lock[0]), lock_program(lock[1]);
  FirstProcess first;
  first.plan = &plan;
  first.lock_init = lock[0];
  first.lock_program = lock[1];
  first.init_fd = init_fd_.get();
  first.stack_bottom = stack_ + kGuardBytes;
  first.stack_bytes = kStackBytes;
  first.program_main = program_main;
  first.program_arg = arg;

  const bool own_id = host_id >= 0;
  if (own_id) RETURN_IF_ERROR(BecomeOwner(static_cast<uint32_t>(host_id)));
  first.owner_uid = ::geteuid();
  first.owner_gid = ::getegid();
  // CLONE_VFORK: we wait here until the first process has forked the program
  // and exec'd the init program (or exited), so nothing of ours changes while
  // it shares our memory, and the program is a copy of us as we are now.
  pid_t pid = ::clone(RunFirstProcess, stack_ + stack_bytes_, CLONE_VM | CLONE_VFORK | clone_flags_ | SIGCHLD, &first);
  if (pid < 0) {
    Status s = ErrnoError(shares_network() ? "clone(user, pid, mount, ipc namespaces) of a warm run"
                                           : "clone(user, pid, mount, net, ipc namespaces) of a warm run");
    if (own_id) RestoreOwnIds();
    return s;
  }
  if (first.err != 0) {
    int st;
    ::waitpid(pid, &st, __WALL);  // it has exited (its pid namespace, with the program, is gone)
    if (own_id) RestoreOwnIds();
    return Status(ErrorCode::kUnavailable,
                  std::string("a warm run's first process failed at step '") + internal::StepName(first.step) + "'",
                  first.err);
  }
  if (own_id) RestoreOwnIds();
  return pid;
}

}  // namespace airlock::isolation
