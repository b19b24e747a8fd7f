#include "session/live_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

}  // namespace

LiveSession::LiveSession(exec::SessionHandOff handoff, const isolation::Spec& spec, size_t max_event_bytes)
    : h_(std::move(handoff)),
      sandbox_(exec::Sandbox::Adopt(std::move(h_.run), spec, h_.zygote)),
      run_(sandbox_->run()),
      spec_(spec),
      max_event_bytes_(max_event_bytes) {
  cancel_event_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  run_.report.mode = "session";
  if (run_.program_pid <= 0 && !run_.adopted) {
    // A cold session: the interpreter is its init's only child (nothing of
    // the session's code has run yet, so nothing else can be).
    auto children = isolation::ChildrenOfPidfd(run_.pidfd.get());
    if (children.ok() && children->size() == 1) run_.program_pid = children->front();
  }
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
  // Its sandbox, and its interpreter in it (an open sandbox outlives it).
  struct pollfd p[2] = {{run_.pidfd.get(), POLLIN, 0}, {program_pidfd_.get(), POLLIN, 0}};
  return run_.pidfd && ::poll(p, program_pidfd_ ? 2 : 1, 0) == 0;
}

void LiveSession::Kill(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (killed_) return;
  killed_ = true;
  if (kill_reason_.empty()) kill_reason_ = reason;
  sandbox_->Kill(kill_reason_);
}

StatusOr<std::shared_ptr<exec::Sandbox>> LiveSession::OpenSandbox(const isolation::HostSetup& host,
                                                                 exec::SandboxOptions options) {
  RETURN_IF_ERROR(sandbox_->Open(host, std::move(options)));
  return sandbox_;
}

std::string LiveSession::EndReason() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!kill_reason_.empty()) return kill_reason_;
  }
  isolation::CgroupStats st;
  if (run_.cgroup) st = run_.cgroup->ReadStats();
  std::string why;
  // In an open sandbox an out-of-memory kill may have been another
  // process's: it is the session's end only if the interpreter was killed.
  // (Init reports the interpreter's end at once; the bound is for a host
  // too busy to run it.)
  std::optional<int> program = sandbox_->opened() ? sandbox_->ProgramWaitStatus(1000) : std::nullopt;
  const bool program_killed = !program || (WIFSIGNALED(*program) && WTERMSIG(*program) == SIGKILL);
  if (st.oom_kills > 0 && program_killed) {
    why = "memory: the session ran out of memory (limit " + std::to_string(spec_.limits.memory_bytes) + " bytes)";
  } else if (h_.zygote && h_.zygote->DiedOrDying(200)) {
    why = "lost: the warm pool's zygote died, and the session with it";
  } else if (auto ws = program ? program : sandbox_->ProgramWaitStatus(1000); ws && WIFEXITED(*ws)) {
    why = "exited: the interpreter exited with code " + std::to_string(WEXITSTATUS(*ws)) + " (os._exit or a crash)";
  } else if (ws && WIFSIGNALED(*ws)) {
    why = "signal: the interpreter was killed by signal " + std::to_string(WTERMSIG(*ws)) + " (" +
          sigabbrev_np(WTERMSIG(*ws)) + ")";
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

bool LiveSession::SendInterrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  if (killed_ || !program_pidfd_) return false;
  return ::syscall(SYS_pidfd_send_signal, program_pidfd_.get(), SIGINT, nullptr, 0) == 0;
}

CallOutcome LiveSession::Call(std::string_view request, int64_t call, const CallOptions& options) {
  LiveCall c(*this, nullptr, std::string(request), call, options);
  c.WaitDone();
  return c.Finish();
}

// ---------------------------------------------------------------------------

std::unique_ptr<LiveCall> LiveCall::Start(std::shared_ptr<LiveSession> session, std::string request, int64_t call,
                                          CallOptions options) {
  LiveSession& s = *session;
  return std::unique_ptr<LiveCall>(new LiveCall(s, std::move(session), std::move(request), call, std::move(options)));
}

