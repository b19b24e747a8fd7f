// Boost 1.74's asio headers need <utility> first under g++ 12 -std=c++20
// (research/ecosystem.md §6.3).
#include <utility>

#include "api/server.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <future>
#include <optional>
#include <random>
#include <set>

#include "api/approvals.h"
#include "api/console_routes.h"
#include "api/recent_runs.h"
#include "api/e2b_routes.h"
#include "api/error_mapping.h"
#include "api/event_stream.h"
#include "api/metrics.h"
#include "api/mcp_routes.h"
#include "api/request_gate.h"
#include "api/session_routes.h"
#include "base/clock.h"
#include "base/log.h"
#include "model/execute.h"
#include "model/runner_protocol.h"
#include "model/stream_events.h"

namespace airlock::api {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

constexpr size_t kHeaderLimit = 16 * 1024;
// Requests whose code is larger than this are prepared (analyzed) on a worker
// thread, so that a big program does not hold up the event loop.
constexpr size_t kInlinePrepareBytes = 64 * 1024;

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::string ToString(beast::string_view s) { return std::string(s.data(), s.size()); }

// The outcome label of a run for metrics and audit.
std::string Outcome(const model::RunReport& r) {
  if (r.kill_reason) return *r.kill_reason;
  return r.exit_code == 0 ? "ok" : "error";
}

const char* RejectReason(model::ErrorKind kind) {
  switch (kind) {
    case model::ErrorKind::kPolicy: return "policy";
    case model::ErrorKind::kPayloadTooLarge: return "too_large";
    case model::ErrorKind::kTooManyRequests: return "overloaded";
    case model::ErrorKind::kUnauthorized: return "unauthorized";
    case model::ErrorKind::kUnavailable: return "unavailable";
    case model::ErrorKind::kMisdirected: return "host";
    case model::ErrorKind::kForbidden: return "origin";
    case model::ErrorKind::kUnsupportedMediaType: return "media_type";
    default: return "invalid";
  }
}

}  // namespace

class Session;
class RunDriver;
class SessionCallDriver;

// Which listener a connection came in on: the API, or one of the E2B ports.
enum class Door { kApi, kE2bInterpreter, kE2bEnvd };

// ---------------------------------------------------------------------------
// Shared server state. Everything here is touched only on the event-loop
// thread, except `svc` (thread-safe) and `metrics` (locked).

struct Server::Impl {
  Impl(ServerOptions o, const service::Service& s, Authenticator a, std::unique_ptr<AuditLog> al)
      : opt(std::move(o)), svc(s), auth(std::move(a)), audit(std::move(al)) {
    io = std::make_unique<net::io_context>(1);
    acceptor = std::make_unique<tcp::acceptor>(*io);
    signals = std::make_unique<net::signal_set>(*io, SIGTERM, SIGINT);
    drain_timer = std::make_unique<net::steady_timer>(*io);
    hard_timer = std::make_unique<net::steady_timer>(*io);
    std::random_device rd;
    id_seed = (uint64_t{rd()} << 32) ^ rd();
    session_mgr = std::make_unique<session::SessionManager>(svc, opt.sessions);
    SessionRouteOptions ro;
    ro.caps.max_depth = opt.max_json_depth;
    ro.caps.max_code_bytes = opt.max_code_bytes;
    ro.max_file_bytes = opt.max_file_bytes;
    session_routes = std::make_unique<SessionRoutes>(*session_mgr, ro);
    E2bRouteOptions eo;
    eo.caps = ro.caps;
    eo.profile = opt.e2b_profile;
    eo.max_file_bytes = opt.max_file_bytes;
    e2b_routes = std::make_unique<E2bRoutes>(*session_mgr, eo);
    session_pool = std::make_unique<net::thread_pool>(std::max<size_t>(2, opt.session_threads));
    mcp_routes = MakeMcpRoutes();
    ApprovalOptions ao;
    ao.max_pending = opt.max_pending_approvals;
    ao.max_depth = opt.max_json_depth;
    ao.auth_enabled = auth.enabled();
    approvals = std::make_unique<Approvals>(
        *io, ao, [this](std::unique_ptr<service::Plan> plan, Approvals::RunDone done) {
          StartApproved(std::move(plan), std::move(done));
        },
        [this](model::AuditRecord rec) { WriteAudit(rec); });
  }
  // /mcp and /v1/tools (api/mcp_routes.h); their calls block session_pool threads.
  std::unique_ptr<McpRoutes> MakeMcpRoutes() {
    McpRouteOptions mo;
    mo.version = AIRLOCK_SERVER_VERSION;
    mo.max_message_bytes = opt.max_body_bytes;
    mo.max_depth = opt.max_json_depth;
    mo.max_code_bytes = opt.max_code_bytes;
    mo.max_file_bytes = opt.max_file_bytes;
    mo.max_concurrent_runs = opt.max_concurrent;
    mo.audit = [this](model::AuditRecord r) {
      if (!audit || !audit->enabled()) return;
      r.time = NowRfc3339();
      audit->Write(r);
    };
    // The approvals book lives on the event loop; an MCP call blocks a
    // session_pool thread, so the hold is posted there and waited for.
    mo.hold = [this](service::Prepared p, const std::string& owner) -> StatusOr<mcp::McpOptions::Held> {
      auto prepared = std::make_shared<service::Prepared>(std::move(p));
      auto answer = std::make_shared<std::promise<StatusOr<mcp::McpOptions::Held>>>();
      std::future<StatusOr<mcp::McpOptions::Held>> got = answer->get_future();
      net::post(*io, [this, prepared, answer, owner] {
        const profile::Profile* prof = svc.profiles().Find(prepared->profile_name);
        if (!approvals || prof == nullptr || !prepared->plan) {
          answer->set_value(Unavailable("the server is stopping"));
          return;
        }
        const std::string request_id = prepared->plan->request_id;
        StatusOr<std::string> id = approvals->Hold(std::move(*prepared), owner, prof->approval, request_id);
        if (!id.ok()) {
          answer->set_value(id.status());
          return;
        }
        answer->set_value(mcp::McpOptions::Held{*id, approvals->PendingJson(*id)});
      });
      if (got.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        return Unavailable("the server's event loop did not take the request (stopping?)");
      }
      return got.get();
    };
    return std::make_unique<McpRoutes>(
        svc, *session_mgr, mo, [this](std::function<void()> fn) { net::post(launcher, std::move(fn)); },
        [this](std::function<void()> fn) { net::post(reaper, std::move(fn)); });
  }
  ~Impl();

  ServerOptions opt;
  const service::Service& svc;
  Authenticator auth;
  RequestGate gate;  // made in Run(), once the listen address is bound
  std::unique_ptr<AuditLog> audit;
  Metrics metrics;

  // One launcher thread: every run is launched from it (see Service::Start).
  net::thread_pool launcher{1};
  // Finishing runs (reaping, parsing the result channel) and preparing large
  // requests.
  net::thread_pool workers{2};
  // Tearing runs down (killing what is left, waiting for init, removing the
  // cgroup: up to seconds for a big run): apart, so that answers never wait
  // behind a teardown. The run's slot is released when its teardown is done.
  net::thread_pool reaper{2};

  // Sessions: the manager (its own expiry thread) and the threads the
  // blocking session routes run on (create, restart, delete, files, and
  // preparing a large call); calls themselves are fed from the loop
  // (SessionCallDriver).
  std::unique_ptr<session::SessionManager> session_mgr;
  std::unique_ptr<SessionRoutes> session_routes;
  // The E2B listener's routes and sockets (one per port and address).
  std::unique_ptr<E2bRoutes> e2b_routes;
  std::vector<std::pair<std::unique_ptr<tcp::acceptor>, Door>> e2b_acceptors;
  std::unique_ptr<net::thread_pool> session_pool;
  std::unique_ptr<McpRoutes> mcp_routes;

  std::unique_ptr<net::io_context> io;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<net::signal_set> signals;
  std::unique_ptr<net::steady_timer> drain_timer, hard_timer;

  bool ready = false;
  bool draining = false;
  bool destroying = false;
  std::string not_ready_detail = "the isolation self-test has not finished";
  std::vector<model::LayerReport> layers;  // from the self-test run

  size_t running = 0;
  std::deque<std::shared_ptr<Session>> queue;
  std::set<std::shared_ptr<RunDriver>> drivers;
  std::set<std::shared_ptr<SessionCallDriver>> call_drivers;  // session calls under way
  std::set<Session*> sessions;

  // Approvals (api/approvals.h): held requests; approved runs waiting for a
  // slot (served before the queue of connections: a person is waiting); the
  // last audit records, for the console's recent runs (GET /v1/runs).
  std::unique_ptr<Approvals> approvals;
  std::deque<std::function<void(bool have_slot)>> approved_queue;
  RecentRuns recent;

  void StartApproved(std::unique_ptr<service::Plan> plan, Approvals::RunDone done);
  void WriteAudit(const model::AuditRecord& a) {
    recent.Add(a);
    if (!audit || !audit->enabled()) return;
    audit->Write(a);
    metrics.SetAuditDropped(audit->dropped());
  }

  uint64_t id_seed = 0, id_counter = 0;

  std::string NewRequestId() {
    // splitmix64 over a random seed: unique, unguessable enough for correlation.
    uint64_t z = id_seed + 0x9e3779b97f4a7c15ULL * ++id_counter;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    char buf[32];
    snprintf(buf, sizeof buf, "req_%016llx", static_cast<unsigned long long>(z));
    return buf;
  }

  void UpdateGauges() {
    metrics.SetInFlight(static_cast<int64_t>(running));
    metrics.SetQueueDepth(static_cast<int64_t>(queue.size()));
  }

  void Accept();
  void AcceptE2b(tcp::acceptor& a, Door door);
  Status ListenE2b();
  void Admit(const std::shared_ptr<Session>& s);
  void Dequeue(Session* s);
  void ReleaseSlot();
  void BeginDrain();
  void MaybeStop();
  void SelfTest();
};

