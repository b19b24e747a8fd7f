#include "session/live_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "model/runner_protocol.h"

namespace airlock::session {
namespace {

constexpr int kStatsIntervalMs = 100;

// As exec::Execution's: output this far past the cap ends the writer.
int64_t OutputKillThreshold(int64_t cap) { return std::max<int64_t>(int64_t{16} << 20, 8 * cap); }

std::string Seconds(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Reads what `fd` (non-blocking) holds now into `cap` (up to `limit` bytes
// kept), calling on_output with what is kept. False at end of file.
bool ReadStream(int fd, exec::Stream s, int64_t limit, exec::StreamCapture* cap,
                const std::function<void(exec::Stream, std::string_view)>& on_output) {
  char buf[65536];
  for (int i = 0; i < 16; ++i) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;
    cap->total_bytes += static_cast<uint64_t>(n);
    size_t room = cap->data.size() < static_cast<size_t>(limit) ? static_cast<size_t>(limit) - cap->data.size() : 0;
    size_t keep = std::min(room, static_cast<size_t>(n));
    if (keep < static_cast<size_t>(n)) cap->truncated = true;
    if (keep > 0) {
      cap->data.append(buf, keep);
      if (on_output) on_output(s, std::string_view(buf, keep));
    }
  }
  return true;
}

bool WriteAll(int fd, const char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return false;
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) return false;
    struct pollfd p = {fd, POLLOUT, 0};
    if (::poll(&p, 1, left) < 0 && errno != EINTR) return false;
  }
  return true;
}

}  // namespace

LiveSession::LiveSession(exec::SessionHandOff handoff, const isolation::Spec& spec, size_t max_event_bytes)
    : h_(std::move(handoff)), run_(h_.run), spec_(spec), max_event_bytes_(max_event_bytes) {
  cancel_event_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  run_.report.mode = "session";
  if (run_.program_pid > 0) {
    // Opened, then checked to be init's child still: a pidfd of a recycled
    // pid would not be (init has no other child), so the signal can only
    // ever reach the session's own interpreter.
    UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, run_.program_pid, 0)));
    auto children = isolation::ChildrenOfPidfd(run_.pidfd.get());
    if (fd && children.ok() && children->size() == 1 && children->front() == run_.program_pid) {
      program_pidfd_ = std::move(fd);
    }
  }
  if (!program_pidfd_) log::Warn("a session's interpreter could not be told: its calls cannot be interrupted");
}

LiveSession::~LiveSession() { Kill("closed"); }

bool LiveSession::Alive() const {
  struct pollfd p = {run_.pidfd.get(), POLLIN, 0};
  return run_.pidfd && ::poll(&p, 1, 0) == 0;
}

void LiveSession::Kill(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (killed_) return;
  killed_ = true;
  if (kill_reason_.empty()) kill_reason_ = reason;
  if (run_.pidfd) isolation::KillRun(run_);
}

std::string LiveSession::EndReason() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!kill_reason_.empty()) return kill_reason_;
  }
  isolation::CgroupStats st;
  if (run_.cgroup) st = run_.cgroup->ReadStats();
  std::string why;
  if (st.oom_kills > 0) {
    why = "memory: the session ran out of memory (limit " + std::to_string(spec_.limits.memory_bytes) + " bytes)";
  } else if (h_.zygote && h_.zygote->DiedOrDying(200)) {
    why = "lost: the warm pool's zygote died, and the session with it";
  } else if (auto e = isolation::ReadProgramStatus(run_, 0); e.ok() && e->exited) {
    why = "exited: the interpreter exited with code " + std::to_string(e->exit_code) + " (os._exit or a crash)";
  } else if (e.ok() && e->signal != 0) {
    why = "signal: the interpreter was killed by signal " + std::to_string(e->signal) + " (" +
          sigabbrev_np(e->signal) + ")";
  } else {
    why = "ended: the session's processes are gone";
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (kill_reason_.empty()) kill_reason_ = why;
  return kill_reason_;
}

void LiveSession::Cancel(const std::string& detail) {
  if (!in_call_.load()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancel_detail_ = detail;
  }
  uint64_t one = 1;
  ssize_t ignored = ::write(cancel_event_.get(), &one, sizeof one);
  (void)ignored;
}

void LiveSession::DrainStale() {
  // Output written between calls (a thread or child left running) is not
  // this call's: dropped.
  char buf[65536];
  for (int fd : {run_.stdout_fd.get(), run_.stderr_fd.get(), h_.events_read.get()}) {
    for (int i = 0; i < 64; ++i) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
    }
  }
  uint64_t v;
  while (::read(cancel_event_.get(), &v, sizeof v) > 0) {
  }
}

