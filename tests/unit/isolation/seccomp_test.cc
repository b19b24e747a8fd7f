// The seccomp policy, installed for real in forked children: what must work
// (including CPython with numpy/pandas/matplotlib, threads, multiprocessing and
// subprocess), what must fail with EPERM, and what must kill (foreign ABIs).
#include "isolation/seccomp_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/helpers/host_abi.h"
#include "tests/helpers/must_work.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

namespace airlock::isolation {
namespace {

constexpr int kApplyFailed = 99;

struct ChildOutcome {
  int status = 0;
  std::string output;
  bool timed_out = false;
  bool Exited(int code) const { return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == code; }
  bool KilledBy(int sig) const { return !timed_out && WIFSIGNALED(status) && WTERMSIG(status) == sig; }
  std::string Describe() const {
    std::ostringstream s;
    if (timed_out) s << "timed out; ";
    if (WIFEXITED(status)) s << "exit " << WEXITSTATUS(status);
    if (WIFSIGNALED(status)) s << "signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status)) << ")";
    s << "; output:\n" << output;
    return s.str();
  }
};

// Forks; the child runs body(out) and _exits with what it returns. Whatever the
// child (and its descendants) write to `out` is collected until EOF.
ChildOutcome RunInChild(const std::function<int(int out)>& body, int timeout_s = 120) {
  ChildOutcome r;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    r.output = "pipe2 failed";
    r.timed_out = true;
    return r;
  }
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);  // the SIGSYS tests would dump core
    _exit(body(p[1]));
  }
  close(p[1]);
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  char buf[4096];
  for (;;) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long left_ms = timeout_s * 1000L - ((now.tv_sec - start.tv_sec) * 1000L + (now.tv_nsec - start.tv_nsec) / 1000000L);
    if (left_ms <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    struct pollfd pfd = {p[0], POLLIN, 0};
    int n = poll(&pfd, 1, static_cast<int>(left_ms));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    ssize_t got = read(p[0], buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    r.output.append(buf, got);
  }
  close(p[0]);
  waitpid(pid, &r.status, 0);
  return r;
}

// The launcher's order: no_new_privs, then the filter.
int EnterFilter(const SeccompProgram& prog, int out) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    dprintf(out, "PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
    return kApplyFailed;
  }
  if (int err = ApplySeccompInChild(prog)) {
    dprintf(out, "ApplySeccompInChild: %s\n", strerror(err));
    return kApplyFailed;
  }
  return 0;
}

// Child-side checks: count failures, describe them on `out`.
#define CHILD_EXPECT_ERRNO(call, want)                                                                  \
  do {                                                                                                  \
    errno = 0;                                                                                          \
    long rc_ = static_cast<long>(call);                                                                 \
    int e_ = errno;                                                                                     \
    if (rc_ != -1 || e_ != (want)) {                                                                    \
      dprintf(out, "%s:%d %s -> rc=%ld errno=%d (%s), want errno=%d\n", __FILE__, __LINE__, #call, rc_, \
              e_, strerror(e_), (want));                                                                \
      ++failures;                                                                                       \
    }                                                                                                   \
  } while (0)
#define CHILD_EXPECT_OK(call)                                                                            \
  do {                                                                                                   \
    errno = 0;                                                                                           \
    long rc_ = static_cast<long>(call);                                                                  \
    if (rc_ < 0) {                                                                                       \
      dprintf(out, "%s:%d %s -> rc=%ld errno=%d (%s), want success\n", __FILE__, __LINE__, #call, rc_, \
              errno, strerror(errno));                                                                   \
      ++failures;                                                                                        \
    }                                                                                                    \
  } while (0)

SeccompProgram Compile() {
  auto prog = CompileSeccompPolicy({});
  EXPECT_TRUE(prog.ok()) << prog.status().ToString();
  return prog.ok() ? prog.value() : SeccompProgram{};
}

long RawClone(unsigned long flags) {
  long pid = syscall(SYS_clone, flags, nullptr, nullptr, nullptr, 0UL);
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid(static_cast<pid_t>(pid), nullptr, __WALL);
  return pid;
}

using ::airlock::test::MustWork;