LiveCall::LiveCall(LiveSession& session, std::shared_ptr<LiveSession> keep, std::string request, int64_t call,
                   CallOptions options)
    : s_(session),
      keep_(std::move(keep)),
      call_(call),
      options_(std::move(options)),
      o_(session.max_event_bytes_) {
  o_.result.isolation = s_.run_.report;
  start_ = Clock::now();
  deadline_ = start_ + std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000));
  grace_deadline_ = Clock::time_point::max();
  next_stats_ = start_ + std::chrono::milliseconds(kStatsIntervalMs);
  cpu_before_ = s_.run_.cgroup ? s_.run_.cgroup->ReadCpuUsageNs() : 0;
  s_.in_call_ = true;
  s_.DrainStale();
  // The frame: 'C', the request's size (8 bytes, little-endian), the request.
  pending_.reserve(9 + request.size());
  pending_.push_back('C');
  uint64_t size = request.size();
  for (int i = 0; i < 8; ++i) pending_.push_back(static_cast<char>((size >> (8 * i)) & 0xFF));
  pending_ += request;
  Send();
}

LiveCall::~LiveCall() {
  if (!finished_) s_.in_call_ = false;
}

void LiveCall::Send() {
  bool failed = false;
  {
    std::lock_guard<std::mutex> lock(s_.mu_);
    failed = s_.killed_;
    while (!failed && sent_ < pending_.size()) {
      ssize_t n = ::send(s_.h_.control.get(), pending_.data() + sent_, pending_.size() - sent_,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent_ += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        return;  // the rest when the socket is writable (fd(kControl))
      } else {
        failed = true;
      }
    }
  }
  if (!failed) {
    pending_.clear();
    pending_.shrink_to_fit();
    sent_ = 0;
    return;
  }
  exec::RunResult& r = o_.result;
  if (!s_.Alive()) {
    o_.alive = false;
    o_.end_reason = s_.EndReason();
    r.kill_reason = exec::KillReason::kLost;
    r.kill_detail = "the session had ended before the call: " + o_.end_reason;
    done_ = true;
  } else {
    EndSession(exec::KillReason::kLost, "lost: the call could not be handed to the session's interpreter");
  }
}

// The session is killed (SIGKILL to every process of it) and the call says why.
void LiveCall::EndSession(exec::KillReason reason, const std::string& detail) {
  exec::RunResult& r = o_.result;
  if (r.kill_reason == exec::KillReason::kNone || r.kill_reason == exec::KillReason::kTimeout) r.kill_reason = reason;
  if (r.kill_detail.empty() || reason != exec::KillReason::kTimeout) r.kill_detail = detail;
  r.signal = SIGKILL;
  r.exit_code = 128 + SIGKILL;
  {
    std::lock_guard<std::mutex> lock(s_.mu_);
    if (s_.kill_reason_.empty()) s_.kill_reason_ = detail;
  }
  s_.Kill(detail);
  o_.alive = false;
  o_.end_reason = detail;
  done_ = true;
}

int LiveCall::fd(Fd which) const {
  if (done_) return -1;
  switch (which) {
    case kOut: return out_open_ ? s_.run_.stdout_fd.get() : -1;
    case kErr: return err_open_ ? s_.run_.stderr_fd.get() : -1;
    case kChan: return chan_open_ ? s_.h_.events_read.get() : -1;
    // The run's status channel: init's word that the interpreter ended (with
    // its wait status; an open sandbox outlives it), or its final status, or
    // end of file when init is gone. (A start's answer makes it readable too,
    // for a moment: OnDeath tells.)
    case kPid: return s_.run_.status_fd.get();
    case kCancel: return s_.cancel_event_.get();
    case kControl: return sent_ < pending_.size() ? s_.h_.control.get() : -1;
    case kFdCount: break;
  }
  return -1;
}

