#include "isolation/seccomp_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <string_view>

#include "base/unique_fd.h"
#include "isolation/restrict.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

namespace airlock::isolation {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the ioctl prologue reads the low half of a 64-bit argument at its first byte");

// Everything an interpreter (CPython 3.11 with numpy/pandas/matplotlib, threads,
// multiprocessing with fork and /dev/shm semaphores, subprocess) and /bin/sh need.
// The arguments of these calls are not inspected: the other layers (namespaces,
// Landlock, no capabilities, limits) bound what they can reach.
constexpr const char* kAllowed[] = {
    // Memory.
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync",
    "pkey_alloc", "pkey_free", "pkey_mprotect", "get_mempolicy", "membarrier",
    // Reading and writing descriptors.
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
    "preadv2", "pwritev2", "lseek", "sendfile", "copy_file_range",
    // Opening, closing, duplicating, locking, syncing (fsync on tmpfs is free; sync(2),
    // which flushes every filesystem of the host, is not here).
    "open", "openat", "openat2", "creat", "close", "close_range", "dup", "dup2", "dup3",
    "fcntl", "flock", "fsync", "fdatasync", "truncate", "ftruncate", "fallocate",
    "fadvise64", "readahead", "memfd_create",
    // Metadata and directories. xattrs: shutil.copy2 copies them and treats only
    // ENOTSUP/ENODATA/EINVAL as "no xattrs", so EPERM would break it.
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access",
    "faccessat", "faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
    "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat",
    "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod",
    "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask",
    "utime", "utimes", "utimensat", "futimesat", "getxattr", "lgetxattr", "fgetxattr",
    "listxattr", "llistxattr", "flistxattr", "setxattr", "lsetxattr", "fsetxattr",
    "removexattr", "lremovexattr", "fremovexattr",
    // Pipes, polling, event descriptors.
    "pipe", "pipe2", "select", "pselect6", "poll", "ppoll", "epoll_create",
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd",
    "eventfd2", "signalfd", "signalfd4", "timerfd_create", "timerfd_settime",
    "timerfd_gettime",
    // Signals. kill and friends reach only the run's own pid namespace.
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_sigpending", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "pause", "kill",
    "tkill", "tgkill", "pidfd_open", "pidfd_send_signal", "restart_syscall",
    // Time and timers.
    "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time",
    "getitimer", "setitimer", "alarm", "timer_create", "timer_settime", "timer_gettime",
    "timer_getoverrun", "timer_delete",
    // Processes and threads (clone is filtered below).
    "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
    "getpid", "getppid", "gettid", "getpgrp", "getpgid", "setpgid", "getsid", "setsid",
    "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "arch_prctl",
    "futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue", "capget",
    // prctl: every option that could widen anything needs a capability the run does not
    // have (PR_SET_MM needs CAP_SYS_RESOURCE, raising ambient caps needs them permitted),
    // and PR_SET_SECCOMP / PR_SET_NO_NEW_PRIVS only narrow. Python uses PR_SET_NAME,
    // PR_SET_PDEATHSIG, PR_GET_DUMPABLE...
    "prctl",
    // Credentials: reading only (the set* calls are refused below).
    "getuid", "getgid", "geteuid", "getegid", "getresuid", "getresgid", "getgroups",
    // Scheduling and resources. Raising priority or hard limits needs capabilities.
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
    "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
    "sched_rr_get_interval", "sched_getattr", "getcpu", "getpriority", "setpriority",
    "getrlimit", "setrlimit", "prlimit64", "getrusage", "times", "sysinfo", "uname",
    "getrandom",
    // Sockets (socket/socketpair are filtered to AF_UNIX below, so these only ever see
    // unix sockets).
    "connect", "accept", "accept4", "bind", "listen", "sendto", "recvfrom", "sendmsg",
    "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "getsockname", "getpeername",
    "setsockopt", "getsockopt",
    // System V and POSIX IPC: the run has its own IPC namespace.
    "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semctl", "semtimedop",
    "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
    "mq_timedreceive", "mq_notify", "mq_getsetattr",
    // Restricting oneself further (a stacked filter or ruleset can only take away).
    "seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
};

// Refused on purpose. The default action refuses them already (EPERM), and
// libseccomp will not even accept a rule whose action equals the default, so this
// list is documentation that CompileSeccompPolicy checks: none of these may be
// allowed above, every name must be a real system call, and the tests call each one.
constexpr const char* kRefused[] = {
    // Debugging other processes and reading their memory.
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    // Mounts, roots and namespaces: the sandbox's own shape must stay as built.
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    // Kernel attack surface with a long CVE history and no use for an interpreter.
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init",
    // inotify instances are charged per user up to the namespace's owner on the
    // host (root): a run could exhaust the host's limit. CPython never needs them.
    "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
    "lookup_dcookie", "open_by_handle_at", "name_to_handle_at",
    // Page-cache writes through pipes ("Dirty Pipe"/"Copy Fail" family).
    "vmsplice", "splice", "tee",
    // The machine: kernels, modules, power, swap, accounting, quotas, log, clocks, ports.
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
    "modify_ldt", "sethostname", "setdomainname", "vhangup", "uselib",
    // NUMA placement of memory (get_mempolicy, a query, is allowed).
    "mbind", "set_mempolicy", "set_mempolicy_home_node", "migrate_pages", "move_pages",
    "process_madvise", "process_mrelease",
    // Identity changes.
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
    "setfsuid", "setfsgid",
    // Kept only in narrow forms by the conditional rules below.
    "personality", "mknod", "mknodat",
};

// Every namespace flag. A clone() with any of them fails with EPERM. CLONE_NEWTIME
// (0x80) shares its bit with the exit-signal byte of clone(); no valid signal has
// that bit, so masking it refuses nothing real.
constexpr uint64_t kCloneNamespaceFlags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |
                                          CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
                                          CLONE_NEWNET | CLONE_NEWTIME;

// Many syscalls take 32-bit ints (socket's domain, ioctl's cmd, personality's
// persona) and the kernel ignores the upper half of the register, so a comparison
// must only look at the low 32 bits, or a caller sets a high bit and walks past an
// equality test (flatpak's CVE-2019-10063 did exactly that with TIOCSTI).
constexpr uint64_t kLow32 = 0xffffffffULL;

// ioctl requests refused although ioctl is allowed: pushing bytes into a
// terminal's input queue (TIOCSTI) and the Linux console's multiplexer
// (TIOCLINUX, which can also inject via selection paste).
constexpr uint32_t kRefusedIoctls[] = {TIOCSTI, TIOCLINUX};

Status SeccompError(const std::string& what, int rc) {
  return Status(ErrorCode::kInternal, "libseccomp: " + what, -rc);
}

using FilterCtx = std::unique_ptr<void, decltype(&seccomp_release)>;

StatusOr<int> Resolve(const char* name) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR || nr < 0) {
    return Internal(std::string("seccomp policy: libseccomp does not know the system call '") + name +
                    "' on this architecture; fix the name in src/isolation/seccomp_policy.cc");
  }
  return nr;
}