TEST(SeccompPolicyTest, CompilesToABoundedProgramWithArchAndX32Checks) {
  SeccompProgram prog = Compile();
  ASSERT_FALSE(prog.filter.empty());
  EXPECT_LE(prog.filter.size(), static_cast<size_t>(BPF_MAXINSNS));
  // It starts with the ioctl prologue, which loads the architecture first.
  EXPECT_EQ(prog.filter[0].code, BPF_LD | BPF_W | BPF_ABS);
  EXPECT_EQ(prog.filter[0].k, 4u);  // offsetof(seccomp_data, arch)
  // libseccomp's x86_64 arch check rejects x32 numbers: "jge 0x40000000".
  bool x32_check = false;
  bool kill_process = false;
  for (const sock_filter& i : prog.filter) {
    if (i.code == (BPF_JMP | BPF_JGE | BPF_K) && i.k == 0x40000000u) x32_check = true;
    if (i.code == (BPF_RET | BPF_K) && i.k == 0x80000000u) kill_process = true;  // SECCOMP_RET_KILL_PROCESS
  }
  EXPECT_TRUE(x32_check) << "no x32 check in the program: add one in seccomp_policy.cc";
  EXPECT_TRUE(kill_process);
}

TEST(SeccompPolicyTest, DescribesItself) {
  auto text = DescribeSeccompPolicy({});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("TIOCSTI"), std::string::npos);
  EXPECT_NE(text->find("KILL_PROCESS"), std::string::npos);
  EXPECT_NE(text->find("\"clone\""), std::string::npos);
}

TEST(SeccompPolicyTest, RefusedListNamesRealSyscalls) {
  auto refused = SeccompRefusedSyscalls();
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  std::map<std::string, int> by_name;
  for (const auto& s : *refused) by_name[s.name] = s.nr;
  EXPECT_EQ(by_name["ptrace"], SYS_ptrace);
  EXPECT_EQ(by_name["mount"], SYS_mount);
  EXPECT_EQ(by_name["io_uring_setup"], SYS_io_uring_setup);
  EXPECT_EQ(by_name["splice"], SYS_splice);
  EXPECT_GE(refused->size(), 60u);
}

TEST(SeccompPolicyTest, ApplyRejectsAnEmptyProgram) { EXPECT_EQ(ApplySeccompInChild(SeccompProgram{}), EINVAL); }

void* NoOpThread(void*) { return nullptr; }

TEST(SeccompPolicyTest, AllowedCallsWork) {
  SeccompProgram prog = Compile();
  ChildOutcome r = RunInChild([&](int out) {
    if (int rc = EnterFilter(prog, out)) return rc;
    int failures = 0;
    CHILD_EXPECT_OK(getpid());
    int p[2];
    CHILD_EXPECT_OK(pipe2(p, O_CLOEXEC));
    CHILD_EXPECT_OK(write(p[1], "x", 1));
    int avail = 0;
    CHILD_EXPECT_OK(ioctl(p[0], FIONREAD, &avail));  // ioctl in general stays allowed
    if (avail != 1) ++failures;
    CHILD_EXPECT_ERRNO(ioctl(p[0], TCGETS, nullptr), ENOTTY);  // reaches the kernel
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHILD_EXPECT_OK(fd);
    close(fd);
    int sv[2];
    CHILD_EXPECT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
    // fork(): glibc uses clone(SIGCHLD|...), no namespace flag.
    pid_t child = fork();
    if (child == 0) _exit(7);
    int st = 0;
    CHILD_EXPECT_OK(waitpid(child, &st, 0));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 7) {
      dprintf(out, "fork child status %d\n", st);
      ++failures;
    }
    // Threads: glibc tries clone3 (ENOSYS by policy) and falls back to clone.
    pthread_t t;
    int perr = pthread_create(&t, nullptr, NoOpThread, nullptr);
    if (perr != 0) {
      dprintf(out, "pthread_create: %s\n", strerror(perr));
      ++failures;
    } else {
      pthread_join(t, nullptr);
    }
    // The narrow forms of personality and mknod.
    CHILD_EXPECT_OK(syscall(SYS_personality, 0xffffffffUL));
    CHILD_EXPECT_OK(syscall(SYS_personality, static_cast<unsigned long>(PER_LINUX)));
    char dir[] = "/tmp/airlock-seccomp-test-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      ++failures;
    } else {
      std::string fifo = std::string(dir) + "/fifo";
      CHILD_EXPECT_OK(mkfifo(fifo.c_str(), 0600));
      unlink(fifo.c_str());
      rmdir(dir);
    }
    return failures;
  });
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
}

