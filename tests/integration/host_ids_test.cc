// Every run is a host user of its own (issue 15 part 1; isolation/host_ids.h):
// one run exhausting the kernel's per-user pools does not starve a concurrent
// run, on the cold and the warm path, while its own limits still bind it.
#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "base/fs.h"
#include "tests/integration/sandbox_fixture.h"

namespace airlock::test {
namespace {

using ::testing::HasSubstr;

class HostIdsTest : public BothPathsTest {
 protected:
  void SetUp() override {
    BothPathsTest::SetUp();
    if (IsSkipped() || HasFailure()) return;
    // Host-dependent: ids of their own need a server running as root, and
    // the pipe attack a per-user soft limit on pipe buffers.
    std::string why;
    if (!host_->host_ids) why = "no host id range: " + host_->host_ids_why_not;
    auto soft = ReadFile("/proc/sys/fs/pipe-user-pages-soft");
    if (why.empty() && (!soft.ok() || std::atol(soft->c_str()) == 0)) why = "fs.pipe-user-pages-soft is 0 (no limit)";
    if (why.empty()) return;
    if (MustWork()) FAIL() << why;
    GTEST_SKIP() << why;
  }
};
INSTANTIATE_TEST_SUITE_P(Paths, HostIdsTest, ::testing::Values(RunPath::kCold, RunPath::kWarm), RunPathName);

// Every process on the host whose command name is `comm`: pid -> real uid.
std::map<pid_t, long> HostProcessesNamed(const std::string& comm) {
  std::map<pid_t, long> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    auto status = ReadFile(std::string("/proc/") + e->d_name + "/status");
    if (!status.ok() || status->find("Name:\t" + comm + "\n") == std::string::npos) continue;
    size_t uid = status->find("\nUid:\t");
    if (uid != std::string::npos) out[std::atoi(e->d_name)] = std::atol(status->c_str() + uid + 6);
  }
  closedir(proc);
  return out;
}

// Names the run's process (prctl(PR_SET_NAME)), so the host can find it.
std::string NameSelf(const std::string& name) {
  return "import ctypes\n"
         "ctypes.CDLL(None, use_errno=True).prctl(15, b'" + name + "', 0, 0, 0)\n";
}

// The attacker: as many 1 MiB pipes as it may have (fs.pipe-user-pages-soft),
// descriptors parked in an unread socket until refused (unix_inflight, against
// RLIMIT_NOFILE), and real-time signals queued to itself until refused
// (RLIMIT_SIGPENDING); it says how far it got, then holds everything.
const char* const kAttacker = R"(
import array, errno, fcntl, os, signal, socket, threading, time
def name(e): return errno.errorcode.get(e, str(e)) if e else None
pipes, pipe_err = [], None
for i in range(200):
    r, w = os.pipe()
    pipes.append((r, w))
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
    except OSError as e:
        pipe_err = e.errno
        break
a, b = socket.socketpair()
sent, fd_err = 0, None
while sent < 100000:
    try:
        a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [0] * 250))])
        sent += 250
    except OSError as e:
        fd_err = e.errno
        break
sig = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
queued, sig_err = 0, None
while queued < 100000:
    try:
        signal.pthread_kill(threading.get_ident(), sig)  # tgkill: refused (EAGAIN) when full, unlike kill()
        queued += 1
    except OSError as e:
        sig_err = e.errno
        break
print('HELD', len(pipes), name(pipe_err), sent, name(fd_err), queued, name(sig_err), flush=True)
time.sleep(7)
)";

// The victim: one of each, all while the attacker holds its share.
const char* const kVictim = R"(
import array, ctypes, errno, fcntl, os, signal, socket, threading, time
res = []
def attempt(what, f):
    try:
        f()
        res.append(what + ' ok')
    except OSError as e:
        res.append(what + ' ' + errno.errorcode.get(e.errno, str(e.errno)))
r, w = os.pipe()
attempt('pipe', lambda: fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20))
a, b = socket.socketpair()
attempt('fd', lambda: a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [r]))]))
sig = signal.SIGRTMIN + 1
signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
attempt('sigqueue', lambda: signal.pthread_kill(threading.get_ident(), sig))
libc = ctypes.CDLL(None, use_errno=True)
timer = ctypes.c_void_p()
def timer_create():
    if libc.timer_create(1, None, ctypes.byref(timer)) != 0:  # CLOCK_MONOTONIC, SIGALRM on expiry
        raise OSError(ctypes.get_errno(), 'timer_create')
attempt('timer_create', timer_create)
print('VICTIM', ' '.join(res), flush=True)
time.sleep(2)
)";