// ---------------------------------------------------------------------------
// RunDriver: one run, supervised from the event loop.

struct RunOutcome {
  Status status;  // not ok: the run could not be started
  model::ExecuteResponse response;
};

class RunDriver : public std::enable_shared_from_this<RunDriver> {
 public:
  using Done = std::function<void(RunOutcome)>;

  RunDriver(Server::Impl& s, std::unique_ptr<service::Plan> plan, Done done)
      : s_(s),
        plan_(std::move(plan)),
        done_(std::move(done)),
        out_(*s.io),
        err_(*s.io),
        pid_(*s.io),
        chan_(*s.io),
        timer_(*s.io),
        channel_(s.svc.max_event_bytes()) {}

  // The fds belong to the Execution and the plan; the stream_descriptors must
  // not close them (a run abandoned at shutdown is killed by ~Execution).
  ~RunDriver() {
    out_.release();
    err_.release();
    pid_.release();
    chan_.release();
  }

  // For a driver made before its owner's callback is (an approved run).
  void SetDone(Done done) { done_ = std::move(done); }

  // The run's options, to adjust before Start() (the streaming output hook).
  exec::RunOptions& plan_options() { return plan_->options; }

  void Start() {
    // A ready warm run is handed the code right here (no fork, no wait).
    if (auto ex = s_.svc.TryStartWarmNow(*plan_)) return OnLaunched(std::move(ex));
    net::post(s_.launcher, [self = shared_from_this()] {
      Clock::time_point t0 = Clock::now();
      auto ex = self->s_.svc.Start(*self->plan_);
      char buf[96];
      snprintf(buf, sizeof buf, "%s: launched in %.1f ms", self->plan_->request_id.c_str(), MillisSince(t0));
      log::Debug(buf);
      net::post(*self->s_.io, [self, ex = std::move(ex)]() mutable { self->OnLaunched(std::move(ex)); });
    });
  }

  // Called once, on the event loop, when the run has been launched (not when
  // the launch failed): a streamed response begins then.
  void OnStarted(std::function<void()> fn) { on_started_ = std::move(fn); }

  // Kills the run (client gone, server draining); it completes as usual, with
  // kill_reason "cancelled".
  void Cancel(const std::string& detail) {
    if (ex_) {
      if (!finishing_) ex_->Cancel(exec::KillReason::kCancelled, detail);
    } else if (!cancel_requested_) {
      cancel_requested_ = true;
      cancel_detail_ = detail;
    }
  }

 private:
  enum Which { kOut, kErr, kPid, kChan };

  void OnLaunched(StatusOr<std::unique_ptr<exec::Execution>> ex) {
    if (!ex.ok()) {
      Done done = std::move(done_);
      done(RunOutcome{ex.status(), {}});
      s_.ReleaseSlot();  // nothing to tear down
      return;
    }
    ex_ = std::move(*ex);
    if (cancel_requested_) ex_->Cancel(exec::KillReason::kCancelled, cancel_detail_);
    fd_[kOut] = ex_->stdout_fd();
    fd_[kErr] = ex_->stderr_fd();
    fd_[kPid] = ex_->pidfd();
    fd_[kChan] = plan_->events_read.get();
    // The descriptors stay owned by the Execution and the plan: released (not
    // closed) by the stream_descriptors when the run ends.
    out_.assign(fd_[kOut]);
    err_.assign(fd_[kErr]);
    pid_.assign(fd_[kPid]);
    chan_.assign(fd_[kChan]);
    for (Which w : {kOut, kErr, kPid, kChan}) Wait(w);
    if (auto started = std::move(on_started_)) started();
    Tick();
  }

  net::posix::stream_descriptor& Desc(Which w) {
    switch (w) {
      case kOut: return out_;
      case kErr: return err_;
      case kPid: return pid_;
      case kChan: break;
    }
    return chan_;
  }

  void Wait(Which w) {
    Desc(w).async_wait(net::posix::descriptor_base::wait_read,
                       [self = shared_from_this(), w](const error_code& ec) { self->OnReady(w, ec); });
  }

  void OnReady(Which w, const error_code& ec) {
    if (ec || finishing_) return;
    switch (w) {
      case kOut:
        ex_->OnReadable(fd_[kOut]);
        if (ex_->stdout_fd() >= 0) Wait(kOut);
        break;
      case kErr:
        ex_->OnReadable(fd_[kErr]);
        if (ex_->stderr_fd() >= 0) Wait(kErr);
        break;
      case kPid:
        ex_->OnReadable(fd_[kPid]);
        break;
      case kChan:
        chan_open_ = channel_.ReadFrom(fd_[kChan]);
        // A flood: more than the runner protocol allows. The rest is read and
        // dropped until the run is gone.
        if (channel_.overflowed()) ex_->Cancel(exec::KillReason::kChannel, channel_.overflow_detail());
        if (chan_open_) Wait(kChan);
        break;
    }
    CheckExit();
  }

  void Tick() {
    int ms = ex_->OnTick();
    CheckExit();
    if (finishing_) return;
    timer_.expires_after(std::chrono::milliseconds(std::max(ms, 1)));
    timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec || self->finishing_) return;
      self->Tick();
    });
  }

  void CheckExit() {
    if (finishing_ || !ex_) return;
    // A warm run's program closes every fd right after its end event: with
    // all three streams at end of file, answer now rather than after the
    // program's teardown and its init's report (~2 ms for `print(1)`).
    std::optional<model::ProgramEnd> end;
    if (!ex_->Exited()) {
      if (chan_open_) return;
      end = model::ParseProgramEnd(channel_.data(), channel_.truncated());
      // Closed without a word, or not only init and the program left: the
      // init's report will say (CanFinishOnEnd reads the cgroup and /proc,
      // so it comes last).
      if (!end || !ex_->CanFinishOnEnd()) return;
    }
    finishing_ = true;
    timer_.cancel();
    out_.release();
    err_.release();
    pid_.release();
    // Every process of the run is gone (the pid namespace died with its
    // init), so the channel holds all there is: read it to EOF.
    if (chan_open_) chan_open_ = channel_.ReadFrom(fd_[kChan]);
    chan_.release();
    // The rest is off the loop: Finish may wait for a killed run's init, and
    // the channel (up to the byte cap) is parsed there.
    net::post(s_.workers, [self = shared_from_this(), end] {
      exec::RunResult result =
          end ? self->ex_->FinishOnEnd(end->exit_code, end->max_rss_kb) : self->ex_->Finish();
      RunOutcome o;
      o.response = self->s_.svc.Complete(*self->plan_, result, self->channel_);
      net::post(*self->s_.io, [self, o = std::move(o)]() mutable { self->Complete(std::move(o)); });
    });
  }

  // Answer early, account late: the response goes now; the run's slot is
  // released once the run is torn down (whatever is left of it killed, its
  // init gone, its cgroup removed), so that a run answered from its end
  // event, forged or not, never outlives its place in the concurrency limit.
  void Complete(RunOutcome o) {
    std::unique_ptr<exec::Execution> ex = std::move(ex_);
    Done done = std::move(done_);
    done(std::move(o));
    net::post(s_.reaper, [ex = std::move(ex), &s = s_]() mutable {
      ex.reset();
      net::post(*s.io, [&s] { s.ReleaseSlot(); });
    });
  }

  Server::Impl& s_;
  std::unique_ptr<service::Plan> plan_;
  Done done_;
  std::function<void()> on_started_;
  std::unique_ptr<exec::Execution> ex_;
  net::posix::stream_descriptor out_, err_, pid_, chan_;
  int fd_[4] = {-1, -1, -1, -1};
  net::steady_timer timer_;
  service::ChannelBuffer channel_;
  bool chan_open_ = true;
  bool finishing_ = false;
  bool cancel_requested_ = false;
  std::string cancel_detail_;
};

// ---------------------------------------------------------------------------
// SessionCallDriver: one call into a live session (session::LiveCall), fed
// from the event loop like a RunDriver. A blocking call on a worker thread
// cost two thread hops (there and back) on top of the runner's round trip:
// on this 2-core VM they were most of a call's latency under load.

class SessionCallDriver : public std::enable_shared_from_this<SessionCallDriver> {
 public:
  using Done = std::function<void(RouteReply)>;
  using Fd = session::LiveCall::Fd;

  SessionCallDriver(Server::Impl& s, std::unique_ptr<session::PendingCall> pending, Done done)
      : s_(s),
        pending_(std::move(pending)),
        done_(std::move(done)),
        desc_{net::posix::stream_descriptor(*s.io), net::posix::stream_descriptor(*s.io),
              net::posix::stream_descriptor(*s.io), net::posix::stream_descriptor(*s.io),
              net::posix::stream_descriptor(*s.io), net::posix::stream_descriptor(*s.io)},
        timer_(*s.io) {}

  // The fds belong to the session: released, never closed, here.
  ~SessionCallDriver() { ReleaseAll(); }

  void Start() {
    session::LiveCall& c = pending_->call();
    for (int i = 0; i < Fd::kFdCount; ++i) {
      int fd = c.fd(static_cast<Fd>(i));
      if (fd < 0) continue;
      error_code ec;
      desc_[i].assign(fd, ec);
      if (ec) log::Warn("a session call's fd could not be watched: " + ec.message());
    }
    Continue();
    if (!finishing_) Tick();
  }

  // A server stopping with the call under way: the call is dropped here,
  // while the session manager still exists (its sessions are killed next).
  void Abandon() {
    if (finishing_) return;  // being finished on a worker: it completes there
    finishing_ = true;
    timer_.cancel();
    ReleaseAll();
    pending_.reset();
  }

 private:
  void ReleaseAll() {
    for (auto& d : desc_) {
      if (d.is_open()) d.release();
    }
  }

