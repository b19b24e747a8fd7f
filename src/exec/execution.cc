#include "exec/execution.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "base/fs.h"
#include "base/log.h"

namespace airlock::exec {
namespace {

constexpr int kStatsIntervalMs = 20;
// A run that keeps writing after its cap is a runaway: once it has written this
// much more than it was allowed to keep, it is killed (kill_reason "output").
int64_t OutputKillThreshold(int64_t cap) { return std::max<int64_t>(16ll << 20, 8 * cap); }

std::string FormatSeconds(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Waits (up to 2 s) until the run's init is gone: it exits last, once the
// kernel has emptied its pid namespace.
void WaitForInit(const isolation::Launched& run) {
  if (!run.pidfd) return;
  struct pollfd p = {run.pidfd.get(), POLLIN, 0};
  while (::poll(&p, 1, 2000) < 0 && errno == EINTR) {
  }
}

}  // namespace

StatusOr<std::unique_ptr<Execution>> Execution::Start(const isolation::HostSetup& host,
                                                      const isolation::Spec& spec, RunOptions options) {
  std::unique_ptr<Execution> ex(new Execution());
  ex->spec_ = spec;
  ex->options_ = std::move(options);
  ex->start_ = Clock::now();
  ex->deadline_ = ex->start_ + std::chrono::microseconds(static_cast<int64_t>(ex->options_.timeout_s * 1e6));
  ex->next_stats_ = ex->start_ + Millis(kStatsIntervalMs);
  ASSIGN_OR_RETURN(ex->run_, isolation::Launch(host, spec));
  ex->result_.isolation = ex->run_.report;
  return ex;
}

int64_t ZygoteLife::PrivateMemoryBytes() const {
  if (pid <= 0 || Died(0)) return 0;
  auto status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  if (!status.ok()) return 0;
  const size_t at = status->find("\nRssAnon:");
  if (at == std::string::npos) return 0;
  return std::strtoll(status->c_str() + at + 9, nullptr, 10) * 1024;  // "RssAnon:   123456 kB"
}

bool ZygoteLife::Died(int wait_ms) const {
  if (!pidfd) return false;
  struct pollfd p = {pidfd.get(), POLLIN, 0};
  return ::poll(&p, 1, wait_ms) > 0;
}

bool ZygoteLife::DiedOrDying(int wait_ms) const {
  if (!pidfd) return false;
  if (Died(0) || isolation::PidfdProcessExiting(pidfd.get())) return true;
  return Died(wait_ms);
}

std::unique_ptr<Execution> Execution::Adopt(isolation::Launched run, const isolation::Spec& spec, RunOptions options,
                                            std::shared_ptr<const ZygoteLife> zygote) {
  std::unique_ptr<Execution> ex(new Execution());
  ex->spec_ = spec;
  ex->options_ = std::move(options);
  ex->start_ = Clock::now();
  ex->deadline_ = ex->start_ + std::chrono::microseconds(static_cast<int64_t>(ex->options_.timeout_s * 1e6));
  ex->next_stats_ = ex->start_ + Millis(kStatsIntervalMs);
  ex->run_ = std::move(run);
  ex->run_.adopted = true;
  ex->zygote_ = std::move(zygote);
  if (ex->run_.cgroup) ex->cpu_baseline_ns_ = ex->run_.cgroup->ReadCpuUsageNs();
  ex->result_.isolation = ex->run_.report;
  return ex;
}

Execution::~Execution() {
  const bool kill = !finished_ || finished_on_end_;
  if (run_.adopted) {
    // Abandoned, or answered from the program's end event while the run was
    // still being torn down: kill it by the one kill path (its init, and the
    // CPU quota lifted, or a throttled run would take its time to die).
    // Either way, wait until the init is gone: it goes last (the kernel
    // empties its pid namespace first), so the cgroup is empty then and its
    // removal below needs no polling. A server destroys Executions off its
    // event loop.
    if (kill) isolation::StartKillingRun(run_);
    WaitForInit(run_);
    return;  // the cgroup's destructor kills whatever is left (nothing) and removes it
  }
  if (kill) {
    isolation::KillRun(run_);
    if (run_.pid > 0) (void)isolation::Reap(run_);
  }
}

int Execution::stdout_fd() const { return out_eof_ ? -1 : run_.stdout_fd.get(); }
int Execution::stderr_fd() const { return err_eof_ ? -1 : run_.stderr_fd.get(); }
// An adopted (warm) run ends for us when its init has written the program's
// status (every other process of the run is reaped by then; init only exits,
// and tearing its namespaces down takes milliseconds we need not wait for), or
// when init died without writing it (end of file: init held the only write end).
int Execution::pidfd() const {
  if (exited_) return -1;
  return run_.adopted ? run_.status_fd.get() : run_.pidfd.get();
}

void Execution::OnReadable(int fd) {
  if (fd == pidfd()) {
    exited_ = true;
  } else if (fd == run_.stdout_fd.get()) {
    ReadStream(Stream::kStdout, false);
  } else if (fd == run_.stderr_fd.get()) {
    ReadStream(Stream::kStderr, false);
  }
}

void Execution::ReadStream(Stream s, bool final) {
  bool& eof = s == Stream::kStdout ? out_eof_ : err_eof_;
  StreamCapture& cap = s == Stream::kStdout ? result_.out : result_.err;
  int fd = s == Stream::kStdout ? run_.stdout_fd.get() : run_.stderr_fd.get();
  char buf[65536];
  // Bounded work per call so one chatty run cannot starve the others in a loop.
  for (int i = 0; i < 16 && !eof; ++i) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      // After init is reaped no process of the run exists, so an empty pipe is
      // the end even when a write end survives elsewhere (passed over SCM_RIGHTS
      // into a unix socket's queue, for instance).
      if (errno != EAGAIN || final) eof = true;
      return;
    }
    if (n == 0) {
      eof = true;
      return;
    }
    cap.total_bytes += static_cast<uint64_t>(n);
    size_t room = cap.data.size() < static_cast<size_t>(options_.output_cap)
                      ? static_cast<size_t>(options_.output_cap) - cap.data.size()
                      : 0;
    size_t keep = std::min(room, static_cast<size_t>(n));
    if (keep > 0) {
      cap.data.append(buf, keep);
      if (options_.on_output) options_.on_output(s, std::string_view(buf, keep));
    }
    if (keep < static_cast<size_t>(n)) cap.truncated = true;
    int64_t over = static_cast<int64_t>(cap.total_bytes) - options_.output_cap;
    if (over > OutputKillThreshold(options_.output_cap)) {
      Kill(KillReason::kOutput, std::string(s == Stream::kStdout ? "stdout" : "stderr") + " kept writing " +
                                    std::to_string(over) + " bytes past its cap of " +
                                    std::to_string(options_.output_cap) + " bytes");
    }
  }
}