TEST_P(HostIdsTest, OneRunExhaustingPerUserPoolsDoesNotStarveAnother) {
  // Names of this test process's own runs: ctest runs the cold and warm cases
  // at once, and the host must tell whose process is whose.
  const std::string tag = std::to_string(::getpid() % 100000);
  const std::string attacker_name = "al-att-" + tag, victim_name = "al-vic-" + tag;
  std::atomic<bool> held{false}, victim_up{false};
  exec::RunResult attacker, victim;
  std::thread attack([&] {
    attacker = PyWatched(NameSelf(attacker_name) + kAttacker, [&](exec::Stream s, std::string_view d) {
      if (s == exec::Stream::kStdout && d.find("HELD") != std::string_view::npos) held = true;
    });
    held = true;  // ended: do not wait for it
  });
  for (int i = 0; i < 600 && !held; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::thread defend([&] {
    victim = PyWatched(NameSelf(victim_name) + kVictim, [&](exec::Stream s, std::string_view d) {
      if (s == exec::Stream::kStdout && d.find("VICTIM") != std::string_view::npos) victim_up = true;
    });
    victim_up = true;
  });
  for (int i = 0; i < 600 && !victim_up; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Seen from the host while both are alive: two different host uids, both
  // from this process's block of the range.
  auto attackers = HostProcessesNamed(attacker_name);
  auto victims = HostProcessesNamed(victim_name);
  defend.join();
  attack.join();

  ASSERT_EQ(attacker.exit_code, 0) << attacker.err.data;
  ASSERT_EQ(victim.exit_code, 0) << victim.err.data;
  std::istringstream held_line(attacker.out.data.substr(attacker.out.data.find("HELD")));
  std::string word, pipe_err, fd_err, sig_err;
  int pipes = 0, sent = 0, queued = 0;
  held_line >> word >> pipes >> pipe_err >> sent >> fd_err >> queued >> sig_err;
  // Its own limits still bind the attacker: ~64 pipes of 1 MiB (16384 pages),
  // RLIMIT_NOFILE (256) plus one message of descriptors, RLIMIT_SIGPENDING (1024).
  EXPECT_EQ(pipe_err, "EPERM") << attacker.out.data;
  EXPECT_LE(pipes, 70) << attacker.out.data;
  EXPECT_EQ(fd_err, "ETOOMANYREFS") << attacker.out.data;
  EXPECT_LE(sent, 256 + 250) << attacker.out.data;
  EXPECT_EQ(sig_err, "EAGAIN") << attacker.out.data;
  EXPECT_LE(queued, 1024) << attacker.out.data;
  EXPECT_GE(queued, 1000) << attacker.out.data;
  // And the victim, at the same time, was not starved of any.
  EXPECT_THAT(victim.out.data, HasSubstr("VICTIM pipe ok fd ok sigqueue ok timer_create ok")) << victim.err.data;

  ASSERT_GE(attacker.isolation.host_uid, 0);
  ASSERT_GE(victim.isolation.host_uid, 0);
  EXPECT_NE(attacker.isolation.host_uid, victim.isolation.host_uid);
  const isolation::HostIdRange& block = host_->host_ids->block();
  EXPECT_TRUE(block.Contains(static_cast<uint32_t>(attacker.isolation.host_uid)));
  EXPECT_TRUE(block.Contains(static_cast<uint32_t>(victim.isolation.host_uid)));
  ASSERT_EQ(attackers.size(), 1u) << "the host sees no (or several) attacker processes";
  ASSERT_EQ(victims.size(), 1u);
  EXPECT_EQ(attackers.begin()->second, attacker.isolation.host_uid);
  EXPECT_EQ(victims.begin()->second, victim.isolation.host_uid);
  for (const auto& l : victim.isolation.layers) {
    if (l.name == "host_ids") {
      EXPECT_TRUE(l.enforced);
      EXPECT_THAT(l.detail, HasSubstr(std::to_string(victim.isolation.host_uid)));
      EXPECT_THAT(l.detail, HasSubstr(host_->host_ids->range().ToString()));
    }
  }
}

// Ids come back: after many runs, every id of the block is free again (the
// warm pool's ready runs and zygote hold theirs; they are counted first).
TEST_P(HostIdsTest, NoIdLeaksAfterManyRuns) {
  // Let the path settle (a warm pool starts, fills and keeps its runs).
  (void)Py("pass\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const size_t before = host_->host_ids->FreeCount();
  std::set<int64_t> seen;
  const int runs = path_ == RunPath::kWarm ? 200 : 60;  // a cold run takes ~10x as long
  for (int i = 0; i < runs; ++i) {
    auto r = Py("pass\n");
    ASSERT_EQ(r.exit_code, 0) << r.err.data;
    seen.insert(r.isolation.host_uid);
  }
  EXPECT_GT(seen.size(), 1u) << "every run had the same host id";
  size_t after = 0;
  for (int i = 0; i < 100 && (after = host_->host_ids->FreeCount()) < before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(after, before) << "host ids were not given back";
}

}  // namespace
}  // namespace airlock::test
