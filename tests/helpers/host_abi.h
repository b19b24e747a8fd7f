// What this host does with a foreign-ABI system call outside any sandbox.
//
// The sandbox must make sure no system call of another ABI (i386 through
// `int $0x80`, x32 numbers) executes inside a run. How a refusal looks depends
// on the host as well as on the sandbox: where the kernel (or the hypervisor
// under it) does not deliver the i386 entry at all, `int $0x80` kills any
// 64-bit process with SIGSEGV before seccomp ever sees it. Tests therefore run
// the same probe (tests/helpers/try_syscall) on the host first, unconfined,
// and expect inside the sandbox:
//   - where the host runs the call (it returns, with a value or an errno):
//     SIGSYS, the seccomp filter's kill;
//   - where the host itself refuses it with a signal: that same signal, and
//     never the probe's "ok" line.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace airlock::test {

struct HostAbiOutcome {
  bool ran = false;    // the call returned on the host (its line says ok or errno=N)
  int signal = 0;      // else: the signal the host killed the probe with
  std::string output;  // what the probe printed
  bool probe_failed = false;

  std::string Describe() const {
    if (probe_failed) return "the probe could not run: " + output;
    if (ran) return "the host runs it (" + output.substr(0, output.find('\n')) + ")";
    return std::string("the host itself refuses it: the probe dies of signal ") + std::to_string(signal) + " (" +
           ::strsignal(signal) + ") outside any sandbox";
  }
  // The signal a run must die of when it tries the same call.
  int ExpectedSignalInSandbox() const { return ran ? SIGSYS : signal; }
};

// Runs `helper name` (try_syscall) on the host, unconfined, and says how it ended.
inline HostAbiOutcome ProbeAbiOnHost(const std::string& helper, const std::string& name) {
  HostAbiOutcome r;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    r.probe_failed = true;
    r.output = "pipe2 failed";
    return r;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    const char* argv[] = {helper.c_str(), name.c_str(), nullptr};
    ::execv(helper.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(p[1]);
  char buf[512];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid) {
    r.probe_failed = true;
    r.output = "fork/waitpid failed";
    return r;
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && r.output.rfind(name + " ", 0) == 0) {
    r.ran = true;
  } else if (WIFSIGNALED(st)) {
    r.signal = WTERMSIG(st);
  } else {
    r.probe_failed = true;
    r.output = "exit status " + std::to_string(st) + ": " + r.output;
  }
  return r;
}

}  // namespace airlock::test
