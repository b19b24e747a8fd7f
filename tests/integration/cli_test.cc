// The airlock binary as a user runs it: airlock run FILE|-, --json, exit codes,
// limit flags, and airlock check.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "tests/integration/sandbox_fixture.h"

namespace airlock::test {
namespace {

using ::testing::HasSubstr;

struct Output {
  int exit_code = -1;
  std::string out;
};

std::string Binary() {
  const char* b = std::getenv("AIRLOCK_BINARY");
  return b ? b : AIRLOCK_BINARY_DEFAULT;
}

// Runs the binary with a shell command line; stdin from `input`.
Output RunCli(const std::string& args, const std::string& input = "") {
  char path[] = "/tmp/airlock-cli-in-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, input.data(), input.size()), static_cast<ssize_t>(input.size()));
  close(fd);
  std::string cmd = Binary() + " " + args + " < " + path + " 2>&1";
  Output o;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  int st = pclose(p);
  o.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  unlink(path);
  return o;
}

class CliTest : public SandboxTest {
 protected:
  // Where run cgroups can be on this host: the cgroups that hold the parents
  // PrepareHost detected (the host's own cgroup per hierarchy), searched a few
  // levels deep, since a child airlock may nest its parent one level further
  // (v2: an airlock-supervisor leaf).
  static std::vector<std::string> CgroupRoots() {
    std::vector<std::string> roots;
    const isolation::CgroupSetup& c = host_->cgroups;
    for (const std::string& dir :
         {c.v1_memory_parent, c.v1_pids_parent, c.v1_cpu_parent, c.v1_cpuacct_parent, c.v2_parent}) {
      if (dir.empty()) continue;
      std::string root = dir.substr(0, dir.find_last_of('/'));
      if (!root.empty() && std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
    }
    return roots;
  }

  // The cgroup directories named `prefix`* under `roots`, one a line.
  static std::string FindCgroups(const std::vector<std::string>& roots, const std::string& prefix) {
    std::string found;
    for (const std::string& dir : roots) {
      std::string cmd = "find '" + dir + "' -maxdepth 4 -type d -name '" + prefix + "*' 2>/dev/null";
      FILE* p = popen(cmd.c_str(), "r");
      char line[512];
      while (fgets(line, sizeof line, p)) found += line;
      pclose(p);
    }
    return found;
  }
};

TEST_F(CliTest, RunFromStdinPrintsAndExitsZero) {
  Output o = RunCli("run -", "print(sum(range(10)))\n");
  EXPECT_EQ(o.exit_code, 0) << o.out;
  EXPECT_EQ(o.out, "45\n");
}

TEST_F(CliTest, RunFileExitsWithTheProgramsCode) {
  char path[] = "/tmp/airlock-cli-prog-XXXXXX";
  int fd = mkstemp(path);
  std::string code = "import sys\nprint('bye')\nsys.exit(7)\n";
  ASSERT_EQ(write(fd, code.data(), code.size()), static_cast<ssize_t>(code.size()));
  close(fd);
  Output o = RunCli(std::string("run ") + path);
  unlink(path);
  EXPECT_EQ(o.exit_code, 7);
  EXPECT_EQ(o.out, "bye\n");
}

TEST_F(CliTest, SignalGives128PlusN) {
  Output o = RunCli("run -", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n");
  EXPECT_EQ(o.exit_code, 128 + 15) << o.out;
  EXPECT_THAT(o.out, HasSubstr("run killed (signal)"));
}

TEST_F(CliTest, TimeoutIsReportedAndKills) {
  Output o = RunCli("run --timeout 2 -", "print('start', flush=True)\nwhile True: pass\n");
  EXPECT_EQ(o.exit_code, 137) << o.out;
  EXPECT_THAT(o.out, HasSubstr("start"));
  EXPECT_THAT(o.out, HasSubstr("run killed (timeout): wall-clock limit of 2 s exceeded"));
}

// SIGTERM/SIGINT to airlock run cancel the run and still remove its cgroup.
TEST_F(CliTest, InterruptedRunLeavesNoCgroup) {
  if (host_->cgroups.version == isolation::CgroupVersion::kNone) {
    if (MustWork()) FAIL() << "no cgroups on this host: " << host_->cgroups.why_not;
    GTEST_SKIP() << "no cgroups on this host: " << host_->cgroups.why_not;
  }
  char path[] = "/tmp/airlock-cli-sleep-XXXXXX";
  int fd = mkstemp(path);
  std::string code = "import time\nprint('up', flush=True)\ntime.sleep(30)\n";
  ASSERT_EQ(write(fd, code.data(), code.size()), static_cast<ssize_t>(code.size()));
  close(fd);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    std::string bin = Binary();
    execl(bin.c_str(), bin.c_str(), "run", path, nullptr);
    _exit(127);
  }
  close(out[1]);
  // The program is running once its line arrived (python -u may write "up" and
  // "\n" separately, so read up to the newline).
  std::string up;
  char c;
  while (up.size() < 16 && read(out[0], &c, 1) == 1) {
    up += c;
    if (c == '\n') break;
  }
  EXPECT_EQ(up, "up\n");
  // The run's cgroup is there while it runs: the search below looks in the right places.
  std::vector<std::string> roots = CgroupRoots();
  std::string where;
  for (const std::string& r : roots) where += " " + r;
  std::cout << "[ host    ] run cgroups searched under:" << where << "\n";
  EXPECT_FALSE(roots.empty()) << "the host setup detected no cgroup parent";
  std::string prefix = "run-" + std::to_string(pid) + "-";
  EXPECT_NE(FindCgroups(roots, prefix), "") << "the running run's cgroup is not under" << where;
  kill(pid, SIGTERM);
  int st = 0;
  waitpid(pid, &st, 0);
  close(out[0]);
  unlink(path);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 128 + SIGTERM);
  EXPECT_EQ(FindCgroups(roots, prefix), "") << "left behind";
}

TEST_F(CliTest, JsonResultHasEveryField) {
  Output o = RunCli("run --json --memory 128M --pids 32 --disk 16M --output 10 -",
                    "print('0123456789abcdef')\nimport sys; print('err', file=sys.stderr)\n");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_TRUE(j["signal"].is_null());
  EXPECT_EQ(j["timed_out"], false);
  EXPECT_TRUE(j["kill_reason"].is_null());
  EXPECT_EQ(j["stdout"], "0123456789");
  EXPECT_EQ(j["stderr"], "err\n");
  EXPECT_EQ(j["truncated"]["stdout"], true);
  EXPECT_EQ(j["truncated"]["stderr"], false);
  EXPECT_GT(j["duration_ms"].get<double>(), 0);
  EXPECT_TRUE(j["usage"]["cpu_ms"].is_number());
  EXPECT_GT(j["usage"]["max_rss_kb"].get<int64_t>(), 0);
  for (const char* layer : {"user_namespace", "pid_namespace", "mount_namespace", "network_namespace",
                            "ipc_namespace", "uts_namespace", "cgroup_namespace", "cgroup", "rlimits",
                            "capabilities", "no_new_privs", "landlock", "seccomp"}) {
    ASSERT_TRUE(j["isolation"].contains(layer)) << layer;
    EXPECT_EQ(j["isolation"][layer]["enforced"], true) << layer;
  }
  EXPECT_GT(j["isolation"]["landlock_abi"].get<int>(), 0);
  EXPECT_THAT(j["isolation"]["cgroup_version"].get<std::string>(), ::testing::AnyOf("v1", "v2"));
}

TEST_F(CliTest, JsonReportsMemoryKill) {
  Output o = RunCli("run --json --memory 48M -", "print('before')\nx = []\nwhile True: x.append(bytearray(1 << 20))\n");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["kill_reason"], "memory");
  EXPECT_EQ(j["stdout"], "before\n");  // printed before the kill: kept (issue 25)
  EXPECT_EQ(j["signal"], 9);
  EXPECT_THAT(j["kill_detail"].get<std::string>(), HasSubstr("memory limit"));
}

TEST_F(CliTest, InvalidUtf8OutputIsReplacedInJson) {
  Output o = RunCli("run --json -", "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end')\n");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["stdout"], "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
}

// Whatever stops airlock from running the program is 125 (the README's
// promise), never a code the program could exit with.
TEST_F(CliTest, AirlocksOwnFailuresAre125) {
  EXPECT_EQ(RunCli("run --memory lots -", "print(1)").exit_code, 125);
  EXPECT_EQ(RunCli("run --allow-degraded=seccomp -", "print(1)").exit_code, 125);
  EXPECT_EQ(RunCli("run --no-such-flag -", "print(1)").exit_code, 125);
  Output o = RunCli("run /nonexistent/file.py");
  EXPECT_EQ(o.exit_code, 125);
  EXPECT_THAT(o.out, HasSubstr("cannot read the program"));
  EXPECT_EQ(RunCli("run --help").exit_code, 0);
}

// --profile, --language and --input run the program as POST /v1/execute
// does: the profile's analyzer and languages, input files in the working
// directory, the limit flags as the request's.
TEST_F(CliTest, RunsThroughAProfile) {
  const std::string profiles = std::string(" --profiles ") + AIRLOCK_SOURCE_DIR_DEFAULT + "/profiles ";
  char dir_template[] = "/tmp/airlock-cli-input-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  {
    std::ofstream f(dir + "/data.csv");
    f << "a,b\n1,2\n";
  }
  Output py = RunCli("run" + profiles + "--input " + dir + "/data.csv --input " + dir + "/data.csv=in/copy.csv -",
                     "import sys\nprint(open('data.csv').read() == open('in/copy.csv').read())\nsys.exit(4)\n");
  EXPECT_EQ(py.exit_code, 4) << py.out;
  EXPECT_EQ(py.out, "True\n");
  Output bash = RunCli("run" + profiles + "--language bash --input " + dir + "/data.csv -", "tail -n 1 data.csv\n");
  EXPECT_EQ(bash.exit_code, 0) << bash.out;
  EXPECT_EQ(bash.out, "1,2\n");
  if (::access("/usr/bin/node", X_OK) == 0) {
    Output js = RunCli("run" + profiles + "--language javascript -", "console.log([3, 1, 2].sort().join())\n");
    EXPECT_EQ(js.exit_code, 0) << js.out;
    EXPECT_EQ(js.out, "1,2,3\n");
  }
  // A refusal is airlock's: 125, the violation and where the code would run.
  Output refused = RunCli("run" + profiles + "--profile minimal -", "import numpy\n");
  EXPECT_EQ(refused.exit_code, 125);
  EXPECT_THAT(refused.out, HasSubstr("import of 'numpy' is not allowed"));
  EXPECT_THAT(refused.out, HasSubstr("allowed in: data-science, general, visualization"));
  EXPECT_EQ(RunCli("run" + profiles + "--language cobol -", "x").exit_code, 125);
  EXPECT_EQ(RunCli("run" + profiles + "--input /nonexistent.csv -", "x").exit_code, 125);
  // The limit flags given are the request's; --json is /v1/execute's response.
  Output j = RunCli("run --json" + profiles + "--profile general --timeout 1 -", "print('before')\nwhile True: pass\n");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  auto body = nlohmann::json::parse(j.out);
  EXPECT_EQ(body["kill_reason"], "timeout");
  EXPECT_EQ(body["stdout"], "before\n");
  EXPECT_EQ(body["profile"]["name"], "general");
  EXPECT_EQ(body["profile"]["timeout_s"], 1.0);
  ::unlink((dir + "/data.csv").c_str());
  ::rmdir(dir.c_str());
}