void Execution::Kill(KillReason reason, std::string detail) {
  // The first cause is the one reported; the run is killed once.
  if (result_.kill_reason != KillReason::kNone) return;
  result_.kill_reason = reason;
  result_.kill_detail = std::move(detail);
  if (reason == KillReason::kTimeout) result_.timed_out = true;
  // Called on a server's event loop: signal, do not wait. The run ends for
  // us when its init is gone (every other process of the run is gone first).
  isolation::StartKillingRun(run_);
}

void Execution::Cancel(KillReason reason, std::string detail) {
  if (!exited_) Kill(reason, std::move(detail));
}

int Execution::OnTick() {
  if (exited_) return 0;
  auto now = Clock::now();
  if (now >= deadline_) {
    Kill(KillReason::kTimeout, "wall-clock limit of " + FormatSeconds(options_.timeout_s) + " s exceeded");
    return kStatsIntervalMs;
  }
  // The counters are read every kStatsIntervalMs, the first time that long
  // after the start (most runs are over by then; Finish reads them anyway).
  if (run_.cgroup && result_.kill_reason == KillReason::kNone && now >= next_stats_) {
    next_stats_ = now + Millis(kStatsIntervalMs);
    isolation::CgroupStats st = run_.cgroup->ReadStats();
    if (st.oom_kills > 0) {
      Kill(KillReason::kMemory, "memory limit of " + std::to_string(spec_.limits.memory_bytes) + " bytes reached");
    } else if (st.pids_max_hits > 0) {
      Kill(KillReason::kPids, "process limit of " + std::to_string(spec_.limits.pids) +
                                  " reached (a fork or thread was refused)");
    } else if (spec_.limits.cpu_time_ms > 0 &&
               (st.cpu_usage_ns - std::min(st.cpu_usage_ns, cpu_baseline_ns_)) / 1000000 >
                   static_cast<uint64_t>(spec_.limits.cpu_time_ms)) {
      Kill(KillReason::kTimeout, "CPU time limit of " + std::to_string(spec_.limits.cpu_time_ms) + " ms exceeded");
    }
  }
  auto until_deadline = std::chrono::duration_cast<Millis>(deadline_ - now).count() + 1;
  if (!run_.cgroup) return static_cast<int>(std::min<int64_t>(until_deadline, 1000));
  return static_cast<int>(std::min<int64_t>(until_deadline, kStatsIntervalMs));
}

