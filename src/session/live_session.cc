#include "session/live_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/log.h"
#include "base/random.h"
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

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<Context> NewContext(profile::Language language, std::string cwd, std::map<std::string, std::string> env) {
  auto c = std::make_shared<Context>();
  c->id = "c-" + base::RandomHex(8);
  c->language = language;
  c->cwd = std::move(cwd);
  c->env = std::move(env);
  c->created_ms = NowMs();
  c->cancel_event.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  return c;
}

// Why an interpreter with this wait status ended, for a context's or a session's end.
std::string WhyEnded(int status, const std::string& who) {
  if (WIFEXITED(status)) return "exited: " + who + " exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "signal: " + who + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           sigabbrev_np(WTERMSIG(status)) + ")";
  }
  return "ended: " + who + " is gone";
}

int WaitStatusOf(const exec::ProcessExit& e) {
  if (e.exited) return (e.exit_code & 0xFF) << 8;
  return e.signal > 0 ? e.signal : SIGKILL;
}

// A sealed memfd holding `data` (a kernel's source, given to it as fd 5).
StatusOr<UniqueFd> SealedMemfd(const std::string& data) {
  UniqueFd fd(static_cast<int>(::syscall(SYS_memfd_create, "airlock-kernel", MFD_CLOEXEC | MFD_ALLOW_SEALING)));
  if (!fd) return ErrnoError("memfd_create (a kernel's source)");
  for (size_t off = 0; off < data.size();) {
    ssize_t n = ::write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write (a kernel's source)");
    off += static_cast<size_t>(n);
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    return ErrnoError("fcntl(F_ADD_SEALS) (a kernel's source)");
  }
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) return ErrnoError("lseek (a kernel's source)");
  return fd;
}

// Whether `cwd` is one a started process may be given (exec::Sandbox::Start's
// rule); other directories are the kernel's to change to.
bool StartsIn(const std::string& cwd) {
  for (std::string_view root : {std::string_view(isolation::kWorkspaceDir), std::string_view("/tmp")}) {
    if (cwd == root || (cwd.size() > root.size() && cwd.compare(0, root.size(), root) == 0 && cwd[root.size()] == '/')) {
      return cwd.find("/.") == std::string::npos && cwd.find("//") == std::string::npos;
    }
  }
  return false;
}

// write(2) to a pipe whose reader may be gone: EPIPE, never SIGPIPE (blocked
// for the call, a pending one taken back).
ssize_t WriteNoSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_only, old;
  ::sigemptyset(&pipe_only);
  ::sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  ssize_t n = ::write(fd, data, size);
  const int saved = errno;
  if (n < 0 && errno == EPIPE) {
    const struct timespec zero = {0, 0};
    ::sigtimedwait(&pipe_only, nullptr, &zero);
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return n;
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
  main_ = NewContext(profile::Language::kPython, isolation::kWorkspaceDir, {});
  main_->main = true;
  main_->started = true;
  contexts_.push_back(main_);
  run_.report.mode = "session";
  if (run_.program_pid <= 0 && !run_.adopted) {
    // A cold session: the interpreter is its init's only child (nothing of
    // the session's code has run yet, so nothing else can be).
    auto children = isolation::ChildrenOfPidfd(run_.pidfd.get(), run_.pid);
    if (children.ok() && children->size() == 1) run_.program_pid = children->front();
  }
  if (run_.program_pid > 0) {
    // Opened, then checked to be init's child still: a pidfd of a recycled
    // pid would not be (init has no other child), so the signal can only
    // ever reach the session's own interpreter.
    UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, run_.program_pid, 0)));
    auto children = isolation::ChildrenOfPidfd(run_.pidfd.get(), run_.pid);
    if (fd && children.ok() && children->size() == 1 && children->front() == run_.program_pid) {
      program_pidfd_ = std::move(fd);
    }
  }
  if (!program_pidfd_) log::Warn("a session's interpreter could not be told: its calls cannot be interrupted");
}

LiveSession::~LiveSession() { Kill("closed"); }

bool LiveSession::Alive() const {
  // Its sandbox, and its main interpreter in it (an open sandbox outlives it):
  // the run's program, or the kernel that replaced it (a restart in place).
  if (std::shared_ptr<exec::Process> p = main_->process) {
    struct pollfd q = {run_.pidfd.get(), POLLIN, 0};
    return run_.pidfd && ::poll(&q, 1, 0) == 0 && !p->Exit();
  }
  struct pollfd p[2] = {{run_.pidfd.get(), POLLIN, 0}, {program_pidfd_.get(), POLLIN, 0}};
  return run_.pidfd && ::poll(p, program_pidfd_ ? 2 : 1, 0) == 0;
}

