// Ordinary programs behave as they would outside the sandbox, and a run leaves
// nothing behind on the host.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "base/fs.h"
#include "tests/integration/sandbox_fixture.h"

namespace airlock::test {
namespace {

using ::testing::HasSubstr;

class ProgramsTest : public BothPathsTest {};
INSTANTIATE_TEST_SUITE_P(Paths, ProgramsTest, ::testing::Values(RunPath::kCold, RunPath::kWarm), RunPathName);

TEST_P(ProgramsTest, PrintsAndExitsZero) {
  auto r = Py("print(sum(range(10)))\n");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.data, "45\n");
  EXPECT_EQ(r.err.data, "");
  EXPECT_EQ(r.signal, 0);
  EXPECT_FALSE(r.timed_out);
}

TEST_P(ProgramsTest, ExitCodesAndExceptions) {
  EXPECT_EQ(Py("import sys\nsys.exit(42)\n").exit_code, 42);
  auto r = Py("1/0\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err.data, HasSubstr("ZeroDivisionError: division by zero"));
  auto k = Py("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n");
  EXPECT_EQ(k.signal, SIGKILL);
  EXPECT_EQ(k.exit_code, 128 + SIGKILL);
  EXPECT_EQ(exec::KillReasonName(k.kill_reason), std::string("signal"));
}

TEST_P(ProgramsTest, StandardLibraryThreadsAndUnicode) {
  auto r = Py("import json, re, statistics, threading, hashlib, decimal, datetime, sqlite3\n"
              "out = []\n"
              "ts = [threading.Thread(target=lambda i=i: out.append(i * i)) for i in range(8)]\n"
              "[t.start() for t in ts]; [t.join() for t in ts]\n"
              "print(sorted(out))\n"
              "print(statistics.mean([1, 2, 3, 4]), json.dumps({'a': [1, 2]}))\n"
              "db = sqlite3.connect(':memory:'); print(db.execute('select 6*7').fetchone()[0])\n"
              "print('héllo wörld ✓ 世界')\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, HasSubstr("[0, 1, 4, 9, 16, 25, 36, 49]"));
  EXPECT_THAT(r.out.data, HasSubstr("2.5 {\"a\": [1, 2]}"));
  EXPECT_THAT(r.out.data, HasSubstr("42"));
  EXPECT_THAT(r.out.data, HasSubstr("héllo wörld ✓ 世界"));
}

TEST_P(ProgramsTest, MultiprocessingPoolAndSubprocess) {
  auto r = Py("import multiprocessing, subprocess\n"
              "def sq(x): return x * x\n"
              "if __name__ == '__main__':\n"
              "    with multiprocessing.Pool(2) as p:\n"
              "        print('POOL', sum(p.map(sq, range(10))))\n"
              "    print('SH', subprocess.run(['/bin/sh', '-c', 'echo from sh; exit 3']).returncode)\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, HasSubstr("POOL 285"));
  EXPECT_THAT(r.out.data, HasSubstr("from sh"));
  EXPECT_THAT(r.out.data, HasSubstr("SH 3"));
}

TEST_P(ProgramsTest, FilesInTheWorkingDirectory) {
  auto r = Py("import os, csv\n"
              "print(os.getcwd())\n"
              "with open('data.csv', 'w', newline='') as f: csv.writer(f).writerows([[1, 2], [3, 4]])\n"
              "print(list(csv.reader(open('data.csv'))))\n"
              "os.makedirs('a/b'); open('a/b/c.txt', 'w').write('deep'); print(open('a/b/c.txt').read())\n"
              "open('/tmp/scratch', 'w').write('s')\n"
              "st_home, st_tmp = os.stat('/home/user'), os.stat('/tmp')\n"
              "print('ONE DISK', st_home.st_dev == st_tmp.st_dev, sorted(os.listdir('/home/user')), "
              "[n for n in os.listdir('/tmp') if n != '" + HelpersTmpEntry() + "'])\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  // The workspace: /home/user is the working directory; /tmp is another
  // directory of the same tmpfs (one disk limit for both).
  EXPECT_THAT(r.out.data, HasSubstr("/home/user\n"));
  EXPECT_THAT(r.out.data, HasSubstr("ONE DISK True ['a', 'data.csv'] ['scratch']"));
  EXPECT_THAT(r.out.data, HasSubstr("[['1', '2'], ['3', '4']]"));
  EXPECT_THAT(r.out.data, HasSubstr("deep"));
}

TEST_P(ProgramsTest, NumpyAndPandasImport) {
  auto r = Py("import numpy as np, pandas as pd\n"
              "print(int(np.arange(10).sum()))\n"
              "print(pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]}).groupby('k').v.sum().to_dict())\n",
              {.memory_bytes = 512ll << 20});
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, HasSubstr("45\n{'a': 4, 'b': 2}"));
}

TEST_P(ProgramsTest, EachRunStartsFromACleanSlate) {
  auto a = Py("open('/tmp/left-behind', 'w').write('x')\n");
  EXPECT_EQ(a.exit_code, 0);
  auto b = Py("import os\nprint(os.path.exists('/tmp/left-behind'))\n");
  EXPECT_EQ(b.out.data, "False\n");
}

// Whether a process of the host has `token` in its command line.
bool HostHasProcessWith(const std::string& token) {
  bool found = false;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return false;
  while (dirent* e = readdir(proc)) {
    if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    auto cmd = ReadFile(std::string("/proc/") + e->d_name + "/cmdline");
    if (cmd.ok() && cmd->find(token) != std::string::npos) found = true;
  }
  closedir(proc);
  return found;
}

// The run's init never execs, so close-on-exec does not keep the parent's fds
// out of it; it must close them itself. Otherwise it would hold the server's
// sockets and other runs' pipes open (no EOF, no FIN) for as long as it lives.
TEST_P(ProgramsTest, RunHoldsNoFileDescriptorOfTheParent) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  // The run's program becomes `sleep 5.0PID`: once the host sees that command
  // line, the run (and its init) is alive, however long its launch took.
  const std::string token = "5.0" + std::to_string(getpid());
  std::thread run([&] { Py("import os\nos.execv('/bin/sleep', ['sleep', '" + token + "'])\n"); });
  auto start = std::chrono::steady_clock::now();
  while (!HostHasProcessWith(token) && std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool alive = HostHasProcessWith(token);
  EXPECT_TRUE(alive) << "the run's program (sleep " << token << ") did not show up on the host in 60 s";
  if (alive) {
    std::cout << "[ host    ] the run was up after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count()
              << " ms\n";
    close(fds[1]);
    struct pollfd p = {fds[0], POLLIN, 0};
    int ready = poll(&p, 1, 1500);
    char c;
    EXPECT_EQ(ready, 1) << "no EOF while the run lives: its init holds the parent's write end";
    if (ready == 1) {
      EXPECT_EQ(read(fds[0], &c, 1), 0);
    }
    EXPECT_TRUE(HostHasProcessWith(token)) << "the run ended before the check: it proves nothing";
  } else {
    close(fds[1]);
  }
  run.join();
  close(fds[0]);
}

int CountMounts() {
  auto m = ReadFile("/proc/self/mountinfo");
  return m.ok() ? static_cast<int>(std::count(m->begin(), m->end(), '\n')) : -1;
}

int CountFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// Run cgroups of this process ("run-PID-N" cold, "warm-PID-N" warm) under the
// parents the host setup uses.
int CountRunCgroups(const isolation::HostSetup& host, const std::string& kind) {
  int n = 0;
  std::string prefix = kind + "-" + std::to_string(getpid()) + "-";
  const isolation::CgroupSetup& c = host.cgroups;
  for (const std::string& dir : {c.v1_memory_parent, c.v1_pids_parent, c.v1_cpu_parent, c.v2_parent}) {
    if (dir.empty()) continue;
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) n += std::string(e->d_name).rfind(prefix, 0) == 0;
    closedir(d);
  }
  return n;
}

int CountChildren() {
  int n = 0;
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d)) {
    if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    auto st = ReadFile(std::string("/proc/") + e->d_name + "/status");
    if (st.ok() && st->find("\nPPid:\t" + std::to_string(getpid()) + "\n") != std::string::npos) ++n;
  }
  closedir(d);
  return n;
}

TEST_P(ProgramsTest, RunsLeaveNoMountFdCgroupOrChildBehind) {
  // The cold variant counts from zero: no warm pool of an earlier test around.
  if (path_ == RunPath::kCold && pools_) pools_->clear();
  Py("print(1)\n");  // warm up lazily-created state (and the warm pool)
  // A warm pool keeps runs ready (their cgroups, its zygote): compare once it
  // has refilled after each batch. How long that takes depends on the host's
  // load, so both waits poll, up to 60 s.
  constexpr auto kSettleLimit = std::chrono::seconds(60);
  auto pool_full = [&] {
    if (path_ != RunPath::kWarm) return true;
    auto snap = WarmPoolFor(isolation::Limits{}.disk_bytes)->Snapshot();
    return !snap.empty() && snap[0].ready == snap[0].target;
  };
  auto start = std::chrono::steady_clock::now();
  while (!pool_full() && std::chrono::steady_clock::now() - start < kSettleLimit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(pool_full()) << "the warm pool did not fill up in 60 s";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int mounts = CountMounts(), fds = CountFds(), children = CountChildren();
  int cold = CountRunCgroups(*host_, "run"), warm = CountRunCgroups(*host_, "warm");
  EXPECT_GT(path_ == RunPath::kWarm ? warm : 1, 0) << "the warm runs' cgroups are not where this test looks";
  for (int i = 0; i < 20; ++i) {
    Py(i % 2 ? "print(1)\n" : "while True: pass\n", {}, 0.2);
  }
  // Settled: the pool is full again and every count is back to its baseline.
  auto settled = [&] {
    return pool_full() && CountMounts() == mounts && CountFds() == fds && CountChildren() == children &&
           CountRunCgroups(*host_, "run") == cold && CountRunCgroups(*host_, "warm") == warm;
  };
  start = std::chrono::steady_clock::now();
  while (!settled() && std::chrono::steady_clock::now() - start < kSettleLimit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::cout << "[ host    ] settled in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count()
            << " ms after 20 runs (limit 60 s)\n";
  EXPECT_TRUE(pool_full()) << "the warm pool did not refill in 60 s";
  EXPECT_EQ(CountMounts(), mounts) << "mounts left behind (60 s after the runs)";
  EXPECT_EQ(CountFds(), fds) << "fds left behind (60 s after the runs)";
  EXPECT_EQ(CountChildren(), children) << "children left behind (60 s after the runs)";
  EXPECT_EQ(CountRunCgroups(*host_, "run"), cold) << "cold run cgroups left behind (60 s after the runs)";
  EXPECT_EQ(CountRunCgroups(*host_, "warm"), warm) << "warm run cgroups left behind (60 s after the runs)";
  if (path_ == RunPath::kCold) {
    EXPECT_EQ(cold, 0);
    int st;
    EXPECT_EQ(waitpid(-1, &st, WNOHANG), -1) << "an unreaped child is left";
    EXPECT_EQ(errno, ECHILD);
  }
}

}  // namespace
}  // namespace airlock::test