RunResult Execution::Finish() {
  if (finished_) return result_;
  finished_ = true;
  if (run_.adopted && result_.kill_reason != KillReason::kNone) {
    // We killed its init: its status pipe ended when init's fds were closed,
    // a moment before the kernel emptied its pid namespace. Answer once init
    // is gone (it goes last), so no process of the run outlives the answer.
    WaitForInit(run_);
  }
  auto exit = isolation::Reap(run_);
  if (run_.adopted && exit.ok() && exit->init_killed && result_.kill_reason == KillReason::kNone) {
    // Its init died without a report (its zygote died, most likely): the
    // status pipe ended when init's fds were closed, before the kernel had
    // emptied the run's pid namespace. Wait for init to be gone too.
    WaitForInit(run_);
  }
  // Every process of the run is gone once init is reaped (the kernel tears the
  // pid namespace down first): read what the pipes still hold, and take an
  // empty pipe as the end (a write end may survive in a unix socket's queue).
  while (!out_eof_) ReadStream(Stream::kStdout, /*final=*/true);
  while (!err_eof_) ReadStream(Stream::kStderr, /*final=*/true);
  result_.duration_ms = MillisSince(start_);

  isolation::CgroupStats st;
  // The cgroup's directories stay until the Execution is destroyed (removing a
  // v1 memory cgroup can take milliseconds: a server does it after replying).
  // Nothing is left in it: init is gone, and its pid namespace took the rest.
  if (run_.cgroup) st = run_.cgroup->ReadStats();
  if (!exit.ok()) {
    log::Error("reaping a run failed: " + exit.status().ToString());
    result_.exit_code = 128 + SIGKILL;
    result_.signal = SIGKILL;
    return result_;
  }
  return Conclude(*exit, st);
}

bool Execution::CanFinishOnEnd() const {
  if (!run_.adopted || exited_ || finished_ || !out_eof_ || !err_eof_ || result_.kill_reason != KillReason::kNone) {
    return false;
  }
  // Nothing of the run may be left but init and the program. Every other
  // process is a descendant of the program (its children, alive or not yet
  // reaped, are charged to the cgroup) or, once orphaned, a child of init
  // (listed there until it is fully released).
  if (!run_.cgroup || run_.program_pid <= 0) return false;  // cannot tell: wait for init's report
  int64_t tasks = run_.cgroup->ReadTaskCount();
  if (tasks < 0 || tasks > 2) return false;
  auto children = isolation::ChildrenOfPidfd(run_.pidfd.get(), run_.pid);
  if (!children.ok()) return false;
  for (pid_t child : *children) {
    if (child != run_.program_pid) return false;
  }
  return true;
}

