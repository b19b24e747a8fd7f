// A sandbox holds processes (issue 22): commands started inside a run by its
// init (exec::Sandbox), on both paths (a cold run and a warm session run).
// Real processes, real attacks from the started commands, each asserting what
// the sandbox did.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "base/fs.h"
#include "base/random.h"
#include "exec/process_watch.h"
#include "exec/sandbox.h"
#include "isolation/init_control.h"
#include "tests/integration/sandbox_fixture.h"

namespace airlock::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The run's own program while the sandbox lives: a Python that waits (cold),
// or a warm run made a session (its runner waits for calls).
constexpr const char* kIdleProgram = "import time\nwhile True:\n    time.sleep(3600)\n";

std::string Token() {
  return "tok" + std::to_string(::getpid()) + "x" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

bool Readable(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return ::poll(&p, 1, ms) > 0;
}

class SandboxProcessTest : public BothPathsTest {
 protected:
  struct Made {
    std::shared_ptr<exec::Sandbox> sandbox;
    UniqueFd program;  // a pidfd of the run's own program
  };

  // A sandbox on the test's path with these limits.
  Made MakeSandbox(isolation::Limits limits = {}, exec::SandboxOptions options = {}) {
    Made m;
    isolation::Spec spec;
    spec.limits = limits;
    isolation::Launched run;
    if (path_ == RunPath::kCold) {
      spec = exec::PythonSpec(kIdleProgram, limits, false);
      auto launched = isolation::Launch(*host_, spec);
      EXPECT_TRUE(launched.ok()) << launched.status().ToString();
      if (!launched.ok()) return m;
      run = std::move(*launched);
    } else {
      exec::SessionHandOff h = WarmSession(limits);
      if (!h.ok()) return m;
      run = std::move(h.run);
      sessions_.push_back(std::move(h.control));  // its runner waits for calls while this is open
      sessions_.push_back(std::move(h.events_read));
    }
    auto children = isolation::ChildrenOfPidfd(run.pidfd.get());
    EXPECT_TRUE(children.ok() && children->size() == 1);
    if (children.ok() && children->size() == 1) m.program.reset(static_cast<int>(::syscall(SYS_pidfd_open, children->front(), 0)));
    if (options.env.empty()) options.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/user", "LANG=C.UTF-8"};
    auto sb = exec::Sandbox::Make(*host_, std::move(run), spec, options);
    EXPECT_TRUE(sb.ok()) << sb.status().ToString();
    if (sb.ok()) m.sandbox = *sb;
    return m;
  }

  static bool ProgramAlive(const Made& m) { return m.program && !Readable(m.program.get(), 0); }

  // Runs a command to its end (blocking), its stdin `input` when given.
  exec::ProcessOutcome Run(const std::shared_ptr<exec::Sandbox>& sb, std::vector<std::string> argv, std::optional<std::string> input = {},
                           double timeout_s = 60, std::string cwd = "/home/user") {
    exec::ProcessRequest rq;
    rq.argv = std::move(argv);
    rq.cwd = std::move(cwd);
    rq.stdin_open = input.has_value();
    auto p = sb->Start(rq);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return {};
    if (input) {
      EXPECT_TRUE((*p)->SendInput(*input).ok());
      (*p)->CloseInput();
    }
    return Watch(sb, *p, timeout_s);
  }

  exec::ProcessOutcome Watch(const std::shared_ptr<exec::Sandbox>& sb, std::shared_ptr<exec::Process> p,
                             double timeout_s = 60) {
    exec::WatchOptions wo;
    wo.timeout_s = timeout_s;
    auto w = exec::ProcessWatch::Attach(std::move(p), sb, wo);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok()) return {};
    (*w)->WaitDone();
    return (*w)->Finish();
  }

  exec::ProcessOutcome Py(const std::shared_ptr<exec::Sandbox>& sb, const std::string& code, double timeout_s = 60) {
    return Run(sb, {"python3", "-I", "-c", code}, std::nullopt, timeout_s);
  }

  Made Keep(Made m) {
    if (m.sandbox) made_.push_back(m.sandbox);
    return m;
  }

  void TearDown() override {
    made_.clear();
    sessions_.clear();
  }

  std::vector<std::shared_ptr<exec::Sandbox>> made_;
  std::vector<UniqueFd> sessions_;
};
INSTANTIATE_TEST_SUITE_P(Paths, SandboxProcessTest, ::testing::Values(RunPath::kCold, RunPath::kWarm), RunPathName);

