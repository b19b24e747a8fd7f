// PidOfPidfd and PidfdProcessExiting on real processes.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "base/unique_fd.h"
#include "isolation/sandbox.h"
#include "tests/helpers/must_work.h"

namespace airlock::isolation {
namespace {

using ::airlock::test::MustWork;

// A child that touches `bytes` of memory (so that tearing it down takes a
// while), then waits to be killed.
pid_t SpawnHolding(size_t bytes) {
  pid_t pid = ::fork();
  if (pid == 0) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) std::memset(p, 1, bytes);
    for (;;) ::pause();
  }
  return pid;
}

bool Readable(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

TEST(PidfdTest, PidOfALiveChildThenAnError) {
  pid_t pid = SpawnHolding(0);
  ASSERT_GT(pid, 0);
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  ASSERT_TRUE(pidfd) << strerror(errno);
  auto got = PidOfPidfd(pidfd.get());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, pid);
  EXPECT_FALSE(PidfdProcessExiting(pidfd.get()));  // alive, paused
  ::kill(pid, SIGKILL);
  int st;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_FALSE(PidOfPidfd(pidfd.get()).ok());  // reaped: "Pid: -1"
  EXPECT_FALSE(PidfdProcessExiting(pidfd.get()));
  EXPECT_FALSE(PidfdProcessExiting(-1));
}

// The host's MemAvailable (/proc/meminfo), in bytes; 0 if unreadable.
size_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// The transparent huge page mode in force ("always", "madvise" or "never"):
// with THP a touched region tears down in 2 MiB pages, much faster.
std::string ThpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  auto open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "unknown";
  return line.substr(open + 1, close - open - 1);
}

TEST(PidfdTest, ChildrenOfPidfdOnlyWhileTheProcessLives) {
  // A child with a child of its own: listed through the child's pidfd.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    pid_t grandchild = ::fork();
    if (grandchild == 0) {
      for (;;) ::pause();
    }
    char c = 'r';
    if (::write(ready[1], &c, 1) != 1) ::_exit(1);
    ::waitpid(grandchild, nullptr, 0);
    ::_exit(0);
  }
  ASSERT_GT(pid, 0);
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  ASSERT_TRUE(pidfd) << strerror(errno);
  auto children = ChildrenOfPidfd(pidfd.get());
  ASSERT_TRUE(children.ok()) << children.status().ToString();
  ASSERT_EQ(children->size(), 1u);
  pid_t grandchild = children->front();
  // The same with the pid given (the caller read it before: no fdinfo read).
  auto given = ChildrenOfPidfd(pidfd.get(), pid);
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(*given, *children);

  // Once it has exited (a zombie: its pid is still held), its pid is not read
  // any more: after its reaping the pid could be anyone's. A pid the caller
  // gives is refused then too: the pidfd, not the pid, says the process lives.
  ::kill(pid, SIGKILL);
  struct pollfd p = {pidfd.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_FALSE(ChildrenOfPidfd(pidfd.get()).ok());
  EXPECT_FALSE(ChildrenOfPidfd(pidfd.get(), pid).ok());
  int st;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_FALSE(ChildrenOfPidfd(pidfd.get()).ok());
  EXPECT_FALSE(ChildrenOfPidfd(pidfd.get(), pid).ok());
  ::kill(grandchild, SIGKILL);  // orphaned: reparented to init (or a subreaper), which reaps it
}

TEST(PidfdTest, ExitingIsSeenWhileTheAddressSpaceIsTornDown) {
  // Killed, a child holding 1 GiB takes tens of milliseconds to exit: from
  // when it handles SIGKILL until its pidfd is readable, it is "exiting".
  // The size is what this host can spare (half of MemAvailable, at most 1 GiB),
  // the same on every try: a bigger one could push the host into swap or OOM.
  const size_t available = MemAvailableBytes();
  const size_t bytes = std::min(size_t{1} << 30, available / 2);
  const std::string thp = ThpMode();
  std::cout << "[ host    ] MemAvailable " << (available >> 20) << " MiB; the child touches " << (bytes >> 20)
            << " MiB; transparent huge pages: " << thp << "\n";
  constexpr size_t kAtLeast = size_t{128} << 20;
  if (bytes < kAtLeast) {
    const std::string why = "this host has " + std::to_string(available >> 20) +
                            " MiB available; the test needs twice " + std::to_string(kAtLeast >> 20) + " MiB";
    if (MustWork()) FAIL() << why;
    GTEST_SKIP() << why;
  }
  bool seen = false;
  constexpr int kTries = 5;
  int tries = 0;
  while (!seen && tries < kTries) {
    ++tries;
    pid_t pid = SpawnHolding(bytes);
    ASSERT_GT(pid, 0);
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    ASSERT_TRUE(pidfd);
    // Until it has touched its memory its RSS grows; wait for that.
    for (int i = 0; i < 500; ++i) {
      char path[64];
      snprintf(path, sizeof path, "/proc/%d/statm", pid);
      FILE* f = fopen(path, "r");
      long size = 0, rss = 0;
      if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2) rss = 0;
        fclose(f);
      }
      if (static_cast<size_t>(rss) * 4096 >= bytes) break;
      ::usleep(10000);
    }
    ::kill(pid, SIGKILL);
    while (!Readable(pidfd.get())) {
      if (PidfdProcessExiting(pidfd.get())) seen = true;
    }
    int st;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  }
  std::cout << "[ host    ] PF_EXITING " << (seen ? "seen" : "not seen") << " after " << tries << " of " << kTries
            << " tries\n";
  EXPECT_TRUE(seen) << "never saw PF_EXITING between SIGKILL and the pidfd becoming readable, in " << kTries
                    << " tries of a child holding " << (bytes >> 20) << " MiB (transparent huge pages: " << thp << ")";
}

}  // namespace
}  // namespace airlock::isolation