bool LiveSession::SendCall(std::string_view request, int64_t call, Clock::time_point deadline) {
  (void)call;
  std::string frame(9, '\0');
  frame[0] = 'C';
  uint64_t size = request.size();
  for (int i = 0; i < 8; ++i) frame[static_cast<size_t>(1 + i)] = static_cast<char>((size >> (8 * i)) & 0xFF);
  std::lock_guard<std::mutex> lock(mu_);
  if (killed_) return false;
  return WriteAll(h_.control.get(), frame.data(), frame.size(), deadline) &&
         WriteAll(h_.control.get(), request.data(), request.size(), deadline);
}

bool LiveSession::SendInterrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  if (killed_ || !program_pidfd_) return false;
  return ::syscall(SYS_pidfd_send_signal, program_pidfd_.get(), SIGINT, nullptr, 0) == 0;
}

CallOutcome LiveSession::Call(std::string_view request, int64_t call, const CallOptions& options) {
  CallOutcome o(max_event_bytes_);
  exec::RunResult& r = o.result;
  r.isolation = run_.report;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
  Clock::time_point grace_deadline = Clock::time_point::max();
  Clock::time_point next_stats = start + std::chrono::milliseconds(kStatsIntervalMs);
  const uint64_t cpu_before = run_.cgroup ? run_.cgroup->ReadCpuUsageNs() : 0;
  in_call_ = true;
  DrainStale();

  // The session is killed (SIGKILL to every process of it) and the call says why.
  auto end_session = [&](exec::KillReason reason, const std::string& detail) {
    if (r.kill_reason == exec::KillReason::kNone || r.kill_reason == exec::KillReason::kTimeout) r.kill_reason = reason;
    if (r.kill_detail.empty() || reason != exec::KillReason::kTimeout) r.kill_detail = detail;
    r.signal = SIGKILL;
    r.exit_code = 128 + SIGKILL;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (kill_reason_.empty()) kill_reason_ = detail;
    }
    Kill(detail);
    o.alive = false;
    o.end_reason = detail;
  };

  bool interrupt_sent = false;
  bool done = false;
  if (!SendCall(request, call, deadline)) {
    if (!Alive()) {
      o.alive = false;
      o.end_reason = EndReason();
      r.kill_reason = exec::KillReason::kLost;
      r.kill_detail = "the session had ended before the call: " + o.end_reason;
    } else {
      end_session(exec::KillReason::kLost, "lost: the call could not be handed to the session's interpreter");
    }
    done = true;
  }
  bool out_open = true, err_open = true, chan_open = true;
  while (!done) {
    Clock::time_point now = Clock::now();
    if (!interrupt_sent && now >= deadline) {
      interrupt_sent = true;
      r.kill_reason = exec::KillReason::kTimeout;
      r.timed_out = true;
      r.kill_detail = "the call ran past its timeout of " + Seconds(options.timeout_s) + " s and was interrupted";
      grace_deadline = now + std::chrono::milliseconds(static_cast<int64_t>(options.interrupt_grace_s * 1000));
      SendInterrupt();
    }
    if (now >= grace_deadline) {
      std::string what = r.kill_reason == exec::KillReason::kCancelled ? "cancelled" : "timeout";
      r.kill_detail += "; it did not stop within " + Seconds(options.interrupt_grace_s) +
                       " s of the interrupt, so the session was killed";
      end_session(r.kill_reason, what + ": " + r.kill_detail);
      break;
    }
    if (run_.cgroup && now >= next_stats) {
      next_stats = now + std::chrono::milliseconds(kStatsIntervalMs);
      isolation::CgroupStats st = run_.cgroup->ReadStats();
      if (st.oom_kills > 0) {
        end_session(exec::KillReason::kMemory, "memory: the session ran out of memory (limit " +
                                                   std::to_string(spec_.limits.memory_bytes) + " bytes)");
        break;
      }
      if (st.pids_max_hits > 0) {
        end_session(exec::KillReason::kPids, "pids: the session reached its process limit of " +
                                                 std::to_string(spec_.limits.pids) + " (a fork or thread was refused)");
        break;
      }
    }
    Clock::time_point wake = std::min({interrupt_sent ? grace_deadline : deadline, next_stats});
    int wait_ms = static_cast<int>(
        std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1, 1, 1000));
    struct pollfd fds[5] = {{out_open ? run_.stdout_fd.get() : -1, POLLIN, 0},
                            {err_open ? run_.stderr_fd.get() : -1, POLLIN, 0},
                            {chan_open ? h_.events_read.get() : -1, POLLIN, 0},
                            {run_.pidfd.get(), POLLIN, 0},
                            {cancel_event_.get(), POLLIN, 0}};
    int n = ::poll(fds, 5, run_.cgroup ? wait_ms : std::min(wait_ms, 1000));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents) out_open = ReadStream(fds[0].fd, exec::Stream::kStdout, options.output_cap, &r.out, options.on_output);
    if (fds[1].revents) err_open = ReadStream(fds[1].fd, exec::Stream::kStderr, options.output_cap, &r.err, options.on_output);
    // As for a one-shot run: output past the cap is dropped, and a program
    // that keeps writing far past it is stopped (here: its session).
    for (const exec::StreamCapture* c : {&r.out, &r.err}) {
      if (static_cast<int64_t>(c->total_bytes) - options.output_cap > OutputKillThreshold(options.output_cap)) {
        end_session(exec::KillReason::kOutput, std::string("output: ") + (c == &r.out ? "stdout" : "stderr") +
                                                   " kept writing far past its cap of " +
                                                   std::to_string(options.output_cap) + " bytes");
        break;
      }
    }
    if (!o.alive) break;
    if (fds[2].revents) {
      chan_open = o.channel.ReadFrom(fds[2].fd);
      if (o.channel.overflowed()) {
        end_session(exec::KillReason::kChannel, "channel: " + o.channel.overflow_detail());
        break;
      }
      if (auto end = model::ParseProgramEnd(o.channel.data(), o.channel.truncated()); end && end->call == call) {
        // The runner flushed stdout and stderr before its end event: what is
        // in the pipes now is all of this call's output.
        while (out_open && ReadStream(run_.stdout_fd.get(), exec::Stream::kStdout, options.output_cap, &r.out,
                                      options.on_output) &&
               ::poll(&fds[0], 1, 0) > 0) {
        }
        while (err_open && ReadStream(run_.stderr_fd.get(), exec::Stream::kStderr, options.output_cap, &r.err,
                                      options.on_output) &&
               ::poll(&fds[1], 1, 0) > 0) {
        }
        r.exit_code = end->exit_code;
        r.max_rss_kb = end->max_rss_kb;
        o.interrupted = interrupt_sent;
        if (interrupt_sent && r.kill_reason == exec::KillReason::kTimeout) {
          r.kill_detail += " (KeyboardInterrupt); the session lives on";
        }
        done = true;
      }
    }
    if (!done && fds[3].revents) {
      // The session died under the call: what it wrote is all there is.
      if (out_open) ReadStream(run_.stdout_fd.get(), exec::Stream::kStdout, options.output_cap, &r.out, options.on_output);
      if (err_open) ReadStream(run_.stderr_fd.get(), exec::Stream::kStderr, options.output_cap, &r.err, options.on_output);
      if (chan_open) o.channel.ReadFrom(h_.events_read.get());
      o.alive = false;
      o.end_reason = EndReason();
      std::string kind = o.end_reason.substr(0, o.end_reason.find(':'));
      if (r.kill_reason == exec::KillReason::kNone) {
        r.kill_reason = kind == "memory" ? exec::KillReason::kMemory
                        : kind == "lost" ? exec::KillReason::kLost
                                         : exec::KillReason::kSignal;
        r.kill_detail = o.end_reason;
      }
      if (auto e = isolation::ReadProgramStatus(run_, 0); e.ok()) {
        r.exit_code = e->exited ? e->exit_code : 128 + (e->signal ? e->signal : SIGKILL);
        r.signal = e->exited ? 0 : (e->signal ? e->signal : SIGKILL);
      }
      done = true;
    }
    if (!done && fds[4].revents) {
      uint64_t v;
      while (::read(cancel_event_.get(), &v, sizeof v) > 0) {
      }
      if (!interrupt_sent) {
        interrupt_sent = true;
        r.kill_reason = exec::KillReason::kCancelled;
        std::lock_guard<std::mutex> lock(mu_);
        r.kill_detail = cancel_detail_.empty() ? "the call was cancelled" : cancel_detail_;
        grace_deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.interrupt_grace_s * 1000));
      }
      if (interrupt_sent) SendInterrupt();
    }
  }
  in_call_ = false;
  if (!o.alive && o.end_reason.empty()) o.end_reason = EndReason();
  const Clock::time_point end = Clock::now();
  r.duration_ms = MsBetween(start, end);
  if (run_.cgroup && o.alive) {
    uint64_t cpu_after = run_.cgroup->ReadCpuUsageNs();
    r.cpu_ms = static_cast<int64_t>((cpu_after - std::min(cpu_after, cpu_before)) / 1000000);
  }
  return o;
}

}  // namespace airlock::session