  // Waits on every fd the call still wants, then concludes once it is done.
  void Continue() {
    if (finishing_) return;
    session::LiveCall& c = pending_->call();
    if (c.done()) return Conclude();
    for (int i = 0; i < Fd::kFdCount; ++i) {
      if (waiting_[i] || c.fd(static_cast<Fd>(i)) < 0 || !desc_[i].is_open()) continue;
      waiting_[i] = true;
      auto kind = i == Fd::kControl ? net::posix::descriptor_base::wait_write : net::posix::descriptor_base::wait_read;
      desc_[i].async_wait(kind, [self = shared_from_this(), i](const error_code& ec) {
        self->waiting_[i] = false;
        if (ec || self->finishing_) return;
        self->pending_->call().OnReady(static_cast<Fd>(i));
        self->Continue();
      });
    }
  }

  void Tick() {
    int ms = pending_->call().OnTick();
    Continue();
    if (finishing_) return;
    timer_.expires_after(std::chrono::milliseconds(std::max(ms, 1)));
    timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec || self->finishing_) return;
      self->Tick();
    });
  }

  void Conclude() {
    finishing_ = true;
    timer_.cancel();
    ReleaseAll();
    // Small answers are made right here; a session that ended under the
    // call (its remains are killed: blocking) or a large answer (figures,
    // megabytes of output) is finished on a worker.
    constexpr size_t kInlineFinishBytes = 64 * 1024;
    if (!pending_->ended() && pending_->call().bytes_kept() <= kInlineFinishBytes) {
      RouteReply reply = s_.session_routes->FinishCall(std::move(pending_));
      // Posted, not called: a streamed call's last output pieces were posted
      // to this loop as they were read (CallHooks::on_output), and the end
      // of the stream must come after them.
      net::post(*s_.io, [self = shared_from_this(), reply = std::move(reply)]() mutable {
        self->Complete(std::move(reply));
      });
      return;
    }
    net::post(*s_.session_pool, [self = shared_from_this()] {
      RouteReply reply = self->s_.session_routes->FinishCall(std::move(self->pending_));
      net::post(*self->s_.io, [self, reply = std::move(reply)]() mutable { self->Complete(std::move(reply)); });
    });
  }

  void Complete(RouteReply reply) {
    Done done = std::move(done_);
    s_.call_drivers.erase(shared_from_this());
    if (done) done(std::move(reply));
  }

  Server::Impl& s_;
  std::unique_ptr<session::PendingCall> pending_;
  Done done_;
  net::posix::stream_descriptor desc_[Fd::kFdCount];
  bool waiting_[Fd::kFdCount] = {};
  net::steady_timer timer_;
  bool finishing_ = false;
};

