// Shared fixture for tests that run real programs in real sandboxes.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "exec/python_spec.h"
#include "exec/execution.h"
#include "isolation/sandbox.h"

namespace airlock::test {

inline bool MustWork() {
  const char* v = std::getenv("AIRLOCK_MUST_WORK");
  return v && std::string(v) == "1";
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
  void SetUp() override {
    if (host_) return;
    if (MustWork()) FAIL() << "the sandbox cannot run on this host: " << *setup_error_;
    GTEST_SKIP() << "the sandbox cannot run on this host: " << *setup_error_;
  }

  // Runs Python code with the given limits; the test fails on a launch error.
  exec::RunResult Py(const std::string& code, isolation::Limits limits = {}, double timeout_s = 10,
                     int64_t output_cap = 1 << 20, std::vector<std::string> ro_binds = {}) {
    isolation::Spec spec = exec::PythonSpec(code, limits, false);
    spec.ro_binds = std::move(ro_binds);
    exec::RunOptions options;
    options.timeout_s = timeout_s;
    options.output_cap = output_cap;
    auto r = exec::RunToCompletion(*host_, spec, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : exec::RunResult{};
  }

  // Runs a tests/helpers program (bound read-only into the sandbox at its host path).
  exec::RunResult Helper(const std::string& name, std::vector<std::string> args) {
    const char* dir = std::getenv("AIRLOCK_HELPERS_DIR");
    if (!dir) dir = AIRLOCK_HELPERS_DIR_DEFAULT;
    std::string path = std::string(dir) + "/" + name;
    isolation::Spec spec = exec::PythonSpec("", {}, false);
    spec.argv = {path};
    for (auto& a : args) spec.argv.push_back(std::move(a));
    spec.ro_binds = {dir};
    exec::RunOptions options;
    options.timeout_s = 10;
    auto r = exec::RunToCompletion(*host_, spec, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : exec::RunResult{};
  }

  static isolation::HostSetup* host_;
  static std::string* setup_error_;
};

inline isolation::HostSetup* SandboxTest::host_ = nullptr;
inline std::string* SandboxTest::setup_error_ = nullptr;

}  // namespace airlock::test