std::optional<int> LiveSession::MainWaitStatus(int wait_ms) {
  if (std::shared_ptr<exec::Process> p = main_->process) {
    struct pollfd q = {p->exit_fd(), POLLIN, 0};
    if (wait_ms > 0) ::poll(&q, 1, wait_ms);
    if (std::optional<exec::ProcessExit> e = p->Exit()) return WaitStatusOf(*e);
    return std::nullopt;
  }
  return sandbox_->ProgramWaitStatus(wait_ms);
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
  std::optional<int> program = sandbox_->opened() ? MainWaitStatus(1000) : std::nullopt;
  const bool program_killed = !program || (WIFSIGNALED(*program) && WTERMSIG(*program) == SIGKILL);
  if (st.oom_kills > 0 && program_killed) {
    why = "memory: the session ran out of memory (limit " + std::to_string(spec_.limits.memory_bytes) + " bytes)";
  } else if (h_.zygote && h_.zygote->DiedOrDying(200)) {
    why = "lost: the warm pool's zygote died, and the session with it";
  } else if (auto ws = program ? program : MainWaitStatus(1000); ws && WIFEXITED(*ws)) {
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

void LiveSession::Cancel(const std::string& detail) { Cancel(*main_, detail); }

void LiveSession::Cancel(Context& context, const std::string& detail) {
  if (!context.in_call.load()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    context.cancel_detail = detail;
  }
  uint64_t one = 1;
  ssize_t ignored = ::write(context.cancel_event.get(), &one, sizeof one);
  (void)ignored;
}

void LiveSession::DrainStale(Context& context) {
  // Output written between calls (a thread or child left running) is not
  // this call's: dropped.
  char buf[65536];
  std::shared_ptr<exec::Process> p = context.process;
  std::vector<int> fds = p ? std::vector<int>{p->stdout_fd(), p->stderr_fd(), context.events.get()}
                           : std::vector<int>{run_.stdout_fd.get(), run_.stderr_fd.get(), h_.events_read.get()};
  for (int fd : fds) {
    for (int i = 0; i < 64 && fd >= 0; ++i) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
    }
  }
  uint64_t v;
  while (::read(context.cancel_event.get(), &v, sizeof v) > 0) {
  }
}

bool LiveSession::SendInterrupt(Context& context) {
  std::lock_guard<std::mutex> lock(mu_);
  if (killed_) return false;
  if (std::shared_ptr<exec::Process> p = context.process) {
    // To the kernel's process group (a bash's running command too), through
    // init: an exchange on the sandbox's channel, so off the caller's thread
    // (an event loop may be feeding the call).
    std::thread([sandbox = sandbox_, pid = p->pid()] { (void)sandbox->Signal(pid, SIGINT); }).detach();
    return true;
  }
  if (!program_pidfd_) return false;
  return ::syscall(SYS_pidfd_send_signal, program_pidfd_.get(), SIGINT, nullptr, 0) == 0;
}

CallOutcome LiveSession::Call(std::string_view request, int64_t call, const CallOptions& options) {
  LiveCall c(*this, nullptr, main_, std::string(request), call, options);
  c.WaitDone();
  return c.Finish();
}

std::shared_ptr<Context> LiveSession::AddContext(profile::Language language, std::string cwd,
                                                 std::map<std::string, std::string> env) {
  std::shared_ptr<Context> c = NewContext(language, std::move(cwd), std::move(env));
  std::lock_guard<std::mutex> lock(mu_);
  contexts_.push_back(c);
  return c;
}

std::shared_ptr<Context> LiveSession::FindContext(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& c : contexts_) {
    if (c->id == id) return c;
  }
  return nullptr;
}

std::vector<std::shared_ptr<Context>> LiveSession::Contexts() {
  std::lock_guard<std::mutex> lock(mu_);
  return contexts_;
}

size_t LiveSession::context_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return contexts_.size();
}