TEST(SeccompPolicyTest, RefusedCallsFailWithEperm) {
  SeccompProgram prog = Compile();
  ChildOutcome r = RunInChild([&](int out) {
    if (int rc = EnterFilter(prog, out)) return rc;
    int failures = 0;
    CHILD_EXPECT_ERRNO(socket(AF_INET, SOCK_STREAM, 0), EPERM);
    CHILD_EXPECT_ERRNO(socket(AF_INET6, SOCK_DGRAM, 0), EPERM);
    CHILD_EXPECT_ERRNO(socket(AF_NETLINK, SOCK_RAW, 0), EPERM);
    CHILD_EXPECT_ERRNO(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
    int sv[2];
    CHILD_EXPECT_ERRNO(socketpair(AF_INET, SOCK_STREAM, 0, sv), EPERM);
    CHILD_EXPECT_ERRNO(unshare(CLONE_NEWUSER), EPERM);
    CHILD_EXPECT_ERRNO(unshare(CLONE_FILES), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_mount, "none", "/nonexistent-airlock", "tmpfs", 0UL, nullptr), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, getppid(), nullptr, nullptr), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, nullptr, nullptr), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_bpf, 0xffff, nullptr, 0), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_io_uring_setup, 1, nullptr), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_keyctl, 0x7fffffff, 0, 0, 0, 0), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_splice, -1, nullptr, -1, nullptr, 1UL, 0U), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_setuid, 0), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_setresuid, -1, -1, -1), EPERM);  // a no-op, still refused
    // clone with any namespace flag; clone3 answers ENOSYS so libc falls back.
    const unsigned long kNs[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
                                 CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME};
    for (unsigned long ns : kNs) CHILD_EXPECT_ERRNO(RawClone(ns | SIGCHLD), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_clone3, nullptr, 0UL), ENOSYS);
    // Terminal injection, also with a high bit the kernel would drop.
    CHILD_EXPECT_ERRNO(syscall(SYS_ioctl, -1, static_cast<unsigned long>(TIOCSTI), "x"), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_ioctl, -1, (1UL << 32) | TIOCSTI, "x"), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_ioctl, -1, static_cast<unsigned long>(TIOCLINUX), "x"), EPERM);
    // AF_INET with a high bit is still AF_INET to the kernel, so still refused.
    CHILD_EXPECT_ERRNO(syscall(SYS_socket, (1UL << 32) | AF_INET, SOCK_STREAM, 0), EPERM);
    // personality: only the query and PER_LINUX.
    CHILD_EXPECT_ERRNO(syscall(SYS_personality, static_cast<unsigned long>(PER_LINUX32)), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_personality, static_cast<unsigned long>(READ_IMPLIES_EXEC)), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_personality, static_cast<unsigned long>(ADDR_NO_RANDOMIZE)), EPERM);
    // mknod: device nodes and regular files refused (only FIFOs pass).
    CHILD_EXPECT_ERRNO(mknod("/tmp/airlock-seccomp-never", S_IFCHR | 0600, makedev(1, 3)), EPERM);
    CHILD_EXPECT_ERRNO(mknod("/tmp/airlock-seccomp-never", S_IFREG | 0600, 0), EPERM);
    CHILD_EXPECT_ERRNO(syscall(SYS_sync), EPERM);
    return failures;
  });
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
}