Status AddRule(scmp_filter_ctx ctx, uint32_t action, const char* name, int nr,
               std::initializer_list<scmp_arg_cmp> args) {
  int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(args.size()),
                                  args.size() ? args.begin() : nullptr);
  if (rc < 0) return SeccompError(std::string("adding the rule for ") + name, rc);
  return Status::Ok();
}

StatusOr<FilterCtx> BuildContext() {
  if (seccomp_arch_native() != SCMP_ARCH_X86_64) {
    return Unavailable("seccomp policy: only x86_64 is supported (the allowlist uses its syscall names "
                       "and the ioctl prologue its numbers)");
  }
  FilterCtx ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)), &seccomp_release);
  if (!ctx) return Internal("libseccomp: seccomp_init failed (out of memory?)");
  // Any syscall of another ABI (i386 int $0x80; x32 numbers, which libseccomp
  // rejects in its x86_64 arch check) kills the process: it is never legitimate here.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc < 0) {
    return SeccompError("setting the bad-architecture action", rc);
  }
  // Only affects seccomp_load(), which we never call: the child sets no_new_privs
  // itself and installs the exported program with seccomp(2).
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0); rc < 0) {
    return SeccompError("clearing the NNP attribute", rc);
  }
  // A binary search over syscall numbers instead of a linear chain: ~8 comparisons
  // per syscall instead of up to ~250.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0) {
    return SeccompError("enabling the binary-tree optimization", rc);
  }

  std::set<std::string_view> allowed;
  for (const char* name : kAllowed) {
    if (!allowed.insert(name).second) {
      return Internal(std::string("seccomp policy: '") + name + "' is listed twice in kAllowed");
    }
    ASSIGN_OR_RETURN(int nr, Resolve(name));
    RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ALLOW, name, nr, {}));
  }
  for (const char* name : kRefused) {
    if (allowed.count(name)) {
      return Internal(std::string("seccomp policy: '") + name + "' is both allowed and refused");
    }
    RETURN_IF_ERROR(Resolve(name).status());
  }
  // An unconditional ALLOW makes libseccomp drop every conditional rule of the same
  // call without a word, so these must stay out of kAllowed.
  for (const char* name : {"clone", "clone3", "socket", "socketpair", "ioctl", "personality", "mknod", "mknodat"}) {
    if (allowed.count(name)) {
      return Internal(std::string("seccomp policy: '") + name +
                      "' has argument rules below and must not be in kAllowed");
    }
  }

  // clone(): threads, fork, vfork and posix_spawn, but never a new namespace.
  RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ALLOW, "clone", SCMP_SYS(clone),
                          {SCMP_A0(SCMP_CMP_MASKED_EQ, kCloneNamespaceFlags, 0)}));
  // clone3() passes its flags in a struct seccomp cannot read. ENOSYS makes glibc
  // (pthread_create, posix_spawn) fall back to clone(), which is filtered above.
  RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), "clone3", SCMP_SYS(clone3), {}));
  // Unix sockets only. Other domains fail with EPERM like every other refusal, so
  // Python raises PermissionError ("Operation not permitted"), not a misleading
  // "address family not supported" that code may take for a missing IPv6 and retry.
  RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ALLOW, "socket", SCMP_SYS(socket),
                          {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, AF_UNIX)}));
  RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ALLOW, "socketpair", SCMP_SYS(socketpair),
                          {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, AF_UNIX)}));
  // ioctl: allowed here; TIOCSTI/TIOCLINUX are refused by the prologue that
  // CompileSeccompPolicy puts in front of this program (libseccomp cannot express
  // "allow except" on one argument: an unconditional rule swallows conditional ones).
  RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ALLOW, "ioctl", SCMP_SYS(ioctl), {}));
  // personality(): the query (0xffffffff, used by some libcs and tools) and plain
  // PER_LINUX; not READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE and other weakenings.
  RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ALLOW, "personality", SCMP_SYS(personality),
                          {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, 0xffffffffULL)}));
  RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ALLOW, "personality", SCMP_SYS(personality),
                          {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, PER_LINUX)}));
  // mknod(): FIFOs only (os.mkfifo); device nodes, sockets and files are refused.
  // mode is a 16-bit umode_t in the kernel and S_IFMT lies within those bits.
  RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ALLOW, "mknod", SCMP_SYS(mknod),
                          {SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFIFO)}));
  RETURN_IF_ERROR(AddRule(ctx.get(), SCMP_ACT_ALLOW, "mknodat", SCMP_SYS(mknodat),
                          {SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFIFO)}));
  return ctx;
}