// ---------------------------------------------------------------------------
// Session: one client connection; one request at a time.

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server::Impl& s, tcp::socket socket, Door door = Door::kApi)
      : s_(s), stream_(std::move(socket)), door_(door) {
    error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
    s_.sessions.insert(this);
  }
  ~Session() {
    if (s_.destroying) return;
    s_.sessions.erase(this);
    s_.MaybeStop();
  }

  void Begin() { ReadHeader(s_.opt.header_timeout_s); }

  // Drain: a connection waiting for its next request is closed now.
  void CloseIfIdle() {
    if (state_ == State::kReading) Close();
  }

  // Admission granted a run slot.
  void StartRun();
  // Admission put the request in the queue.
  void EnterQueue() {
    state_ = State::kQueued;
    WatchDisconnect();
  }
  // Draining: a queued request will not run.
  void RejectQueued() {
    FinishError({model::ErrorKind::kUnavailable, "the server is shutting down; retry on another instance", ""}, {});
  }
  void FinishError(const model::ApiError& error, const std::vector<model::Violation>& violations);

 private:
  enum class State { kReading, kHandling, kQueued, kRunning, kWriting, kClosed };

  struct Request {
    std::string id;
    std::string route;  // for metrics: a fixed set of names
    bool execute = false;
    bool compat = false;
    bool session_route = false;  // /v1/sessions and below (api/session_routes.h)
    bool approval_route = false;  // /v1/approvals and below (api/approvals.h)
    bool console = false;         // /, /console and its assets (api/console_routes.h)
    // The token's roles (every role without tokens), and a held request's wait.
    bool may_run = true;
    bool may_approve = true;
    std::optional<double> wait_s;
    bool e2b = false;            // on an E2B port (api/e2b_routes.h)
    std::string session_id;      // a session call's, for cancelling it
    bool keep_alive = true;
    Clock::time_point start;
    model::AuditRecord audit;
    std::unique_ptr<service::Plan> plan;
    std::shared_ptr<RunDriver> driver;
    bool client_gone = false;
    std::string origin;  // the Origin header ("" when absent)
    // A streamed response (Accept on /v1/execute): its format, and the writer
    // once the run is admitted (it begins when the run is launched).
    model::StreamFormat stream = model::StreamFormat::kNone;
    std::shared_ptr<EventStream> events;
  };

  void ReadHeader(double timeout_s) {
    state_ = State::kReading;
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    // The larger of the two caps while the header is read (Beast checks a
    // Content-Length against it then); OnHeader sets the route's own.
    parser_->body_limit(std::max<uint64_t>(s_.opt.max_body_bytes, static_cast<uint64_t>(s_.opt.max_file_bytes)));
    stream_.expires_after(Ms(timeout_s));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](const error_code& ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(const error_code& ec) {
    if (ec) return OnReadError(ec);
    BeginRequest();
    // Everything that can refuse a request on its headers alone does so here:
    // before the body is read and before "100 Continue" invites it.
    if (!ScreenHeaders()) return;
    // A session file upload is a raw body of its own cap (--max-file); every
    // other body, --max-body.
    body_limit_ = s_.opt.max_body_bytes;
    if (req_.session_route && SessionRoutes::IsUpload(ToString(parser_->get().method_string()), path_)) {
      body_limit_ = static_cast<uint64_t>(s_.opt.max_file_bytes);
    }
    // An E2B upload is multipart: the file plus its part headers.
    if (req_.e2b && E2bRoutes::IsUpload(ToString(parser_->get().method_string()), path_)) {
      body_limit_ = static_cast<uint64_t>(s_.opt.max_file_bytes) + 64 * 1024;
    }
    parser_->body_limit(body_limit_);
    if (auto length = parser_->content_length(); length && *length > body_limit_) {
      return OnReadError(http::error::body_limit);
    }
    auto expect = parser_->get()[http::field::expect];
    if (beast::iequals(expect, "100-continue") && !parser_->is_done()) {
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(Ms(s_.opt.write_timeout_s));
      net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1),
                       [self = shared_from_this()](const error_code& e, size_t) {
                         if (e) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    stream_.expires_after(Ms(s_.opt.body_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](const error_code& ec, size_t) { self->OnRead(ec); });
  }

  void OnReadError(const error_code& ec) {
    if (ec == http::error::body_limit) {
      if (state_ == State::kReading) BeginRequest();
      req_.keep_alive = false;
      FinishError({model::ErrorKind::kPayloadTooLarge,
                   "request body is larger than " + std::to_string(body_limit_) + " bytes" +
                       (body_limit_ == s_.opt.max_body_bytes ? "" : " (--max-file)"),
                   ""},
                  {});
      return;
    }
    // A client that closed, a timeout, or an abort (drain): nothing to answer.
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset || !parser_->got_some()) {
      return Close();
    }
    if (state_ == State::kReading) BeginRequest();
    req_.keep_alive = false;
    Send(400, model::ErrorToJson({model::ErrorKind::kBadRequest, "malformed HTTP request: " + ec.message(), ""}, ""),
         "application/json", {});
  }

  void OnRead(const error_code& ec) {
    if (ec) return OnReadError(ec);
    stream_.expires_never();
    Handle();
  }

  // The per-request context; the route is known when the header is.
  void BeginRequest() {
    state_ = State::kHandling;
    req_ = Request();
    req_.id = s_.NewRequestId();
    req_.start = Clock::now();
    const auto& h = parser_->get();
    std::string target = ToString(h.target());
    if (size_t q = target.find('?'); q != std::string::npos) target.resize(q);
    path_ = target;
    req_.keep_alive = h.keep_alive() && !s_.draining;
    if (door_ != Door::kApi) {
      req_.e2b = true;
      req_.route = E2bRoutes::RouteName(path_);
    } else if (path_ == "/execute" || path_ == "/v1/execute") {
      req_.execute = true;
      req_.compat = path_ == "/execute";
      req_.route = path_;
      if (!req_.compat) req_.stream = model::NegotiateStreamFormat(ToString(h[http::field::accept]));
    } else if (path_ == "/healthz" || path_ == "/readyz" || path_ == "/profile" || path_ == "/v1/profiles" ||
               path_ == "/metrics" || path_ == "/v1/rules") {
      req_.route = path_;
    } else if (path_.rfind("/v1/profiles/", 0) == 0) {
      req_.route = "/v1/profiles/{name}";
    } else if (McpRoutes::Matches(path_) || McpRoutes::IsTools(path_)) {
      req_.route = path_;
    } else if (Approvals::Matches(path_)) {
      req_.approval_route = true;
      req_.route = path_ == "/v1/approvals" ? "/v1/approvals" : "/v1/approvals/{id}";
    } else if (path_ == "/v1/runs") {
      req_.route = path_;
    } else if (ConsoleRoutes::Matches(path_)) {
      req_.console = true;
      req_.route = "/console";
    } else if (SessionRoutes::Matches(path_)) {
      req_.session_route = true;
      req_.route = SessionRoutes::RouteName(ToString(h.method_string()), path_);
      if (SessionRoutes::IsCall(ToString(h.method_string()), path_)) {
        req_.stream = model::NegotiateStreamFormat(ToString(h[http::field::accept]));
      }
    } else {
      req_.route = "other";
    }
    req_.origin = ToString(h[http::field::origin]).substr(0, 512);
    model::AuditRecord& a = req_.audit;
    a.request_id = req_.id;
    a.route = path_.size() > 256 ? path_.substr(0, 256) : path_;
    a.client_address = remote_;
  }

  bool ScreenHeaders();
  void Handle();
  void HandleSessionRoute();
  // Metrics and the audit record of a session-call reply (the session routes'
  // and E2B's): its refusal, and the call that ran or was refused. False when
  // the reply carries no call.
  template <class Reply>
  bool AccountCall(const Reply& reply) {
    if (reply.error) {
      s_.metrics.CountRejected(RejectReason(reply.error->kind));
      req_.audit.error = reply.error->message;
      for (const auto& v : reply.violations) s_.metrics.CountPolicyRule(v.rule);
      req_.audit.violations = reply.violations;
    }
    if (!reply.call) return false;
    const session::CallReply& c = *reply.call;
    req_.audit.profile = c.profile;
    req_.audit.code_sha256 = c.code_sha256;
    req_.audit.code_bytes = c.code_bytes;
    if (c.kind == session::CallReply::Kind::kRan) {
      RecordRun(c.response.run);
      Audit(req_.client_gone ? "client_gone" : "ran", req_.client_gone ? 499 : 200);
    } else {
      Audit(Verdict(c.error.kind), reply.status);
    }
    return true;
  }
  void DriveSessionCall(std::unique_ptr<session::PendingCall> pending);
  void OnSessionReply(RouteReply reply);
  void HandleMcp();
  void HandleE2b();
  void OnE2bReply(E2bReply reply);
  void HandleExecute();
  void OnPrepared(service::Prepared p);
  void HoldForApproval(service::Prepared p);
  void OnRunDone(RunOutcome o);
  void OnClientGone();
  void WatchDisconnect();
  void PrepareStream();
  // A stream's writer on this connection (PrepareStream and session calls).
  void MakeEventStream();
  void BeginStream();
  // `end_json`: the final object (the non-streaming response).
  void EndStream(const model::ExecuteResponse& resp, const std::string& end_json);
  // The same with given final events and last line (E2B's shapes).
  void EndStreamWith(const std::vector<model::StreamEvent>& final_events, const std::string& end_type,
                     const std::string& end_line);

  // A run that ended (one-shot or a session's call): counted, and its outcome
  // put in the audit record.
  void RecordRun(const model::RunReport& run) {
    s_.metrics.CountExecution(Outcome(run), run.duration_ms / 1000.0);
    model::AuditRecord& a = req_.audit;
    a.exit_code = run.exit_code;
    if (run.signal) a.signal = run.signal;
    a.kill_reason = run.kill_reason;
    a.run_ms = run.duration_ms;
    a.cpu_ms = run.cpu_ms;
    a.max_rss_kb = run.max_rss_kb;
  }

  void Audit(const std::string& verdict, int status) {
    model::AuditRecord& a = req_.audit;
    a.time = NowRfc3339();
    a.verdict = verdict;
    a.http_status = status;
    a.client_gone = req_.client_gone;
    a.duration_ms = MillisSince(req_.start);
    s_.WriteAudit(a);
  }

  void Send(int status, std::string body, const char* content_type,
            const std::vector<std::pair<std::string, std::string>>& headers) {
    s_.metrics.CountHttp(req_.route, status);
    if (req_.client_gone || state_ == State::kClosed) return Close();
    state_ = State::kWriting;
    ++watch_gen_;
    error_code ignored;
    stream_.socket().cancel(ignored);  // the disconnect watch
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(11);
    res->result(static_cast<unsigned>(status));
    res->set(http::field::server, "airlock");
    res->set(http::field::content_type, content_type);
    res->set(http::field::cache_control, "no-store");
    res->set("X-Request-Id", req_.id);
    for (const auto& [k, v] : s_.gate.CorsHeaders(req_.origin)) res->set(k, v);
    for (const auto& [k, v] : headers) res->set(k, v);
    if (s_.draining) req_.keep_alive = false;
    res->keep_alive(req_.keep_alive);
    res->body() = std::move(body);
    res->prepare_payload();
    stream_.expires_after(Ms(s_.opt.write_timeout_s));
    http::async_write(stream_, *res, [self = shared_from_this(), res](const error_code& ec, size_t) {
      self->OnWritten(ec);
    });
  }

  void SendJson(int status, std::string body) { Send(status, std::move(body), "application/json", {}); }

  void OnWritten(const error_code& ec) {
    if (ec) return Close();
    if (!req_.keep_alive) {
      // Half-close and read what the client may still send (the rest of an
      // oversized body), so that it sees our answer rather than a reset.
      error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      // One absolute deadline for the whole discard: a client trickling a byte
      // at a time must not hold the connection open.
      stream_.expires_after(std::chrono::seconds(2));
      Discard(0);
      return;
    }
    req_ = Request();
    ReadHeader(s_.opt.idle_timeout_s);
  }

  void Discard(size_t total) {
    state_ = State::kClosed;
    if (total > (size_t{64} << 20)) return Close();
    if (!discard_) discard_ = std::make_unique<char[]>(65536);
    stream_.async_read_some(net::buffer(discard_.get(), 65536),
                            [self = shared_from_this(), total](const error_code& ec, size_t n) {
                              if (ec) return self->Close();
                              self->Discard(total + n);
                            });
  }

  void Close() {
    state_ = State::kClosed;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  Server::Impl& s_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::unique_ptr<char[]> discard_;
  std::string remote_;
  std::string path_;
  State state_ = State::kReading;
  Door door_ = Door::kApi;
  Request req_;
  uint64_t watch_gen_ = 0;
  uint64_t body_limit_ = 0;  // this request's cap on its body (OnHeader)
};

// The probes stay open to anyone (a kubelet sends its own Host); every other
// route passes the browser rules and, when tokens are configured, auth, on
// the headers alone. A refusal is answered at once and the connection closed
// after it, so a refused body is never read (only discarded, bounded).
bool Session::ScreenHeaders() {
  const auto& h = parser_->get();
  if (!req_.e2b && (path_ == "/healthz" || path_ == "/readyz")) return true;
  const bool has_body = !parser_->is_done();
  auto refuse = [&](const model::ApiError& e, const char* verdict) {
    s_.metrics.CountRejected(RejectReason(e.kind));
    req_.audit.error = e.message;
    if (has_body) req_.keep_alive = false;
    ErrorReply r = MakeErrorReply(e, {}, req_.compat, req_.id);
    if (req_.execute || e.kind == model::ErrorKind::kUnauthorized) Audit(verdict, r.status);
    Send(r.status, r.body, "application/json", r.headers);
    return false;
  };
  const http::verb method = h.method();
  if (auto refusal = s_.gate.Check(ToString(h.method_string()), ToString(h[http::field::host]), req_.origin,
                                   ToString(h[http::field::content_type]),
                                   /*json_body=*/method == http::verb::post && has_body &&
                                       !(req_.e2b && E2bRoutes::IsUpload("POST", path_)))) {
    model::ErrorKind kind = refusal->status == 421   ? model::ErrorKind::kMisdirected
                            : refusal->status == 415 ? model::ErrorKind::kUnsupportedMediaType
                                                     : model::ErrorKind::kForbidden;
    return refuse({kind, refusal->message, ""}, Verdict(kind));
  }
  // A CORS preflight carries no credentials: answer it before auth, from its
  // headers alone (a body it may carry is never read).
  if (method == http::verb::options) {
    if (has_body) req_.keep_alive = false;
    Handle();
    return false;
  }
  // The console's static page carries no data: a browser loads it without a
  // token, then sends one (Authorization header, never a cookie) on its calls.
  if (req_.console) return true;
  if (s_.auth.enabled()) {
    // E2B's clients send their token as X-Access-Token.
    std::string key = ToString(h["X-API-Key"]);
    if (req_.e2b && key.empty()) key = ToString(h["X-Access-Token"]);
    auto id = s_.auth.Identify(ToString(h[http::field::authorization]), key);
    if (!id) {
      return refuse({model::ErrorKind::kUnauthorized,
                     "missing or wrong token: send 'Authorization: Bearer <token>' or 'X-API-Key: <token>'", ""},
                    "unauthorized");
    }
    req_.audit.token_name = id->name;
    req_.may_run = id->run;
    req_.may_approve = id->approve;
  }
  return true;
}

void Session::Handle() {
  const auto& h = parser_->get();
  const http::verb method = h.method();
  if (method == http::verb::options) {
    // A preflight from an allowed origin gets the CORS answer; anything else
    // (no Origin: a plain OPTIONS) only what the server allows.
    auto headers = s_.gate.PreflightHeaders(req_.origin);
    headers.emplace_back("Allow", "GET, POST, PUT, DELETE, OPTIONS");
    return Send(204, "", "text/plain", headers);
  }
  auto method_not_allowed = [&](const char* allow) {
    ErrorReply r = MakeErrorReply({model::ErrorKind::kMethodNotAllowed,
                                   std::string("method not allowed; use ") + allow, ""},
                                  {}, false, req_.id);
    r.headers.emplace_back("Allow", allow);
    Send(r.status, r.body, "application/json", r.headers);
  };

  if (req_.console) {
    if (method != http::verb::get) return method_not_allowed("GET");
    ConsoleAsset a = ConsoleRoutes::Get(path_);
    return Send(a.status, std::move(a.body), a.content_type, a.headers);
  }
  if ((req_.execute || req_.session_route || req_.e2b || McpRoutes::Matches(path_)) && !req_.may_run) {
    return FinishError({model::ErrorKind::kForbidden, "token '" + req_.audit.token_name +
                                                          "' may approve, not run code (its role in the tokens file)",
                        ""},
                       {});
  }
  if (req_.e2b) return HandleE2b();
  if (req_.approval_route) {
    Caller caller{req_.audit.token_name, req_.may_run, req_.may_approve};
    RouteAnswer a = s_.approvals->Handle(ToString(h.method_string()), path_, parser_->release().body(), caller);
    return SendJson(a.status, std::move(a.body));
  }
  if (path_ == "/v1/runs") {
    if (method != http::verb::get) return method_not_allowed("GET");
    // Approvers see every run; a run-only token its own.
    const bool all = !s_.auth.enabled() || req_.may_approve;
    return SendJson(200, s_.recent.ToJson(all ? nullptr : &req_.audit.token_name));
  }
  if (req_.execute) {
    if (method != http::verb::post) return method_not_allowed("POST");
    return HandleExecute();
  }
  if (req_.session_route) return HandleSessionRoute();
  if (McpRoutes::Matches(path_)) return HandleMcp();
  if (req_.route == "other") {
    return SendJson(404, model::ErrorToJson({model::ErrorKind::kNotFound, "no such endpoint: " + path_.substr(0, 256) +
                                                                              " (see docs/api.md)", ""}, req_.id));
  }
  if (method != http::verb::get) return method_not_allowed("GET");

  if (path_ == "/healthz") return SendJson(200, model::StatusToJson("ok", ""));
  if (path_ == "/readyz") {
    if (s_.ready && !s_.draining) return SendJson(200, model::ReadyToJson("ready", "", s_.svc.Pools()));
    ErrorReply r = MakeErrorReply({model::ErrorKind::kUnavailable, "", ""}, {}, false, req_.id);
    return Send(503, model::StatusToJson("not ready", s_.draining ? "the server is shutting down" : s_.not_ready_detail),
                "application/json", r.headers);
  }
  if (path_ == "/metrics") {
    return Send(200,
                s_.metrics.Render() + RenderPoolMetrics(s_.svc.Pools()) +
                    RenderSessionMetrics(s_.session_mgr->Stats()),
                "text/plain; version=0.0.4; charset=utf-8", {});
  }
  if (path_ == "/profile") {
    const profile::Profile& p = s_.svc.profiles().Default();
    return SendJson(200, model::ProfileToJson(s_.svc.View(p), s_.layers));
  }
  if (McpRoutes::IsTools(path_)) {
    std::string target = ToString(h.target());
    size_t q = target.find('?');
    McpHttpReply r = s_.mcp_routes->Tools(q == std::string::npos ? "" : std::string_view(target).substr(q + 1));
    return Send(r.status, std::move(r.body), r.content_type.c_str(), r.headers);
  }
  if (path_ == "/v1/profiles") {
    std::vector<model::ProfileView> views;
    for (const profile::Profile& p : s_.svc.profiles().profiles()) views.push_back(s_.svc.View(p, profile::Door::kApi));
    return SendJson(200, model::ProfileListToJson(views, s_.svc.profiles().DefaultFor(profile::Door::kApi).name,
                                                  s_.svc.DoorDefaults()));
  }
  if (path_ == "/v1/rules") return SendJson(200, model::RulesToJson(service::Service::Rules()));
  // /v1/profiles/{name}
  std::string name = path_.substr(std::string("/v1/profiles/").size());
  const profile::Profile* p = s_.svc.profiles().Find(name);
  if (p == nullptr) {
    return SendJson(404, model::ErrorToJson({model::ErrorKind::kNotFound,
                                             "no profile named '" + name.substr(0, 64) + "' (GET /v1/profiles lists them)",
                                             ""},
                                            req_.id));
  }
  return SendJson(200, model::ProfileToJson(s_.svc.View(*p, profile::Door::kApi), s_.layers));
}

void Session::HandleExecute() {
  if (s_.draining) {
    return FinishError({model::ErrorKind::kUnavailable, "the server is shutting down; retry on another instance", ""},
                       {});
  }
  model::RequestCaps caps;
  caps.max_depth = s_.opt.max_json_depth;
  caps.max_code_bytes = s_.opt.max_code_bytes;
  model::ExecuteRequest request;
  model::ApiError error;
  std::string body = parser_->release().body();
  if (!model::ParseExecuteRequest(body, caps, &request, &error)) return FinishError(error, {});
  req_.audit.code_bytes = static_cast<int64_t>(request.code.size());
  request.stream_output = req_.stream != model::StreamFormat::kNone;
  req_.wait_s = request.wait_s;
  // Each door's default profile: /execute the fips sidecar's, /v1 one where agent code runs.
  if (!request.profile && !req_.compat) request.profile = s_.svc.profiles().DefaultFor(profile::Door::kApi).name;

  if (request.code.size() <= kInlinePrepareBytes) {
    return OnPrepared(s_.svc.Prepare(request, req_.id));
  }
  net::post(s_.workers, [self = shared_from_this(), request = std::move(request), id = req_.id]() {
    service::Prepared p = self->s_.svc.Prepare(request, id);
    net::post(*self->s_.io, [self, p = std::move(p)]() mutable { self->OnPrepared(std::move(p)); });
  });
}

void Session::OnPrepared(service::Prepared p) {
  if (state_ == State::kClosed) return;
  req_.audit.profile = p.profile_name;
  req_.audit.code_sha256 = p.code_sha256;
  req_.audit.code_bytes = p.code_bytes;
  if (p.verdict == service::Verdict::kInvalid) return FinishError(p.error, {});
  if (p.verdict == service::Verdict::kRejected) {
    for (const auto& v : p.violations) s_.metrics.CountPolicyRule(v.rule);
    req_.audit.violations = p.violations;
    return FinishError(p.error, p.violations);
  }
  if (p.verdict == service::Verdict::kNeedsApproval) return HoldForApproval(std::move(p));
  req_.audit.violations = p.plan->warnings;
  req_.plan = std::move(p.plan);
  s_.Admit(shared_from_this());
}

// The profile holds this request for a person: 202 at once, or after the
// decision and the run when the client asked to wait (the connection is held
// by a timer, never by a thread).
void Session::HoldForApproval(service::Prepared p) {
  const profile::Profile* prof = s_.svc.profiles().Find(p.profile_name);
  req_.audit.violations = p.violations;
  auto id = s_.approvals->Hold(std::move(p), req_.audit.token_name, prof->approval, req_.id);
  if (!id.ok()) return FinishError({model::ErrorKind::kTooManyRequests, id.status().message(), ""}, {});
  req_.audit.approval_id = *id;
  req_.audit.verdict = "pending_approval";
  Audit("pending_approval", 202);
  if (!req_.wait_s) return Send(202, s_.approvals->PendingJson(*id), "application/json", {{"X-Approval-Id", *id}});
  state_ = State::kRunning;  // a disconnect only marks the request (the approval stays)
  WatchDisconnect();
  s_.approvals->Wait(*id, *req_.wait_s, [self = shared_from_this(), id = *id] {
    if (self->state_ == State::kClosed) return;
    self->state_ = State::kHandling;
    RouteAnswer a = self->s_.approvals->Outcome(id, self->req_.compat);
    self->Send(a.status, std::move(a.body), "application/json", {{"X-Approval-Id", id}});
  });
}

void Session::FinishError(const model::ApiError& error, const std::vector<model::Violation>& violations) {
  s_.metrics.CountRejected(RejectReason(error.kind));
  req_.audit.error = error.message;
  ErrorReply r = MakeErrorReply(error, violations, req_.compat, req_.id);
  if (req_.execute) Audit(Verdict(error.kind), r.status);
  if (state_ == State::kQueued || state_ == State::kRunning) state_ = State::kHandling;
  Send(r.status, r.body, "application/json", r.headers);
}

void Session::StartRun() {
  state_ = State::kRunning;
  auto self = shared_from_this();
  req_.driver = std::make_shared<RunDriver>(s_, std::move(req_.plan), [self](RunOutcome o) {
    self->OnRunDone(std::move(o));
  });
  s_.drivers.insert(req_.driver);
  if (req_.stream != model::StreamFormat::kNone) PrepareStream();
  req_.driver->Start();
  if (req_.client_gone) req_.driver->Cancel("the client disconnected");
  else WatchDisconnect();
}

void Session::WatchDisconnect() {
  uint64_t gen = ++watch_gen_;
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), gen](const error_code& ec) {
    if (ec || gen != self->watch_gen_) return;
    if (self->state_ != State::kQueued && self->state_ != State::kRunning) return;
    char c;
    ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return self->OnClientGone();
    }
    if (n > 0) return;  // the client sent its next request already: cannot tell more
    self->WatchDisconnect();
  });
}

