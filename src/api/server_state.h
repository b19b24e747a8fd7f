// The HTTP service's shared state (api/server.h is the service as the rest of
// airlock sees it): options, the service and session manager, the routes'
// objects, metrics and audit, the thread pools, the event loop and its
// listeners, and the run slots. Everything here is touched only on the
// event-loop thread, except `svc` (thread-safe) and `metrics` (locked).
#pragma once

#include "api/net.h"

#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/approvals.h"
#include "api/audit_log.h"
#include "api/auth.h"
#include "api/e2b_routes.h"
#include "api/mcp_routes.h"
#include "api/metrics.h"
#include "api/recent_runs.h"
#include "api/request_gate.h"
#include "api/server.h"
#include "api/session_routes.h"
#include "model/execute.h"
#include "service/service.h"
#include "session/session_manager.h"

namespace airlock::api {

class Connection;
class RunDriver;
class SessionCallDriver;

// The outcome label of a run for metrics and audit.
inline std::string Outcome(const model::RunReport& r) {
  if (r.kill_reason) return *r.kill_reason;
  return r.exit_code == 0 ? "ok" : "error";
}

// The metrics label of a refusal (airlock_requests_rejected_total{reason}).
const char* RejectReason(model::ErrorKind kind);

struct ServerState {
  ServerState(ServerOptions o, const service::Service& s, Authenticator a, std::unique_ptr<AuditLog> al);
  // /mcp and /v1/tools (api/mcp_routes.h); their calls block session_pool threads.
  std::unique_ptr<McpRoutes> MakeMcpRoutes();
  ~ServerState();

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
  std::deque<std::shared_ptr<Connection>> queue;
  std::set<std::shared_ptr<RunDriver>> drivers;
  std::set<std::shared_ptr<SessionCallDriver>> call_drivers;  // session calls under way
  std::set<Connection*> sessions;  // every open connection

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
  void Admit(const std::shared_ptr<Connection>& s);
  void Dequeue(Connection* s);
  void ReleaseSlot();
  void BeginDrain();
  void MaybeStop();
  void SelfTest();
};

}  // namespace airlock::api