// Every syscall on the documented refused list, with all arguments -1 (invalid
// descriptors, pointers, flags: harmless even if the filter let one through).
TEST(SeccompPolicyTest, EveryRefusedSyscallFailsWithEperm) {
  SeccompProgram prog = Compile();
  auto refused = SeccompRefusedSyscalls();
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  ChildOutcome r = RunInChild([&](int out) {
    setsid();  // no controlling terminal: vhangup could hang nothing up
    if (int rc = EnterFilter(prog, out)) return rc;
    int failures = 0;
    for (const SyscallName& s : *refused) {
      if (s.name == "personality") continue;  // -1 is the allowed query
      errno = 0;
      long rc = syscall(s.nr, -1L, -1L, -1L, -1L, -1L, -1L);
      if (rc != -1 || errno != EPERM) {
        dprintf(out, "%s (%d): rc=%ld errno=%d (%s), want EPERM\n", s.name.c_str(), s.nr, rc, errno,
                strerror(errno));
        ++failures;
      }
    }
    return failures;
  });
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
}

TEST(SeccompPolicyTest, X32SyscallKillsTheProcess) {
  // Without the filter this kernel answers ENOSYS (or runs it, with x32 built in):
  // the death below is the filter's doing.
  ChildOutcome bare = RunInChild([](int) { return syscall(0x40000000L | SYS_getpid) == getpid() ? 0 : 1; });
  EXPECT_TRUE(bare.Exited(0) || bare.Exited(1)) << bare.Describe();

  SeccompProgram prog = Compile();
  ChildOutcome r = RunInChild([&](int out) {
    if (int rc = EnterFilter(prog, out)) return rc;
    syscall(0x40000000L | SYS_getpid);
    dprintf(out, "x32 getpid returned instead of killing\n");
    return 1;
  });
  EXPECT_TRUE(r.KilledBy(SIGSYS)) << r.Describe();
}

TEST(SeccompPolicyTest, I386SyscallKillsTheProcess) {
  SeccompProgram prog = Compile();
  auto i386_getpid = []() {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "0"(20L) : "memory", "r8", "r9", "r10", "r11");
    return ret;
  };
  // The host first, unfiltered: some hypervisors do not deliver `int $0x80`
  // at all, and the kernel then kills any 64-bit process with SIGSEGV before
  // seccomp sees the call. Under the filter the call must then die the same
  // way; where the host runs it, the filter must kill it (SIGSYS).
  ChildOutcome host = RunInChild([&](int out) {
    dprintf(out, "host: i386 getpid returned %ld\n", i386_getpid());
    return 0;
  });
  ASSERT_TRUE(host.Exited(0) || WIFSIGNALED(host.status)) << host.Describe();
  int expected = host.Exited(0) ? SIGSYS : WTERMSIG(host.status);
  std::cout << "[ host    ] int $0x80 outside the filter: " << host.Describe() << "; expecting signal " << expected
            << " under it\n";
  ChildOutcome r = RunInChild([&](int out) {
    if (int rc = EnterFilter(prog, out)) return rc;
    dprintf(out, "i386 getpid returned %ld instead of killing\n", i386_getpid());
    return 1;
  });
  EXPECT_TRUE(r.KilledBy(expected)) << r.Describe();
}

// ---- Real programs under the filter ----

// Runs argv with stdout+stderr captured, optionally under the filter.
ChildOutcome Exec(const std::vector<std::string>& argv, const SeccompProgram* prog,
                  const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) env_storage.push_back(*e);
  for (const auto& e : extra_env) env_storage.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = argv;
  std::vector<char*> args;
  for (auto& a : argv_storage) args.push_back(a.data());
  args.push_back(nullptr);
  return RunInChild([&](int out) {
    if (dup2(out, 1) < 0 || dup2(out, 2) < 0) return 98;
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (prog) {
      if (int rc = EnterFilter(*prog, out)) return rc;
    }
    execve(args[0], args.data(), envp.data());
    dprintf(out, "execve %s: %s\n", args[0], strerror(errno));
    return 127;
  });
}

class SeccompPythonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPython, X_OK) != 0) {
      if (MustWork()) FAIL() << kPython << " is missing";
      GTEST_SKIP() << kPython << " is missing";
    }
    char dir[] = "/tmp/airlock-seccomp-mpl-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    mpl_dir_ = dir;
  }
  void TearDown() override {
    if (!mpl_dir_.empty()) {
      std::string cmd = "rm -rf '" + mpl_dir_ + "'";
      (void)!system(cmd.c_str());
    }
  }
  // Runs the script bare first: a failure there is the host's (a missing module),
  // not the filter's, and skips (fails under AIRLOCK_MUST_WORK).
  ChildOutcome RunPython(const std::string& script) {
    std::vector<std::string> argv = {kPython, "-c", script};
    std::vector<std::string> env = {"MPLCONFIGDIR=" + mpl_dir_, "PYTHONDONTWRITEBYTECODE=1"};
    ChildOutcome bare = Exec(argv, nullptr, env);
    if (!bare.Exited(0)) {
      if (MustWork()) ADD_FAILURE() << "the script fails even without seccomp: " << bare.Describe();
      skipped_ = true;
      skip_reason_ = "the script fails even without seccomp (missing module?): " + bare.Describe();
      return bare;
    }
    SeccompProgram prog = Compile();
    return Exec(argv, &prog, env);
  }
  static constexpr const char* kPython = "/usr/bin/python3";
  std::string mpl_dir_;
  bool skipped_ = false;
  std::string skip_reason_;
};

TEST_F(SeccompPythonTest, DataStackThreadsMultiprocessingSubprocess) {
  const std::string script = R"PY(
import numpy, pandas, threading, multiprocessing, subprocess, json
a = numpy.arange(12).reshape(3, 4)
df = pandas.DataFrame(a, columns=list("abcd"))
seen = []
t = threading.Thread(target=lambda: seen.append(int(df["c"].sum())))
t.start(); t.join()
print(json.dumps({"sum": int(a.sum()), "mean_b": float(df["b"].mean()), "thread": seen[0]}))
with multiprocessing.Pool(2) as p:
    print(sum(p.map(abs, range(10))))
print(subprocess.run(['/bin/sh', '-c', 'echo hi'], capture_output=True).stdout)
)PY";
  ChildOutcome r = RunPython(script);
  if (skipped_) GTEST_SKIP() << skip_reason_;
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_NE(r.output.find("{\"sum\": 66, \"mean_b\": 5.0, \"thread\": 18}"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n45\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("b'hi\\n'"), std::string::npos) << r.output;
}

TEST_F(SeccompPythonTest, MatplotlibAggSavefig) {
  const std::string script = R"PY(
import io, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [1, 4, 9])
buf = io.BytesIO()
fig.savefig(buf, format="png")
data = buf.getvalue()
print("png", data[:8] == b"\x89PNG\r\n\x1a\n", len(data) > 1000)
)PY";
  ChildOutcome r = RunPython(script);
  if (skipped_) GTEST_SKIP() << skip_reason_;
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_NE(r.output.find("png True True"), std::string::npos) << r.output;
}

TEST_F(SeccompPythonTest, InetSocketsRaisePermissionErrorUnixSocketsWork) {
  const std::string script = R"PY(
import socket
a, b = socket.socketpair()
a.sendall(b"ping"); print("pair", b.recv(4))
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    print("inet allowed")
except PermissionError as e:
    print("inet refused", e.errno)
)PY";
  ChildOutcome r = RunPython(script);
  if (skipped_) GTEST_SKIP() << skip_reason_;
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_NE(r.output.find("pair b'ping'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("inet refused 1"), std::string::npos) << r.output;
}

// ---- tests/helpers/try_syscall under the filter ----

class TrySyscallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    helper_ = FindHelper();
    if (helper_.empty()) {
      if (MustWork()) FAIL() << "try_syscall not found (set AIRLOCK_HELPERS_DIR or build the try_syscall target)";
      GTEST_SKIP() << "try_syscall not found (set AIRLOCK_HELPERS_DIR or build the try_syscall target)";
    }
  }
  // $AIRLOCK_HELPERS_DIR, else the build tree's layout: this binary lives in
  // <build>/tests/unit/isolation, the helper in <build>/tests/helpers.
  static std::string FindHelper() {
    std::vector<std::string> candidates;
    if (const char* dir = getenv("AIRLOCK_HELPERS_DIR")) candidates.push_back(std::string(dir) + "/try_syscall");
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
      std::string self(exe, n);
      std::string dir = self.substr(0, self.rfind('/'));
      candidates.push_back(dir + "/../../helpers/try_syscall");
      candidates.push_back(dir + "/try_syscall");
    }
    for (const auto& c : candidates) {
      if (access(c.c_str(), X_OK) == 0) return c;
    }
    return "";
  }
  // name -> "ok" / "errno=N"
  static std::map<std::string, std::string> Parse(const std::string& output) {
    std::map<std::string, std::string> m;
    std::istringstream in(output);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string name, result;
      words >> name >> result;
      m[name] = result;
    }
    return m;
  }
  std::string helper_;
};

