// The host id range (isolation/host_ids.h): parsing, the check against the
// user databases, the blocks shared between airlock processes, and an id
// coming back only once the process that held it is gone and reaped.
#include "isolation/host_ids.h"

#include "isolation/sandbox.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>

namespace airlock::isolation {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/airlock-host-ids-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d ? d : "/tmp";
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A child that waits until killed; its pidfd.
std::pair<pid_t, UniqueFd> SpawnWaiting() {
  pid_t pid = ::fork();
  if (pid == 0) {
    for (;;) ::pause();
  }
  return {pid, UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)))};
}

TEST(HostIdRangeTest, ParsesAndRefusesWhatIsNotARange) {
  auto r = ParseHostIdRange("1879048192:65536");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->start, 1879048192u);
  EXPECT_EQ(r->count, 65536u);
  auto hex = ParseHostIdRange("0x70000000:1024");
  ASSERT_TRUE(hex.ok());
  EXPECT_EQ(hex->start, 0x70000000u);
  for (const char* bad : {"", "5000", "5000:", ":5", "abc:10", "5000:0", "500:10", "1000:10", "4294967290:10",
                          "5000:99999999", "-5:3", "5000:10:2"}) {
    EXPECT_FALSE(ParseHostIdRange(bad).ok()) << bad;
  }
  EXPECT_NE(ParseHostIdRange("5:5").status().message().find("above 1000"), std::string::npos);
}

TEST(HostIdRangeTest, TheDefaultIsInSystemdsUnusedRangeAndBelowTwoToThe31) {
  EXPECT_GE(kDefaultHostIdRange.start, 1879048192u);
  EXPECT_LE(uint64_t{kDefaultHostIdRange.start} + kDefaultHostIdRange.count, uint64_t{1} << 31);
}

TEST(HostIdRangeTest, AnEntryOfTheUserDatabasesOrSubordinateIdsInTheRangeIsAConflict) {
  const std::string etc = TempDir();
  const HostIdRange range{200000, 1000};
  Write(etc + "/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n");
  Write(etc + "/group", "root:x:0:\n");
  Write(etc + "/subuid", "alice:100000:65536\n");  // overlaps 200000? no: ends at 165536
  Write(etc + "/subgid", "alice:100000:65536\n");
  HostIdCheck clean = CheckHostIdRange(range, etc);
  EXPECT_TRUE(clean.conflicts.empty()) << clean.conflicts.front();
  EXPECT_EQ(clean.checked.size(), 6u);  // four files, and both id maps of this user namespace

  Write(etc + "/passwd", "root:x:0:0:root:/root:/bin/sh\nbob:x:200010:100::/:/bin/false\n");
  Write(etc + "/group", "grp:x:200999:\n");
  Write(etc + "/subuid", "carol:165536:65536\n");  // 165536..231071: overlaps
  HostIdCheck dirty = CheckHostIdRange(range, etc);
  ASSERT_EQ(dirty.conflicts.size(), 3u);
  EXPECT_NE(dirty.conflicts[0].find("user 'bob' has uid 200010"), std::string::npos) << dirty.conflicts[0];
  EXPECT_NE(dirty.conflicts[1].find("group 'grp' has gid 200999"), std::string::npos) << dirty.conflicts[1];
  EXPECT_NE(dirty.conflicts[2].find("carol"), std::string::npos) << dirty.conflicts[2];
  auto claimed = HostIdPool::Claim(range, TempDir() + "/locks", etc);
  ASSERT_FALSE(claimed.ok());
  EXPECT_NE(claimed.status().message().find("--uid-range"), std::string::npos);
}

TEST(HostIdRangeTest, AProcessWithAnIdOfTheRangeIsFound) {
  const uint32_t mine = static_cast<uint32_t>(::getuid());
  if (mine <= 1000) {
    // Run a child as an id of a range and look for it.
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      if (::syscall(SYS_setresgid, 300123, 300123, 300123) != 0 || ::syscall(SYS_setresuid, 300123, 300123, 300123) != 0) {
        ::_exit(1);
      }
      char c = 'x';
      (void)!::write(p[1], &c, 1);
      for (;;) ::pause();
    }
    ::close(p[1]);
    char c;
    if (::read(p[0], &c, 1) != 1) {
      ::close(p[0]);
      ::waitpid(pid, nullptr, 0);
      GTEST_SKIP() << "cannot change ids here (not root)";
    }
    ::close(p[0]);
    auto found = ProcessIdsInRange({300000, 1000});
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    bool saw = false;
    for (auto& [id, what] : found) saw = saw || (id == 300123 && what.find(std::to_string(pid)) != std::string::npos);
    EXPECT_TRUE(saw);
  }
}