Status LiveSession::StartContext(Context& context, const isolation::HostSetup& host, exec::SandboxOptions options,
                                 const service::KernelLaunch& launch) {
  RETURN_IF_ERROR(sandbox_->Open(host, std::move(options)));
  if (context.main && !context.process) {
    // A restart in place: the warm fork (or cold runner) goes, a kernel takes
    // its place; the session lives on (its sandbox is open).
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (program_pidfd_) ::syscall(SYS_pidfd_send_signal, program_pidfd_.get(), SIGKILL, nullptr, 0);
    }
    // Its end (init's word on the run's channel) is taken now, not by a later call.
    (void)sandbox_->ProgramWaitStatus(2000);
  } else if (context.process) {
    KillKernel(context, "restarted");
  }
  int control[2], events[2];
  if (::pipe2(control, O_CLOEXEC) != 0) return ErrnoError("pipe2 (a context's calls)");
  UniqueFd control_r(control[0]), control_w(control[1]);
  if (::pipe2(events, O_CLOEXEC) != 0) return ErrnoError("pipe2 (a context's events)");
  UniqueFd events_r(events[0]), events_w(events[1]);
  if (::fcntl(control_w.get(), F_SETFL, O_NONBLOCK) != 0 || ::fcntl(events_r.get(), F_SETFL, O_NONBLOCK) != 0) {
    return ErrnoError("fcntl(O_NONBLOCK) (a context's pipes)");
  }
  // R and Java cannot take an inherited fd as a stream; they open
  // /proc/self/fd/3 and 4, which reopens the pipe and checks its inode's
  // mode against their uid, to which the server's (the pipe's owner) is not
  // mapped. So "other" may read the call pipe and write the event pipe (one
  // inode per pipe: both ends). What that opens to the sandbox's processes
  // (all of one uid) is this context's calls and results, which its code
  // could reach anyway; nothing of the server or of another sandbox.
  if (::fchmod(control_r.get(), 0604) != 0 || ::fchmod(events_w.get(), 0602) != 0) {
    return ErrnoError("fchmod (a context's pipes)");
  }
  exec::ProcessRequest rq;
  rq.argv = launch.argv;
  for (const auto& [k, v] : context.env) rq.env.push_back(k + "=" + v);
  // The kernel changes to its directory itself: a context may name any
  // directory of the sandbox, a process starts beneath the workspace.
  rq.cwd = StartsIn(context.cwd) ? context.cwd : isolation::kWorkspaceDir;
  rq.tag = "context " + context.id + " (" + std::string(profile::LanguageName(context.language)) + ")";
  rq.extra_fds = {control_r.get(), events_w.get()};
  UniqueFd source;
  if (!launch.source.empty()) {
    ASSIGN_OR_RETURN(source, SealedMemfd(launch.source));
    rq.extra_fds.push_back(source.get());
  }
  ASSIGN_OR_RETURN(std::shared_ptr<exec::Process> p, sandbox_->Start(rq));
  std::lock_guard<std::mutex> lock(mu_);
  context.process = std::move(p);
  context.control = std::move(control_w);
  context.events = std::move(events_r);
  context.started = true;
  return Status::Ok();
}

void LiveSession::StopContext(Context& context, const std::string& reason, bool remove) {
  if (context.main) return;
  if (remove) {
    std::lock_guard<std::mutex> lock(mu_);
    contexts_.erase(
        std::remove_if(contexts_.begin(), contexts_.end(), [&](const auto& c) { return c.get() == &context; }),
        contexts_.end());
  }
  KillKernel(context, reason);
}

std::string LiveSession::EndedBetweenCalls(Context& context) {
  std::shared_ptr<exec::Process> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p = context.process;
  }
  if (context.main || !p) return "";
  std::optional<exec::ProcessExit> e = p->Exit();
  return e ? WhyEnded(WaitStatusOf(*e), "the context's interpreter") + ", between calls" : "";
}

void LiveSession::KillKernel(Context& context, const std::string& reason) {
  std::shared_ptr<exec::Process> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p = std::move(context.process);
    context.control.reset();
    context.events.reset();
    context.started = false;
    if (!reason.empty()) context.end_reason = reason;
  }
  if (!p) return;
  if (!p->Exit() && sandbox_->Signal(p->pid(), SIGKILL).ok()) {
    struct pollfd q = {p->exit_fd(), POLLIN, 0};
    ::poll(&q, 1, 2000);
  }
  sandbox_->Forget(p->pid());
}

// ---------------------------------------------------------------------------

std::unique_ptr<LiveCall> LiveCall::Start(std::shared_ptr<LiveSession> session, std::string request, int64_t call,
                                          CallOptions options) {
  std::shared_ptr<Context> main = session->main_;
  return Start(std::move(session), std::move(main), std::move(request), call, std::move(options));
}

std::unique_ptr<LiveCall> LiveCall::Start(std::shared_ptr<LiveSession> session, std::shared_ptr<Context> context,
                                          std::string request, int64_t call, CallOptions options) {
  LiveSession& s = *session;
  return std::unique_ptr<LiveCall>(
      new LiveCall(s, std::move(session), std::move(context), std::move(request), call, std::move(options)));
}