int LiveCall::OnTick() {
  if (done_) return 1000;
  // The interpreter's end, should another reader of the run's channel (a
  // start in the sandbox, at that moment) have taken init's word for it
  // before this call's loop saw the channel readable.
  if (s_.program_pidfd_) {
    struct pollfd p = {s_.program_pidfd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      OnDeath();
      if (done_) return 1000;
    }
  }
  exec::RunResult& r = o_.result;
  Clock::time_point now = Clock::now();
  if (!interrupt_sent_ && now >= deadline_) {
    interrupt_sent_ = true;
    r.kill_reason = exec::KillReason::kTimeout;
    r.timed_out = true;
    r.kill_detail = "the call ran past its timeout of " + Seconds(options_.timeout_s) + " s and was interrupted";
    grace_deadline_ = now + std::chrono::milliseconds(static_cast<int64_t>(options_.interrupt_grace_s * 1000));
    s_.SendInterrupt();
  }
  if (now >= grace_deadline_) {
    std::string what = r.kill_reason == exec::KillReason::kCancelled ? "cancelled" : "timeout";
    r.kill_detail += "; it did not stop within " + Seconds(options_.interrupt_grace_s) +
                     " s of the interrupt, so the session was killed";
    EndSession(r.kill_reason, what + ": " + r.kill_detail);
    return 1000;
  }
  if (s_.run_.cgroup && now >= next_stats_) {
    next_stats_ = now + std::chrono::milliseconds(kStatsIntervalMs);
    isolation::CgroupStats st = s_.run_.cgroup->ReadStats();
    // In an open sandbox the limits are shared with its other processes: a
    // kill that spared the interpreter, or a refused fork, is not the
    // session's end (the interpreter's death is, seen by OnDeath).
    const bool shared = s_.sandbox_->opened();
    if (st.oom_kills > 0 && !shared) {
      EndSession(exec::KillReason::kMemory, "memory: the session ran out of memory (limit " +
                                                std::to_string(s_.spec_.limits.memory_bytes) + " bytes)");
      return 1000;
    }
    if (st.pids_max_hits > 0 && !shared) {
      EndSession(exec::KillReason::kPids, "pids: the session reached its process limit of " +
                                              std::to_string(s_.spec_.limits.pids) +
                                              " (a fork or thread was refused)");
      return 1000;
    }
  }
  Clock::time_point wake = std::min(interrupt_sent_ ? grace_deadline_ : deadline_, next_stats_);
  if (!s_.run_.cgroup) wake = std::min(wake, now + std::chrono::milliseconds(1000));
  return static_cast<int>(
      std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1, 1, 1000));
}

void LiveCall::OnReady(Fd which) {
  if (done_) return;
  switch (which) {
    case kOut:
    case kErr: return OnOutput(which);
    case kChan: return OnChannel();
    case kPid: return OnDeath();
    case kCancel: return OnCancel();
    case kControl: return Send();
    case kFdCount: break;
  }
}

void LiveCall::OnOutput(Fd which) {
  exec::RunResult& r = o_.result;
  if (which == kOut && out_open_) {
    out_open_ = ReadStream(s_.run_.stdout_fd.get(), exec::Stream::kStdout, options_.output_cap, &r.out,
                           options_.on_output);
  }
  if (which == kErr && err_open_) {
    err_open_ = ReadStream(s_.run_.stderr_fd.get(), exec::Stream::kStderr, options_.output_cap, &r.err,
                           options_.on_output);
  }
  // As for a one-shot run: output past the cap is dropped, and a program
  // that keeps writing far past it is stopped (here: its session).
  for (const exec::StreamCapture* c : {&r.out, &r.err}) {
    if (static_cast<int64_t>(c->total_bytes) - options_.output_cap > OutputKillThreshold(options_.output_cap)) {
      EndSession(exec::KillReason::kOutput, std::string("output: ") + (c == &r.out ? "stdout" : "stderr") +
                                                " kept writing far past its cap of " +
                                                std::to_string(options_.output_cap) + " bytes");
      return;
    }
  }
}

void LiveCall::OnChannel() {
  if (!chan_open_) return;
  exec::RunResult& r = o_.result;
  chan_open_ = o_.channel.ReadFrom(s_.h_.events_read.get());
  if (o_.channel.overflowed()) {
    EndSession(exec::KillReason::kChannel, "channel: " + o_.channel.overflow_detail());
    return;
  }
  auto end = model::ParseProgramEnd(o_.channel.data(), o_.channel.truncated());
  if (!end || end->call != call_) return;
  // The runner flushed stdout and stderr before its end event: what is in
  // the pipes now is all of this call's output.
  for (Fd w : {kOut, kErr}) {
    int f = fd(w);
    struct pollfd p = {f, POLLIN, 0};
    while (f >= 0 && ::poll(&p, 1, 0) > 0) {
      OnOutput(w);
      if (done_) return;
      f = fd(w);
      p.fd = f;
    }
  }
  r.exit_code = end->exit_code;
  r.max_rss_kb = end->max_rss_kb;
  o_.interrupted = interrupt_sent_;
  if (interrupt_sent_ && r.kill_reason == exec::KillReason::kTimeout) {
    r.kill_detail += " (KeyboardInterrupt); the session lives on";
  }
  done_ = true;
}