TEST_P(SandboxProcessTest, ACommandGetsItsInputArgumentsEnvironmentAndExitCode) {
  Made m = Keep(MakeSandbox());
  ASSERT_TRUE(m.sandbox);
  exec::ProcessRequest rq;
  rq.argv = {"/bin/sh", "-c", "read line; echo \"got $line in $(pwd) as $(id -u) $GREETING\"; echo oops >&2; exit 3"};
  rq.env = {"GREETING=hello"};
  rq.stdin_open = true;
  rq.tag = "first";
  auto p = m.sandbox->Start(rq);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE((*p)->SendInput("typed\n").ok());
  (*p)->CloseInput();
  exec::ProcessOutcome o = Watch(m.sandbox, *p);
  EXPECT_TRUE(o.exit.exited);
  EXPECT_EQ(o.exit.exit_code, 3);
  EXPECT_EQ(o.out.data, "got typed in /home/user as 1000 hello\n");
  EXPECT_EQ(o.err.data, "oops\n");
  // A name is looked up in the PATH; the working directory may be /tmp.
  o = Run(m.sandbox, {"pwd"}, std::nullopt, 60, "/tmp");
  EXPECT_EQ(o.out.data, "/tmp\n");
  auto list = m.sandbox->List();
  ASSERT_GE(list.size(), 2u);
  bool found = false;
  for (const auto& info : list) {
    if (info.tag == "first") {
      found = true;
      EXPECT_FALSE(info.running);
      EXPECT_EQ(info.exit.exit_code, 3);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(ProgramAlive(m));
}

TEST_P(SandboxProcessTest, CommandsShareOneWorkspaceAndOneDiskLimit) {
  Made m = Keep(MakeSandbox({.disk_bytes = 8ll << 20}));
  ASSERT_TRUE(m.sandbox);
  EXPECT_EQ(Run(m.sandbox, {"/bin/sh", "-c", "echo kept > /home/user/a.txt; mkdir -p d; echo t > /tmp/b.txt"})
                .exit.exit_code,
            0);
  exec::ProcessOutcome o = Run(m.sandbox, {"/bin/sh", "-c",
                                           "cat a.txt /tmp/b.txt; ls /home/user; ls /tmp | grep -vxF -- '" +
                                               HelpersTmpEntry() + "'"});
  EXPECT_EQ(o.out.data, "kept\nt\na.txt\nd\nb.txt\n");
  // Filling /home/user leaves nothing for /tmp: one tmpfs, one limit.
  o = Run(m.sandbox, {"/bin/sh", "-c",
                       "dd if=/dev/zero of=/home/user/fill bs=1M count=64 2>&1; echo dd=$?; "
                       "echo x > /tmp/more 2>&1; echo tmp=$?"});
  EXPECT_THAT(o.out.data, HasSubstr("No space left on device"));
  EXPECT_THAT(o.out.data, HasSubstr("dd=1"));
  EXPECT_THAT(o.out.data, Not(HasSubstr("tmp=0")));
  EXPECT_TRUE(m.sandbox->Alive());
  EXPECT_TRUE(ProgramAlive(m));
}

// Seen from the host: the fields of /proc/PID/status that say what a process
// may do, its namespaces, its cgroup and its limits.
std::map<std::string, std::string> Restrictions(pid_t pid) {
  std::map<std::string, std::string> out;
  const std::string dir = "/proc/" + std::to_string(pid);
  auto status = ReadFile(dir + "/status");
  if (!status.ok()) return out;
  std::istringstream lines(*status);
  for (std::string line; std::getline(lines, line);) {
    const std::string key = line.substr(0, line.find(':'));
    for (const char* k : {"Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
                          "Seccomp", "Seccomp_filters"}) {
      if (key == k) out[key] = line.substr(line.find(':') + 1);
    }
  }
  for (const char* ns : {"pid", "mnt", "ipc", "uts", "net", "user", "cgroup"}) {
    char target[128] = {};
    if (::readlink((dir + "/ns/" + ns).c_str(), target, sizeof target - 1) > 0) out[std::string("ns/") + ns] = target;
  }
  for (const char* file : {"cgroup", "limits"}) {
    auto text = ReadFile(dir + "/" + file);
    out[file] = text.ok() ? *text : "?";
  }
  return out;
}

TEST_P(SandboxProcessTest, AStartedProcessHasExactlyTheProgramsRestrictions) {
  Made m = Keep(MakeSandbox());
  ASSERT_TRUE(m.sandbox);
  auto sleeper = m.sandbox->Start({.argv = {"sleep", "1000"}});
  ASSERT_TRUE(sleeper.ok()) << sleeper.status().ToString();
  auto program = isolation::PidOfPidfd(m.program.get());
  ASSERT_TRUE(program.ok());
  auto children = isolation::ChildrenOfPidfd(m.sandbox->run().pidfd.get());
  ASSERT_TRUE(children.ok());
  ASSERT_EQ(children->size(), 2u);
  const pid_t started = children->front() == *program ? children->back() : children->front();
  auto prog = Restrictions(*program), self = Restrictions(started);
  ASSERT_FALSE(prog.empty());
  EXPECT_EQ(self, prog) << "a started process's credentials, capabilities, filters, namespaces, cgroup or "
                           "limits differ from the program's";
  EXPECT_THAT(self["CapBnd"], HasSubstr("0000000000000000"));
  EXPECT_THAT(self["CapEff"], HasSubstr("0000000000000000"));
  EXPECT_THAT(self["NoNewPrivs"], HasSubstr("1"));
  EXPECT_THAT(self["Seccomp"], HasSubstr("2"));
  // And from inside: its fds, and where it may write.
  exec::ProcessOutcome o = Py(m.sandbox,
                              "import os\n"
                              "print('FDS', sorted(os.listdir('/proc/self/fd')))\n"
                              "for p in ('/usr/x', '/etc/x', '/x', '/proc/1/environ'):\n"
                              "    try:\n"
                              "        open(p, 'w' if not p.endswith('environ') else 'r').close(); print('OPENED', p)\n"
                              "    except OSError as e:\n"
                              "        print('DENIED', p)\n");
  EXPECT_EQ(o.exit.exit_code, 0) << o.err.data;
  EXPECT_THAT(o.out.data, HasSubstr("FDS ['0', '1', '2', '3']"));  // 3: listdir's own
  EXPECT_THAT(o.out.data, Not(HasSubstr("OPENED")));
}

TEST_P(SandboxProcessTest, ACommandCannotReachTheHost) {
  Made m = Keep(MakeSandbox());
  ASSERT_TRUE(m.sandbox);
  // A host file anyone may read, a host TCP listener, a host process.
  char dir[] = "/tmp/airlock-sbx-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  chmod(dir, 0755);
  const std::string secret = std::string(dir) + "/secret.txt";
  std::ofstream(secret) << "HOST-SECRET-5521";
  chmod(secret.c_str(), 0644);
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  pid_t host_child = ::fork();
  if (host_child == 0) {
    ::pause();
    ::_exit(0);
  }
  const std::string code =
      "import os, socket, errno\n"
      "for p in ['" + secret + "', '/etc/shadow', '/proc/1/root" + secret + "']:\n"
      "    try:\n"
      "        print('READ', p, open(p).read())\n"
      "    except OSError as e:\n"
      "        print('DENIED', p)\n"
      "for fam in (socket.AF_INET, socket.AF_INET6):\n"
      "    try:\n"
      "        s = socket.socket(fam, socket.SOCK_STREAM)\n"
      "        s.settimeout(3)\n"
      "        s.connect(('127.0.0.1' if fam == socket.AF_INET else '::1', " + std::to_string(port) + "))\n"
      "        print('CONNECTED', fam)\n"
      "    except OSError as e:\n"
      "        print('NOCONNECT', fam, e.errno)\n"
      "try:\n"
      "    os.kill(" + std::to_string(host_child) + ", 9)\n"
      "    print('SIGNALLED')\n"
      "except OSError as e:\n"
      "    print('NOSIGNAL', e.errno)\n";
  exec::ProcessOutcome o = Py(m.sandbox, code);
  EXPECT_EQ(o.exit.exit_code, 0) << o.err.data;
  EXPECT_THAT(o.out.data, Not(HasSubstr("HOST-SECRET")));
  EXPECT_THAT(o.out.data, Not(HasSubstr("READ ")));
  EXPECT_THAT(o.out.data, Not(HasSubstr("CONNECTED")));
  // Its pid names nothing in the sandbox's pid namespace, or something of the sandbox.
  int status = 0;
  EXPECT_EQ(::waitpid(host_child, &status, WNOHANG), 0) << "the host process was killed from the sandbox";
  ::kill(host_child, SIGKILL);
  ::waitpid(host_child, &status, 0);
  // Nothing connected to the listener.
  struct pollfd pl = {listener, POLLIN, 0};
  EXPECT_EQ(::poll(&pl, 1, 0), 0);
  ::close(listener);
  unlink(secret.c_str());
  rmdir(dir);
}

TEST_P(SandboxProcessTest, ACommandCannotTouchInitOrLeaveThePidNamespace) {
  Made m = Keep(MakeSandbox());
  ASSERT_TRUE(m.sandbox);
  const std::string code =
      "import ctypes, os, signal\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "def call(name, f):\n"
      "    r = f()\n"
      "    print(name, r, ctypes.get_errno() if r != 0 else 0)\n"
      "call('ptrace_init', lambda: libc.ptrace(16, 1, 0, 0))\n"  // PTRACE_ATTACH
      "call('unshare_pid', lambda: libc.unshare(0x20000000))\n"
      "call('unshare_user', lambda: libc.unshare(0x10000000))\n"
      "fd = os.open('/proc/self/ns/pid', os.O_RDONLY)\n"
      "call('setns_own_pid', lambda: libc.setns(fd, 0x20000000))\n"
      "for p in ('/proc/1/environ', '/proc/1/mem', '/proc/1/fd'):\n"
      "    try:\n"
      "        (os.listdir(p) if p.endswith('fd') else open(p, 'rb').read(1)); print('READ', p)\n"
      "    except OSError as e:\n"
      "        print('DENIED', p)\n"
      "for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):\n"
      "    try:\n"
      "        os.kill(1, sig)\n"
      "    except OSError:\n"
      "        pass\n"
      "print('PIDS', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
      "print('NSPID', [l for l in open('/proc/self/status') if l.startswith('NSpid')])\n";
  exec::ProcessOutcome o = Py(m.sandbox, code);
  EXPECT_EQ(o.exit.exit_code, 0) << o.err.data;
  EXPECT_THAT(o.out.data, HasSubstr("ptrace_init -1 1\n"));  // EPERM
  EXPECT_THAT(o.out.data, HasSubstr("unshare_pid -1 1\n"));
  EXPECT_THAT(o.out.data, HasSubstr("unshare_user -1 1\n"));
  EXPECT_THAT(o.out.data, HasSubstr("setns_own_pid -1 1\n"));
  EXPECT_THAT(o.out.data, Not(HasSubstr("READ ")));
  // One pid in its own namespace only: it is in the sandbox's, not the host's.
  EXPECT_THAT(o.out.data, testing::ContainsRegex(R"(NSPID \['NSpid:\\t[0-9]+\\n'\])"));
  // Init shrugged off every signal: the sandbox and its program live on, and take more.
  EXPECT_TRUE(m.sandbox->Alive());
  EXPECT_TRUE(ProgramAlive(m));
  EXPECT_EQ(Run(m.sandbox, {"true"}).exit.exit_code, 0);
}

TEST_P(SandboxProcessTest, AForkBombStopsAtThePidsLimitAndTheProgramLives) {
  Made m = Keep(MakeSandbox({.pids = 32}));
  ASSERT_TRUE(m.sandbox);
  exec::ProcessRequest rq;
  // Forks until refused, then keeps every process it made alive.
  rq.argv = {"python3", "-I", "-c",
             "import os, time\n"
             "made = 0\n"
             "while True:\n"
             "    try:\n"
             "        if os.fork() == 0:\n"
             "            while True: time.sleep(1)\n"
             "        made += 1\n"
             "    except OSError:\n"
             "        print('REFUSED after', made, flush=True)\n"
             "        break\n"
             "while True: time.sleep(1)\n"};
  auto bomb = m.sandbox->Start(rq);
  ASSERT_TRUE(bomb.ok()) << bomb.status().ToString();
  exec::WatchOptions wo;
  std::string seen;
  wo.on_output = [&](exec::Stream, std::string_view d) { seen.append(d); };
  auto w = exec::ProcessWatch::Attach(*bomb, m.sandbox, wo);
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 600 && seen.find("REFUSED") == std::string::npos; ++i) {
    for (auto which : {exec::ProcessWatch::kOut}) {
      if (Readable((*w)->fd(which), 100)) (*w)->OnReady(which);
    }
  }
  EXPECT_THAT(seen, HasSubstr("REFUSED after"));
  ASSERT_TRUE(m.sandbox->run().cgroup);
  EXPECT_GT(m.sandbox->run().cgroup->ReadStats().pids_max_hits, 0u);
  // The sandbox's own processes outlive the bomb: the program, and init,
  // which ends the bomb's whole group on request.
  EXPECT_TRUE(ProgramAlive(m));
  EXPECT_TRUE(m.sandbox->Alive());
  ASSERT_TRUE(m.sandbox->Signal((*bomb)->pid(), SIGKILL).ok());
  (*w)->WaitDone();
  exec::ProcessOutcome o = (*w)->Finish();
  EXPECT_EQ(o.exit.signal, SIGKILL);
  // Its children were in its group: gone too, so there is room again.
  exec::ProcessOutcome again;
  for (int i = 0; i < 100; ++i) {
    again = Run(m.sandbox, {"true"});
    if (again.exit.exited) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(again.exit.exited);
  EXPECT_TRUE(ProgramAlive(m));
}

TEST_P(SandboxProcessTest, AMemoryHogIsKilledAndTheSandboxLivesOn) {
  Made m = Keep(MakeSandbox({.memory_bytes = 128ll << 20}));
  ASSERT_TRUE(m.sandbox);
  exec::ProcessOutcome o = Py(m.sandbox, "x = bytearray(1 << 30)\nx[::4096] = b'x' * (len(x) // 4096)\nprint('SURVIVED')\n");
  EXPECT_THAT(o.out.data, Not(HasSubstr("SURVIVED")));
  EXPECT_FALSE(o.exit.exited);
  EXPECT_EQ(o.exit.signal, SIGKILL);
  ASSERT_TRUE(m.sandbox->run().cgroup);
  EXPECT_GT(m.sandbox->run().cgroup->ReadStats().oom_kills, 0u);
  EXPECT_TRUE(m.sandbox->Alive());
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer the warm program is a fork of an instrumented
  // zygote: the shadow memory it touched counts in its RSS, which is what the
  // kernel's OOM killer ranks by, so it may outrank the hog even with the
  // hog's oom_score_adj raised. The normal build asserts it.
  if (GetParam() == RunPath::kCold) {
    EXPECT_TRUE(ProgramAlive(m));
  }
#else
  EXPECT_TRUE(ProgramAlive(m));
#endif
  EXPECT_EQ(Run(m.sandbox, {"true"}).exit.exit_code, 0);
}

TEST_P(SandboxProcessTest, ABackgroundCommandDiesWithItsSandbox) {
  Made m = MakeSandbox();
  ASSERT_TRUE(m.sandbox);
  const std::string token = Token();
  // A daemon: a session of its own, its parent gone, its output elsewhere.
  exec::ProcessOutcome o = Run(m.sandbox, {"/bin/bash", "-c", "setsid /bin/bash -c 'exec -a " + token +
                                                                 " sleep 1000' >/dev/null 2>&1 </dev/null & echo started"});
  EXPECT_EQ(o.out.data, "started\n");
  // The daemon once it is `sleep` (CI caught the wait reading a command line
  // in the middle of one of the chain's execs: empty for a moment).
  ASSERT_EQ(WaitForHostProcessWith(token, /*argv0_only=*/true), 1);
  std::vector<std::string> cgroup_dirs = m.sandbox->run().cgroup ? m.sandbox->run().cgroup->dirs() : std::vector<std::string>{};
  m.sandbox->Kill("test");
  EXPECT_FALSE(m.sandbox->Alive());
  EXPECT_EQ(HostProcessesWith(token), 0);
  m.sandbox.reset();  // the run's last holder: its cgroup goes
  for (const std::string& dir : cgroup_dirs) EXPECT_NE(::access(dir.c_str(), F_OK), 0) << dir;
}

TEST_P(SandboxProcessTest, NothingOutlivesTheSandboxsLifetime) {
  exec::SandboxOptions options;
  options.lifetime_s = 5;
  Made m = Keep(MakeSandbox({}, options));
  ASSERT_TRUE(m.sandbox);
  const std::string token = Token();
  auto p = m.sandbox->Start({.argv = {"python3", "-c", "import time; time.sleep(1000)", token}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(WaitForHostProcessWith(token), 1);
  // Its init ends it, whatever the server does: wait for that (bounded).
  for (int i = 0; i < 600 && m.sandbox->Alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(m.sandbox->Alive());
  EXPECT_EQ(HostProcessesWith(token), 0);
  std::optional<exec::ProcessExit> e = (*p)->Exit();
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->sandbox_ended);
  auto late = m.sandbox->Start({.argv = {"true"}});
  EXPECT_FALSE(late.ok());
}

TEST_P(SandboxProcessTest, TheSandboxOutlivesItsProgram) {
  Made m = Keep(MakeSandbox());
  ASSERT_TRUE(m.sandbox);
  ASSERT_TRUE(m.program);
  ASSERT_EQ(::syscall(SYS_pidfd_send_signal, m.program.get(), SIGKILL, nullptr, 0), 0);
  std::optional<int> status;
  for (int i = 0; i < 200 && !status; ++i) {
    status = m.sandbox->ProgramWaitStatus();
    if (!status) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);
  EXPECT_TRUE(m.sandbox->Alive());
  EXPECT_EQ(Run(m.sandbox, {"echo", "still here"}).out.data, "still here\n");
}

TEST_P(SandboxProcessTest, TwoSandboxesSeeNothingOfEachOther) {
  Made a = Keep(MakeSandbox());
  Made b = Keep(MakeSandbox());
  ASSERT_TRUE(a.sandbox && b.sandbox);
  const std::string token = Token();
  ASSERT_EQ(Run(a.sandbox, {"/bin/sh", "-c", "echo " + token + " > /home/user/secret; echo x > /tmp/" + token})
                .exit.exit_code,
            0);
  auto sleeper = a.sandbox->Start({.argv = {"python3", "-c", "import time; time.sleep(1000)", token}});
  ASSERT_TRUE(sleeper.ok());
  ASSERT_EQ(WaitForHostProcessWith(token), 1);
  exec::ProcessOutcome o = Py(b.sandbox,
                              "import os\n"
                              "print('HOME', os.listdir('/home/user'), 'TMP', [n for n in os.listdir('/tmp') if n != '" +
                                  HelpersTmpEntry() + "'])\n"
                              "for p in os.listdir('/proc'):\n"
                              "    if p.isdigit():\n"
                              "        try:\n"
                              "            print('CMD', open(f'/proc/{p}/cmdline', 'rb').read())\n"
                              "        except OSError:\n"
                              "            pass\n");
  EXPECT_EQ(o.exit.exit_code, 0) << o.err.data;
  EXPECT_THAT(o.out.data, HasSubstr("HOME [] TMP []"));
  EXPECT_THAT(o.out.data, Not(HasSubstr(token)));
  // A's pid means nothing to B: B started no such process.
  EXPECT_EQ(b.sandbox->Signal((*sleeper)->pid(), SIGKILL).code(), ErrorCode::kNotFound);
  EXPECT_FALSE((*sleeper)->Exit());
  EXPECT_EQ(HostProcessesWith(token), 1);
}

TEST_P(SandboxProcessTest, SignalsListAndBadRequests) {
  Made m = Keep(MakeSandbox());
  ASSERT_TRUE(m.sandbox);
  auto p = m.sandbox->Start({.argv = {"sleep", "1000"}, .tag = "sleeper"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto list = m.sandbox->List();
  ASSERT_FALSE(list.empty());
  EXPECT_EQ(list.front().tag, "sleeper");
  EXPECT_TRUE(list.front().running);
  ASSERT_TRUE(m.sandbox->Signal((*p)->pid(), SIGTERM).ok());
  exec::ProcessOutcome o = Watch(m.sandbox, *p);
  EXPECT_EQ(o.exit.signal, SIGTERM);
  EXPECT_EQ(o.exit.exit_code, 128 + SIGTERM);
  EXPECT_FALSE(m.sandbox->List().front().running);
  // Ended: no more signals, no input.
  EXPECT_EQ(m.sandbox->Signal((*p)->pid(), SIGTERM).code(), ErrorCode::kNotFound);
  EXPECT_EQ((*p)->SendInput("x").code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(m.sandbox->Signal(999999, SIGTERM).code(), ErrorCode::kNotFound);
  // Bad requests, each said clearly.
  auto missing = m.sandbox->Start({.argv = {"/usr/bin/no-such-program"}});
  EXPECT_EQ(missing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(missing.status().ToString(), HasSubstr("could not be executed"));
  EXPECT_EQ(m.sandbox->Start({.argv = {"true"}, .cwd = "/etc"}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(m.sandbox->Start({.argv = {"true"}, .cwd = "/home/user/../../etc"}).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(m.sandbox->Start({.argv = {}}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(m.sandbox->Start({.argv = {"true"}, .cwd = "/home/user/nowhere"}).status().code(),
            ErrorCode::kInvalidArgument);
  // A second watch on a watched process is refused.
  auto q = m.sandbox->Start({.argv = {"sleep", "1000"}});
  ASSERT_TRUE(q.ok());
  auto w1 = exec::ProcessWatch::Attach(*q, m.sandbox, {});
  ASSERT_TRUE(w1.ok());
  EXPECT_EQ(exec::ProcessWatch::Attach(*q, m.sandbox, {}).status().code(), ErrorCode::kFailedPrecondition);
  w1->reset();
  // A timeout kills it (and its group).
  exec::ProcessOutcome t = Watch(m.sandbox, *q, 0.2);
  EXPECT_EQ(t.kill_reason, exec::KillReason::kTimeout);
  EXPECT_EQ(t.exit.signal, SIGKILL);
  EXPECT_TRUE(ProgramAlive(m));
}

TEST_P(SandboxProcessTest, LockCallsOfStartedProcessesAreAnswered) {
  Made m = Keep(MakeSandbox());
  ASSERT_TRUE(m.sandbox);
  // flock on the workspace works (init takes it on the caller's behalf) and
  // conflicts between two processes; a lock on a shared system file takes nothing.
  exec::ProcessOutcome o = Py(m.sandbox,
                              "import fcntl, os\n"
                              "f = open('/home/user/l', 'w')\n"
                              "fcntl.flock(f, fcntl.LOCK_EX)\n"
                              "pid = os.fork()\n"
                              "if pid == 0:\n"
                              "    g = open('/home/user/l', 'w')\n"
                              "    try:\n"
                              "        fcntl.flock(g, fcntl.LOCK_EX | fcntl.LOCK_NB); print('CHILD LOCKED', flush=True)\n"
                              "    except OSError:\n"
                              "        print('CHILD REFUSED', flush=True)\n"
                              "    os._exit(0)\n"
                              "os.waitpid(pid, 0)\n"
                              "u = open('/usr/lib/os-release')\n"
                              "fcntl.flock(u, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                              "print('SHARED OK')\n");
  EXPECT_EQ(o.exit.exit_code, 0) << o.err.data;
  EXPECT_THAT(o.out.data, HasSubstr("CHILD REFUSED"));
  EXPECT_THAT(o.out.data, HasSubstr("SHARED OK"));
}

TEST_P(SandboxProcessTest, TheSandboxTakesItsMostProcessesAndSaysSo) {
  // Cold: pids room for more than init's table; warm: the pool's runs have
  // 64 pids, the same as the table, so the pids limit refuses first. Either
  // way the refusal says so and the sandbox goes on.
  Made m = Keep(MakeSandbox({.pids = 256}));
  ASSERT_TRUE(m.sandbox);
  std::vector<std::shared_ptr<exec::Process>> held;
  Status last = Status::Ok();
  for (int i = 0; i <= isolation::internal::kMaxStartedProcesses; ++i) {
    auto p = m.sandbox->Start({.argv = {"sleep", "1000"}});
    if (!p.ok()) {
      last = p.status();
      break;
    }
    held.push_back(*p);
  }
  EXPECT_EQ(last.code(), ErrorCode::kResourceExhausted) << last.ToString();
  EXPECT_LE(held.size(), static_cast<size_t>(isolation::internal::kMaxStartedProcesses));
  if (path_ == RunPath::kCold) {
    EXPECT_EQ(held.size(), static_cast<size_t>(isolation::internal::kMaxStartedProcesses));
    EXPECT_THAT(last.ToString(), HasSubstr("most processes started at once"));
  }
  ASSERT_FALSE(held.empty());
  ASSERT_TRUE(m.sandbox->Signal(held.front()->pid(), SIGKILL).ok());
  Watch(m.sandbox, held.front());
  ASSERT_TRUE(m.sandbox->Signal(held.back()->pid(), SIGKILL).ok());
  Watch(m.sandbox, held.back());
  EXPECT_TRUE(m.sandbox->Start({.argv = {"true"}}).ok());
  EXPECT_TRUE(ProgramAlive(m));
}


// What the server writes on the control channel is bounded and checked by
// init: each malformed message is answered with an error, its fds closed,
// and init serves on. (Only the server writes there; this is init's own
// robustness.)
TEST_P(SandboxProcessTest, InitAnswersMalformedControlMessagesAndServesOn) {
  namespace in = isolation::internal;
  Made m = Keep(MakeSandbox());
  ASSERT_TRUE(m.sandbox);
  const int fd = m.sandbox->run().status_fd.get();
  uint32_t seq = 1000;
  // Sends `bytes` (its header's seq and size set when it has one) and returns init's errno.
  auto ask = [&](std::string bytes, std::vector<int> fds = {}, bool fix_header = true) -> int {
    if (fix_header && bytes.size() >= sizeof(in::ControlHeader)) {
      in::ControlHeader h;
      memcpy(&h, bytes.data(), sizeof h);
      h.seq = ++seq;
      h.size = static_cast<uint32_t>(bytes.size());
      memcpy(bytes.data(), &h, sizeof h);
    }
    struct iovec iov = {bytes.data(), bytes.size()};
    char control[CMSG_SPACE(sizeof(int) * 8)] = {};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    EXPECT_EQ(::sendmsg(fd, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size())) << strerror(errno);
    in::Reply r{};
    for (int i = 0; i < 100; ++i) {
      if (!Readable(fd, 100)) continue;
      ssize_t n = ::recv(fd, &r, sizeof r, 0);
      if (n == static_cast<ssize_t>(sizeof r) && r.h.type == in::kCtlReply) return r.err;
    }
    ADD_FAILURE() << "init did not answer";
    return -1;
  };
  auto start = [](uint32_t flags, uint32_t argc, uint32_t envc, const std::string& strings) {
    in::StartRequest rq{};
    rq.h = {in::kControlMagic, in::kCtlStart, 0, 0};
    rq.flags = flags;
    rq.argc = argc;
    rq.envc = envc;
    rq.strings_size = static_cast<uint32_t>(strings.size());
    return std::string(reinterpret_cast<const char*>(&rq), sizeof rq) + strings;
  };
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const std::string ok_strings = std::string("/home/user\0/bin/true\0", 22);
  EXPECT_EQ(ask("abc", {}, false), EBADMSG);                                        // no header
  in::ControlHeader bad{0xdeadbeef, in::kCtlSignal, 0, 0};
  EXPECT_EQ(ask(std::string(reinterpret_cast<const char*>(&bad), sizeof bad)), EBADMSG);  // magic
  in::ControlHeader unknown{in::kControlMagic, 77, 0, 0};
  EXPECT_EQ(ask(std::string(reinterpret_cast<const char*>(&unknown), sizeof unknown)), EBADMSG);  // type
  in::ControlHeader lying{in::kControlMagic, in::kCtlSignal, 5, 4096};
  EXPECT_EQ(ask(std::string(reinterpret_cast<const char*>(&lying), sizeof lying), {}, false), EBADMSG);  // size
  EXPECT_EQ(ask(start(in::kStartStdinNull, 1, 0, "/home/user\0/bin/true")), EINVAL);  // no NUL at the end
  EXPECT_EQ(ask(start(in::kStartStdinNull, 0, 0, std::string("/home/user\0", 11))), EINVAL);  // no argv
  EXPECT_EQ(ask(start(in::kStartStdinNull, 1, 0, std::string("rel\0/bin/true\0", 15))), EINVAL);  // relative cwd
  EXPECT_EQ(ask(start(in::kStartStdinNull, 1, 0, ok_strings)), EINVAL);  // no fds at all
  EXPECT_EQ(ask(start(0, 1, 0, ok_strings), {pipe_fds[1], pipe_fds[1], pipe_fds[1]}), EINVAL);  // stdin's fd missing
  EXPECT_EQ(ask(start(in::kStartStdinNull, 1, 5, ok_strings), {pipe_fds[1], pipe_fds[1], pipe_fds[1]}), EINVAL);
  EXPECT_EQ(ask(std::string(200 * 1024, 'x') + start(in::kStartStdinNull, 1, 0, ok_strings), {}, false), E2BIG);
  in::SignalRequest sig{};
  sig.h = {in::kControlMagic, in::kCtlSignal, 0, 0};
  sig.sig = SIGKILL;
  sig.pid = 1;  // init itself: not a process it started
  EXPECT_EQ(ask(std::string(reinterpret_cast<const char*>(&sig), sizeof sig)), ESRCH);
  sig.pid = 2;  // the program: not one either
  EXPECT_EQ(ask(std::string(reinterpret_cast<const char*>(&sig), sizeof sig)), ESRCH);
  in::SandboxRequest again{};
  again.h = {in::kControlMagic, in::kCtlSandbox, 0, 0};
  EXPECT_EQ(ask(std::string(reinterpret_cast<const char*>(&again), sizeof again)), EALREADY);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  // Nothing of that reached a process, and init serves on.
  EXPECT_TRUE(ProgramAlive(m));
  EXPECT_EQ(Run(m.sandbox, {"echo", "fine"}).out.data, "fine\n");
}

}  // namespace
}  // namespace airlock::test