// Hand-written BPF run before libseccomp's program: refuses the ioctl requests in
// kRefusedIoctls by the low 32 bits of the request, whatever the upper half holds.
// It either returns ERRNO(EPERM) or falls through to the first instruction of
// libseccomp's program, which starts by loading the architecture itself; classic
// BPF jumps are relative, so libseccomp's program works unchanged behind it.
std::vector<sock_filter> IoctlPrologue() {
  constexpr uint32_t kArgLow = offsetof(struct seccomp_data, args) + 1 * sizeof(uint64_t);
  constexpr uint8_t kCount = sizeof(kRefusedIoctls) / sizeof(kRefusedIoctls[0]);
  // Layout: 0 ld arch; 1 jne x86_64 -> past; 2 ld nr; 3 jne ioctl -> past; 4 ld arg1.lo;
  // 5.. one jeq per request -> deny; deny: ret ERRNO(EPERM); past: libseccomp.
  const uint8_t deny = 5 + kCount;  // index of the RET
  const uint8_t past = deny + 1;
  std::vector<sock_filter> p;
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, past - 2));
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, past - 4));
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArgLow));
  for (uint8_t i = 0; i < kCount; ++i) {
    const uint8_t at = 5 + i;
    const uint8_t jt = static_cast<uint8_t>(deny - at - 1);
    const uint8_t jf = (i + 1 == kCount) ? static_cast<uint8_t>(past - at - 1) : 0;
    p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kRefusedIoctls[i], jt, jf));
  }
  p.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)));
  return p;
}

// The lock filter (see SeccompProgram::lock_filter). Layout: 0 ld arch; 1 jne
// x86_64 -> allow; 2 ld nr; 3 jeq flock -> notify; 4 jne fcntl -> allow; 5 ld
// arg1.lo; 6 jeq F_NOTIFY -> deny; 7.. one jeq per lock command -> notify;
// allow; notify; deny. Another ABI is allowed here and killed by the main filter.
std::vector<sock_filter> LockFilter() {
  constexpr uint32_t kArgLow = offsetof(struct seccomp_data, args) + 1 * sizeof(uint64_t);
  constexpr uint32_t kLockCommands[] = {F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW};
  constexpr uint8_t kCount = sizeof(kLockCommands) / sizeof(kLockCommands[0]);
  const uint8_t allow = 7 + kCount, notify = allow + 1, deny = allow + 2;
  auto rel = [](uint8_t target, uint8_t at) { return static_cast<uint8_t>(target - at - 1); };
  std::vector<sock_filter> p;
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, rel(allow, 1)));
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_flock, rel(notify, 3), 0));
  p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fcntl, 0, rel(allow, 4)));
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArgLow));
  p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, F_NOTIFY, rel(deny, 6), 0));
  for (uint8_t i = 0; i < kCount; ++i) {
    const uint8_t at = 7 + i;
    p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kLockCommands[i], rel(notify, at),
                         i + 1 == kCount ? rel(allow, at) : uint8_t{0}));
  }
  p.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  p.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF));
  p.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)));
  return p;
}

}  // namespace

