// The session door (docs/api.md, "Sessions"): its rows of the API's route
// table and their handlers. The pipeline has checked, before any of these
// runs, the token's run role and that the session {id} is the caller's (404
// otherwise), and read the body the row allows.
//
//   POST   /v1/sessions                       create               201   worker
//   GET    /v1/sessions[?limit&cursor]        the caller's, a page 200   worker
//   GET    /v1/sessions/{id}                  one                  200   loop
//   DELETE /v1/sessions/{id}                  kill it now          204   worker
//   POST   /v1/sessions/{id}/execute          one call             200   driver (JSON or events)
//   POST   /v1/sessions/{id}/restart          fresh interpreter    200   worker
//   GET    /v1/sessions/{id}/files[?path=d]   list                 200   worker
//   PUT    /v1/sessions/{id}/files/{path}     write (streamed)     201   driver (upload)
//   GET    /v1/sessions/{id}/files/{path}     read (Range)         200/206 worker (sandbox bytes)
//   DELETE /v1/sessions/{id}/files/{path}     remove               204   worker
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/route.h"
#include "model/execute.h"
#include "session/session_manager.h"

namespace airlock::api {

class Exchange;
class ServerState;

class SessionRoutes {
 public:
  static std::vector<Route> Table();
  // Phase 5's owner check of OwnerRule::kSession: nullopt when `owner` may
  // reach session `id` (live, or dead while its tombstone lasts: 410 from the
  // handler), else the 404 (a malformed id, another's, or none).
  static std::optional<model::ApiError> Owner(session::SessionManager& mgr, const std::string& id,
                                              const std::string& owner);
};

// A session made for a door that waits for a warm run rather than answering
// 503 (E2B contexts, MCP's create_session): SessionManager::Create on a
// worker, retried every 100 ms from a loop timer while no warm run is ready,
// up to `tries` times. No thread sleeps and no lock is held meanwhile. `done`
// on the loop. A request that names no profile gets `door`'s default.
void CreateSessionFromLoop(ServerState& s, std::string owner, model::SessionCreateRequest request,
                           profile::Door door, int tries, std::function<void(session::Created)> done);

// A call in session rq.param (its owner checked), fed from the loop: in
// context `context_id` ("" for the session's own route), streamed when the
// client asks. The exchange is answered (or refused) when it ends.
void CallSession(const std::shared_ptr<Exchange>& ex, std::string context_id, model::ExecuteRequest request);

// Whether `id` looks like a session id (s1-<8 hex>-<32 hex>).
bool IsSessionId(std::string_view id);

// The session gauges and counters for /metrics (Prometheus text).
std::string RenderSessionMetrics(const session::SessionStats& stats);

}  // namespace airlock::api