RunResult Execution::FinishOnEnd(int exit_code, int64_t max_rss_kb) {
  if (finished_) return result_;
  finished_ = true;
  finished_on_end_ = true;
  result_.duration_ms = MillisSince(start_);
  isolation::CgroupStats st;
  if (run_.cgroup) st = run_.cgroup->ReadStats();
  isolation::ExitInfo e;
  e.exited = true;
  e.exit_code = exit_code;
  e.usage.ru_maxrss = max_rss_kb;
  return Conclude(e, st);
}

RunResult Execution::Conclude(const isolation::ExitInfo& e, const isolation::CgroupStats& st) {
  const struct rusage& ru = e.usage;
  int64_t rusage_cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                          (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
  uint64_t cgroup_cpu_ns = st.cpu_usage_ns - std::min(st.cpu_usage_ns, cpu_baseline_ns_);
  result_.cpu_ms = cgroup_cpu_ns > 0 ? static_cast<int64_t>(cgroup_cpu_ns / 1000000) : rusage_cpu_ms;
  result_.max_rss_kb = ru.ru_maxrss;

  if (e.exited) {
    result_.exit_code = e.exit_code;
  } else {
    result_.signal = e.init_killed ? SIGKILL : e.signal;
    result_.exit_code = 128 + result_.signal;
  }
  if (result_.kill_reason == KillReason::kNone) {
    // The zygote dies first (its pid namespace then takes its runs with it);
    // a short wait covers being told in the other order.
    if (e.init_killed && zygote_ && zygote_->DiedOrDying(200)) {
      result_.kill_reason = KillReason::kLost;
      result_.kill_detail = "the warm pool's zygote died during the run, which died with it; retry the request";
    } else if (st.oom_kills > 0) {
      result_.kill_reason = KillReason::kMemory;
      result_.kill_detail = "memory limit of " + std::to_string(spec_.limits.memory_bytes) + " bytes reached";
    } else if (result_.signal == SIGXCPU && spec_.limits.cpu_time_ms > 0) {
      result_.kill_reason = KillReason::kTimeout;
      result_.timed_out = true;
      result_.kill_detail = "CPU time limit of " + std::to_string(spec_.limits.cpu_time_ms) + " ms exceeded";
    } else if (result_.signal != 0) {
      result_.kill_reason = KillReason::kSignal;
      result_.kill_detail = std::string("killed by signal ") + std::to_string(result_.signal) + " (" +
                            sigabbrev_np(result_.signal) + ")";
    }
  }
  return result_;
}

StatusOr<RunResult> RunToCompletion(const isolation::HostSetup& host, const isolation::Spec& spec,
                                    RunOptions options) {
  int cancel_fd = options.cancel_fd;
  ASSIGN_OR_RETURN(auto ex, Execution::Start(host, spec, std::move(options)));
  while (!ex->Exited()) {
    int wait_ms = ex->OnTick();
    struct pollfd fds[4];
    int n = 0;
    for (int fd : {ex->stdout_fd(), ex->stderr_fd(), ex->pidfd(), cancel_fd}) {
      if (fd >= 0) fds[n++] = {fd, POLLIN, 0};
    }
    int r = ::poll(fds, static_cast<nfds_t>(n), wait_ms);
    if (r < 0 && errno != EINTR) return ErrnoError("poll");
    for (int i = 0; i < n && r > 0; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == cancel_fd) {
        ex->Cancel(KillReason::kCancelled, "the run was interrupted");
        cancel_fd = -1;  // once
      } else {
        ex->OnReadable(fds[i].fd);
      }
    }
  }
  return ex->Finish();
}

}  // namespace airlock::exec