StatusOr<SeccompProgram> CompileSeccompPolicy(const SeccompOptions& /*options*/) {
  ASSIGN_OR_RETURN(FilterCtx ctx, BuildContext());

  // libseccomp 2.5 exports only to a file descriptor.
  UniqueFd fd(memfd_create("airlock-seccomp", MFD_CLOEXEC));
  if (!fd) return ErrnoError("memfd_create for the seccomp export");
  if (int rc = seccomp_export_bpf(ctx.get(), fd.get()); rc < 0) return SeccompError("exporting BPF", rc);
  off_t size = lseek(fd.get(), 0, SEEK_END);
  if (size < 0) return ErrnoError("lseek on the seccomp export");
  if (size == 0 || size % sizeof(sock_filter) != 0) {
    return Internal("libseccomp exported " + std::to_string(size) +
                    " bytes, not a whole number of BPF instructions");
  }

  SeccompProgram program;
  program.lock_filter = LockFilter();
  program.filter = IoctlPrologue();
  const size_t prologue = program.filter.size();
  program.filter.resize(prologue + size / sizeof(sock_filter));
  char* dst = reinterpret_cast<char*>(program.filter.data() + prologue);
  for (off_t done = 0; done < size;) {
    ssize_t n = pread(fd.get(), dst + done, size - done, done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("reading back the seccomp export", n == 0 ? EIO : errno);
    done += n;
  }
  // The prologue relies on libseccomp's program not depending on the accumulator's
  // initial value: it must begin by loading the architecture.
  const sock_filter& first = program.filter[prologue];
  if (first.code != (BPF_LD | BPF_W | BPF_ABS) || first.k != offsetof(struct seccomp_data, arch)) {
    return Internal("libseccomp's program does not start by loading the architecture; "
                    "the ioctl prologue in seccomp_policy.cc needs revisiting for this libseccomp");
  }
  if (program.filter.size() > BPF_MAXINSNS) {
    return Internal("seccomp program has " + std::to_string(program.filter.size()) +
                    " instructions, more than the kernel's " + std::to_string(BPF_MAXINSNS));
  }
  return program;
}

int ApplySeccompInChild(const SeccompProgram& program) {
  internal::RestrictPlan r{};
  r.filter = program.filter.data();
  r.filter_len = program.filter.size();
  return internal::ApplySeccomp(r);
}

StatusOr<std::string> DescribeSeccompPolicy(const SeccompOptions& /*options*/) {
  ASSIGN_OR_RETURN(FilterCtx ctx, BuildContext());
  UniqueFd fd(memfd_create("airlock-seccomp-pfc", MFD_CLOEXEC));
  if (!fd) return ErrnoError("memfd_create for the seccomp description");
  if (int rc = seccomp_export_pfc(ctx.get(), fd.get()); rc < 0) return SeccompError("exporting PFC", rc);
  std::string text =
      "# before this program: ioctl (x86_64) with the low 32 bits of arg1 equal to TIOCSTI (0x5412)\n"
      "# or TIOCLINUX (0x541c) -> ERRNO(1)\n"
      "# a filter installed before this one: flock and fcntl F_GETLK/F_SETLK/F_SETLKW/F_OFD_GETLK/\n"
      "# F_OFD_SETLK/F_OFD_SETLKW -> USER_NOTIF (answered by the run's init), fcntl F_NOTIFY -> ERRNO(1)\n";
  char buf[4096];
  for (off_t off = 0;;) {
    ssize_t n = pread(fd.get(), buf, sizeof(buf), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("reading back the seccomp description");
    if (n == 0) break;
    text.append(buf, n);
    off += n;
  }
  return text;
}

StatusOr<std::vector<SyscallName>> SeccompRefusedSyscalls() {
  std::vector<SyscallName> out;
  for (const char* name : kRefused) {
    ASSIGN_OR_RETURN(int nr, Resolve(name));
    out.push_back({name, nr});
  }
  return out;
}

}  // namespace airlock::isolation
