#include "exec/sandbox.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>

#include "base/log.h"

namespace airlock::exec {
namespace {

constexpr int kInputWaitMs = 5000;

// The order ends were seen in, for List() (newest first) and forgetting the oldest.
std::atomic<uint64_t> g_end_order{0};

// Whether `cwd` is /home/user, /tmp or a path beneath either, with no "." or
// ".." component (lexically: a symlink planted in the workspace may still
// lead elsewhere, which gives nothing: every process may read the whole root
// and write only the workspace).
bool InWorkspace(const std::string& cwd) {
  bool under = false;
  for (std::string_view root : {std::string_view(isolation::kWorkspaceDir), std::string_view("/tmp")}) {
    if (cwd == root || (cwd.size() > root.size() && cwd.compare(0, root.size(), root) == 0 && cwd[root.size()] == '/')) {
      under = true;
    }
  }
  if (!under || cwd.size() > 4095) return false;
  for (size_t pos = 1; pos <= cwd.size();) {
    size_t next = cwd.find('/', pos);
    if (next == std::string::npos) next = cwd.size();
    std::string_view part(cwd.data() + pos, next - pos);
    if (part == "." || part == "..") return false;
    if (part.empty() && next != cwd.size()) return false;  // "//"
    pos = next + 1;
  }
  return true;
}

// base laid under over: an entry of `over` replaces base's of the same name.
std::vector<std::string> MergeEnv(const std::vector<std::string>& base, const std::vector<std::string>& over) {
  auto name = [](const std::string& e) { return e.substr(0, e.find('=')); };
  std::vector<std::string> out;
  for (const std::string& b : base) {
    bool replaced = std::any_of(over.begin(), over.end(), [&](const std::string& o) { return name(o) == name(b); });
    if (!replaced) out.push_back(b);
  }
  out.insert(out.end(), over.begin(), over.end());
  return out;
}

ProcessExit ExitOf(int wait_status) {
  ProcessExit e;
  if (WIFEXITED(wait_status)) {
    e.exited = true;
    e.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    e.signal = WTERMSIG(wait_status);
    e.exit_code = 128 + e.signal;
  }
  return e;
}

}  // namespace

// ---------------------------------------------------------------------------

ProcessInfo Process::Info() {
  Exit();
  std::lock_guard<std::mutex> lock(mu_);
  return info_;
}

std::optional<ProcessExit> Process::Exit() {
  std::lock_guard<std::mutex> lock(mu_);
  if (ended_) return info_.exit;
  if (!status_) return std::nullopt;
  char buf[16];
  ssize_t n;
  do {
    n = ::read(status_.get(), buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return std::nullopt;  // not yet
  std::optional<int> st = isolation::ParseProcessStatus(buf, static_cast<size_t>(n));
  if (st) {
    info_.exit = ExitOf(*st);
  } else {
    // End of file without a status: init is gone, and the process with it.
    info_.exit = ProcessExit{false, 128 + SIGKILL, SIGKILL, true};
  }
  info_.running = false;
  ended_ = true;
  end_order_ = ++g_end_order;
  // status_ stays open until the process is dropped: a loop may be waiting
  // on it (ProcessWatch), and its number must not be reused under it.
  return info_.exit;
}

Status Process::SendInput(std::string_view data) {
  std::lock_guard<std::mutex> lock(in_mu_);
  if (!in_) {
    return Status(ErrorCode::kFailedPrecondition,
                  "process " + std::to_string(pid_) + (stdin_pipe_ ? " has its input closed" : " was started without input"));
  }
  // A reader gone must not kill this process with SIGPIPE: blocked here, and
  // a pending one taken back before the mask is restored.
  sigset_t pipe_only, old;
  ::sigemptyset(&pipe_only);
  ::sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  Status result = Status::Ok();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kInputWaitMs);
  while (!data.empty()) {
    ssize_t n = ::write(in_.get(), data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      struct pollfd p = {in_.get(), POLLOUT, 0};
      if (left.count() > 0 && ::poll(&p, 1, static_cast<int>(left.count())) >= 0) {
        if (std::chrono::steady_clock::now() < deadline) continue;
      }
      result = Status(ErrorCode::kUnavailable, "process " + std::to_string(pid_) + " did not read its input for " +
                                                   std::to_string(kInputWaitMs / 1000) + " s");
      break;
    }
    if (n < 0 && errno == EPIPE) {
      const struct timespec zero = {0, 0};
      ::sigtimedwait(&pipe_only, nullptr, &zero);
      in_.reset();
      result = Status(ErrorCode::kFailedPrecondition,
                      "process " + std::to_string(pid_) + " no longer reads its input (it closed it or ended)");
      break;
    }
    result = ErrnoError("write (process " + std::to_string(pid_) + "'s input)");
    break;
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return result;
}

void Process::CloseInput() {
  std::lock_guard<std::mutex> lock(in_mu_);
  in_.reset();
}

// ---------------------------------------------------------------------------

std::shared_ptr<Sandbox> Sandbox::Adopt(isolation::Launched run, const isolation::Spec& spec,
                                        std::shared_ptr<const ZygoteLife> zygote) {
  std::shared_ptr<Sandbox> sb(new Sandbox());
  sb->run_ = std::move(run);
  sb->spec_ = spec;
  sb->zygote_ = std::move(zygote);
  sb->channel_ = std::make_unique<isolation::InitChannel>(sb->run_.status_fd.get());
  return sb;
}

Status Sandbox::Open(const isolation::HostSetup& host, SandboxOptions options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (opened_) return *opened_;
  if (killed_) return Unavailable("the sandbox has ended: " + kill_reason_);
  if (!run_.pidfd || !run_.status_fd) return InvalidArgument("a sandbox is made from a running run");
  options_ = std::move(options);
  const auto lifetime_ms = static_cast<int64_t>(options_.lifetime_s * 1000);
  opened_ = channel_->BecomeSandbox(host, spec_, run_.cgroup != nullptr, lifetime_ms);
  open_ = opened_->ok();
  return *opened_;
}

bool Sandbox::opened() { return open_.load(); }

StatusOr<std::shared_ptr<Sandbox>> Sandbox::Make(const isolation::HostSetup& host, isolation::Launched run,
                                                 const isolation::Spec& spec, SandboxOptions options,
                                                 std::shared_ptr<const ZygoteLife> zygote) {
  std::shared_ptr<Sandbox> sb = Adopt(std::move(run), spec, std::move(zygote));
  if (Status s = sb->Open(host, std::move(options)); !s.ok()) {
    sb->Kill("it could not be made a sandbox: " + s.ToString());
    return s;
  }
  return sb;
}

Sandbox::~Sandbox() { Kill("closed"); }

StatusOr<std::shared_ptr<Process>> Sandbox::Start(const ProcessRequest& request) {
  if (!InWorkspace(request.cwd)) {
    return InvalidArgument("the working directory '" + request.cwd.substr(0, 200) + "' is not " +
                           isolation::kWorkspaceDir + ", /tmp or a directory beneath them");
  }
  isolation::ProcessRequest rq;
  rq.argv = request.argv;
  rq.env = MergeEnv(options_.env, request.env);
  rq.cwd = request.cwd;
  rq.stdin_pipe = request.stdin_open;
  rq.extra_fds = request.extra_fds;
  std::lock_guard<std::mutex> lock(mu_);
  if (killed_) return Unavailable("the sandbox has ended: " + kill_reason_);
  if (!open_) return Status(ErrorCode::kFailedPrecondition, "the run is not a sandbox (Open() it first)");
  ASSIGN_OR_RETURN(isolation::StartedProcess started, channel_->Start(rq));
  auto p = std::shared_ptr<Process>(new Process());
  p->pid_ = started.pid;
  p->stdin_pipe_ = request.stdin_open;
  p->info_.pid = started.pid;
  p->info_.tag = request.tag;
  p->info_.argv = request.argv;
  p->info_.cwd = request.cwd;
  p->status_ = std::move(started.status);
  p->in_ = std::move(started.stdin_w);
  p->out_ = std::move(started.stdout_r);
  p->err_ = std::move(started.stderr_r);
  // A pid is given again only once its last holder is reaped: an ended
  // process of the same pid is replaced.
  processes_[started.pid] = p;
  TrimEndedLocked();
  return p;
}

Status Sandbox::Signal(pid_t pid, int sig) {
  std::shared_ptr<Process> p = Find(pid);
  if (!p || p->Exit()) return NotFound("process " + std::to_string(pid) + " is not running in this sandbox");
  std::lock_guard<std::mutex> lock(mu_);
  if (killed_) return Unavailable("the sandbox has ended: " + kill_reason_);
  return channel_->Signal(pid, sig, /*group=*/true);
}

std::shared_ptr<Process> Sandbox::Find(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = processes_.find(pid);
  return it == processes_.end() ? nullptr : it->second;
}

std::vector<ProcessInfo> Sandbox::List() {
  std::vector<std::shared_ptr<Process>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TrimEndedLocked();
    for (auto& [pid, p] : processes_) all.push_back(p);
  }
  std::vector<std::pair<uint64_t, ProcessInfo>> rows;
  for (auto& p : all) {
    ProcessInfo info = p->Info();
    uint64_t order;
    {
      std::lock_guard<std::mutex> lock(p->mu_);
      order = p->end_order_;
    }
    rows.emplace_back(order, std::move(info));
  }
  // Running (order 0) first by pid, then ended ones, newest first.
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    if ((a.first == 0) != (b.first == 0)) return a.first == 0;
    if (a.first == 0) return a.second.pid < b.second.pid;
    return a.first > b.first;
  });
  std::vector<ProcessInfo> out;
  for (auto& r : rows) out.push_back(std::move(r.second));
  return out;
}

