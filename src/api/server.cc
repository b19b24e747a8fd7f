// The server's wiring (api/server.h): its state and the doors' tables, the
// listeners and their accept loops, approved runs, the drain and the startup
// self-test. What a request goes through is api/pipeline.h.
#include "api/server.h"

#include "api/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <random>

#include "api/call_driver.h"
#include "api/command_driver.h"
#include "api/connection.h"
#include "api/doors.h"
#include "api/e2b_routes.h"
#include "api/envd_process_routes.h"
#include "api/envd_process_routes.h"
#include "api/mcp_routes.h"
#include "api/run_driver.h"
#include "api/server_state.h"
#include "api/session_routes.h"
#include "base/clock.h"
#include "base/log.h"

namespace airlock::api {

namespace {

AdmissionOptions BudgetsOf(const ServerOptions& o, bool per_owner) {
  AdmissionOptions a;
  a.body_buffer_bytes = o.max_body_buffer;
  a.body_buffer_per_owner = o.max_body_buffer_per_owner;
  a.uploads_per_owner = o.max_uploads_per_owner;
  a.per_owner = per_owner;
  return a;
}

}  // namespace

ServerState::ServerState(ServerOptions o, const service::Service& s, Authenticator a, std::unique_ptr<AuditLog> al)
    : opt(std::move(o)),
      svc(s),
      auth(std::move(a)),
      audit(std::move(al)),
      admission(BudgetsOf(opt, auth.enabled())),
      connections(opt.max_connections, opt.max_connections_per_address),
      slots(opt.max_concurrent, opt.max_queue) {
  io = std::make_unique<net::io_context>(1);
  acceptor = std::make_unique<tcp::acceptor>(*io);
  signals = std::make_unique<net::signal_set>(*io, SIGTERM, SIGINT);
  drain_timer = std::make_unique<net::steady_timer>(*io);
  hard_timer = std::make_unique<net::steady_timer>(*io);
  accept_backoff = std::make_unique<net::steady_timer>(*io);
  std::random_device rd;
  id_seed_ = (uint64_t{rd()} << 32) ^ rd();
  session::SessionOptions so = opt.sessions;
  if (!auth.enabled()) so.max_per_owner = 0;  // no tokens: no owners
  session_mgr = std::make_unique<session::SessionManager>(svc, so);
  session_pool = std::make_unique<net::thread_pool>(std::max<size_t>(2, opt.session_threads));
  slots.on_change = [this] {
    UpdateGauges();
    MaybeStop();
  };

  api_routes = ApiRouteTable();
  e2b_routes = E2bRouteTable();
  // A row that leaves a phase's field unset is a bug the table test catches;
  // a server built without it must not start with one.
  for (const RouteTable* t : {&api_routes, &e2b_routes}) {
    if (std::string problems = CheckTable(*t); !problems.empty()) {
      log::Error("route table: " + problems);
      std::abort();
    }
  }
  body_caps.json = opt.max_body_bytes;
  body_caps.upload = static_cast<uint64_t>(opt.max_file_bytes);
  owners.session = [this](const std::string& id, const std::string& owner) {
    return SessionRoutes::Owner(*session_mgr, id, owner);
  };
  owners.approval = [this](const std::string& id, const Identity& who) -> std::optional<model::ApiError> {
    if (approvals->Visible(id, Caller{who.name, who.run, who.approve})) return std::nullopt;
    return model::ApiError{model::ErrorKind::kNotFound,
                           "no approval '" + id.substr(0, 64) + "' (GET /v1/approvals lists pending ones)", ""};
  };
  owners.mcp_session = [this](const std::string& id, const std::string& owner) { return mcp->Owner(id, owner); };
  owners.context = [this](const std::string& id, const std::string& owner) { return e2b->Owner(id, owner); };

  McpSessions::Options mo;
  mo.version = AIRLOCK_SERVER_VERSION;
  mo.max_sessions = opt.max_mcp_sessions;
  mo.max_per_owner = opt.max_mcp_sessions_per_owner;
  mo.per_owner = auth.enabled();
  mcp = std::make_unique<McpSessions>(*this, mo);
  e2b = std::make_unique<E2bContexts>(*this);
  envd = std::make_unique<EnvdProcesses>();
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

ServerState::~ServerState() {
  destroying = true;
  // Abandon launches not started yet, wait for the ones under way, then tear
  // down the loop: pending handlers (and the connections and runs they hold)
  // are destroyed with it, and a run destroyed unfinished is killed and reaped.
  launcher.stop();
  launcher.join();
  workers.join();
  reaper.join();
  // Session calls under way are dropped, then their sessions end; then the
  // manager goes.
  // (In blocks: the drivers hold the loop's objects, and go now, not when this
  // destructor's locals do, after the loop.)
  {
    std::vector<std::shared_ptr<SessionCallDriver>> calls(call_drivers.begin(), call_drivers.end());
    for (auto& d : calls) d->Abandon();
    call_drivers.clear();
  }
  {
    std::vector<std::shared_ptr<CommandDriver>> commands(command_drivers.begin(), command_drivers.end());
    for (auto& d : commands) d->Abandon();
    command_drivers.clear();
  }
  session_mgr->CloseAll();
  session_pool->join();
  mcp.reset();
  e2b.reset();
  // The process hubs hold their (abandoned) drivers and deadline timers: the
  // loop's objects, gone before the loop is.
  envd.reset();
  envd_watchers.reset();
  session_mgr.reset();
  approvals.reset();  // its timers belong to the loop
  error_code ignored;
  acceptor->close(ignored);
  for (auto& [a, door] : e2b_acceptors) a->close(ignored);
  e2b_acceptors.clear();
  signals->cancel(ignored);
  drain_timer.reset();
  hard_timer.reset();
  accept_backoff.reset();
  signals.reset();
  acceptor.reset();
  drivers.clear();
  // A connection still open (the drain's hard stop) and its exchange hold
  // each other: closing it lets both go with the loop.
  std::vector<Connection*> left(open.begin(), open.end());
  for (Connection* c : left) c->Close();
  io.reset();
}

std::string ServerState::NewRequestId() {
  // splitmix64 over a random seed: unique, unguessable enough for correlation.
  uint64_t z = id_seed_ + 0x9e3779b97f4a7c15ULL * ++id_counter_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  char buf[32];
  snprintf(buf, sizeof buf, "req_%016llx", static_cast<unsigned long long>(z));
  return buf;
}

void ServerState::WriteAudit(const model::AuditRecord& a) {
  recent.Add(a);
  if (!audit || !audit->enabled()) return;
  audit->Write(a);
  metrics.SetAuditDropped(audit->dropped());
}

void ServerState::UpdateGauges() {
  metrics.SetInFlight(static_cast<int64_t>(slots.running()));
  metrics.SetQueueDepth(static_cast<int64_t>(slots.queued()));
}

// Phase 1's budget: a new connection may push out the oldest one waiting (of
// its address first); when every connection is busy it is refused. A full fd
// table pauses accepting a moment rather than spinning on EMFILE.
void ServerState::Accept(tcp::acceptor& a, Door door) {
  a.async_accept([this, &a, door](const error_code& ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !a.is_open()) return;
      if (ec == net::error::no_descriptors || ec.value() == ENFILE) {
        log::Warn("accept: " + ec.message() + "; accepting again in 100 ms");
        accept_backoff->expires_after(std::chrono::milliseconds(100));
        accept_backoff->async_wait([this, &a, door](const error_code& e) {
          if (!e && !draining) Accept(a, door);
        });
        return;
      }
      log::Warn("accept failed: " + ec.message());
    } else {
      error_code addr_ec;
      auto ep = socket.remote_endpoint(addr_ec);
      const std::string address = addr_ec ? std::string() : ep.address().to_string();
      if (!connections.Accept(address)) {
        error_code ignored;
        socket.close(ignored);  // every connection is busy: over the cap
      } else {
        std::make_shared<Connection>(*this, std::move(socket), door)->Begin();
      }
    }
    if (!draining) Accept(a, door);
  });
}

