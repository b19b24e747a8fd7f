// Landlock: the plan's masks per ABI (pure), and the ruleset applied for real in
// forked children: filesystem, TCP and scopes.
#include "isolation/landlock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "isolation/seccomp_policy.h"
#include "tests/helpers/must_work.h"

namespace airlock::isolation {
namespace {

// Kernel UAPI values (Debian 12's header lacks the newer ones).
constexpr unsigned long long kExecute = 1ULL << 0, kWriteFile = 1ULL << 1, kReadFile = 1ULL << 2,
                             kReadDir = 1ULL << 3, kRefer = 1ULL << 13, kTruncate = 1ULL << 14,
                             kIoctlDev = 1ULL << 15;
constexpr unsigned long long kAbi1Fs = (1ULL << 13) - 1;  // EXECUTE .. MAKE_SYM

struct ChildOutcome {
  int status = 0;
  std::string output;
  bool timed_out = false;
  bool Exited(int code) const { return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == code; }
  std::string Describe() const {
    std::ostringstream s;
    if (timed_out) s << "timed out; ";
    if (WIFEXITED(status)) s << "exit " << WEXITSTATUS(status);
    if (WIFSIGNALED(status)) s << "signal " << WTERMSIG(status);
    s << "; output:\n" << output;
    return s.str();
  }
};

// Forks; the child runs body(out) and _exits with its result; collects `out`.
ChildOutcome RunInChild(const std::function<int(int out)>& body, int timeout_s = 60) {
  ChildOutcome r;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    r.timed_out = true;
    return r;
  }
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    _exit(body(p[1]));
  }
  close(p[1]);
  struct pollfd pfd = {p[0], POLLIN, 0};
  char buf[4096];
  for (;;) {
    int n = poll(&pfd, 1, timeout_s * 1000);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    ssize_t got = read(p[0], buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    r.output.append(buf, got);
  }
  close(p[0]);
  waitpid(pid, &r.status, 0);
  return r;
}

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

constexpr int kApplyFailed = 99;

int Apply(const LandlockPlan& plan, int out) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return kApplyFailed;
  if (int err = ApplyLandlockInChild(plan)) {
    dprintf(out, "ApplyLandlockInChild: %s\n", strerror(err));
    return kApplyFailed;
  }
  return 0;
}

// open()+close(); returns the fd or -1 with errno.
int OpenClose(const std::string& path, int flags, mode_t mode = 0600) {
  int fd = open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd >= 0) close(fd);
  return fd;
}

// ---- The plan (no kernel needed) ----

TEST(LandlockPlanTest, AbiZeroPlansNothing) {
  LandlockPlan plan = PlanLandlock(0, {"/usr"}, {"/tmp"}, {"/dev/null"});
  EXPECT_EQ(plan.abi, 0);
  EXPECT_EQ(plan.handled_fs, 0u);
  EXPECT_TRUE(plan.rules.empty());
  EXPECT_EQ(ApplyLandlockInChild(plan), 0);  // nothing to apply
}

TEST(LandlockPlanTest, HandledRightsFollowTheAbi) {
  struct Case {
    int abi;
    unsigned long long fs, net, scoped;
  } cases[] = {
      {1, kAbi1Fs, 0, 0},
      {2, kAbi1Fs | kRefer, 0, 0},
      {3, kAbi1Fs | kRefer | kTruncate, 0, 0},
      {4, kAbi1Fs | kRefer | kTruncate, 3, 0},
      {5, kAbi1Fs | kRefer | kTruncate | kIoctlDev, 3, 0},
      {6, kAbi1Fs | kRefer | kTruncate | kIoctlDev, 3, 3},
      {7, kAbi1Fs | kRefer | kTruncate | kIoctlDev, 3, 3},
      {9, kAbi1Fs | kRefer | kTruncate | kIoctlDev, 3, 3},  // newer than known: what we know
  };
  for (const Case& c : cases) {
    LandlockPlan plan = PlanLandlock(c.abi, {}, {}, {});
    EXPECT_EQ(plan.abi, c.abi);
    EXPECT_EQ(plan.handled_fs, c.fs) << "abi " << c.abi;
    EXPECT_EQ(plan.handled_net, c.net) << "abi " << c.abi;
    EXPECT_EQ(plan.scoped, c.scoped) << "abi " << c.abi;
  }
}

TEST(LandlockPlanTest, RulesPerKind) {
  LandlockPlan plan = PlanLandlock(5, {"/usr", "/etc/passwd"}, {"/work"}, {"/dev/null"});
  ASSERT_EQ(plan.rules.size(), 4u);
  EXPECT_EQ(plan.rules[0].path, "/usr");
  EXPECT_EQ(plan.rules[0].access, kReadFile | kReadDir | kExecute);
  EXPECT_EQ(plan.rules[1].path, "/etc/passwd");  // READ_DIR dropped in the child (a file)
  EXPECT_EQ(plan.rules[2].path, "/work");
  EXPECT_EQ(plan.rules[2].access, plan.handled_fs);
  EXPECT_EQ(plan.rules[3].access, kReadFile | kWriteFile | kTruncate | kIoctlDev);
  EXPECT_EQ(PlanLandlock(2, {}, {}, {"/dev/null"}).rules[0].access, kReadFile | kWriteFile);
}

