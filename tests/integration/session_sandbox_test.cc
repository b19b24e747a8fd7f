// A session's sandbox (issue 22): commands started next to a session's live
// interpreter (session::LiveSession::OpenSandbox) share its workspace and its
// limits; the interpreter lives through a command's fork bomb and memory hog,
// and everything dies with the session.
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/fs.h"
#include "exec/process_watch.h"
#include "exec/sandbox.h"
#include "session/live_session.h"
#include "tests/integration/sandbox_fixture.h"

namespace airlock::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class SessionSandboxTest : public SandboxTest {
 protected:
  std::shared_ptr<session::LiveSession> NewSession(isolation::Limits limits) {
    exec::SessionHandOff h = WarmSession(limits);
    if (!h.ok()) return nullptr;
    isolation::Spec spec;
    spec.limits = limits;
    return std::make_shared<session::LiveSession>(std::move(h), spec, size_t{8} << 20);
  }

  session::CallOutcome Call(session::LiveSession& live, const std::string& code) {
    nlohmann::json frame = {{"frame", "call"}, {"code", code}, {"call", ++calls_}, {"line_buffered", false}};
    session::CallOptions options;
    options.timeout_s = 60;
    return live.Call(frame.dump(), calls_, options);
  }

  exec::ProcessOutcome Run(const std::shared_ptr<exec::Sandbox>& sb, std::vector<std::string> argv) {
    auto p = sb->Start({.argv = std::move(argv)});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return {};
    auto w = exec::ProcessWatch::Attach(*p, sb, {.timeout_s = 60});
    EXPECT_TRUE(w.ok());
    if (!w.ok()) return {};
    (*w)->WaitDone();
    return (*w)->Finish();
  }

  int64_t calls_ = 0;
};

TEST_F(SessionSandboxTest, CommandsJoinTheSessionAndItsInterpreterOutlivesTheirExcess) {
  auto live = NewSession({.memory_bytes = 256ll << 20, .pids = 32});
  ASSERT_TRUE(live);
  session::CallOutcome c = Call(*live, "x = 41\n");
  ASSERT_TRUE(c.alive) << c.end_reason;
  auto sandbox = live->OpenSandbox(*host_, {.env = {"PATH=/usr/bin:/bin", "HOME=/home/user"}});
  ASSERT_TRUE(sandbox.ok()) << sandbox.status().ToString();
  std::shared_ptr<exec::Sandbox> sb = *sandbox;

  // One workspace, both ways.
  EXPECT_EQ(Run(sb, {"/bin/sh", "-c", "echo -n from-command > from_cmd.txt"}).exit.exit_code, 0);
  c = Call(*live, "print(open('from_cmd.txt').read(), x + 1)\nopen('/tmp/from_py.txt', 'w').write('from-python')\n");
  EXPECT_EQ(c.result.out.data, "from-command 42\n") << c.result.err.data;
  EXPECT_EQ(Run(sb, {"cat", "/tmp/from_py.txt"}).out.data, "from-python");

  // A fork bomb meets the session's pids limit; the interpreter lives on.
  // (It stays to the end, so that its whole group can be killed at once.)
  const int64_t tasks_before = sb->run().cgroup->ReadTaskCount();
  ASSERT_GT(tasks_before, 0);
  auto bomb = sb->Start({.argv = {"python3", "-c",
                                  "import os, time\n"
                                  "while True:\n"
                                  "    try:\n"
                                  "        if os.fork() == 0:\n"
                                  "            time.sleep(1000)\n"
                                  "    except OSError:\n"
                                  "        break\n"
                                  "time.sleep(1000)\n"}});
  ASSERT_TRUE(bomb.ok());
  for (int i = 0; i < 400 && sb->run().cgroup->ReadStats().pids_max_hits == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_GT(sb->run().cgroup->ReadStats().pids_max_hits, 0u);
  ASSERT_TRUE(sb->Signal((*bomb)->pid(), SIGKILL).ok());
  // pids.current, not cgroup.procs: a killed child stays counted by the pids
  // controller (and blocks the next fork) until the sandbox's init reaps it,
  // while cgroup.procs stops listing it at its exit (a CI machine saw the
  // memory hog below refused a fork after cgroup.procs had already emptied).
  for (int i = 0; i < 400 && sb->run().cgroup->ReadTaskCount() > tasks_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(sb->run().cgroup->ReadTaskCount(), tasks_before);
  c = Call(*live, "print(x)\n");
  EXPECT_TRUE(c.alive) << c.end_reason;
  EXPECT_EQ(c.result.out.data, "41\n") << c.result.kill_detail;

  // A memory hog is killed; the interpreter lives on.
  exec::ProcessOutcome hog = Run(sb, {"python3", "-c", "x = bytearray(1 << 30)\nx[::4096] = b'x' * (len(x) // 4096)\n"});
  EXPECT_EQ(hog.exit.signal, SIGKILL);
  EXPECT_GT(sb->run().cgroup->ReadStats().oom_kills, 0u);
  c = Call(*live, "print(x * 2)\n");
  EXPECT_TRUE(c.alive) << c.end_reason;
  EXPECT_EQ(c.result.out.data, "82\n");
  EXPECT_TRUE(live->Alive());

  // The interpreter's end is the session's, and a background command goes with it.
  const std::string token = "tok" + std::to_string(::getpid()) + "session";
  ASSERT_TRUE(sb->Start({.argv = {"python3", "-c", "import time; time.sleep(1000)", token}}).ok());
  ASSERT_EQ(WaitForHostProcessWith(token), 1);
  c = Call(*live, "import os\nos._exit(7)\n");
  EXPECT_FALSE(c.alive);
  EXPECT_THAT(c.end_reason, HasSubstr("exited with code 7"));
  EXPECT_FALSE(live->Alive());
  live->Kill("the interpreter ended");
  EXPECT_EQ(HostProcessesWith(token), 0);
  EXPECT_FALSE(sb->Alive());
}

TEST_F(SessionSandboxTest, ASessionThatNeverOpensItsSandboxEndsWithItsInterpreterAsBefore) {
  auto live = NewSession({});
  ASSERT_TRUE(live);
  session::CallOutcome c = Call(*live, "import os\nos._exit(3)\n");
  EXPECT_FALSE(c.alive);
  EXPECT_THAT(c.end_reason, HasSubstr("exited with code 3"));
  EXPECT_EQ(c.result.exit_code, 3);
  // Its init ended the run with the interpreter (no sandbox held it).
  for (int i = 0; i < 200 && live->Alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  struct pollfd p = {live->pidfd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 2000), 1);
}

}  // namespace
}  // namespace airlock::test