void Session::OnClientGone() {
  req_.client_gone = true;
  if (state_ == State::kQueued) {
    s_.Dequeue(this);
    s_.metrics.CountExecution("cancelled", 0);
    req_.audit.error = "the client disconnected while the request was queued";
    Audit("client_gone", 499);
    return Close();
  }
  if (state_ == State::kRunning && req_.driver) req_.driver->Cancel("the client disconnected");
  if (state_ == State::kRunning && !req_.session_id.empty()) {
    s_.session_mgr->Cancel(req_.session_id, "the client disconnected");
  }
}

void Session::HandleSessionRoute() {
  const auto& h = parser_->get();
  RouteRequest rq;
  rq.method = ToString(h.method_string());
  if (s_.draining && rq.method == "POST" && path_ == "/v1/sessions") {
    return FinishError({model::ErrorKind::kUnavailable, "the server is shutting down; create the session elsewhere", ""},
                       {});
  }
  std::string target = ToString(h.target());
  rq.path = path_;
  if (size_t q = target.find('?'); q != std::string::npos) rq.query = target.substr(q + 1);
  rq.owner = req_.audit.token_name;
  rq.route_key = ToString(h["X-Airlock-Route"]).substr(0, 64);
  rq.range = ToString(h[http::field::range]).substr(0, 128);
  rq.request_id = req_.id;
  rq.body = parser_->release().body();
  const bool call = SessionRoutes::IsCall(rq.method, rq.path);
  if (call) {
    req_.execute = true;  // audited as a run
    req_.session_id = SessionRoutes::SessionId(rq.path);
    req_.audit.code_bytes = static_cast<int64_t>(rq.body.size());
  }
  state_ = State::kRunning;
  if (call) WatchDisconnect();
  // A streamed call: its output goes to the writer as it is read, and the
  // response begins when the call starts running (refusals before that are
  // plain JSON answers, as for /v1/execute).
  session::CallHooks hooks;
  rq.stream_output = call && req_.stream != model::StreamFormat::kNone;
  if (rq.stream_output) {
    MakeEventStream();
    std::weak_ptr<Session> weak = weak_from_this();
    std::weak_ptr<EventStream> events = req_.events;
    net::io_context& io = *s_.io;
    hooks.on_output = [events, &io](exec::Stream which, std::string_view bytes) {
      net::post(io, [events, which, data = std::string(bytes)] {
        if (auto es = events.lock()) es->Output(which == exec::Stream::kStdout ? "stdout" : "stderr", data);
      });
    };
    hooks.on_started = [weak, &io] {
      net::post(io, [weak] {
        if (auto self = weak.lock()) self->BeginStream();
      });
    };
  }
  if (call && rq.body.size() <= kInlinePrepareBytes) {
    // Checked and begun right here (as /v1/execute's small requests are
    // prepared on the loop), then fed from the loop.
    RouteReply refused;
    std::unique_ptr<session::PendingCall> pending = s_.session_routes->BeginCall(rq, hooks, &refused);
    if (!pending) return OnSessionReply(std::move(refused));
    return DriveSessionCall(std::move(pending));
  }
  net::post(*s_.session_pool, [self = shared_from_this(), rq = std::move(rq), hooks = std::move(hooks), call]() {
    if (call) {
      // A large call is analyzed off the loop, then fed from it.
      RouteReply refused;
      std::unique_ptr<session::PendingCall> pending = self->s_.session_routes->BeginCall(rq, hooks, &refused);
      net::post(*self->s_.io, [self, pending = std::move(pending), refused = std::move(refused)]() mutable {
        if (!pending) return self->OnSessionReply(std::move(refused));
        self->DriveSessionCall(std::move(pending));
      });
      return;
    }
    RouteReply reply = self->s_.session_routes->Handle(rq, hooks);
    net::post(*self->s_.io, [self, reply = std::move(reply)]() mutable { self->OnSessionReply(std::move(reply)); });
  });
}

