// The server's wiring (api/server.h): its state, the listeners, admission to
// run slots, the drain and the startup self-test.
#include "api/server.h"

#include "api/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <future>
#include <random>

#include "api/call_driver.h"
#include "api/connection.h"
#include "api/run_driver.h"
#include "api/server_state.h"
#include "base/clock.h"
#include "base/log.h"

namespace airlock::api {

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

ServerState::ServerState(ServerOptions o, const service::Service& s, Authenticator a, std::unique_ptr<AuditLog> al)
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
std::unique_ptr<McpRoutes> ServerState::MakeMcpRoutes() {
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

// ---------------------------------------------------------------------------
// ServerState

ServerState::~ServerState() {
  destroying = true;
  // Abandon launches not started yet, wait for the ones under way, then tear
  // down the loop: pending handlers (and the sessions and runs they hold) are
  // destroyed with it, and a run destroyed unfinished is killed and reaped.
  launcher.stop();
  launcher.join();
  workers.join();
  reaper.join();
  // Connection calls under way are dropped, then their sessions end; then the
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

void ServerState::Accept() {
  acceptor->async_accept([this](const error_code& ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      log::Warn("accept failed: " + ec.message());
    } else if (sessions.size() >= opt.max_connections) {
      error_code ignored;
      socket.close(ignored);  // over the connection limit
    } else {
      std::make_shared<Connection>(*this, std::move(socket))->Begin();
    }
    if (!draining) Accept();
  });
}

void ServerState::AcceptE2b(tcp::acceptor& a, Door door) {
  a.async_accept([this, &a, door](const error_code& ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !a.is_open()) return;
      log::Warn("accept failed (E2B listener): " + ec.message());
    } else if (sessions.size() >= opt.max_connections) {
      error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<Connection>(*this, std::move(socket), door)->Begin();
    }
    if (!draining) AcceptE2b(a, door);
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

void ServerState::Admit(const std::shared_ptr<Connection>& s) {
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

void ServerState::Dequeue(Connection* s) {
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    if (it->get() == s) {
      queue.erase(it);
      break;
    }
  }
  UpdateGauges();
}

void ServerState::ReleaseSlot() {
  if (running > 0) --running;
  while (running < opt.max_concurrent && !approved_queue.empty() && !draining) {
    auto start = std::move(approved_queue.front());
    approved_queue.pop_front();
    ++running;
    start(true);
  }
  while (running < opt.max_concurrent && !queue.empty() && !draining) {
    std::shared_ptr<Connection> next = std::move(queue.front());
    queue.pop_front();
    ++running;
    next->StartRun();
  }
  UpdateGauges();
  MaybeStop();
}

void ServerState::BeginDrain() {
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
  std::deque<std::shared_ptr<Connection>> queued;
  queued.swap(queue);
  UpdateGauges();
  for (auto& s : queued) s->RejectQueued();
  // Approved runs not started yet will not start; clients waiting on a
  // decision are answered (202: still pending) so the drain can end.
  std::deque<std::function<void(bool)>> approved;
  approved.swap(approved_queue);
  for (auto& start : approved) start(false);  // fails the run: no slot, draining
  approvals->ReleaseWaiters();
  std::vector<Connection*> idle(sessions.begin(), sessions.end());
  for (Connection* s : idle) s->CloseIfIdle();
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
void ServerState::StartApproved(std::unique_ptr<service::Plan> plan, Approvals::RunDone done) {
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

void ServerState::MaybeStop() {
  if (draining && running == 0 && sessions.empty()) io->stop();
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