TEST_F(CliTest, CheckReportsEveryLayerAndPasses) {
  Output o = RunCli("check");
  EXPECT_EQ(o.exit_code, 0) << o.out;
  for (const char* row : {"user namespace", "pid namespace", "landlock", "seccomp filter", "cgroup limits",
                          "sandbox self-test"}) {
    EXPECT_THAT(o.out, HasSubstr(row));
  }
  EXPECT_THAT(o.out, HasSubstr("python3 ran as uid 1000, pid 2"));
  // The table's columns line up: every status starts where the header's does,
  // after at least two spaces (a name as long as the column used to touch it).
  std::istringstream lines(o.out);
  std::string header, line;
  std::getline(lines, header);
  const size_t col = header.find("status");
  ASSERT_NE(col, std::string::npos) << header;
  while (std::getline(lines, line) && !line.empty()) {
    ASSERT_GT(line.size(), col) << line;
    EXPECT_EQ(line.substr(col - 2, 2), "  ") << line;
    EXPECT_NE(line[col], ' ') << line;
  }
  Output j = RunCli("check --json");
  auto items = nlohmann::json::parse(j.out);
  ASSERT_TRUE(items.is_array());
  for (const auto& it : items) {
    if (it["required"] == true) {
      EXPECT_EQ(it["ok"], true) << it.dump();
    }
  }
}