void Session::DriveSessionCall(std::unique_ptr<session::PendingCall> pending) {
  std::weak_ptr<Session> weak = weak_from_this();
  auto driver = std::make_shared<SessionCallDriver>(s_, std::move(pending), [weak](RouteReply reply) {
    if (auto self = weak.lock()) self->OnSessionReply(std::move(reply));
  });
  s_.call_drivers.insert(driver);
  driver->Start();
  // The connection went while a large call was being prepared: the call was
  // already handed to the interpreter, so it is driven to its end (never
  // dropped half-way, which would leave its output to the next call),
  // interrupted as for any client that leaves.
  if (state_ == State::kClosed || req_.client_gone) {
    s_.session_mgr->Cancel(req_.session_id, "the client disconnected");
  }
}

// /mcp: the JSON-RPC message is handled on a session_pool thread (a tools/call
// blocks for the run), never on the event loop.
void Session::HandleMcp() {
  const auto& h = parser_->get();
  McpHttpRequest rq;
  rq.method = ToString(h.method_string());
  rq.owner = req_.audit.token_name;
  rq.session_id = ToString(h["Mcp-Session-Id"]).substr(0, 128);
  rq.protocol_version = ToString(h["MCP-Protocol-Version"]).substr(0, 64);
  rq.accept = ToString(h[http::field::accept]).substr(0, 512);
  rq.client_address = remote_;
  rq.body = parser_->release().body();
  state_ = State::kRunning;
  net::post(*s_.session_pool, [self = shared_from_this(), rq = std::move(rq)]() {
    McpHttpReply reply = self->s_.mcp_routes->Handle(rq);
    net::post(*self->s_.io, [self, reply = std::move(reply)]() mutable {
      if (self->state_ == State::kClosed) return;
      self->state_ = State::kHandling;
      self->Send(reply.status, std::move(reply.body), reply.content_type.c_str(), reply.headers);
    });
  });
}

void Session::OnSessionReply(RouteReply reply) {
  if (state_ == State::kClosed) return;
  state_ = State::kHandling;
  const bool streaming = req_.events && req_.events->started();
  if (req_.events && (!streaming || req_.client_gone)) {
    req_.events->Abort();  // never begun (refused before the call ran), or nobody to write to
    req_.events.reset();
  }
  AccountCall(reply);
  if (req_.client_gone) return Close();
  if (req_.events && reply.call && reply.call->kind == session::CallReply::Kind::kRan) {
    return EndStream(reply.call->response, reply.body);
  }
  if (req_.events) {  // begun, but no call result (cannot happen: a call that began ran)
    req_.events->Abort();
    req_.events.reset();
    return Close();
  }
  Send(reply.status, std::move(reply.body), reply.content_type.c_str(), reply.headers);
}

// An E2B request (api/e2b_routes.h), on a session-pool thread as session
// routes are. POST /execute always streams (E2B's NDJSON lines): the response
// begins when the call starts running; a refusal
// before that is a plain answer (an error body, or for code the analyzer
// rejected, the whole NDJSON answer with its error line).
void Session::HandleE2b() {
  const auto& h = parser_->get();
  E2bRequest rq;
  rq.port = door_ == Door::kE2bEnvd ? E2bPort::kEnvd : E2bPort::kInterpreter;
  rq.method = ToString(h.method_string());
  rq.path = path_;
  std::string target = ToString(h.target());
  if (size_t q = target.find('?'); q != std::string::npos) rq.query = target.substr(q + 1);
  rq.content_type = ToString(h[http::field::content_type]).substr(0, 1024);
  rq.owner = req_.audit.token_name;
  rq.request_id = req_.id;
  rq.body = parser_->release().body();
  const bool call = E2bRoutes::IsExecute(rq.method, rq.path);
  if (call && s_.draining) {
    return FinishError({model::ErrorKind::kUnavailable, "the server is shutting down; retry on another instance", ""},
                       {});
  }
  E2bHooks hooks;
  if (call) {
    req_.execute = true;  // audited as a run
    req_.audit.code_bytes = static_cast<int64_t>(rq.body.size());
    req_.stream = model::StreamFormat::kNdjson;
    MakeEventStream();
    std::weak_ptr<Session> weak = weak_from_this();
    std::weak_ptr<EventStream> events = req_.events;
    net::io_context& io = *s_.io;
    hooks.on_output = [events, &io](exec::Stream which, std::string_view bytes) {
      net::post(io, [events, which, data = std::string(bytes)] {
        if (auto es = events.lock()) es->Output(which == exec::Stream::kStdout ? "stdout" : "stderr", data);
      });
    };
    hooks.on_started = [weak, &io](const std::string& session_id) {
      net::post(io, [weak, session_id] {
        auto self = weak.lock();
        if (!self) return;
        self->req_.session_id = session_id;  // a client gone interrupts the call
        self->BeginStream();
      });
    };
  }
  state_ = State::kRunning;
  if (call) WatchDisconnect();
  net::post(*s_.session_pool, [self = shared_from_this(), rq = std::move(rq), hooks = std::move(hooks)]() {
    E2bReply reply = self->s_.e2b_routes->Handle(rq, hooks);
    net::post(*self->s_.io, [self, reply = std::move(reply)]() mutable { self->OnE2bReply(std::move(reply)); });
  });
}

void Session::OnE2bReply(E2bReply reply) {
  if (state_ == State::kClosed) return;
  state_ = State::kHandling;
  const bool streaming = req_.events && req_.events->started();
  if (req_.events && (!streaming || req_.client_gone)) {
    req_.events->Abort();
    req_.events.reset();
  }
  if (!AccountCall(reply) && reply.execute && reply.error) {
    Audit(Verdict(reply.error->kind), reply.status);
  }
  if (req_.client_gone) return Close();
  if (req_.events) {
    // Begun, then refused (cannot happen today: a call that began ran): say why on the stream.
    if (reply.final_events.empty() && reply.error) {
      reply.final_events.push_back({"error", model::E2bErrorEvent("SandboxError", reply.error->message, "")});
    }
    return EndStreamWith(reply.final_events, "end_of_execution", model::E2bEndOfExecution());
  }
  Send(reply.status, std::move(reply.body), reply.content_type.c_str(), reply.headers);
}

// A streamed response: the run's output goes to the writer as it is read
// (Execution::on_output is called on this loop, or on a worker while the run
// is finished; either way in order, before OnRunDone), and the response
// begins once the run is launched. Until then every refusal (policy, limits,
// overload, a failed launch) is the usual status code and JSON body.
void Session::MakeEventStream() {
  std::weak_ptr<Session> weak = weak_from_this();
  EventStream::Options o;
  o.format = req_.stream;
  o.keepalive_s = s_.opt.stream_keepalive_s;
  o.max_queued_bytes = s_.opt.stream_queue_bytes;
  o.write_timeout_s = s_.opt.write_timeout_s;
  req_.events = EventStream::Create(stream_, weak, o, [weak] {
    if (auto self = weak.lock()) self->OnClientGone();
  });
}

void Session::BeginStream() {
  if (!req_.events || req_.client_gone || req_.events->started()) return;
  std::vector<std::pair<std::string, std::string>> headers = {{"X-Request-Id", req_.id}};
  for (const auto& [k, v] : s_.gate.CorsHeaders(req_.origin)) headers.emplace_back(k, v);
  if (s_.draining) req_.keep_alive = false;
  req_.events->Begin(200, headers, req_.keep_alive);
}

