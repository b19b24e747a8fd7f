// The HTTP service (`airlock serve`): a Boost.Beast server on one event-loop
// thread. Runs are launched on one launcher thread (clone + namespace setup
// block for a few milliseconds), then supervised from the event loop (their
// pipes and pidfd are waited on asynchronously, a timer per run checks its
// deadlines), so hundreds of concurrent runs, slow clients and idle keep-alive
// connections hold no thread each. docs/api.md describes every endpoint.
//
//   api::Server server(options, *service, std::move(auth), std::move(audit));
//   Status st = server.Run();   // until SIGTERM/SIGINT and the drain are done
//
// Run() prints "airlock: listening on http://HOST:PORT" as the first line of
// standard output once the socket is bound (port 0 picks a free port).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/audit_log.h"
#include "api/auth.h"
#include "api/options.h"
#include "base/status.h"
#include "service/service.h"
#include "session/session_manager.h"

namespace airlock::api {

class ServerState;  // api/server_state.h

// Whether `host` (an address literal or "localhost") is a loopback address.
bool IsLoopback(const std::string& host);

class Server {
 public:
  Server(ServerOptions options, const service::Service& service, Authenticator auth,
         std::unique_ptr<AuditLog> audit);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, runs the startup self-test in the background (GET /readyz answers
  // 503 until it passed), serves until SIGTERM or SIGINT, drains, returns.
  // Errors: a refused configuration (non-loopback without tokens), a socket
  // that cannot be bound.
  Status Run();

 private:
  std::unique_ptr<ServerState> state_;
};

}  // namespace airlock::api