// --uid-range (isolation/host_ids.h): a malformed range is a usage error; a
// range the host already uses is refused before anything runs, saying what to
// change; a free one gives the run an id of it, and `check` names it.
TEST_F(CliTest, UidRangeIsCheckedAndUsed) {
  Output bad = RunCli("run --uid-range 5:5 -", "print(1)");
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_THAT(bad.out, HasSubstr("above 1000"));
  if (::geteuid() != 0) {
    Output o = RunCli("run --uid-range 1879048192:16 -", "print(1)");
    EXPECT_EQ(o.exit_code, 125) << o.out;
    EXPECT_THAT(o.out, HasSubstr("needs a server running as root"));
    return;
  }
  // nobody (65534) is in every /etc/passwd.
  Output taken = RunCli("run --uid-range 65530:10 -", "print('RAN')");
  EXPECT_EQ(taken.exit_code, 125) << taken.out;
  EXPECT_THAT(taken.out, HasSubstr("/etc/passwd: user 'nobody' has uid 65534"));
  EXPECT_THAT(taken.out, HasSubstr("choose another range with --uid-range"));
  EXPECT_THAT(taken.out, ::testing::Not(HasSubstr("RAN")));
  // A free range, away from the default's blocks.
  const uint32_t start = 0x71000000u + static_cast<uint32_t>(::getpid() % 4096) * 1024;
  const std::string range = std::to_string(start) + ":1024";
  Output o = RunCli("run --json --uid-range " + range + " -", "import os\nprint(os.getuid())\n");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["stdout"], "1000\n");
  const int64_t uid = j["isolation"]["host_uid"].get<int64_t>();
  EXPECT_GE(uid, start);
  EXPECT_LT(uid, start + 1024);
  EXPECT_EQ(j["isolation"]["host_ids"]["enforced"], true);
  EXPECT_THAT(j["isolation"]["host_ids"]["detail"].get<std::string>(), HasSubstr("range " + range));
  Output c = RunCli("check --uid-range " + range);
  EXPECT_EQ(c.exit_code, 0) << c.out;
  EXPECT_THAT(c.out, HasSubstr("per-run host ids"));
  EXPECT_THAT(c.out, HasSubstr("range " + range + ", this process's block"));
  EXPECT_THAT(c.out, HasSubstr("its host uid and gid were"));
}

}  // namespace
}  // namespace airlock::test
