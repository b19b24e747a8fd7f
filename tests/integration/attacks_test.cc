// Real attacks from inside a real sandbox; each asserts the attack failed
// (issue: isolated one-shot execution). Nothing here is mocked.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sys/file.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "base/fs.h"
#include "tests/helpers/host_abi.h"
#include "tests/integration/sandbox_fixture.h"

namespace airlock::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TempDir() {
  char dir[] = "/tmp/airlock-attack-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return dir;
}

// Scans the host's /proc for any process whose command line carries `token`.
void ExpectNoHostProcessWith(const std::string& token) {
  DIR* proc = opendir("/proc");
  ASSERT_NE(proc, nullptr);
  while (dirent* e = readdir(proc)) {
    if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    auto cmd = ReadFile(std::string("/proc/") + e->d_name + "/cmdline");
    if (cmd.ok()) {
      EXPECT_EQ(cmd->find(token), std::string::npos) << "survivor: pid " << e->d_name;
    }
  }
  closedir(proc);
}

class AttackTest : public BothPathsTest {};
INSTANTIATE_TEST_SUITE_P(Paths, AttackTest, ::testing::Values(RunPath::kCold, RunPath::kWarm), RunPathName);

TEST_P(AttackTest, CannotReadAHostFileOutsideTheSandbox) {
  std::string dir = TempDir();
  std::string secret = dir + "/secret.txt";
  std::ofstream(secret) << "TOP-SECRET-7731";
  chmod(dir.c_str(), 0755);
  chmod(secret.c_str(), 0644);  // world-readable on the host: only the sandbox stands in the way
  // The project's own source tree, wherever it is checked out: the host can read it.
  const std::string source_file = std::string(AIRLOCK_SOURCE_DIR_DEFAULT) + "/CMakeLists.txt";
  ASSERT_TRUE(ReadFile(source_file).ok()) << "the host cannot read " << source_file;
  std::cout << "[ host    ] source tree file tried from inside: " << source_file << "\n";
  auto r = Py("import os\n"
              "for p in ['" + secret + "', '/proc/1/root" + secret + "', '/proc/self/root" + secret + "',\n"
              "          '/etc/shadow', '/root/.bashrc', '" + source_file + "']:\n"
              "    try:\n"
              "        print('READ', p, open(p).read()[:40])\n"
              "    except OSError as e:\n"
              "        print('DENIED', p, type(e).__name__)\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, Not(HasSubstr("TOP-SECRET")));
  EXPECT_THAT(r.out.data, Not(HasSubstr("READ ")));
  EXPECT_THAT(r.out.data, HasSubstr("DENIED " + secret));
  EXPECT_THAT(r.out.data, HasSubstr("DENIED " + source_file));
  unlink(secret.c_str());
  rmdir(dir.c_str());
}

TEST_P(AttackTest, CannotWriteOutsideTheWorkingDirectory) {
  auto r = Py("import os\n"
              "for p in ['/usr/airlock-pwn', '/etc/airlock-pwn', '/sandbox/airlock-pwn', '/airlock-pwn',\n"
              "          '/proc/airlock-pwn', '/dev/airlock-pwn']:\n"
              "    try:\n"
              "        open(p, 'w').write('x'); print('WROTE', p)\n"
              "    except OSError as e:\n"
              "        print('DENIED', p, e.errno)\n"
              "open('/tmp/ok.txt', 'w').write('fine'); print('TMP', open('/tmp/ok.txt').read())\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, Not(HasSubstr("WROTE")));
  EXPECT_THAT(r.out.data, HasSubstr("TMP fine"));
  EXPECT_FALSE(PathExists("/usr/airlock-pwn"));
  EXPECT_FALSE(PathExists("/etc/airlock-pwn"));
  EXPECT_FALSE(PathExists("/airlock-pwn"));
}

TEST_P(AttackTest, CannotConnectToATcpListenerOnTheHost) {
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_GE(ls, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(ls, 8), 0);
  socklen_t len = sizeof addr;
  getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  auto r = Py("import socket\n"
              "for fam, host in [(socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')]:\n"
              "    try:\n"
              "        s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(2)\n"
              "        s.connect((host, " + std::to_string(port) + ")); print('CONNECTED')\n"
              "    except OSError as e:\n"
              "        print('DENIED', e.errno)\n");
  EXPECT_THAT(r.out.data, Not(HasSubstr("CONNECTED")));
  EXPECT_THAT(r.out.data, HasSubstr("DENIED"));
  EXPECT_LT(accept(ls, nullptr, nullptr), 0) << "the host listener received a connection";
  close(ls);
}

TEST_P(AttackTest, CannotReachUnixSocketsOnTheHost) {
  std::string dir = TempDir();
  chmod(dir.c_str(), 0777);
  std::string path = dir + "/host.sock";
  int ps = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  snprintf(un.sun_path, sizeof un.sun_path, "%s", path.c_str());
  ASSERT_EQ(bind(ps, reinterpret_cast<sockaddr*>(&un), sizeof un), 0);
  chmod(path.c_str(), 0777);
  ASSERT_EQ(listen(ps, 8), 0);
  // An abstract socket: not a file, so only the namespaces and Landlock's scope keep it apart.
  std::string abstract_name = "airlock-test-" + std::to_string(getpid());
  int as = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_un aun{};
  aun.sun_family = AF_UNIX;
  memcpy(aun.sun_path + 1, abstract_name.data(), abstract_name.size());
  socklen_t alen = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + abstract_name.size());
  ASSERT_EQ(bind(as, reinterpret_cast<sockaddr*>(&aun), alen), 0);
  ASSERT_EQ(listen(as, 8), 0);

  auto r = Py("import socket\n"
              "for addr in ['" + path + "', '\\0" + abstract_name + "']:\n"
              "    try:\n"
              "        s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(addr); print('CONNECTED', addr)\n"
              "    except OSError as e:\n"
              "        print('DENIED', e.errno)\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, Not(HasSubstr("CONNECTED")));
  EXPECT_LT(accept(ps, nullptr, nullptr), 0);
  EXPECT_LT(accept(as, nullptr, nullptr), 0);
  close(ps);
  close(as);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

TEST_P(AttackTest, NoDnsAndNoUdp) {
  auto r = Py("import socket\n"
              "try:\n"
              "    print('RESOLVED', socket.getaddrinfo('example.com', 80))\n"
              "except OSError as e:\n"
              "    print('NO DNS', type(e).__name__)\n"
              "try:\n"
              "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('8.8.8.8', 53)); print('SENT')\n"
              "except OSError as e:\n"
              "    print('NO UDP', e.errno)\n");
  EXPECT_THAT(r.out.data, HasSubstr("NO DNS"));
  EXPECT_THAT(r.out.data, HasSubstr("NO UDP"));
  EXPECT_THAT(r.out.data, Not(HasSubstr("RESOLVED")));
  EXPECT_THAT(r.out.data, Not(HasSubstr("SENT")));
}

TEST_P(AttackTest, CannotSignalOrTraceOrInspectAHostProcess) {
  pid_t victim = fork();
  ASSERT_GE(victim, 0);
  if (victim == 0) {
    setenv("VICTIM_SECRET", "ENV-SECRET-5521", 1);
    execl("/bin/sleep", "sleep", "60", nullptr);
    _exit(1);
  }
  std::string pid = std::to_string(victim);
  auto r = Py("import os, signal, ctypes\n"
              "try:\n"
              "    os.kill(" + pid + ", signal.SIGKILL); print('KILLED')\n"
              "except OSError as e:\n"
              "    print('KILL DENIED', e.errno)\n"
              "try:\n"
              "    print('ENVIRON', open('/proc/" + pid + "/environ', 'rb').read())\n"
              "except OSError as e:\n"
              "    print('ENVIRON DENIED', e.errno)\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "rc = libc.ptrace(16, " + pid + ", 0, 0)  # PTRACE_ATTACH\n"
              "print('PTRACE', rc, ctypes.get_errno())\n"
              "print('PIDS', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, HasSubstr("KILL DENIED"));
  EXPECT_THAT(r.out.data, HasSubstr("ENVIRON DENIED"));
  EXPECT_THAT(r.out.data, HasSubstr("PTRACE -1 1\n"));  // EPERM: seccomp
  EXPECT_THAT(r.out.data, Not(HasSubstr("ENV-SECRET")));
  // Only the run's own processes exist in its pid namespace: its init (1) and itself (2).
  EXPECT_THAT(r.out.data, HasSubstr("PIDS [1, 2]"));
  int st = 0;
  EXPECT_EQ(waitpid(victim, &st, WNOHANG), 0) << "the host process died";
  kill(victim, SIGKILL);
  waitpid(victim, &st, 0);
}

TEST_P(AttackTest, CannotSignalItsOwnInit) {
  auto r = Py("import os, signal\n"
              "for sig in (signal.SIGKILL, signal.SIGTERM):\n"
              "    try:\n"
              "        os.kill(1, sig); print('SENT', sig)\n"
              "    except OSError as e:\n"
              "        print('DENIED', e.errno)\n"
              "print('ALIVE')\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, HasSubstr("ALIVE"));
  EXPECT_THAT(r.out.data, Not(HasSubstr("SENT")));
}

// A warm run shares its zygote's UTS namespace with the other runs of its
// zygote (isolation/warm_run.cc): what one run does to the hostname, the next
// would see. It can do nothing: the call is refused, and the next run (the
// same zygote's, when warm) still sees "sandbox".
TEST_P(AttackTest, CannotChangeTheHostnameTheNextRunSees) {
  auto r = Py("import socket\n"
              "for name in ('evil', 'sandbox'):\n"
              "    try:\n"
              "        socket.sethostname(name); print('SET', name)\n"
              "    except OSError as e:\n"
              "        print('DENIED', e.errno)\n"
              "print('HOST', socket.gethostname())\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, Not(HasSubstr("SET")));
  EXPECT_THAT(r.out.data, HasSubstr("DENIED 1"));  // EPERM
  EXPECT_THAT(r.out.data, HasSubstr("HOST sandbox"));
  auto next = Py("import socket\nprint('HOST', socket.gethostname(), socket.getfqdn())\n");
  EXPECT_EQ(next.exit_code, 0) << next.err.data;
  EXPECT_THAT(next.out.data, HasSubstr("HOST sandbox"));
  EXPECT_THAT(next.out.data, Not(HasSubstr("evil")));
}

TEST_P(AttackTest, DangerousSyscallsAreRefused) {
  auto r = Helper("try_syscall", {"mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "keyctl",
                                  "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
                                  "io_uring_setup", "kexec_load", "kexec_file_load", "init_module",
                                  "finit_module", "open_by_handle_at", "name_to_handle_at", "ptrace",
                                  "clone_newuser", "socket_inet", "socket_inet6", "socket_netlink",
                                  "socket_packet", "socket_alg", "socket_vsock", "splice", "vmsplice",
                                  "process_vm_readv", "setuid", "iopl", "ioperm", "swapon", "syslog",
                                  "reboot", "tiocsti"});
  ASSERT_EQ(r.exit_code, 0) << r.out.data << r.err.data;
  std::istringstream lines(r.out.data);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    EXPECT_THAT(line, Not(HasSubstr(" ok"))) << "a refused syscall succeeded: " << line;
    bool refused = line.find("errno=1 ") != std::string::npos ||   // EPERM
                   line.find("errno=97 ") != std::string::npos ||  // EAFNOSUPPORT
                   line.find("errno=38 ") != std::string::npos;    // ENOSYS
    EXPECT_TRUE(refused) << line;
  }
  EXPECT_EQ(count, 37) << r.out.data;
}

// What it protects: no system call of a foreign ABI executes inside a run.
// Where the host delivers it, seccomp kills the program (SIGSYS); where the
// host itself refuses it (a hypervisor that does not deliver `int $0x80`
// kills any 64-bit process with SIGSEGV), the run must die the same way. The
// host is probed first, unconfined, with the same helper (host_abi.h).
TEST_P(AttackTest, X32AndI386SyscallsKillTheProgram) {
  for (const char* abi : {"x32_getpid", "i386_getpid"}) {
    HostAbiOutcome host = ProbeAbiOnHost(HelpersDir() + "/try_syscall", abi);
    ASSERT_FALSE(host.probe_failed) << abi << ": " << host.Describe();
    std::cout << "[ host    ] " << abi << ": " << host.Describe() << "; expecting signal "
              << host.ExpectedSignalInSandbox() << " in the sandbox\n";
    auto r = Helper("try_syscall", {abi});
    EXPECT_THAT(r.out.data, Not(HasSubstr(std::string(abi) + " ok"))) << abi << " executed in the sandbox";
    EXPECT_EQ(r.signal, host.ExpectedSignalInSandbox()) << abi << " (" << host.Describe() << "): " << r.out.data;
    EXPECT_EQ(r.exit_code, 128 + host.ExpectedSignalInSandbox());
  }
}

TEST_P(AttackTest, ForkBombIsStoppedByThePidsLimit) {
  isolation::Limits limits;
  limits.pids = 16;
  auto r = Py("import os\n"
              "while True:\n"
              "    try:\n"
              "        os.fork()\n"
              "    except OSError:\n"
              "        pass\n",
              limits, 20);
  // Stopped by the pids limit, not by its 20 s timeout: what airlock says it did.
  EXPECT_EQ(exec::KillReasonName(r.kill_reason), std::string("pids")) << r.kill_detail;
  EXPECT_FALSE(r.timed_out);
  // The host still forks.
  pid_t p = fork();
  ASSERT_GE(p, 0);
  if (p == 0) _exit(0);
  int st;
  waitpid(p, &st, 0);
}

TEST_P(AttackTest, MemoryBombIsKilledWithReasonMemory) {
  isolation::Limits limits;
  limits.memory_bytes = 64 << 20;
  auto r = Py("x = []\n"
              "while True:\n"
              "    x.append(bytearray(1 << 20))\n",
              limits, 20);
  EXPECT_EQ(exec::KillReasonName(r.kill_reason), std::string("memory")) << r.kill_detail << r.err.data;
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_NE(r.exit_code, 0);
}

TEST_P(AttackTest, FillingTheWorkingDirectoryGivesEnospc) {
  isolation::Limits limits;
  limits.disk_bytes = 8 << 20;
  auto r = Py("import errno\n"
              "try:\n"
              "    with open('/tmp/fill', 'wb') as f:\n"
              "        while True:\n"
              "            f.write(b'x' * 65536); f.flush()\n"
              "except OSError as e:\n"
              "    print('FULL', errno.errorcode[e.errno])\n"
              "import os; print('SIZE', os.path.getsize('/tmp/fill') <= 8 << 20)\n",
              limits);
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, HasSubstr("FULL ENOSPC"));
  EXPECT_THAT(r.out.data, HasSubstr("SIZE True"));
}

TEST_P(AttackTest, SeesNoEnvironmentVariableOfTheParent) {
  setenv("AIRLOCK_PARENT_SECRET", "PARENT-SECRET-9913", 1);
  auto r = Py("import os\nprint(sorted(os.environ.items()))\nprint(open('/proc/self/environ','rb').read())\n");
  unsetenv("AIRLOCK_PARENT_SECRET");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, Not(HasSubstr("PARENT-SECRET")));
  EXPECT_THAT(r.out.data, HasSubstr("('HOME', '/home/user')"));
}

TEST_P(AttackTest, InheritsNoFileDescriptorOfTheParent) {
  int leaked = open("/etc/hostname", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 0);
  auto r = Py("import os\nprint('FDS', sorted(int(f) for f in os.listdir('/proc/self/fd')))\n");
  close(leaked);
  // 0-2 plus the fd listdir itself opened; a warm run also holds its result
  // channel (moved to a high number by the runner).
  if (path_ == RunPath::kCold) {
    EXPECT_THAT(r.out.data, HasSubstr("FDS [0, 1, 2, 3]"));
  } else {
    EXPECT_THAT(r.out.data, testing::MatchesRegex("FDS \\[0, 1, 2, 3, [0-9]+\\]\n"));
  }
}

TEST_P(AttackTest, RunsUnprivilegedWithEveryLayerInForce) {
  auto r = Py("import os, socket\n"
              "st = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
              "print('UID', os.getuid(), os.geteuid(), 'GID', os.getgid())\n"
              "print('CAPS', st['CapEff'].strip(), st['CapPrm'].strip(), st['CapBnd'].strip(), st['CapAmb'].strip())\n"
              "print('NNP', st['NoNewPrivs'].strip(), 'SECCOMP', st['Seccomp'].strip())\n"
              "print('HOST', socket.gethostname())\n"
              "print('PID', os.getpid())\n"
              "print('MAPS', open('/proc/self/uid_map').read().split())\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, HasSubstr("UID 1000 1000 GID 1000"));
  EXPECT_THAT(r.out.data, HasSubstr("CAPS 0000000000000000 0000000000000000 0000000000000000 0000000000000000"));
  EXPECT_THAT(r.out.data, HasSubstr("NNP 1 SECCOMP 2"));
  EXPECT_THAT(r.out.data, HasSubstr("HOST sandbox"));
  EXPECT_THAT(r.out.data, HasSubstr("PID 2"));
  EXPECT_THAT(r.out.data, Not(HasSubstr("'0'")));  // host root is not mapped
  for (const auto& layer : r.isolation.layers) {
    EXPECT_TRUE(layer.enforced) << layer.name << ": " << layer.detail;
  }
}

// No process of a run survives its end: daemons, setsid children and processes
// that ignore SIGTERM all go when the run times out.
TEST_P(AttackTest, TimeoutKillsEveryProcessOfTheRun) {
  std::string token = "4242." + std::to_string(getpid());
  // The timeout must cover setting up the sandbox, starting Python and the
  // forks below on a loaded host; the kill must then come within the time a
  // trivial run takes to launch here (at least 2 s).
  auto launch_start = std::chrono::steady_clock::now();
  auto trivial = Py("pass\n");
  const int64_t launch_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - launch_start).count();
  ASSERT_EQ(trivial.exit_code, 0) << trivial.err.data;
  // 5 s, or the launch time plus 3 s where launching alone takes longer.
  const double timeout_s = std::max(5.0, static_cast<double>(launch_ms) / 1000 + 3);
  const int64_t bound_ms = static_cast<int64_t>(timeout_s * 1000) + std::max<int64_t>(2000, launch_ms);
  std::cout << "[ host    ] a trivial run took " << launch_ms << " ms to launch and finish; timeout " << timeout_s
            << " s; the run must end within " << bound_ms << " ms\n";
  auto r = Py("import os, subprocess, time\n"
              "subprocess.Popen(['/bin/sh', '-c', 'trap \"\" TERM HUP; exec sleep " + token + "'], start_new_session=True)\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              "        os.execv('/bin/sleep', ['sleep', '" + token + "'])\n"
              "    os._exit(0)\n"
              "time.sleep(0.3)\n"
              "print('STARTED', flush=True)\n"
              "while True: pass\n",
              {}, timeout_s);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(exec::KillReasonName(r.kill_reason), std::string("timeout"));
  EXPECT_THAT(r.out.data, HasSubstr("STARTED"));
  EXPECT_GE(r.duration_ms, static_cast<int64_t>(timeout_s * 1000));
  EXPECT_LT(r.duration_ms, bound_ms);
  ExpectNoHostProcessWith(token);
}

TEST_P(AttackTest, ProgramExitingLeavesNoBackgroundProcess) {
  std::string token = "4343." + std::to_string(getpid());
  auto r = Py("import subprocess\n"
              "subprocess.Popen(['/bin/sleep', '" + token + "'], start_new_session=True)\n"
              "print('BYE')\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  // Ended with its program: a run waiting for the background sleep would end by its timeout.
  EXPECT_FALSE(r.timed_out) << r.kill_detail;
  EXPECT_EQ(r.kill_reason, exec::KillReason::kNone) << r.kill_detail;
  ExpectNoHostProcessWith(token);
}

// A run that parks its own stdout/stderr write ends in a unix socket's queue
// (SCM_RIGHTS to itself) and exits must not keep its result waiting for EOF.
TEST_P(AttackTest, WriteEndsParkedInASocketDoNotHoldTheResult) {
  auto r = Py("import array, os, socket\n"
              "a, b = socket.socketpair()\n"
              "fds = array.array('i', [1, 2, a.fileno(), b.fileno()])\n"
              "a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])\n"
              "b.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])\n"
              "print('parked', flush=True)\n"
              "os._exit(0)\n",
              {}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_EQ(r.out.data, "parked\n");
  // Answered when its program ended: a result waiting for EOF on the parked ends would come at
  // the 30 s timeout, with kill_reason "timeout".
  EXPECT_FALSE(r.timed_out) << r.kill_detail;
  EXPECT_EQ(r.kill_reason, exec::KillReason::kNone) << r.kill_detail;
}

// Issue 15.2: flock() works on a read-only descriptor and its lock belongs to
// the inode, so a run could lock the host's shared files. A host process (root)
// taking a shared lock on the same file must never be blocked by a run, for the
// read-only binds, the bound devices and the run's own executable.
TEST_P(AttackTest, LocksOnSharedFilesDoNotBlockTheHost) {
  char exe[PATH_MAX];
  const char* exe_path = path_ == RunPath::kWarm ? (std::getenv("AIRLOCK_BINARY") ? std::getenv("AIRLOCK_BINARY")
                                                                                   : AIRLOCK_BINARY_DEFAULT)
                                                 : "/usr/bin/python3";
  ASSERT_NE(realpath(exe_path, exe), nullptr) << exe_path;
  const std::vector<std::string> files = {"/usr/lib/python3.11/os.py", "/dev/null", exe};
  std::atomic<bool> done{false};
  exec::RunResult r;
  std::thread run([&] {
    r = Py("import fcntl, os, time\n"
           "held = []\n"
           "for p in ['/usr/lib/python3.11/os.py', '/dev/null', '/proc/self/exe']:\n"
           "    try:\n"
           "        f = open(p, 'rb'); fcntl.flock(f, fcntl.LOCK_EX); held.append(f)\n"
           "        g = open(p, 'rb'); fcntl.lockf(g, fcntl.LOCK_SH); held.append(g)\n"
           "        print('LOCKED', p, flush=True)\n"
           "    except OSError as e:\n"
           "        print('NOLOCK', p, e.errno, flush=True)\n"
           "time.sleep(2.5)\n",
           {}, 20);
    done = true;
  });
  std::vector<int> fds, flock_blocked(files.size()), posix_blocked(files.size());
  for (const auto& f : files) fds.push_back(open(f.c_str(), O_RDONLY | O_CLOEXEC));
  while (!done) {
    for (size_t i = 0; i < files.size(); ++i) {
      if (fds[i] < 0) continue;
      if (flock(fds[i], LOCK_SH | LOCK_NB) == 0) {
        flock(fds[i], LOCK_UN);
      } else if (errno == EWOULDBLOCK) {
        ++flock_blocked[i];
      }
      struct flock fl{};
      fl.l_type = F_WRLCK;
      fl.l_whence = SEEK_SET;
      if (fcntl(fds[i], F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) ++posix_blocked[i];
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  run.join();
  for (int fd : fds) close(fd);
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_THAT(r.out.data, HasSubstr("LOCKED /usr/lib/python3.11/os.py\n")) << r.out.data;
  EXPECT_THAT(r.out.data, HasSubstr("LOCKED /dev/null\n"));
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(flock_blocked[i], 0) << "a run's flock blocked the host's LOCK_SH on " << files[i] << "\n" << r.out.data;
    EXPECT_EQ(posix_blocked[i], 0) << "a run's POSIX read lock conflicts with a host writer on " << files[i];
  }
}

// Issue 15.2: two concurrent runs must not see each other's locks on shared
// files (flock, POSIX and OFD record locks): that was an exact covert channel.
TEST_P(AttackTest, LocksOnSharedFilesAreNoChannelBetweenRuns) {
  const std::string probe_files = "['/usr/lib/python3.11/os.py', '/dev/null']";
  std::atomic<bool> done{false};
  exec::RunResult sender;
  std::thread run([&] {
    isolation::Spec spec = exec::PythonSpec("import fcntl, time\n"
                                            "held = []\n"
                                            "for p in " + probe_files + ":\n"
                                            "    f = open(p, 'rb'); fcntl.flock(f, fcntl.LOCK_EX); held.append(f)\n"
                                            "    g = open(p, 'rb'); fcntl.lockf(g, fcntl.LOCK_SH); held.append(g)\n"
                                            "print('HOLDING', flush=True)\n"
                                            "time.sleep(4)\n",
                                            {}, false);
    exec::RunOptions options;
    options.timeout_s = 20;
    auto res = exec::RunToCompletion(*host_, spec, options);
    if (res.ok()) sender = *res;
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto r = Py("import fcntl, os, struct, time\n"
              "seen = set()\n"
              "end = time.time() + 3\n"
              "while time.time() < end:\n"
              "    for p in " + probe_files + ":\n"
              "        with open(p, 'rb') as f:\n"
              "            try:\n"
              "                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); fcntl.flock(f, fcntl.LOCK_UN)\n"
              "            except BlockingIOError:\n"
              "                seen.add('FLOCK ' + p)\n"
              "            for cmd in (fcntl.F_GETLK, 36):\n"  // 36: F_OFD_GETLK
              "                req = struct.pack('hhqqi4x', fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)\n"
              "                if struct.unpack('hhqqi4x', fcntl.fcntl(f, cmd, req))[0] != fcntl.F_UNLCK:\n"
              "                    seen.add('GETLK%d %s' % (cmd, p))\n"
              "    time.sleep(0.05)\n"
              "print('SEEN', sorted(seen))\n",
              {}, 20);
  run.join();
  EXPECT_EQ(sender.exit_code, 0) << sender.err.data;
  EXPECT_THAT(sender.out.data, HasSubstr("HOLDING"));
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_EQ(r.out.data, "SEEN []\n") << "a run saw another run's locks on shared files";
}

// What must keep working: flock (Python's filelock) and POSIX locks (SQLite)
// between the processes of one run, in its working directory and /dev/shm.
TEST_P(AttackTest, LocksInTheWorkingDirectoryStillExclude) {
  auto r = Py("import fcntl, sqlite3, subprocess, sys, time\n"
              "open('/tmp/child.py', 'w').write('''\n"
              "import fcntl, sqlite3, sys, time\n"
              "kind, path = sys.argv[1], sys.argv[2]\n"
              "if kind == 'flock':\n"
              "    b = open(path, 'w')\n"
              "    try:\n"
              "        fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB); sys.exit(1)\n"
              "    except BlockingIOError:\n"
              "        print('TRIED', flush=True)\n"
              "    t = time.time(); fcntl.flock(b, fcntl.LOCK_EX)\n"
              "    sys.exit(0 if time.time() - t > 0.3 else 2)\n"
              "c2 = sqlite3.connect(path, timeout=0)\n"
              "try:\n"
              "    c2.execute('begin immediate'); sys.exit(1)\n"
              "except sqlite3.OperationalError:\n"
              "    print('TRIED', flush=True)\n"
              "c2 = sqlite3.connect(path, timeout=10)\n"
              "c2.execute('begin immediate')\n"
              "sys.exit(0 if c2.execute('select count(*) from t').fetchone()[0] == 1 else 3)\n"
              "''')\n"
              "def child(*args):\n"
              "    p = subprocess.Popen([sys.executable, '/tmp/child.py', *args], stdout=subprocess.PIPE)\n"
              "    p.stdout.readline()\n"  // returns once the child found the lock taken
              "    time.sleep(0.5)\n"
              "    return p\n"
              "for path in ['/tmp/x.lock', '/dev/shm/x.lock']:\n"
              "    a = open(path, 'w'); fcntl.flock(a, fcntl.LOCK_EX)\n"
              "    p = child('flock', path)\n"
              "    fcntl.flock(a, fcntl.LOCK_UN)\n"
              "    print('FLOCK', path, p.wait(), flush=True)\n"
              "c1 = sqlite3.connect('/tmp/db.sqlite', isolation_level=None)\n"
              "c1.execute('create table t(x)'); c1.execute('begin immediate'); c1.execute('insert into t values (1)')\n"
              "p = child('sqlite', '/tmp/db.sqlite')\n"
              "c1.execute('commit')\n"
              "print('SQLITE', p.wait(), flush=True)\n",
              {}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_EQ(r.out.data, "FLOCK /tmp/x.lock 0\nFLOCK /dev/shm/x.lock 0\nSQLITE 0\n") << r.err.data;
}

// dnotify (fcntl F_NOTIFY) on a shared directory would report other runs'
// accesses, as inotify would: refused.
TEST_P(AttackTest, DnotifyIsRefused) {
  auto r = Py("import fcntl, os\n"
              "fd = os.open('/usr/lib/python3.11', os.O_RDONLY)\n"
              "try:\n"
              "    fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT); print('DNOTIFY ok')\n"
              "except OSError as e:\n"
              "    print('DNOTIFY', e.errno)\n");
  EXPECT_EQ(r.out.data, "DNOTIFY 1\n") << r.err.data;
}

// Kernel objects charged per user to the namespace's owner on the host must not
// be exhaustible from a run: inotify instances are refused outright.
TEST_P(AttackTest, InotifyIsRefused) {
  auto r = Py("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
              "print('INOTIFY', libc.inotify_init1(0), ctypes.get_errno())\n");
  EXPECT_THAT(r.out.data, HasSubstr("INOTIFY -1 1\n"));
}

// The run's init is a copy of the launching process: its command line (paths,
// options of the server) must not be readable through /proc/1/cmdline.
TEST_P(AttackTest, ParentCommandLineIsNotVisible) {
  auto r = Py("print(repr(open('/proc/1/cmdline', 'rb').read().strip(b'\\0')))\n");
  EXPECT_EQ(r.exit_code, 0) << r.err.data;
  EXPECT_EQ(r.out.data, "b''\n");
}

TEST_P(AttackTest, SpecPathsThatCouldReachTheHostAreRefused) {
  for (const char* path : {"/.oldroot/x", "/sandbox/../.oldroot/x", "/proc/x", "relative", "/sandbox/./x"}) {
    isolation::Spec spec = exec::PythonSpec("print(1)", {}, false);
    spec.files.push_back({path, "x", 0444});
    auto r = exec::RunToCompletion(*host_, spec, {});
    EXPECT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << path;
  }
}

TEST_P(AttackTest, OutputIsCutWhileProducedAndARunawayWriterIsKilled) {
  auto r = Py("import sys\nchunk = 'x' * 65536\nwhile True:\n    sys.stdout.write(chunk)\n", {}, 30, 4096);
  EXPECT_EQ(r.out.data.size(), 4096u);
  EXPECT_TRUE(r.out.truncated);
  EXPECT_EQ(exec::KillReasonName(r.kill_reason), std::string("output")) << r.kill_detail;
  EXPECT_FALSE(r.timed_out);
}

TEST_P(AttackTest, LargeOutputUnderTheKillThresholdIsTruncatedNotKilled) {
  auto r = Py("print('y' * 200000)\nprint('done')\n", {}, 10, 51200);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.data.size(), 51200u);
  EXPECT_TRUE(r.out.truncated);
  EXPECT_EQ(r.out.total_bytes, 200006u);
  EXPECT_EQ(r.kill_reason, exec::KillReason::kNone);
}

}  // namespace
}  // namespace airlock::test