void Sandbox::Forget(pid_t pid) {
  std::shared_ptr<Process> p = Find(pid);
  if (!p || !p->Exit()) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = processes_.find(pid);
  if (it != processes_.end() && it->second == p) processes_.erase(it);
}

void Sandbox::TrimEndedLocked() {
  std::vector<std::pair<uint64_t, pid_t>> ended;
  for (auto& [pid, p] : processes_) {
    std::lock_guard<std::mutex> lock(p->mu_);
    if (p->ended_) ended.emplace_back(p->end_order_, pid);
  }
  if (ended.size() <= options_.max_ended_kept) return;
  std::sort(ended.begin(), ended.end());
  for (size_t i = 0; i + options_.max_ended_kept < ended.size(); ++i) processes_.erase(ended[i].second);
}

bool Sandbox::Alive() const {
  struct pollfd p = {run_.pidfd.get(), POLLIN, 0};
  return run_.pidfd && ::poll(&p, 1, 0) == 0;
}

bool Sandbox::InitGone() {
  if (!Alive()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return channel_->ended();
}

std::optional<int> Sandbox::ProgramWaitStatus(int wait_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  return channel_->ProgramExit(wait_ms);
}

void Sandbox::Kill(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (killed_) return;
  killed_ = true;
  kill_reason_ = reason;
  if (!run_.pidfd) return;
  isolation::KillRun(run_);
  // Gone when this returns: init (its pid namespace emptied first), reaped
  // here when it is our child (a cold run), waited for (bounded) when its
  // zygote reaps it.
  if (!run_.adopted && run_.pid > 0) {
    int st;
    while (::waitpid(run_.pid, &st, __WALL) < 0 && errno == EINTR) {
    }
    run_.pid = -1;
  } else {
    struct pollfd p = {run_.pidfd.get(), POLLIN, 0};
    ::poll(&p, 1, 2000);
  }
}

std::string Sandbox::ended_reason() {
  std::lock_guard<std::mutex> lock(mu_);
  return kill_reason_;
}

}  // namespace airlock::exec