TEST(HostIdPoolTest, ProcessesSharingARangeTakeBlocksOfTheirOwn) {
  const std::string locks = TempDir() + "/locks";
  const HostIdRange range{0x70100000u + static_cast<uint32_t>(::getpid() % 1000) * 4096, 2048};
  auto a = HostIdPool::Claim(range, locks);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = HostIdPool::Claim(range, locks);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE((*a)->block().start, (*b)->block().start);
  EXPECT_EQ((*a)->block().count, kHostIdBlock);
  auto c = HostIdPool::Claim(range, locks);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("2 held by other airlock processes"), std::string::npos)
      << c.status().message();
  // A block is free again once its holder is gone.
  a->reset();
  auto d = HostIdPool::Claim(range, locks);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  // The lock directory must be ours alone.
  ASSERT_EQ(::chmod(locks.c_str(), 0777), 0);
  EXPECT_FALSE(HostIdPool::Claim(range, locks).ok());
}

TEST(HostIdPoolTest, IdsAreDistinctAndTheLastReturnedIsTheLastReused) {
  auto pool = HostIdPool::ForTesting({500000, 8});
  std::set<uint32_t> ids;
  for (int i = 0; i < 8; ++i) {
    auto id = pool->Acquire();
    ASSERT_TRUE(id.ok());
    EXPECT_TRUE(ids.insert(*id).second);
  }
  EXPECT_EQ(pool->FreeCount(), 0u);
  EXPECT_EQ(pool->Acquire().status().code(), ErrorCode::kResourceExhausted);
  pool->Release(500003, UniqueFd());
  pool->Release(500001, UniqueFd());
  // Handed out in turn from where the last search stopped (it wrapped to the start).
  EXPECT_EQ(pool->Acquire().value(), 500001u);
  EXPECT_EQ(pool->Acquire().value(), 500003u);
}

TEST(HostIdPoolTest, AnIdComesBackOnlyOnceItsProcessIsGoneAndReaped) {
  auto pool = HostIdPool::ForTesting({600000, 1});
  auto lease = HostIdLease::Take(pool);
  ASSERT_TRUE(lease.ok());
  auto [pid, pidfd] = SpawnWaiting();
  ASSERT_TRUE(pidfd);
  lease->Watch(pidfd.get());
  lease->Reset();  // the run is over for its owner, not yet for the kernel
  EXPECT_EQ(pool->FreeCount(), 0u);
  EXPECT_FALSE(pool->Acquire().ok());
  ::kill(pid, SIGKILL);
  siginfo_t info;
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(pool->FreeCount(), 0u) << "a zombie still holds its id";
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  EXPECT_EQ(pool->FreeCount(), 1u);
  auto again = pool->Acquire();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 600000u);
}

TEST(HostIdPoolTest, ALeaseMovesWithItsRunAndAnEmptyOneHoldsNothing) {
  auto pool = HostIdPool::ForTesting({700000, 4});
  {
    auto a = HostIdLease::Take(pool);
    ASSERT_TRUE(a.ok());
    HostIdLease moved = std::move(*a);
    EXPECT_TRUE(moved);
    EXPECT_FALSE(*a);
    EXPECT_EQ(pool->FreeCount(), 3u);
  }
  EXPECT_EQ(pool->FreeCount(), 4u);
  auto none = HostIdLease::Take(nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
}

// The isolation report names the run's id and the range, or says, when there
// is no range (a server that is not root), that the layer is degraded and why.
TEST(HostIdReportTest, TheReportSaysWhichIdOrWhyNone) {
  HostSetup root;
  root.host_ids = HostIdPool::ForTesting({800000, 16});
  IsolationReport r = MakeIsolationReport(root, true, 800003);
  EXPECT_EQ(r.host_uid, 800003);
  bool seen = false;
  for (const LayerState& l : r.layers) {
    if (l.name != "host_ids") continue;
    seen = true;
    EXPECT_TRUE(l.enforced);
    EXPECT_NE(l.detail.find("800003"), std::string::npos) << l.detail;
    EXPECT_NE(l.detail.find("range 800000:16"), std::string::npos) << l.detail;
  }
  EXPECT_TRUE(seen);
  HostSetup user;
  user.host_ids_why_not = "the server is not root, so every run's uid 1000 is the server's own uid 1234";
  IsolationReport u = MakeIsolationReport(user, true, -1);
  EXPECT_EQ(u.host_uid, -1);
  for (const LayerState& l : u.layers) {
    if (l.name != "host_ids") continue;
    EXPECT_FALSE(l.enforced);
    EXPECT_EQ(l.detail.rfind("degraded: the server is not root", 0), 0u) << l.detail;
  }
}

}  // namespace
}  // namespace airlock::isolation