void Session::PrepareStream() {
  std::weak_ptr<Session> weak = weak_from_this();
  MakeEventStream();
  std::weak_ptr<EventStream> events = req_.events;
  net::io_context& io = *s_.io;
  req_.driver->plan_options().on_output = [events, &io](exec::Stream which, std::string_view bytes) {
    net::dispatch(io, [events, which, data = std::string(bytes)] {
      if (auto es = events.lock()) es->Output(which == exec::Stream::kStdout ? "stdout" : "stderr", data);
    });
  };
  req_.driver->OnStarted([weak] {
    if (auto self = weak.lock()) self->BeginStream();
  });
}

// The end of a streamed response: held-back output, the results, the error,
// then end_of_execution (the non-streaming response object), and the
// connection goes on (keep-alive) or closes as a plain response would.
void Session::EndStream(const model::ExecuteResponse& resp, const std::string& end_json) {
  EndStreamWith(model::FinalEvents(resp), "end_of_execution",
                model::EndOfExecutionEvent(end_json, req_.events->StatsJson()));
}

void Session::EndStreamWith(const std::vector<model::StreamEvent>& final_events, const std::string& end_type,
                            const std::string& end) {
  std::shared_ptr<EventStream> events = std::move(req_.events);
  s_.metrics.CountHttp(req_.route, 200);
  state_ = State::kWriting;
  events->FlushOutput();
  for (const model::StreamEvent& e : final_events) events->Event(e.type, e.json);
  events->End(end_type, end, [self = shared_from_this()](bool ok) {
    // The disconnect watch (a read wait on the socket) ends here, as in Send().
    ++self->watch_gen_;
    error_code ignored;
    self->stream_.socket().cancel(ignored);
    if (!ok) return self->Close();
    if (self->s_.draining) self->req_.keep_alive = false;  // as Send() does
    self->OnWritten(error_code());
  });
}

void Session::OnRunDone(RunOutcome o) {
  s_.drivers.erase(req_.driver);
  req_.driver.reset();  // the driver releases the run's slot once the run is torn down
  state_ = State::kHandling;
  const bool streaming = req_.events && req_.events->started();
  if (req_.events && (!streaming || req_.client_gone)) {
    req_.events->Abort();  // never begun (the launch failed), or nobody to write to
    req_.events.reset();
  }
  if (!o.status.ok()) {
    log::Error("request " + req_.id + ": the run could not be started: " + o.status.ToString());
    s_.metrics.CountExecution("failed", 0);
    model::ApiError e{model::ErrorKind::kInternal, "the run could not be started: " + o.status.ToString(), ""};
    req_.audit.error = e.message;
    ErrorReply r = MakeErrorReply(e, {}, req_.compat, req_.id);
    Audit("error", r.status);
    return Send(r.status, r.body, "application/json", r.headers);
  }
  const model::ExecuteResponse& resp = o.response;
  const model::RunReport& run = resp.run;
  RecordRun(run);
  if (run.kill_reason && *run.kill_reason == "lost" && !req_.client_gone && !streaming) {
    // Not the code's doing: the warm pool's zygote died under it. Say so, and
    // that the same request can simply be sent again.
    model::ApiError e{model::ErrorKind::kUnavailable, run.kill_detail, ""};
    req_.audit.error = e.message;
    ErrorReply r = MakeErrorReply(e, {}, req_.compat, req_.id);
    Audit("error", r.status);
    return Send(r.status, r.body, "application/json", r.headers);
  }
  Audit(req_.client_gone ? "client_gone" : "ran", req_.client_gone ? 499 : 200);
  if (req_.client_gone) return Close();
  // A stream already begun ends with the response as its last event (a run
  // lost with its zygote says so there: kill_reason "lost").
  if (req_.events) return EndStream(resp, model::V1ExecuteToJson(resp));
  SendJson(200, req_.compat ? model::CompatExecuteToJson(resp) : model::V1ExecuteToJson(resp));
}

// ---------------------------------------------------------------------------
// Server::Impl

Server::Impl::~Impl() {
  destroying = true;
  // Abandon launches not started yet, wait for the ones under way, then tear
  // down the loop: pending handlers (and the sessions and runs they hold) are
  // destroyed with it, and a run destroyed unfinished is killed and reaped.
  launcher.stop();
  launcher.join();
  workers.join();
  reaper.join();
  // Session calls under way are dropped, then their sessions end; then the
  // manager goes.
  std::vector<std::shared_ptr<SessionCallDriver>> calls(call_drivers.begin(), call_drivers.end());
  for (auto& d : calls) d->Abandon();
  call_drivers.clear();
  session_mgr->CloseAll();
  session_pool->join();
  mcp_routes.reset();
  session_routes.reset();
  e2b_routes.reset();
  session_mgr.reset();
  approvals.reset();  // its timers belong to the loop
  approved_queue.clear();
  error_code ignored;
  acceptor->close(ignored);
  for (auto& [a, door] : e2b_acceptors) a->close(ignored);
  e2b_acceptors.clear();
  signals->cancel(ignored);
  drain_timer.reset();
  hard_timer.reset();
  signals.reset();
  acceptor.reset();
  queue.clear();
  drivers.clear();
  io.reset();
}

void Server::Impl::Accept() {
  acceptor->async_accept([this](const error_code& ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      log::Warn("accept failed: " + ec.message());
    } else if (sessions.size() >= opt.max_connections) {
      error_code ignored;
      socket.close(ignored);  // over the connection limit
    } else {
      std::make_shared<Session>(*this, std::move(socket))->Begin();
    }
    if (!draining) Accept();
  });
}

void Server::Impl::AcceptE2b(tcp::acceptor& a, Door door) {
  a.async_accept([this, &a, door](const error_code& ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !a.is_open()) return;
      log::Warn("accept failed (E2B listener): " + ec.message());
    } else if (sessions.size() >= opt.max_connections) {
      error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<Session>(*this, std::move(socket), door)->Begin();
    }
    if (!draining) AcceptE2b(a, door);
  });
}

// Binds the E2B ports (before the API's first line is printed, so that a
// client that read it can call them). "localhost" is 127.0.0.1 and, when the
// host has IPv6, ::1.
Status Server::Impl::ListenE2b() {
  if (opt.e2b_host.empty()) return Status::Ok();
  std::vector<std::string> hosts;
  if (opt.e2b_host == "localhost") {
    hosts = {"127.0.0.1", "::1"};
  } else {
    hosts = {opt.e2b_host};
  }
  std::string shown;
  for (auto [port, door] : {std::pair{opt.e2b_port, Door::kE2bInterpreter}, std::pair{opt.e2b_envd_port, Door::kE2bEnvd}}) {
    for (size_t i = 0; i < hosts.size(); ++i) {
      error_code ec;
      net::ip::address address = net::ip::make_address(hosts[i], ec);
      if (ec) return InvalidArgument("--e2b-listen: '" + opt.e2b_host + "' is not an IP address or localhost");
      auto a = std::make_unique<tcp::acceptor>(*io);
      tcp::endpoint endpoint(address, port);
      a->open(endpoint.protocol(), ec);
      if (!ec && address.is_v6()) a->set_option(net::ip::v6_only(true), ec);
      if (!ec) a->set_option(net::socket_base::reuse_address(true), ec);
      if (!ec) a->bind(endpoint, ec);
      if (!ec) a->listen(net::socket_base::max_listen_connections, ec);
      if (ec) {
        if (i > 0) continue;  // localhost's ::1 on a host without IPv6
        return Unavailable("cannot listen on " + hosts[i] + ":" + std::to_string(port) + " (the E2B " +
                           (door == Door::kE2bEnvd ? "envd" : "code interpreter") + " port): " + ec.message() +
                           (ec == net::error::address_in_use ? " (another server, or a real E2B sandbox, is there)" : ""));
      }
      uint16_t bound = a->local_endpoint(ec).port();
      shown += " " + (address.is_v6() ? "[" + address.to_string() + "]" : address.to_string()) + ":" +
               std::to_string(bound) + (door == Door::kE2bEnvd ? " (envd)" : " (code interpreter)");
      e2b_acceptors.emplace_back(std::move(a), door);
    }
  }
  log::Info("E2B-compatible listener on" + shown +
            (auth.enabled() ? "; tokens required (X-Access-Token, Authorization or X-API-Key)"
                            : "; no tokens: every local client may run code"));
  return Status::Ok();
}

void Server::Impl::Admit(const std::shared_ptr<Session>& s) {
  if (running < opt.max_concurrent) {
    ++running;
    UpdateGauges();
    s->StartRun();
  } else if (queue.size() < opt.max_queue) {
    queue.push_back(s);
    UpdateGauges();
    s->EnterQueue();
  } else {
    s->FinishError({model::ErrorKind::kTooManyRequests,
                    "the server is busy: " + std::to_string(running) + " runs executing and " +
                        std::to_string(queue.size()) + " queued; retry after 1 s",
                    ""},
                   {});
  }
}

void Server::Impl::Dequeue(Session* s) {
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    if (it->get() == s) {
      queue.erase(it);
      break;
    }
  }
  UpdateGauges();
}

void Server::Impl::ReleaseSlot() {
  if (running > 0) --running;
  while (running < opt.max_concurrent && !approved_queue.empty() && !draining) {
    auto start = std::move(approved_queue.front());
    approved_queue.pop_front();
    ++running;
    start(true);
  }
  while (running < opt.max_concurrent && !queue.empty() && !draining) {
    std::shared_ptr<Session> next = std::move(queue.front());
    queue.pop_front();
    ++running;
    next->StartRun();
  }
  UpdateGauges();
  MaybeStop();
}

