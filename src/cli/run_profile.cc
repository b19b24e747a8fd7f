// `airlock run --profile|--language|--input ...`: one program run as
// /v1/execute runs it (the profile's analyzer, runner, languages, limits and
// files), on the cold path, from the shell.
#include "cli/run_profile.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "base/fs.h"
#include "base/sandbox_path.h"
#include "cli/commands.h"
#include "cli/runtime_setup.h"
#include "model/execute.h"

namespace airlock::cli {
namespace {

constexpr int kExitAirlockError = 125;
constexpr int64_t kMaxInputBytes = int64_t{64} << 20;  // one --input; the profile's files.max_in_bytes caps them all

bool Given(const RunFlags& flags, const char* name) {
  return std::find(flags.given.begin(), flags.given.end(), name) != flags.given.end();
}

// The limit flags given on the command line, as the request's limits (the
// profile clamps them; a flag left at its default asks for nothing).
bool RequestLimits(const RunFlags& flags, model::ExecuteRequest* req, std::string* error) {
  auto size = [&](const char* name, const std::string& text, std::optional<std::string>* out) {
    if (!Given(flags, name)) return true;
    int64_t bytes = ParseSize(text);
    if (bytes <= 0) {
      *error = std::string("--") + name + " '" + text + "' is not a size (e.g. 256M, 1G)";
      return false;
    }
    *out = std::to_string(bytes);
    return true;
  };
  if (!size("memory", flags.memory, &req->limits.memory) || !size("disk", flags.disk, &req->limits.disk) ||
      !size("output", flags.output, &req->limits.output)) {
    return false;
  }
  if (Given(flags, "timeout")) req->timeout_s = flags.timeout_s;
  if (Given(flags, "pids")) req->limits.pids = flags.pids;
  if (Given(flags, "cpus")) req->limits.cpu = flags.cpus;
  if (Given(flags, "cpu-time")) req->limits.cpu_time = flags.cpu_time_s;
  return true;
}

// --input LOCAL[=NAME]: the local file's bytes, placed as NAME (default: its
// base name) in the run's working directory.
bool ReadInputs(const RunFlags& flags, std::vector<model::InputFile>* out, std::string* error) {
  for (const std::string& spec : flags.inputs) {
    size_t eq = spec.find('=');
    std::string local = spec.substr(0, eq);
    std::string name = eq == std::string::npos ? local.substr(local.rfind('/') + 1) : spec.substr(eq + 1);
    if (Status st = CheckSandboxPath(name); !st.ok()) {
      *error = "--input " + spec + ": " + st.message() + " (write --input LOCAL=NAME)";
      return false;
    }
    auto data = ReadFile(local, kMaxInputBytes);
    if (!data.ok()) {
      *error = "--input " + spec + ": " + data.status().ToString();
      return false;
    }
    out->push_back({name, std::move(*data)});
  }
  return true;
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

int RunThroughProfile(const RunFlags& flags, std::string code, int cancel_fd, int* cancel_signal) {
  *cancel_signal = 0;
  RuntimeFlags rf;
  rf.profiles_dir = flags.profiles_dir;
  rf.allow_degraded = flags.allow_degraded;
  rf.uid_range = flags.uid_range;
  rf.pool_size = 0;  // one run: the cold path
  rf.sweep_stale_cgroups = false;
  rf.max_code_bytes = std::max(code.size(), size_t{1} << 20);
  int rc = 0;
  std::unique_ptr<Runtime> rt = BuildRuntime(rf, &rc);
  if (!rt) return kExitAirlockError;  // BuildRuntime said why

  model::ExecuteRequest req;
  req.code = std::move(code);
  req.profile = flags.profile.empty() ? rt->service->profiles().DefaultFor(profile::Door::kApi).name : flags.profile;
  req.language = flags.language;
  std::string error;
  if (!RequestLimits(flags, &req, &error) || !ReadInputs(flags, &req.files, &error)) {
    std::cerr << "airlock: " << error << "\n";
    return kExitAirlockError;
  }
  service::Prepared p = rt->service->Prepare(req, "cli");
  if (p.verdict == service::Verdict::kRejected) {
    std::cerr << "airlock: the code was not run: profile " << p.profile_name << " refuses it\n";
    for (const model::Violation& v : p.violations) std::cerr << "  " << v.compat << " [" << v.rule << "]\n";
    return kExitAirlockError;
  }
  if (p.verdict != service::Verdict::kRun) {
    std::cerr << "airlock: " << p.error.message << "\n";
    return kExitAirlockError;
  }
  service::Plan& plan = *p.plan;
  if (!flags.json) {
    plan.options.on_output = [](exec::Stream s, std::string_view data) {
      WriteAll(s == exec::Stream::kStdout ? STDOUT_FILENO : STDERR_FILENO, data);
    };
  }
  plan.options.cancel_fd = cancel_fd;
  auto ex = rt->service->Start(plan);
  if (!ex.ok()) {
    std::cerr << "airlock: " << ex.status().ToString() << "\n";
    return kExitAirlockError;
  }
  auto resp = rt->service->Supervise(plan, std::move(*ex));
  if (!resp.ok()) {
    std::cerr << "airlock: " << resp.status().ToString() << "\n";
    return kExitAirlockError;
  }
  const model::RunReport& run = resp->run;
  if (flags.json) {
    WriteAll(STDOUT_FILENO, model::V1ExecuteToJson(*resp) + "\n");
    return 0;
  }
  // The files the run wrote stay in its sandbox (they are gone with it); --json has them.
  if (!resp->files.empty()) {
    std::cerr << "airlock: the run wrote " << resp->files.size() << " file(s) (--json returns them, base64)\n";
  }
  if (run.stdout_truncated || run.stderr_truncated) {
    std::cerr << "airlock: output truncated at " << plan.limits.output_bytes << " bytes per stream\n";
  }
  if (run.kill_reason) std::cerr << "airlock: run killed (" << *run.kill_reason << "): " << run.kill_detail << "\n";
  if (run.kill_reason && *run.kill_reason == "cancelled") {
    *cancel_signal = 1;
    return 0;
  }
  return run.exit_code;
}

}  // namespace airlock::cli
