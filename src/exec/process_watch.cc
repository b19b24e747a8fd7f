#include "exec/process_watch.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace airlock::exec {
namespace {

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string Seconds(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

StatusOr<std::unique_ptr<ProcessWatch>> ProcessWatch::Attach(std::shared_ptr<Process> process,
                                                             std::shared_ptr<Sandbox> sandbox, WatchOptions options) {
  if (!process || !sandbox) return InvalidArgument("a watch needs a process and its sandbox");
  {
    std::lock_guard<std::mutex> lock(process->mu_);
    if (process->watched_) {
      return Status(ErrorCode::kFailedPrecondition,
                    "process " + std::to_string(process->pid_) + " is already watched (one reader of its output at a time)");
    }
    process->watched_ = true;
  }
  std::unique_ptr<ProcessWatch> w(new ProcessWatch());
  w->p_ = std::move(process);
  w->sandbox_ = std::move(sandbox);
  w->options_ = std::move(options);
  w->start_ = Clock::now();
  w->deadline_ = w->options_.timeout_s > 0
                     ? w->start_ + std::chrono::milliseconds(static_cast<int64_t>(w->options_.timeout_s * 1000))
                     : Clock::time_point::max();
  // Already ended (a watch attached late): what the pipes hold is all there is.
  if (w->p_->Exit()) w->OnExit();
  return w;
}

ProcessWatch::~ProcessWatch() {
  std::lock_guard<std::mutex> lock(p_->mu_);
  p_->watched_ = false;
}

int ProcessWatch::fd(Fd which) const {
  if (done_) return -1;
  switch (which) {
    case kOut: return out_open_ ? p_->stdout_fd() : -1;
    case kErr: return err_open_ ? p_->stderr_fd() : -1;
    case kExit: return p_->exit_fd();
    case kFdCount: break;
  }
  return -1;
}

void ProcessWatch::ReadOut(Fd which, bool drain) {
  bool& open = which == kOut ? out_open_ : err_open_;
  if (!open) return;
  const int fd = which == kOut ? p_->stdout_fd() : p_->stderr_fd();
  StreamCapture& cap = which == kOut ? o_.out : o_.err;
  const Stream stream = which == kOut ? Stream::kStdout : Stream::kStderr;
  char buf[65536];
  // A bounded number of reads per wake-up (others wait on the same loop);
  // all that is there when draining.
  for (int i = 0; drain || i < 16; ++i) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: nothing more now
    if (n == 0) {
      open = false;
      return;
    }
    cap.total_bytes += static_cast<uint64_t>(n);
    const size_t room = cap.data.size() < static_cast<size_t>(options_.output_cap)
                            ? static_cast<size_t>(options_.output_cap) - cap.data.size()
                            : 0;
    const size_t keep = std::min(room, static_cast<size_t>(n));
    if (keep < static_cast<size_t>(n)) cap.truncated = true;
    cap.data.append(buf, keep);
    if (options_.on_output) options_.on_output(stream, std::string_view(buf, static_cast<size_t>(n)));
  }
}

void ProcessWatch::OnExit() {
  std::optional<ProcessExit> e = p_->Exit();
  if (!e) return;  // spurious
  o_.exit = *e;
  // It wrote everything it will write before it ended: read what the pipes
  // hold now, and stop there (a child it left may hold them open).
  ReadOut(kOut, /*drain=*/true);
  ReadOut(kErr, /*drain=*/true);
  if (e->sandbox_ended && o_.kill_reason == KillReason::kNone) {
    o_.kill_reason = KillReason::kLost;
    std::string why = sandbox_->ended_reason();
    o_.kill_detail = "the sandbox ended" + (why.empty() ? std::string() : ": " + why);
  }
  done_ = true;
}

void ProcessWatch::OnReady(Fd which) {
  if (done_) return;
  switch (which) {
    case kOut:
    case kErr: return ReadOut(which, /*drain=*/false);
    case kExit: return OnExit();
    case kFdCount: break;
  }
}

int ProcessWatch::OnTick() {
  if (done_) return 1000;
  const Clock::time_point now = Clock::now();
  if (!killed_ && now >= deadline_) {
    killed_ = true;
    o_.kill_reason = KillReason::kTimeout;
    o_.kill_detail = "the process ran past its timeout of " + Seconds(options_.timeout_s) + " s and was killed";
    if (Status s = sandbox_->Signal(p_->pid(), SIGKILL); !s.ok() && s.code() != ErrorCode::kNotFound) {
      log::Warn("killing a process past its timeout: " + s.ToString());
    }
  }
  if (killed_ || deadline_ == Clock::time_point::max()) return 1000;
  return static_cast<int>(std::clamp<int64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now).count() + 1, 1, 1000));
}

void ProcessWatch::WaitDone() {
  constexpr Fd kAll[] = {kOut, kErr, kExit};
  while (!done_) {
    const int wait_ms = OnTick();
    if (done_) break;
    struct pollfd fds[kFdCount];
    for (Fd w : kAll) fds[w] = {fd(w), POLLIN, 0};
    const int n = ::poll(fds, kFdCount, wait_ms);
    if (n < 0 && errno != EINTR) {
      log::Warn(std::string("a process watch's poll failed: ") + strerror(errno));
      ::usleep(1000);
      continue;
    }
    for (Fd w : kAll) {
      if (n > 0 && fds[w].revents && !done_) OnReady(w);
    }
  }
}

ProcessOutcome ProcessWatch::Finish() {
  o_.duration_ms = MsSince(start_);
  return std::move(o_);
}

}  // namespace airlock::exec
