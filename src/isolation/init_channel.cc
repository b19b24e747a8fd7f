#include "isolation/init_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "isolation/child_plan.h"
#include "isolation/init_control.h"
#include "isolation/restrict_blob.h"

namespace airlock::isolation {
namespace {

using namespace internal;

// Init answers at once, except a start, which it answers once the process
// exec'd: a fork and the setup of one process. Far above either.
constexpr int kAnswerTimeoutMs = 10000;

template <typename T>
std::string Bytes(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

StatusOr<std::pair<UniqueFd, UniqueFd>> MakePipe(bool read_nonblocking, bool write_nonblocking) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe2 (a started process's stream)");
  UniqueFd r(fds[0]), w(fds[1]);
  if ((read_nonblocking && ::fcntl(r.get(), F_SETFL, O_NONBLOCK) != 0) ||
      (write_nonblocking && ::fcntl(w.get(), F_SETFL, O_NONBLOCK) != 0)) {
    return ErrnoError("fcntl(O_NONBLOCK)");
  }
  return std::make_pair(std::move(r), std::move(w));
}

Status SendAll(int fd, const std::string& message, const std::vector<int>& fds) {
  struct iovec iov = {const_cast<char*>(message.data()), message.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kAnswerTimeoutMs);
  for (;;) {
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(message.size())) return Status::Ok();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      struct pollfd p = {fd, POLLOUT, 0};
      if (left.count() > 0 && ::poll(&p, 1, static_cast<int>(left.count())) > 0) continue;
      return Unavailable("the sandbox's init does not read its control channel");
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return Unavailable("the sandbox has ended");
    return ErrnoError("sendmsg (the sandbox's control channel)");
  }
}

}  // namespace

std::optional<int> ParseProcessStatus(const char* bytes, size_t size) {
  if (size != sizeof(ProcessStatus)) return std::nullopt;
  ProcessStatus s;
  std::memcpy(&s, bytes, sizeof s);
  return s.wait_status;
}

bool InitChannel::Read(int timeout_ms, uint32_t seq, Answer* answer) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (ended_) return false;
    union {
      char bytes[sizeof(ProgramStatus) + 16];
      ControlHeader h;
    } u;
    ssize_t n = ::recv(fd_, u.bytes, sizeof u.bytes, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      struct pollfd p = {fd_, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
      continue;
    }
    if (n <= 0 || n == static_cast<ssize_t>(sizeof(ProgramStatus))) {
      // End of file, an error, or the final status: init is gone or going.
      // The final status carries the program's wait status.
      if (n == static_cast<ssize_t>(sizeof(ProgramStatus)) && !program_exit_) {
        ProgramStatus st;
        std::memcpy(&st, u.bytes, sizeof st);
        program_exit_ = st.wait_status;
      }
      ended_ = true;
      return false;
    }
    if (static_cast<size_t>(n) < sizeof(ControlHeader) || u.h.magic != kControlMagic) continue;
    if (u.h.type == kCtlProgramExit && n == static_cast<ssize_t>(sizeof(internal::ProgramExit))) {
      internal::ProgramExit m;
      std::memcpy(&m, u.bytes, sizeof m);
      program_exit_ = m.wait_status;
      continue;
    }
    if (u.h.type == kCtlReply && n == static_cast<ssize_t>(sizeof(Reply)) && u.h.seq == seq && seq != 0) {
      Reply r;
      std::memcpy(&r, u.bytes, sizeof r);
      *answer = {r.result, r.err, r.step};
      return true;
    }
    // A late reply to a call that gave up waiting: dropped.
  }
}

StatusOr<InitChannel::Answer> InitChannel::Call(std::string message, const std::vector<int>& fds, const char* what) {
  if (ended_) return Unavailable(std::string(what) + ": the sandbox has ended");
  const uint32_t seq = next_seq_++;
  if (next_seq_ == 0) next_seq_ = 1;
  ControlHeader h;
  std::memcpy(&h, message.data(), sizeof h);
  h.seq = seq;
  h.size = static_cast<uint32_t>(message.size());
  std::memcpy(message.data(), &h, sizeof h);
  RETURN_IF_ERROR(SendAll(fd_, message, fds));
  Answer a;
  if (Read(kAnswerTimeoutMs, seq, &a)) return a;
  if (ended_) return Unavailable(std::string(what) + ": the sandbox has ended");
  return Unavailable(std::string(what) + ": the sandbox's init did not answer within " +
                     std::to_string(kAnswerTimeoutMs / 1000) + " s");
}