// ---- Applied for real ----

class LandlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    abi_ = LandlockAbi();
    if (abi_ == 0) {
      if (::airlock::test::MustWork()) FAIL() << "this kernel has no Landlock (LandlockAbi() == 0)";
      GTEST_SKIP() << "this kernel has no Landlock";
    }
    char dir[] = "/tmp/airlock-landlock-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    outside_ = "/tmp/airlock-landlock-outside-" + std::to_string(getpid());
  }
  void TearDown() override {
    unlink(outside_.c_str());
    if (!dir_.empty()) {
      std::string cmd = "rm -rf '" + dir_ + "'";
      (void)!system(cmd.c_str());
    }
  }
  int abi_ = 0;
  std::string dir_;
  std::string outside_;
};

TEST_F(LandlockTest, AbiIsReported) { EXPECT_GE(abi_, 1); }

TEST_F(LandlockTest, FilesystemRules) {
  LandlockPlan plan = PlanLandlock(abi_, {"/usr"}, {dir_}, {"/dev/null"});
  ChildOutcome r = RunInChild([&](int out) {
    if (int rc = Apply(plan, out)) return rc;
    int failures = 0;
    // Inside the read-write tree: everything.
    const std::string file = dir_ + "/f", sub = dir_ + "/sub";
    int fd = open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    CHILD_EXPECT_OK(fd);
    CHILD_EXPECT_OK(write(fd, "data", 4));
    close(fd);
    CHILD_EXPECT_OK(OpenClose(file, O_WRONLY | O_TRUNC));
    CHILD_EXPECT_OK(mkdir(sub.c_str(), 0700));
    CHILD_EXPECT_OK(rename(file.c_str(), (sub + "/g").c_str()));  // REFER within the tree
    CHILD_EXPECT_OK(unlink((sub + "/g").c_str()));
    CHILD_EXPECT_OK(rmdir(sub.c_str()));
    // Outside it: refused.
    CHILD_EXPECT_ERRNO(OpenClose(outside_, O_CREAT | O_WRONLY), EACCES);
    CHILD_EXPECT_ERRNO(mkdir(outside_.c_str(), 0700), EACCES);
    CHILD_EXPECT_ERRNO(OpenClose("/etc/passwd", O_RDONLY), EACCES);  // not in the plan
    CHILD_EXPECT_ERRNO(OpenClose("/etc", O_RDONLY | O_DIRECTORY), EACCES);
    // The read-only tree: read and execute-map, not write.
    fd = open("/usr/bin/python3", O_RDONLY | O_CLOEXEC);
    if (fd < 0) fd = open("/usr/bin/sh", O_RDONLY | O_CLOEXEC);
    CHILD_EXPECT_OK(fd);
    char magic[4] = {};
    if (fd >= 0 && (read(fd, magic, 4) != 4 || memcmp(magic, "\x7f" "ELF", 4) != 0)) {
      dprintf(out, "reading an ELF under /usr/bin failed\n");
      ++failures;
    }
    close(fd);
    CHILD_EXPECT_OK(OpenClose("/usr/bin", O_RDONLY | O_DIRECTORY));
    CHILD_EXPECT_ERRNO(OpenClose("/usr/airlock-landlock-never", O_CREAT | O_WRONLY), EACCES);
    // A device file: read, write, truncate-on-open (`> /dev/null`).
    CHILD_EXPECT_OK(OpenClose("/dev/null", O_WRONLY | O_TRUNC));
    CHILD_EXPECT_ERRNO(OpenClose("/dev/zero", O_RDONLY), EACCES);
    return failures;
  });
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
  struct stat st;
  EXPECT_NE(stat(outside_.c_str(), &st), 0) << "the child created " << outside_;
}

TEST_F(LandlockTest, SingleFileRuleGetsOnlyFileRights) {
  // /etc/passwd as a "read-only tree": READ_DIR must be dropped or the kernel says EINVAL.
  LandlockPlan plan = PlanLandlock(abi_, {"/etc/passwd"}, {}, {});
  ChildOutcome r = RunInChild([&](int out) {
    if (int rc = Apply(plan, out)) return rc;
    int failures = 0;
    CHILD_EXPECT_OK(OpenClose("/etc/passwd", O_RDONLY));
    CHILD_EXPECT_ERRNO(OpenClose("/etc/passwd", O_WRONLY), EACCES);
    CHILD_EXPECT_ERRNO(OpenClose("/etc/group", O_RDONLY), EACCES);
    return failures;
  });
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
}

