// Shared fixture for tests that run real programs in real sandboxes.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include <dirent.h>
#include <poll.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "exec/python_spec.h"
#include "exec/execution.h"
#include "exec/warm_pool.h"
#include "isolation/sandbox.h"
#include "tests/helpers/must_work.h"

namespace airlock::test {

// Which path a parametrized test runs its code on: a fresh sandbox and python3
// (cold), or a run handed off by a warm pool's zygote (warm).
enum class RunPath { kCold, kWarm };

inline std::string RunPathName(const ::testing::TestParamInfo<RunPath>& info) {
  return info.param == RunPath::kCold ? "Cold" : "Warm";
}

// How many host processes have `token` in their command line.
// Host processes whose command line has `token` (argv0_only: as argv[0]
// exactly, e.g. `exec -a TOKEN sleep`: a chain of execs on the way there shows
// an empty command line for a moment in each exec, and the processes before
// the last exec have the token elsewhere in theirs).
inline int HostProcessesWith(const std::string& token, bool argv0_only = false) {
  int n = 0;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  while (dirent* e = readdir(proc)) {
    if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (argv0_only ? cmd.compare(0, cmd.find('\0'), token) == 0 : cmd.find(token) != std::string::npos) ++n;
  }
  closedir(proc);
  return n;
}

// Waits (bounded: 60 s, for a busy host) until a host process has `token` in
// its command line; how many do then.
inline int WaitForHostProcessWith(const std::string& token, bool argv0_only = false) {
  for (int i = 0; i < 6000 && HostProcessesWith(token, argv0_only) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return HostProcessesWith(token, argv0_only);
}

class SandboxTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (host_) return;
    auto h = isolation::PrepareHost({});
    if (h.ok()) {
      host_ = new isolation::HostSetup(std::move(h).value());
    } else {
      setup_error_ = new std::string(h.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    if (pools_) pools_->clear();  // kills the zygotes and their ready runs
  }
  void SetUp() override {
    if (host_) return;
    if (MustWork()) FAIL() << "the sandbox cannot run on this host: " << *setup_error_;
    GTEST_SKIP() << "the sandbox cannot run on this host: " << *setup_error_;
  }

  static std::string HelpersDir() {
    const char* dir = std::getenv("AIRLOCK_HELPERS_DIR");
    return dir ? dir : AIRLOCK_HELPERS_DIR_DEFAULT;
  }

  // A warm pool whose runs have this disk size (one per size, made on first use).
  exec::WarmPool* WarmPoolFor(int64_t disk_bytes) {
    if (!pools_) pools_ = new std::map<int64_t, std::unique_ptr<exec::WarmPool>>();
    auto it = pools_->find(disk_bytes);
    if (it != pools_->end()) return it->second.get();
    exec::PoolOptions o;
    exec::PoolProfile p;
    p.name = "test";
    p.limits.disk_bytes = disk_bytes;
    o.profiles = {p};
    o.size = 2;
    o.zygote_env = {"PATH=/usr/bin:/bin", "HOME=/home/user", "TMPDIR=/tmp", "LANG=C.UTF-8", "OPENBLAS_NUM_THREADS=1"};
    o.zygote_limits.memory_bytes = int64_t{8} << 30;
    o.zygote_limits.pids = 4096;
    o.zygote_limits.cpus = 0;
    o.zygote_limits.disk_bytes = int64_t{1} << 30;
    o.zygote_limits.open_files = 4096;
    o.ro_binds = {HelpersDir()};
    const char* bin = std::getenv("AIRLOCK_BINARY");
    o.zygote_binary = bin ? bin : AIRLOCK_BINARY_DEFAULT;
    auto pool = exec::WarmPool::Start(*host_, o);
    if (!pool.ok()) {
      ADD_FAILURE() << "warm pool: " << pool.status().ToString();
      return nullptr;
    }
    return pools_->emplace(disk_bytes, std::move(*pool)).first->second.get();
  }

  // Runs code through a warm pool's hand-off (waiting up to 60 s for a ready run).
  exec::RunResult WarmPy(const std::string& code, const isolation::Limits& limits, double timeout_s,
                         int64_t output_cap,
                         std::function<void(exec::Stream, std::string_view)> on_output = nullptr) {
    exec::WarmPool* pool = WarmPoolFor(limits.disk_bytes);
    if (pool == nullptr) return {};
    isolation::Spec spec;
    spec.limits = limits;
    exec::RunOptions options;
    options.timeout_s = timeout_s;
    options.output_cap = output_cap;
    options.on_output = std::move(on_output);
    nlohmann::json req = {{"code", code},           {"filename", "main.py"}, {"allowed_imports", nullptr},
                          {"result_fd", 3},         {"capture_figures", false}};
    exec::HandOff h;
    for (int i = 0; i < 1200 && !h.execution; ++i) {
      h = pool->TakeRun("test", spec, options, req.dump());
      if (!h.execution) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!h.execution) {
      ADD_FAILURE() << "no warm run became ready: " << h.why_not;
      return {};
    }
    exec::Execution& ex = *h.execution;
    int chan = h.events_read.get();
    char buf[4096];
    while (!ex.Exited()) {
      int wait_ms = ex.OnTick();
      struct pollfd fds[4];
      nfds_t n = 0;
      for (int fd : {ex.stdout_fd(), ex.stderr_fd(), ex.pidfd(), chan}) {
        if (fd >= 0) fds[n++] = {fd, POLLIN, 0};
      }
      if (::poll(fds, n, wait_ms) <= 0) continue;
      for (nfds_t i = 0; i < n; ++i) {
        if (!fds[i].revents) continue;
        if (fds[i].fd == chan) {
          if (::read(chan, buf, sizeof buf) == 0) chan = -1;  // result events: not looked at here
        } else {
          ex.OnReadable(fds[i].fd);
        }
      }
    }
    exec::RunResult r = ex.Finish();
    EXPECT_EQ(r.isolation.mode, "warm");
    return r;
  }

  // A warm run made a session (its runner then waits for calls on h.control),
  // waiting up to 60 s for one to be ready; !ok() after a test failure.
  exec::SessionHandOff WarmSession(const isolation::Limits& limits) {
    exec::SessionHandOff h;
    exec::WarmPool* pool = WarmPoolFor(limits.disk_bytes);
    if (pool == nullptr) return h;
    isolation::Spec spec;
    spec.limits = limits;
    nlohmann::json req = {{"code", ""}, {"filename", "main.py"}, {"allowed_imports", nullptr},
                          {"result_fd", 3}, {"capture_figures", false}, {"session", true}};
    for (int i = 0; i < 1200 && !h.ok(); ++i) {
      h = pool->TakeSession("test", spec, req.dump());
      if (!h.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(h.ok()) << h.why_not;
    return h;
  }

  // Runs Python code with the given limits on the test's path; the test fails
  // on a launch error. The default timeout is far above what a run that is
  // meant to end takes even on a busy host: no verdict rests on it (a test
  // about timeouts passes its own).
  exec::RunResult Py(const std::string& code, isolation::Limits limits = {}, double timeout_s = 30,
                     int64_t output_cap = 1 << 20, std::vector<std::string> ro_binds = {}) {
    if (path_ == RunPath::kWarm) {
      EXPECT_TRUE(ro_binds.empty()) << "a warm run has no per-run binds";
      return WarmPy(code, limits, timeout_s, output_cap);
    }
    isolation::Spec spec = exec::PythonSpec(code, limits, false);
    spec.ro_binds = std::move(ro_binds);
    exec::RunOptions options;
    options.timeout_s = timeout_s;
    options.output_cap = output_cap;
    auto r = exec::RunToCompletion(*host_, spec, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : exec::RunResult{};
  }

  // Py() with each piece of output given to on_output as it arrives (from the
  // thread that calls this), for tests that run several programs at once.
  exec::RunResult PyWatched(const std::string& code, std::function<void(exec::Stream, std::string_view)> on_output,
                            double timeout_s = 20) {
    if (path_ == RunPath::kWarm) return WarmPy(code, {}, timeout_s, 1 << 20, std::move(on_output));
    isolation::Spec spec = exec::PythonSpec(code, {}, false);
    exec::RunOptions options;
    options.timeout_s = timeout_s;
    options.on_output = std::move(on_output);
    auto r = exec::RunToCompletion(*host_, spec, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : exec::RunResult{};
  }

  // Runs a tests/helpers program (bound read-only into the sandbox at its host path).
  // On the warm path the run's Python execs it (the program is then the helper).
  exec::RunResult Helper(const std::string& name, std::vector<std::string> args) {
    std::string dir = HelpersDir();
    std::string path = dir + "/" + name;
    if (path_ == RunPath::kWarm) {
      nlohmann::json argv = nlohmann::json::array({path});
      for (auto& a : args) argv.push_back(a);
      return WarmPy("import json, os\nargv = json.loads(" + nlohmann::json(argv.dump()).dump() +
                        ")\nos.execv(argv[0], argv)\n",
                    {}, 30, 1 << 20);
    }
    isolation::Spec spec = exec::PythonSpec("", {}, false);
    spec.argv = {path};
    for (auto& a : args) spec.argv.push_back(std::move(a));
    spec.ro_binds = {dir};
    exec::RunOptions options;
    options.timeout_s = 30;
    auto r = exec::RunToCompletion(*host_, spec, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : exec::RunResult{};
  }

  RunPath path_ = RunPath::kCold;
  static isolation::HostSetup* host_;
  static std::string* setup_error_;
  static std::map<int64_t, std::unique_ptr<exec::WarmPool>>* pools_;
};

inline isolation::HostSetup* SandboxTest::host_ = nullptr;
inline std::string* SandboxTest::setup_error_ = nullptr;
inline std::map<int64_t, std::unique_ptr<exec::WarmPool>>* SandboxTest::pools_ = nullptr;

// A suite whose tests run on both paths: TEST_P(Suite, ...) and
// INSTANTIATE_TEST_SUITE_P(Paths, Suite, ::testing::Values(RunPath::kCold, RunPath::kWarm), RunPathName).
class BothPathsTest : public SandboxTest, public ::testing::WithParamInterface<RunPath> {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    path_ = GetParam();
  }
};

}  // namespace airlock::test
