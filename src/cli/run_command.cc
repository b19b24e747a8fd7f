// `airlock run FILE|-`: one program, one fresh sandbox, its exit code.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "base/fs.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "cli/commands.h"
#include "cli/run_profile.h"
#include "exec/python_spec.h"
#include "exec/execution.h"
#include "model/run_report.h"
#include "service/service.h"

namespace airlock::cli {
namespace {

// airlock's own failures (bad flags, host not capable), distinct from the
// program's exit codes, as docker and podman do.
constexpr int kExitAirlockError = 125;
constexpr size_t kMaxCodeBytes = 8 << 20;

StatusOr<std::string> ReadProgram(const std::string& file) {
  if (file != "-") return ReadFile(file, kMaxCodeBytes);
  std::string code;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read(stdin)");
    if (n == 0) break;
    code.append(buf, static_cast<size_t>(n));
    if (code.size() > kMaxCodeBytes) return InvalidArgument("the program is larger than 8 MiB");
  }
  return code;
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own stdout closed: keep running, drop the output
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

// Every failure of airlock's own is 125 (as docker's and podman's), so that a
// program's own exit codes, 2 included, keep their meaning.
int RunCommand(const RunFlags& flags) {
  // Ctrl-C, SIGTERM and SIGHUP cancel the run (and remove its cgroup) instead
  // of killing airlock with the run's state left behind.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, sig);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  UniqueFd stop_fd(signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK));
  auto cancelled_code = [&]() {
    struct signalfd_siginfo info {};
    if (read(stop_fd.get(), &info, sizeof info) == sizeof info) return 128 + static_cast<int>(info.ssi_signo);
    return 128 + SIGINT;
  };
  if (flags.ThroughProfile()) {
    auto code = ReadProgram(flags.file);
    if (!code.ok()) {
      std::cerr << "airlock: cannot read the program: " << code.status().ToString() << "\n";
      return kExitAirlockError;
    }
    int cancelled = 0;
    int rc = RunThroughProfile(flags, std::move(*code), stop_fd.get(), &cancelled);
    return cancelled ? cancelled_code() : rc;
  }

  isolation::Limits limits;
  limits.memory_bytes = ParseSize(flags.memory);
  limits.disk_bytes = ParseSize(flags.disk);
  int64_t output_cap = ParseSize(flags.output);
  if (limits.memory_bytes < (8 << 20)) {
    std::cerr << "airlock: --memory '" << flags.memory << "' is not a size of at least 8M (e.g. 256M, 1G)\n";
    return kExitAirlockError;
  }
  if (limits.disk_bytes < 4096) {
    std::cerr << "airlock: --disk '" << flags.disk << "' is not a size of at least 4K (e.g. 64M)\n";
    return kExitAirlockError;
  }
  if (output_cap < 0) {
    std::cerr << "airlock: --output '" << flags.output << "' is not a size (e.g. 1M, 65536)\n";
    return kExitAirlockError;
  }
  limits.pids = flags.pids;
  limits.cpus = flags.cpus;
  limits.cpu_time_ms = static_cast<int64_t>(flags.cpu_time_s * 1000);

  isolation::HostOptions host_options;
  std::string error;
  if (!ParseDegradable(flags.allow_degraded, &host_options.degradable, &error) ||
      !ParseUidRange(flags.uid_range, &host_options.id_range, &error)) {
    std::cerr << "airlock: " << error << "\n";
    return kExitAirlockError;
  }
  auto code = ReadProgram(flags.file);
  if (!code.ok()) {
    std::cerr << "airlock: cannot read the program: " << code.status().ToString() << "\n";
    return kExitAirlockError;
  }
  auto host = isolation::PrepareHost(host_options);
  if (!host.ok()) {
    std::cerr << "airlock: " << host.status().ToString() << "\n";
    return kExitAirlockError;
  }

  // Unbuffered whatever the output's use: what the program printed before a
  // kill (timeout, memory) is in the --json result too.
  isolation::Spec spec = exec::PythonSpec(*code, limits, /*unbuffered=*/true);
  exec::RunOptions options;
  options.timeout_s = flags.timeout_s;
  options.output_cap = output_cap;
  if (!flags.json) {
    options.on_output = [](exec::Stream s, std::string_view data) {
      WriteAll(s == exec::Stream::kStdout ? STDOUT_FILENO : STDERR_FILENO, data);
    };
  }
  options.cancel_fd = stop_fd.get();
  auto result = exec::RunToCompletion(*host, spec, std::move(options));
  if (!result.ok()) {
    std::cerr << "airlock: " << result.status().ToString() << "\n";
    return kExitAirlockError;
  }
  if (flags.json) {
    std::string json = model::RunReportToJson(service::ToRunReport(*result), /*pretty=*/true);
    json += '\n';
    WriteAll(STDOUT_FILENO, json);
    return 0;
  }
  if (result->out.truncated || result->err.truncated) {
    std::cerr << "airlock: output truncated at " << output_cap << " bytes per stream ("
              << result->out.total_bytes << " bytes written to stdout, " << result->err.total_bytes
              << " to stderr)\n";
  }
  if (const char* reason = exec::KillReasonName(result->kill_reason)) {
    std::cerr << "airlock: run killed (" << reason << "): " << result->kill_detail << "\n";
  }
  if (result->kill_reason == exec::KillReason::kCancelled) return cancelled_code();
  return result->exit_code;
}

}  // namespace airlock::cli