// Binds the E2B ports (before the API's first line is printed, so that a
// client that read it can call them). "localhost" is 127.0.0.1 and, when the
// host has IPv6, ::1.
Status ServerState::ListenE2b() {
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

// An approved run: launched like any other (a run slot, ahead of the queue:
// a person is waiting; the same driver), on behalf of no connection; its
// result goes to the approval.
void ServerState::StartApproved(std::unique_ptr<service::Plan> plan, Approvals::RunDone done) {
  auto shared_plan = std::make_shared<std::unique_ptr<service::Plan>>(std::move(plan));
  auto shared_done = std::make_shared<Approvals::RunDone>(std::move(done));
  uint64_t ticket = 0;
  slots.Take(
      [this, shared_plan, shared_done](bool granted) {
        if (!granted) return (*shared_done)(Unavailable("the server is shutting down"), {});
        auto driver = std::make_shared<RunDriver>(*this, std::move(*shared_plan), nullptr);
        RunDriver* raw = driver.get();
        driver->SetDone([this, raw, shared_done](RunOutcome o) {
          for (auto it = drivers.begin(); it != drivers.end(); ++it) {
            if (it->get() == raw) {
              drivers.erase(it);
              break;
            }
          }
          metrics.CountExecution(o.status.ok() ? Outcome(o.response.run) : "failed",
                                 o.response.run.duration_ms / 1000.0);
          (*shared_done)(o.status, std::move(o.response));
        });
        drivers.insert(driver);
        driver->Start();
      },
      &ticket, RunSlots::Priority::kApproved);
}

std::optional<model::ApiError> ServerState::Hold(service::Prepared p, const std::string& owner,
                                                 const std::string& request_id, std::string* id) {
  if (auth.enabled() && approvals->PendingOf(owner) >= opt.max_pending_approvals_per_owner) {
    return QuotaError("pending_approvals_per_owner", "--max-pending-approvals-per-owner",
                      "token '" + owner + "' has " + std::to_string(approvals->PendingOf(owner)) +
                          " requests waiting for approval, the most it may; wait for a decision or retry later",
                      5);
  }
  const profile::Profile* prof = svc.profiles().Find(p.profile_name);
  if (prof == nullptr || !p.plan) return model::ApiError{model::ErrorKind::kInternal, "no plan to hold", ""};
  StatusOr<std::string> held = approvals->Hold(std::move(p), owner, prof->approval, request_id);
  if (!held.ok()) return model::ApiError{model::ErrorKind::kTooManyRequests, held.status().message(), ""};
  *id = *held;
  return std::nullopt;
}

void ServerState::BeginDrain() {
  if (draining) return;
  draining = true;
  metrics.SetReady(false);
  char grace[32];
  snprintf(grace, sizeof grace, "%g", opt.drain_grace_s);
  log::Info("draining: no new connections; " + std::to_string(slots.running()) + " run(s) executing, " +
            std::to_string(slots.queued()) + " queued; grace period " + grace + " s");
  error_code ignored;
  acceptor->close(ignored);
  for (auto& [a, door] : e2b_acceptors) a->close(ignored);
  // Queued requests and approved runs not started yet will not start;
  // clients waiting on a decision are answered (202: still pending) so the
  // drain can end.
  slots.Drain();
  approvals->ReleaseWaiters();
  if (envd) envd->Drain();  // a background process's stream would hold its connection open
  std::vector<Connection*> idle(open.begin(), open.end());
  for (Connection* c : idle) c->CloseIfIdle();
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

void ServerState::MaybeStop() {
  if (draining && slots.running() == 0 && open.empty()) io->stop();
}

void ServerState::SelfTest() {
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
    : state_(std::make_unique<ServerState>(std::move(options), service, std::move(auth), std::move(audit))) {}

Server::~Server() = default;

Status Server::Run() {
  ServerState& s = *state_;
  // Every connection is an fd: the soft limit (often 1024) would refuse
  // accepting before the connection cap does. Raised to the hard limit.
  struct rlimit nofile;
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
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
  s.Accept(*s.acceptor, Door::kApi);
  for (auto& [a, door] : s.e2b_acceptors) s.Accept(*a, door);
  s.io->run();
  // Sessions outlive the drain of one-shot runs (their calls are answered
  // until the loop stops); now they end, every process and cgroup with them.
  s.session_mgr->CloseAll();
  log::Info("stopped");
  return Status::Ok();
}

}  // namespace airlock::api