TEST_F(LandlockTest, MissingPathsAreSkippedOtherErrorsReported) {
  LandlockPlan missing = PlanLandlock(abi_, {"/nonexistent-airlock-landlock", "/usr"}, {}, {});
  ChildOutcome r = RunInChild([&](int out) {
    int failures = 0;
    if (Apply(missing, out) != 0) ++failures;
    CHILD_EXPECT_OK(OpenClose("/usr/bin", O_RDONLY | O_DIRECTORY));
    return failures;
  });
  EXPECT_TRUE(r.Exited(0)) << r.Describe();

  LandlockPlan not_dir = PlanLandlock(abi_, {"/etc/passwd/child"}, {}, {});
  ChildOutcome r2 = RunInChild([&](int) { return ApplyLandlockInChild(not_dir); });
  EXPECT_TRUE(r2.Exited(ENOTDIR)) << r2.Describe();
}

TEST_F(LandlockTest, TcpBindAndConnectRefused) {
  if (abi_ < 4) GTEST_SKIP() << "Landlock ABI " << abi_ << " has no TCP rights (needs 4)";
  // A listener the child could reach without Landlock.
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0) << strerror(errno);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);

  auto try_connect = [&addr]() {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    int rc = connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    int err = errno;
    close(s);
    errno = err;
    return rc;
  };
  ASSERT_EQ(try_connect(), 0) << "even without Landlock: " << strerror(errno);

  LandlockPlan plan = PlanLandlock(abi_, {"/usr"}, {dir_}, {});
  ChildOutcome r = RunInChild([&](int out) {
    if (int rc = Apply(plan, out)) return rc;
    int failures = 0;
    CHILD_EXPECT_ERRNO(try_connect(), EACCES);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in any = {};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    any.sin_port = htons(0);
    CHILD_EXPECT_ERRNO(bind(s, reinterpret_cast<sockaddr*>(&any), sizeof(any)), EACCES);
    close(s);
    return failures;
  });
  close(listener);
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
}

TEST_F(LandlockTest, SignalsAndAbstractSocketsScopedToTheSandbox) {
  if (abi_ < 6) GTEST_SKIP() << "Landlock ABI " << abi_ << " has no scopes (needs 6)";
  // An abstract unix socket outside the domain.
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::string name = "airlock-landlock-test-" + std::to_string(getpid());
  memcpy(addr.sun_path + 1, name.data(), name.size());  // sun_path[0] == 0: abstract
  socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), addr_len), 0) << strerror(errno);
  ASSERT_EQ(listen(listener, 4), 0);

  LandlockPlan plan = PlanLandlock(abi_, {"/usr"}, {dir_}, {});
  ChildOutcome r = RunInChild([&](int out) {
    int failures = 0;
    // Before Landlock both work: what follows is Landlock's doing.
    CHILD_EXPECT_OK(kill(getppid(), 0));
    if (int rc = Apply(plan, out)) return rc;
    CHILD_EXPECT_ERRNO(kill(getppid(), 0), EPERM);
    CHILD_EXPECT_OK(kill(getpid(), 0));  // its own domain
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHILD_EXPECT_ERRNO(connect(s, reinterpret_cast<sockaddr*>(&addr), addr_len), EPERM);
    close(s);
    return failures;
  });
  close(listener);
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
}

// Both kernel layers as the launcher stacks them (Landlock, then seccomp), around
// CPython with the data stack: the rules above are not so tight that a real
// program cannot run.
TEST_F(LandlockTest, PythonRunsUnderLandlockAndSeccomp) {
  const char* python = "/usr/bin/python3";
  if (access(python, X_OK) != 0) GTEST_SKIP() << python << " is missing";
  auto seccomp = CompileSeccompPolicy({});
  ASSERT_TRUE(seccomp.ok()) << seccomp.status().ToString();
  LandlockPlan plan = PlanLandlock(abi_, {"/usr", "/etc", "/proc", "/sys", "/lib64"}, {dir_, "/dev/shm"},
                                   {"/dev/null", "/dev/urandom"});
  const std::string script =
      "import numpy, pandas, multiprocessing, subprocess\n"
      "df = pandas.DataFrame(numpy.arange(6).reshape(2, 3))\n"
      "open('out.txt', 'w').write(str(int(df.values.sum())))\n"
      "with multiprocessing.Pool(2) as p: print(sum(p.map(abs, range(10))))\n"
      "print(subprocess.run(['/bin/sh', '-c', 'cat out.txt'], capture_output=True).stdout)\n"
      "try:\n"
      "    open('/tmp/airlock-landlock-escape', 'w')\n"
      "except PermissionError:\n"
      "    print('outside refused')\n";
  std::vector<std::string> storage = {python, "-c", script};
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string home = "HOME=" + dir_, mpl = "MPLCONFIGDIR=" + dir_;
  char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), home.data(), mpl.data(), nullptr};
  ChildOutcome r = RunInChild([&](int out) {
    if (dup2(out, 1) < 0 || dup2(out, 2) < 0 || chdir(dir_.c_str()) != 0) return 98;
    if (int rc = Apply(plan, out)) return rc;
    if (int err = ApplySeccompInChild(*seccomp)) {
      dprintf(out, "ApplySeccompInChild: %s\n", strerror(err));
      return kApplyFailed;
    }
    execve(argv[0], argv.data(), envp);
    dprintf(out, "execve: %s\n", strerror(errno));
    return 127;
  });
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_NE(r.output.find("45\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("b'15'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("outside refused"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace airlock::isolation