LiveCall::LiveCall(LiveSession& session, std::shared_ptr<LiveSession> keep, std::shared_ptr<Context> context,
                   std::string request, int64_t call, CallOptions options)
    : s_(session),
      keep_(std::move(keep)),
      ctx_(std::move(context)),
      call_(call),
      options_(std::move(options)),
      o_(session.max_event_bytes_) {
  if (std::shared_ptr<exec::Process> p = ctx_->process) {
    kernel_ = true;
    out_fd_ = p->stdout_fd();
    err_fd_ = p->stderr_fd();
    chan_fd_ = ctx_->events.get();
    control_fd_ = ctx_->control.get();
    end_fd_ = p->exit_fd();
  } else {
    out_fd_ = s_.run_.stdout_fd.get();
    err_fd_ = s_.run_.stderr_fd.get();
    chan_fd_ = s_.h_.events_read.get();
    control_fd_ = s_.h_.control.get();
    // The run's status channel: init's word that the interpreter ended (with
    // its wait status; an open sandbox outlives it), or its final status, or
    // end of file when init is gone. (A start's answer makes it readable too,
    // for a moment: OnDeath tells.)
    end_fd_ = s_.run_.status_fd.get();
  }
  o_.result.isolation = s_.run_.report;
  start_ = Clock::now();
  deadline_ = start_ + std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000));
  grace_deadline_ = Clock::time_point::max();
  next_stats_ = start_ + std::chrono::milliseconds(kStatsIntervalMs);
  cpu_before_ = s_.run_.cgroup ? s_.run_.cgroup->ReadCpuUsageNs() : 0;
  ctx_->in_call = true;
  s_.DrainStale(*ctx_);
  // The frame: 'C', the request's size (8 bytes, little-endian), the request.
  pending_.reserve(9 + request.size());
  pending_.push_back('C');
  uint64_t size = request.size();
  for (int i = 0; i < 8; ++i) pending_.push_back(static_cast<char>((size >> (8 * i)) & 0xFF));
  pending_ += request;
  Send();
}

LiveCall::~LiveCall() {
  if (!finished_) ctx_->in_call = false;
}