void Server::Impl::BeginDrain() {
  if (draining) return;
  draining = true;
  metrics.SetReady(false);
  char grace[32];
  snprintf(grace, sizeof grace, "%g", opt.drain_grace_s);
  log::Info("draining: no new connections; " + std::to_string(running) + " run(s) executing, " +
            std::to_string(queue.size()) + " queued; grace period " + grace + " s");
  error_code ignored;
  acceptor->close(ignored);
  for (auto& [a, door] : e2b_acceptors) a->close(ignored);
  std::deque<std::shared_ptr<Session>> queued;
  queued.swap(queue);
  UpdateGauges();
  for (auto& s : queued) s->RejectQueued();
  // Approved runs not started yet will not start; clients waiting on a
  // decision are answered (202: still pending) so the drain can end.
  std::deque<std::function<void(bool)>> approved;
  approved.swap(approved_queue);
  for (auto& start : approved) start(false);  // fails the run: no slot, draining
  approvals->ReleaseWaiters();
  std::vector<Session*> idle(sessions.begin(), sessions.end());
  for (Session* s : idle) s->CloseIfIdle();
  drain_timer->expires_after(Ms(opt.drain_grace_s));
  drain_timer->async_wait([this](const error_code& ec) {
    if (ec) return;
    if (!drivers.empty()) log::Warn("grace period over: killing " + std::to_string(drivers.size()) + " run(s)");
    std::vector<std::shared_ptr<RunDriver>> all(drivers.begin(), drivers.end());
    for (auto& d : all) d->Cancel("the server is shutting down");
  });
  hard_timer->expires_after(Ms(opt.drain_grace_s) + std::chrono::seconds(15));
  hard_timer->async_wait([this](const error_code& ec) {
    if (ec) return;
    log::Warn("drain did not finish in time; stopping");
    io->stop();
  });
  MaybeStop();
}

// An approved run: launched like any other (a run slot, the same driver), on
// behalf of no connection; its result goes to the approval.
void Server::Impl::StartApproved(std::unique_ptr<service::Plan> plan, Approvals::RunDone done) {
  auto shared_plan = std::make_shared<std::unique_ptr<service::Plan>>(std::move(plan));
  auto shared_done = std::make_shared<Approvals::RunDone>(std::move(done));
  // `have_slot`: the caller counted the run in `running` already.
  auto start = [this, shared_plan, shared_done](bool have_slot) {
    if (draining || !have_slot) {
      if (have_slot && running > 0) --running;
      UpdateGauges();
      (*shared_done)(Unavailable("the server is shutting down"), {});
      MaybeStop();
      return;
    }
    auto driver = std::make_shared<RunDriver>(*this, std::move(*shared_plan), nullptr);
    RunDriver* raw = driver.get();
    driver->SetDone([this, raw, shared_done](RunOutcome o) {
      for (auto it = drivers.begin(); it != drivers.end(); ++it) {
        if (it->get() == raw) {
          drivers.erase(it);
          break;
        }
      }
      metrics.CountExecution(o.status.ok() ? Outcome(o.response.run) : "failed", o.response.run.duration_ms / 1000.0);
      (*shared_done)(o.status, std::move(o.response));
    });
    drivers.insert(driver);
    driver->Start();
  };
  if (!draining && running < opt.max_concurrent) {
    ++running;
    UpdateGauges();
    return start(true);
  }
  if (draining) return start(false);
  approved_queue.push_back(std::move(start));
}

void Server::Impl::MaybeStop() {
  if (draining && running == 0 && sessions.empty()) io->stop();
}

void Server::Impl::SelfTest() {
  net::post(launcher, [this] {
    model::ExecuteRequest req;
    req.code = "print(1 + 1)\n6 * 7\n";
    // A profile that runs without a person's approval (the default one unless
    // it holds every request): the self-test's fixed program is not held.
    const profile::Profile* p = &svc.profiles().Default();
    for (const profile::Profile& q : svc.profiles().profiles()) {
      if (p->approval.policy != profile::ApprovalPolicy::kAlways) break;
      if (q.approval.policy != profile::ApprovalPolicy::kAlways) p = &q;
    }
    req.profile = p->name;
    req.timeout_s = std::min(10.0, p->resources.timeout_max_s);
    auto r = svc.RunBlocking(req, "self-test");
    net::post(*io, [this, r = std::move(r)]() {
      if (!r.ok()) {
        not_ready_detail = "the isolation self-test failed: " + r.status().ToString();
      } else if (r->run.exit_code != 0 || r->run.stdout_text != "2\n" || r->result.value_or("") != "42") {
        not_ready_detail = "the isolation self-test ran but printed '" + r->run.stdout_text.substr(0, 200) +
                           "', result '" + r->result.value_or("(none)") + "', exit code " +
                           std::to_string(r->run.exit_code) + ": " + r->run.stderr_text.substr(0, 500);
      } else {
        ready = true;
        layers = r->run.layers;
        not_ready_detail.clear();
        metrics.SetReady(!draining);
        char buf[96];
        snprintf(buf, sizeof buf, "self-test passed (python3 in the sandbox, %.1f ms); ready", r->run.duration_ms);
        log::Info(buf);
        return;
      }
      log::Error(not_ready_detail + " — GET /readyz answers 503");
    });
  });
}

// ---------------------------------------------------------------------------
// Server

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  error_code ec;
  net::ip::address a = net::ip::make_address(host, ec);
  return !ec && a.is_loopback();
}

Server::Server(ServerOptions options, const service::Service& service, Authenticator auth,
               std::unique_ptr<AuditLog> audit)
    : impl_(std::make_unique<Impl>(std::move(options), service, std::move(auth), std::move(audit))) {}

Server::~Server() = default;

Status Server::Run() {
  Impl& s = *impl_;
  const std::string host = s.opt.host == "localhost" ? "127.0.0.1" : s.opt.host;
  error_code ec;
  net::ip::address address = net::ip::make_address(host, ec);
  if (ec) return InvalidArgument("--listen: '" + s.opt.host + "' is not an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0)");
  if (!address.is_loopback() && !s.auth.enabled() && !s.opt.insecure) {
    return InvalidArgument("--listen " + s.opt.host +
                           " is reachable from other machines, and no token is configured: anyone who can reach it "
                           "could run code. Give tokens (--tokens-file FILE or AIRLOCK_TOKENS), or say --insecure "
                           "if a proxy in front authenticates");
  }
  tcp::endpoint endpoint(address, s.opt.port);
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot listen on " + s.opt.host + ":" + std::to_string(s.opt.port) + ": " + ec.message() +
                       (ec == net::error::address_in_use ? " (another server is there; pick another --listen port)" : ""));
  }
  tcp::endpoint bound = s.acceptor->local_endpoint(ec);
  // The Host names this server answers to: loopback (always), the address it
  // listens on, and every local address when that is a wildcard.
  std::vector<std::string> local;
  if (address.is_unspecified()) {
    struct ifaddrs* ifs = nullptr;
    if (::getifaddrs(&ifs) == 0) {
      for (struct ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr) continue;
        char text[INET6_ADDRSTRLEN] = "";
        if (i->ifa_addr->sa_family == AF_INET) {
          ::inet_ntop(AF_INET, &reinterpret_cast<struct sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
          ::inet_ntop(AF_INET6, &reinterpret_cast<struct sockaddr_in6*>(i->ifa_addr)->sin6_addr, text, sizeof text);
        }
        if (text[0] != '\0') local.emplace_back(text);
      }
      ::freeifaddrs(ifs);
    }
  } else {
    local.push_back(address.to_string());
  }
  if (!s.opt.e2b_host.empty()) {
    if (!IsLoopback(s.opt.e2b_host) && !s.auth.enabled() && !s.opt.insecure) {
      return InvalidArgument("--e2b-listen " + s.opt.e2b_host +
                             " is reachable from other machines and no token is configured: anyone who can reach it "
                             "could run code (the E2B SDKs send no credentials in debug mode). Keep it on localhost");
    }
    if (Status st = s.ListenE2b(); !st.ok()) return st;
    // The SDKs send Host: localhost:49999; a wildcard E2B address answers
    // to every local address as the API's does.
    if (!IsLoopback(s.opt.e2b_host)) local.push_back(s.opt.e2b_host);
  }
  auto gate = RequestGate::Create({s.opt.allowed_hosts, s.opt.allowed_origins}, std::move(local));
  if (!gate.ok()) return gate.status();
  s.gate = std::move(*gate);
  std::string shown = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  std::string line = "airlock: listening on http://" + shown + ":" + std::to_string(bound.port()) + "\n";
  // The first line of stdout, unbuffered: tests and scripts read the port from it.
  for (size_t off = 0; off < line.size();) {
    ssize_t n = ::write(STDOUT_FILENO, line.data() + off, line.size() - off);
    if (n <= 0 && errno != EINTR) break;
    if (n > 0) off += static_cast<size_t>(n);
  }
  if (!s.auth.enabled()) {
    log::Info(address.is_loopback() ? "no tokens configured: every local client may run code"
                                    : "WARNING: --insecure: no authentication on a non-loopback address");
  }

  s.signals->async_wait([&s](const error_code& e, int signo) {
    if (e) return;
    log::Info(std::string("received ") + (signo == SIGTERM ? "SIGTERM" : "SIGINT") + "; a second one stops at once");
    s.BeginDrain();
    s.signals->async_wait([&s](const error_code& e2, int) {
      if (e2) return;
      log::Warn("second signal: stopping now, killing every run");
      s.io->stop();
    });
  });
  s.SelfTest();
  s.Accept();
  for (auto& [a, door] : s.e2b_acceptors) s.AcceptE2b(*a, door);
  s.io->run();
  // Sessions outlive the drain of one-shot runs (their calls are answered
  // until the loop stops); now they end, every process and cgroup with them.
  s.session_mgr->CloseAll();
  log::Info("stopped");
  return Status::Ok();
}

}  // namespace airlock::api