TEST_F(TrySyscallTest, RefusedUnderTheFilter) {
  const std::vector<std::string> eperm = {
      "ptrace", "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "keyctl", "add_key",
      "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "kexec_load",
      "kexec_file_load", "init_module", "finit_module", "delete_module", "open_by_handle_at",
      "name_to_handle_at", "reboot", "swapon", "swapoff", "syslog", "acct", "clone_newuser",
      "clone_newns", "clone_newnet", "socket_inet", "socket_inet6", "socket_udp", "socket_inet_hi",
      "socket_netlink", "socket_packet", "socket_alg", "socket_vsock", "socketpair_inet", "splice",
      "vmsplice", "tee", "process_vm_readv", "setuid", "personality", "iopl", "ioperm", "modify_ldt",
      "fanotify_init", "mknod", "tiocsti", "tiocsti_hi", "tioclinux", "pidfd_getfd", "sethostname",
      "settimeofday"};
  const std::vector<std::string> ok = {"socket_unix", "getpid", "fork", "mkfifo"};
  std::vector<std::string> argv = {helper_};
  argv.insert(argv.end(), eperm.begin(), eperm.end());
  argv.insert(argv.end(), ok.begin(), ok.end());
  argv.push_back("clone3");
  SeccompProgram prog = Compile();
  ChildOutcome r = Exec(argv, &prog);
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  auto results = Parse(r.output);
  for (const auto& name : eperm) EXPECT_EQ(results[name], "errno=1") << name << "\n" << r.output;
  for (const auto& name : ok) EXPECT_EQ(results[name], "ok") << name << "\n" << r.output;
  EXPECT_EQ(results["clone3"], "errno=38") << r.output;  // ENOSYS: glibc falls back to clone
}

// No foreign-ABI call executes under the filter: SIGSYS where the host would
// run it, the host's own refusal where it would not (host_abi.h).
TEST_F(TrySyscallTest, ForeignAbisAreKilled) {
  SeccompProgram prog = Compile();
  for (const char* abi : {"x32_getpid", "i386_getpid"}) {
    airlock::test::HostAbiOutcome host = airlock::test::ProbeAbiOnHost(helper_, abi);
    ASSERT_FALSE(host.probe_failed) << abi << ": " << host.Describe();
    std::cout << "[ host    ] " << abi << ": " << host.Describe() << "\n";
    ChildOutcome r = Exec({helper_, abi}, &prog);
    EXPECT_TRUE(r.KilledBy(host.ExpectedSignalInSandbox())) << abi << " (" << host.Describe() << "): " << r.Describe();
  }
}

// Without the filter the same calls fail differently (or work): the EPERMs above
// are the filter's.
TEST_F(TrySyscallTest, WithoutTheFilterTheErrorsDiffer) {
  ChildOutcome r = Exec({helper_, "setns", "tiocsti", "tiocsti_hi", "socket_unix", "splice", "x32_getpid"}, nullptr);
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  auto results = Parse(r.output);
  EXPECT_EQ(results["setns"], "errno=9") << r.output;  // EBADF
  EXPECT_EQ(results["tiocsti"], "errno=9") << r.output;
  EXPECT_EQ(results["tiocsti_hi"], "errno=9") << r.output;
  EXPECT_EQ(results["splice"], "errno=9") << r.output;
  EXPECT_EQ(results["socket_unix"], "ok") << r.output;
  EXPECT_NE(results["x32_getpid"], "") << r.output;  // answered (ENOSYS or ok), not killed
}

}  // namespace
}  // namespace airlock::isolation
