// The HTTP service's shared state (api/server.h is the service as the rest of
// airlock sees it): options, the service and the session manager, the doors'
// tables and state, the pipeline's budgets, metrics and audit, the thread
// pools, the event loop and its listeners. Everything here is touched only
// on the event-loop thread, except `svc` and `session_mgr` (thread-safe),
// `metrics` and `admission` (locked).
#pragma once

#include "api/net.h"

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/admission.h"
#include "api/approvals.h"
#include "api/audit_log.h"
#include "api/auth.h"
#include "api/metrics.h"
#include "api/pipeline.h"
#include "api/recent_runs.h"
#include "api/request_gate.h"
#include "api/route.h"
#include "api/run_slots.h"
#include "api/options.h"
#include "model/execute.h"
#include "service/service.h"
#include "session/session_manager.h"

namespace airlock::api {

class Connection;
class E2bContexts;
class EnvdProcesses;
class EnvdWatchers;
class McpSessions;
class RunDriver;
class SessionCallDriver;
class CommandDriver;

// The outcome label of a run for metrics and audit.
inline std::string Outcome(const model::RunReport& r) {
  if (r.kill_reason) return *r.kill_reason;
  return r.exit_code == 0 ? "ok" : "error";
}

class ServerState {
 public:
  ServerState(ServerOptions o, const service::Service& s, Authenticator a, std::unique_ptr<AuditLog> al);
  ~ServerState();
  ServerState(const ServerState&) = delete;
  ServerState& operator=(const ServerState&) = delete;

  ServerOptions opt;
  const service::Service& svc;
  Authenticator auth;
  RequestGate gate;  // made in Run(), once the listen address is bound
  std::unique_ptr<AuditLog> audit;
  Metrics metrics;
  RecentRuns recent;  // the last audit records, for the console (GET /v1/runs)

  // One launcher thread: every run is launched from it (see Service::Start).
  net::thread_pool launcher{1};
  // Finishing runs (reaping, parsing the result channel) and preparing large
  // requests.
  net::thread_pool workers{2};
  // Tearing runs down (killing what is left, waiting for init, removing the
  // cgroup: up to seconds for a big run): apart, so that answers never wait
  // behind a teardown. The run's slot is released when its teardown is done.
  net::thread_pool reaper{2};
  // The routes that block (RunsOn::kWorker), the pieces of uploads, the
  // analysis of a large session call, sessions made and killed.
  std::unique_ptr<net::thread_pool> session_pool;

  std::unique_ptr<net::io_context> io;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::pair<std::unique_ptr<tcp::acceptor>, Door>> e2b_acceptors;
  std::unique_ptr<net::signal_set> signals;
  std::unique_ptr<net::steady_timer> drain_timer, hard_timer, accept_backoff;

  // The pipeline: each door's routes, how owners are found, the body caps and
  // budgets, the connections' budget, the run slots.
  RouteTable api_routes, e2b_routes;
  Owners owners;
  BodyCaps body_caps;
  Admission admission;
  ConnectionBudget connections;
  RunSlots slots;

  // The doors' state: sessions (the manager has its own expiry thread), held
  // approvals, MCP sessions, E2B contexts.
  std::unique_ptr<session::SessionManager> session_mgr;
  std::unique_ptr<Approvals> approvals;
  std::unique_ptr<McpSessions> mcp;
  std::unique_ptr<E2bContexts> e2b;
  std::unique_ptr<EnvdProcesses> envd;  // the processes envd's Connect calls watch
  // envd's polling watchers (api/envd_watch.h), made on first use.
  std::shared_ptr<EnvdWatchers> envd_watchers;

  bool ready = false;       // the isolation self-test passed
  bool pools_warm = false;  // each door's default profile's pool had a warm run once (latched)
  std::atomic<bool> draining{false};  // read by worker handlers too
  bool destroying = false;
  std::string not_ready_detail = "the isolation self-test has not finished";
  std::vector<model::LayerReport> layers;  // from the self-test run

  std::set<std::shared_ptr<RunDriver>> drivers;               // one-shot runs under way
  std::set<std::shared_ptr<SessionCallDriver>> call_drivers;  // session calls under way
  std::set<std::shared_ptr<CommandDriver>> command_drivers;   // sandbox commands watched
  std::set<Connection*> open;                                 // every open connection

  const RouteTable& Table(Door door) const { return door == Door::kApi ? api_routes : e2b_routes; }
  std::string NewRequestId();
  void WriteAudit(const model::AuditRecord& a);
  void UpdateGauges();

  void Accept(tcp::acceptor& a, Door door);
  Status ListenE2b();
  // An approved run: a run slot (ahead of the queue), the same driver.
  void StartApproved(std::unique_ptr<service::Plan> plan, Approvals::RunDone done);
  // Holds a prepared request its profile keeps for a person (any door): the
  // owner's quota, then the book. nullopt with *id, or the 429.
  std::optional<model::ApiError> Hold(service::Prepared p, const std::string& owner, const std::string& request_id,
                                      std::string* id);
  void BeginDrain();
  void MaybeStop();
  void SelfTest();

 private:
  uint64_t id_seed_ = 0, id_counter_ = 0;
};

// The bounds every door parses a JSON body with (--max-json-depth, --max-code).
inline model::RequestCaps Caps(const ServerState& s) {
  model::RequestCaps caps;
  caps.max_depth = s.opt.max_json_depth;
  caps.max_code_bytes = s.opt.max_code_bytes;
  return caps;
}

}  // namespace airlock::api