void LiveCall::OnDeath() {
  std::optional<int> status = s_.sandbox_->ProgramWaitStatus(0);
  if (!status && !s_.sandbox_->InitGone()) return;  // spurious
  // The session died under the call: what it wrote is all there is.
  exec::RunResult& r = o_.result;
  if (out_open_) ReadStream(s_.run_.stdout_fd.get(), exec::Stream::kStdout, options_.output_cap, &r.out,
                            options_.on_output);
  if (err_open_) ReadStream(s_.run_.stderr_fd.get(), exec::Stream::kStderr, options_.output_cap, &r.err,
                            options_.on_output);
  if (chan_open_) o_.channel.ReadFrom(s_.h_.events_read.get());
  o_.alive = false;
  o_.end_reason = s_.EndReason();
  std::string kind = o_.end_reason.substr(0, o_.end_reason.find(':'));
  if (r.kill_reason == exec::KillReason::kNone) {
    r.kill_reason = kind == "memory" ? exec::KillReason::kMemory
                    : kind == "lost" ? exec::KillReason::kLost
                                     : exec::KillReason::kSignal;
    r.kill_detail = o_.end_reason;
  }
  if (const std::optional<int>& st = status) {
    r.exit_code = WIFEXITED(*st) ? WEXITSTATUS(*st) : 128 + (WIFSIGNALED(*st) ? WTERMSIG(*st) : SIGKILL);
    r.signal = WIFEXITED(*st) ? 0 : (WIFSIGNALED(*st) ? WTERMSIG(*st) : SIGKILL);
  } else {
    r.exit_code = 128 + SIGKILL;
    r.signal = SIGKILL;
  }
  done_ = true;
}

void LiveCall::OnCancel() {
  uint64_t v;
  bool any = false;
  while (::read(s_.cancel_event_.get(), &v, sizeof v) > 0) any = true;
  if (!any) return;  // spurious
  exec::RunResult& r = o_.result;
  if (!interrupt_sent_) {
    interrupt_sent_ = true;
    r.kill_reason = exec::KillReason::kCancelled;
    {
      std::lock_guard<std::mutex> lock(s_.mu_);
      r.kill_detail = s_.cancel_detail_.empty() ? "the call was cancelled" : s_.cancel_detail_;
    }
    grace_deadline_ =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.interrupt_grace_s * 1000));
  }
  s_.SendInterrupt();
}

void LiveCall::WaitDone() {
  constexpr Fd kAll[] = {kOut, kErr, kChan, kPid, kCancel, kControl};
  while (!done_) {
    int wait_ms = OnTick();
    if (done_) break;
    struct pollfd fds[kFdCount];
    for (Fd w : kAll) fds[w] = {fd(w), static_cast<short>(w == kControl ? POLLOUT : POLLIN), 0};
    int n = ::poll(fds, kFdCount, wait_ms);
    if (n < 0 && errno != EINTR) {
      log::Warn(std::string("a session call's poll failed: ") + strerror(errno));
      ::usleep(1000);
      continue;
    }
    for (Fd w : kAll) {
      if (n > 0 && fds[w].revents && !done_) OnReady(w);
    }
  }
}

CallOutcome LiveCall::Finish() {
  finished_ = true;
  s_.in_call_ = false;
  if (!o_.alive && o_.end_reason.empty()) o_.end_reason = s_.EndReason();
  exec::RunResult& r = o_.result;
  r.duration_ms = MsBetween(start_, Clock::now());
  if (s_.run_.cgroup && o_.alive) {
    uint64_t cpu_after = s_.run_.cgroup->ReadCpuUsageNs();
    r.cpu_ms = static_cast<int64_t>((cpu_after - std::min(cpu_after, cpu_before_)) / 1000000);
  }
  return std::move(o_);
}

}  // namespace airlock::session