void LiveCall::Send() {
  bool failed = false;
  {
    std::lock_guard<std::mutex> lock(s_.mu_);
    failed = s_.killed_;
    while (!failed && sent_ < pending_.size()) {
      // A kernel's control is a pipe: written with SIGPIPE blocked (a kernel
      // gone must not kill the server), as send() does for a socket.
      ssize_t n = kernel_ ? WriteNoSigpipe(control_fd_, pending_.data() + sent_, pending_.size() - sent_)
                          : ::send(control_fd_, pending_.data() + sent_, pending_.size() - sent_,
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
  if (kernel_ && !ctx_->main) {
    // The kernel is gone (its end says how) or no longer reads its calls.
    struct pollfd q = {end_fd_, POLLIN, 0};
    if (::poll(&q, 1, 2000) > 0) return OnDeath();
    EndContext(exec::KillReason::kLost, "lost: the call could not be handed to the context's interpreter");
    return;
  }
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

// The session is killed (SIGKILL to every process of it) and the call says
// why; in a context other than the main one, only its interpreter is.
void LiveCall::EndSession(exec::KillReason reason, const std::string& detail) {
  if (!ctx_->main) return EndContext(reason, detail);
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

void LiveCall::EndContext(exec::KillReason reason, const std::string& detail) {
  exec::RunResult& r = o_.result;
  if (r.kill_reason == exec::KillReason::kNone || r.kill_reason == exec::KillReason::kTimeout) r.kill_reason = reason;
  if (r.kill_detail.empty() || reason != exec::KillReason::kTimeout) r.kill_detail = detail;
  r.signal = SIGKILL;
  r.exit_code = 128 + SIGKILL;
  // Killed now (through init: an exchange on the sandbox's channel, so off
  // this thread); Finish()'s caller stops what is left and marks it ended.
  if (std::shared_ptr<exec::Process> p = ctx_->process) {
    std::thread([sandbox = s_.sandbox_, pid = p->pid()] { (void)sandbox->Signal(pid, SIGKILL); }).detach();
  }
  o_.context_ended = true;
  o_.context_end_reason = detail;
  done_ = true;
}

int LiveCall::fd(Fd which) const {
  if (done_) return -1;
  switch (which) {
    case kOut: return out_open_ ? out_fd_ : -1;
    case kErr: return err_open_ ? err_fd_ : -1;
    case kChan: return chan_open_ ? chan_fd_ : -1;
    case kPid: return end_fd_;
    case kCancel: return ctx_->cancel_event.get();
    case kControl: return sent_ < pending_.size() ? control_fd_ : -1;
    case kFdCount: break;
  }
  return -1;
}

int LiveCall::OnTick() {
  if (done_) return 1000;
  // The interpreter's end, should another reader of the run's channel (a
  // start in the sandbox, at that moment) have taken init's word for it
  // before this call's loop saw the channel readable.
  if (!kernel_ && s_.program_pidfd_) {
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
    s_.SendInterrupt(*ctx_);
  }
  if (now >= grace_deadline_) {
    std::string what = r.kill_reason == exec::KillReason::kCancelled ? "cancelled" : "timeout";
    r.kill_detail += "; it did not stop within " + Seconds(options_.interrupt_grace_s) + " s of the interrupt, so " +
                     (ctx_->main ? "the session was killed" : "the context's interpreter was killed (its state is "
                                                              "gone; the next call starts a fresh one)");
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
    out_open_ = ReadStream(out_fd_, exec::Stream::kStdout, options_.output_cap, &r.out, options_.on_output);
  }
  if (which == kErr && err_open_) {
    err_open_ = ReadStream(err_fd_, exec::Stream::kStderr, options_.output_cap, &r.err, options_.on_output);
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
  chan_open_ = o_.channel.ReadFrom(chan_fd_);
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
  std::optional<int> status;
  if (kernel_) {
    std::optional<exec::ProcessExit> e = ctx_->process->Exit();
    if (!e) return;  // spurious
    status = WaitStatusOf(*e);
  } else {
    status = s_.sandbox_->ProgramWaitStatus(0);
    if (!status && !s_.sandbox_->InitGone()) return;  // spurious
  }
  // The interpreter died under the call: what it wrote is all there is.
  exec::RunResult& r = o_.result;
  if (out_open_) ReadStream(out_fd_, exec::Stream::kStdout, options_.output_cap, &r.out, options_.on_output);
  if (err_open_) ReadStream(err_fd_, exec::Stream::kStderr, options_.output_cap, &r.err, options_.on_output);
  if (chan_open_) o_.channel.ReadFrom(chan_fd_);
  if (ctx_->main) {
    o_.alive = false;
    o_.end_reason = s_.EndReason();
  } else {
    // The context's interpreter ended (exit, a crash, a kill: an
    // out-of-memory kill picks the sandbox's largest process); the session
    // and its other contexts live on.
    isolation::CgroupStats st;
    if (s_.run_.cgroup) st = s_.run_.cgroup->ReadStats();
    o_.context_ended = true;
    o_.context_end_reason =
        status && WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL && st.oom_kills > 0
            ? "memory: the context's interpreter was killed: the sandbox ran out of memory (limit " +
                  std::to_string(s_.spec_.limits.memory_bytes) + " bytes, shared by its processes)"
            : WhyEnded(*status, "the context's interpreter");
  }
  const std::string& why = ctx_->main ? o_.end_reason : o_.context_end_reason;
  std::string kind = why.substr(0, why.find(':'));
  if (r.kill_reason == exec::KillReason::kNone) {
    r.kill_reason = kind == "memory" ? exec::KillReason::kMemory
                    : kind == "lost" ? exec::KillReason::kLost
                                     : exec::KillReason::kSignal;
    r.kill_detail = why;
  }
  if (status) {
    r.exit_code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + (WIFSIGNALED(*status) ? WTERMSIG(*status) : SIGKILL);
    r.signal = WIFEXITED(*status) ? 0 : (WIFSIGNALED(*status) ? WTERMSIG(*status) : SIGKILL);
  } else {
    r.exit_code = 128 + SIGKILL;
    r.signal = SIGKILL;
  }
  done_ = true;
}

void LiveCall::OnCancel() {
  uint64_t v;
  bool any = false;
  while (::read(ctx_->cancel_event.get(), &v, sizeof v) > 0) any = true;
  if (!any) return;  // spurious
  exec::RunResult& r = o_.result;
  if (!interrupt_sent_) {
    interrupt_sent_ = true;
    r.kill_reason = exec::KillReason::kCancelled;
    {
      std::lock_guard<std::mutex> lock(s_.mu_);
      r.kill_detail = ctx_->cancel_detail.empty() ? "the call was cancelled" : ctx_->cancel_detail;
    }
    grace_deadline_ =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.interrupt_grace_s * 1000));
  }
  s_.SendInterrupt(*ctx_);
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
  ctx_->in_call = false;
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