std::optional<int> InitChannel::ProgramExit(int wait_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    Answer ignored;
    Read(0, 0, &ignored);
    if (program_exit_ || ended_) return program_exit_;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    struct pollfd p = {fd_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
}

Status InitChannel::BecomeSandbox(const HostSetup& host, const Spec& spec, bool have_cgroup, int64_t lifetime_ms) {
  // The plan a program of `spec` gets (Launch and the warm factory plan the
  // same), as the flat plan every started process applies.
  ChildPlan plan;
  FillChildPlan(&plan, spec, host.landlock_abi, &host.seccomp);
  plan.rlimits = PlanRlimits(spec.limits, have_cgroup);
  RestrictPlan r;
  if (!RestrictPlanOf(plan, &r)) return Internal("a sandbox's restrictions do not fit the plan init takes");
  std::string blob = SerializeRestrictPlan(r);
  if (blob.size() > kMaxPlanBytes) return Internal("a sandbox's restrictions are larger than init takes");
  SandboxRequest req{};
  req.h = {kControlMagic, kCtlSandbox, 0, 0};
  req.lifetime_ms = static_cast<uint64_t>(lifetime_ms > 0 ? lifetime_ms : 0);
  req.plan_size = static_cast<uint32_t>(blob.size());
  ASSIGN_OR_RETURN(Answer a, Call(Bytes(req) + blob, {}, "making the run a sandbox"));
  if (a.err != 0) return Status(ErrorCode::kInternal, "the run's init refused to become a sandbox", a.err);
  return Status::Ok();
}

StatusOr<StartedProcess> InitChannel::Start(const ProcessRequest& rq) {
  if (rq.argv.empty() || rq.argv[0].empty()) return InvalidArgument("a process needs a program (argv[0])");
  if (rq.cwd.empty() || rq.cwd[0] != '/') return InvalidArgument("a process's working directory must be absolute");
  if (rq.extra_fds.size() > kMaxExtraFds) {
    return InvalidArgument("at most " + std::to_string(kMaxExtraFds) + " extra fds per process");
  }
  if (rq.argv.size() + rq.env.size() > kMaxStartArgs) {
    return InvalidArgument("more than " + std::to_string(kMaxStartArgs) + " arguments and environment entries");
  }
  std::string strings = rq.cwd + '\0';
  for (const auto& list : {&rq.argv, &rq.env}) {
    for (const std::string& s : *list) {
      if (s.find('\0') != std::string::npos) return InvalidArgument("an argument or variable holds a NUL byte");
      strings += s;
      strings += '\0';
    }
  }
  if (rq.cwd.find('\0') != std::string::npos) return InvalidArgument("the working directory holds a NUL byte");
  if (strings.size() > kMaxStartStrings) {
    return InvalidArgument("the command line, environment and working directory are over " +
                           std::to_string(kMaxStartStrings) + " bytes");
  }
  StartedProcess out;
  ASSIGN_OR_RETURN(auto status, MakePipe(true, false));
  ASSIGN_OR_RETURN(auto out_pipe, MakePipe(true, false));
  ASSIGN_OR_RETURN(auto err_pipe, MakePipe(true, false));
  std::vector<int> fds = {status.second.get()};
  std::pair<UniqueFd, UniqueFd> in_pipe;
  if (rq.stdin_pipe) {
    ASSIGN_OR_RETURN(in_pipe, MakePipe(false, true));
    fds.push_back(in_pipe.first.get());
  }
  fds.push_back(out_pipe.second.get());
  fds.push_back(err_pipe.second.get());
  fds.insert(fds.end(), rq.extra_fds.begin(), rq.extra_fds.end());
  StartRequest req{};
  req.h = {kControlMagic, kCtlStart, 0, 0};
  req.flags = rq.stdin_pipe ? 0 : kStartStdinNull;
  req.n_extra = static_cast<uint32_t>(rq.extra_fds.size());
  req.argc = static_cast<uint32_t>(rq.argv.size());
  req.envc = static_cast<uint32_t>(rq.env.size());
  req.strings_size = static_cast<uint32_t>(strings.size());
  ASSIGN_OR_RETURN(Answer a, Call(Bytes(req) + strings, fds, "starting a process"));
  if (a.err != 0) {
    std::string what = a.err == EAGAIN && a.step == 0
                           ? "the sandbox runs its most processes started at once (" +
                                 std::to_string(kMaxStartedProcesses) + ")"
                       : a.step == kStepExec ? "'" + rq.argv[0].substr(0, 200) + "' could not be executed"
                       : a.step == kStepChdir ? "the working directory '" + rq.cwd.substr(0, 200) + "' could not be entered"
                       : a.step == kStepFork ? "the sandbox could not fork (its process limit?)"
                                             : std::string("starting a process failed at step '") + StepName(a.step) + "'";
    ErrorCode code = a.step == kStepExec && (a.err == ENOENT || a.err == EACCES || a.err == ENOEXEC)
                         ? ErrorCode::kInvalidArgument
                     : a.step == kStepChdir                     ? ErrorCode::kInvalidArgument
                     : a.err == EAGAIN && (a.step == 0 || a.step == kStepFork) ? ErrorCode::kResourceExhausted
                                                                 : ErrorCode::kUnavailable;
    return Status(code, what, a.err);
  }
  out.pid = a.result;
  out.status = std::move(status.first);
  out.stdout_r = std::move(out_pipe.first);
  out.stderr_r = std::move(err_pipe.first);
  out.stdin_w = std::move(in_pipe.second);
  return out;
}

Status InitChannel::Signal(pid_t pid, int sig, bool group) {
  SignalRequest req{};
  req.h = {kControlMagic, kCtlSignal, 0, 0};
  req.pid = pid;
  req.sig = sig;
  req.flags = group ? kSignalGroup : 0;
  ASSIGN_OR_RETURN(Answer a, Call(Bytes(req), {}, "signalling a process"));
  if (a.err == ESRCH) return NotFound("process " + std::to_string(pid) + " is not running in this sandbox");
  if (a.err == EINVAL) return InvalidArgument("signal " + std::to_string(sig) + " is not a signal");
  if (a.err != 0) return Status(ErrorCode::kInternal, "signalling process " + std::to_string(pid), a.err);
  return Status::Ok();
}

}  // namespace airlock::isolation
