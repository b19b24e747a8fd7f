// The options of the HTTP service (`airlock serve`'s flags, docs/api.md
// "Command line"): what api::Server is made with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "session/session_manager.h"

namespace airlock::api {

struct ServerOptions {
  std::string host = "127.0.0.1";  // an IP address (v4 or v6) or "localhost"
  uint16_t port = 8000;            // 0: any free port
  bool insecure = false;           // allow a non-loopback address without tokens
  // The browser rules (api/request_gate.h): Host names besides loopback and the
  // listen address ("*": any), and web origins that may call cross-origin.
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
  size_t max_body_bytes = size_t{2} << 20;  // larger bodies: 413
  size_t max_code_bytes = size_t{1} << 20;  // larger `code`: 413
  size_t max_json_depth = 32;
  size_t max_concurrent = 8;       // runs at once
  size_t max_queue = 64;           // requests waiting for a run slot; beyond: 429
  size_t max_connections = 1024;   // open connections; beyond: the oldest waiting one is closed
  // Connections waiting on one client address (a header not yet complete, or
  // idle between requests); beyond: its oldest waiting one is closed
  // (api/admission.h, ConnectionBudget).
  size_t max_connections_per_address = 128;
  double drain_grace_s = 10;       // SIGTERM: how long running runs may go on
  double header_timeout_s = 30;    // to receive a request's header
  double body_timeout_s = 60;      // to receive its body
  double idle_timeout_s = 60;      // keep-alive connection without a request
  // Sessions (docs/api.md, "Sessions"): their caps and lifetimes, the worker
  // threads of the routes that block, and the largest file upload.
  session::SessionOptions sessions;
  size_t session_threads = 16;
  int64_t max_file_bytes = int64_t{32} << 20;
  double write_timeout_s = 30;     // to send a response (a streamed one: each write)
  // Streamed responses (Accept: application/x-ndjson or text/event-stream;
  // api/event_stream.h): a keepalive event after this long without one, and
  // the bytes of output events one connection may have waiting to be sent
  // (past it, output events are dropped and counted; the final event always
  // carries the whole output up to the caps).
  double stream_keepalive_s = 5;
  size_t stream_queue_bytes = size_t{1} << 20;
  // Approvals (docs/api.md): requests held for a person at once; beyond: 429.
  size_t max_pending_approvals = 64;
  // Quotas (docs/api.md, "Quotas"; api/admission.h): past any, 429 with
  // Retry-After, the quota named. The per-owner ones apply when tokens are
  // configured (without tokens there are no owners). The sessions' per-owner
  // quota is sessions.max_per_owner.
  size_t max_pending_approvals_per_owner = 32;
  size_t max_mcp_sessions = 256;
  size_t max_mcp_sessions_per_owner = 64;
  size_t max_uploads_per_owner = 4;
  uint64_t max_body_buffer = uint64_t{64} << 20;           // bytes of request bodies held server-wide
  uint64_t max_body_buffer_per_owner = uint64_t{16} << 20;  // ... by one token
  // The E2B-compatible listener (api/e2b_routes.h; docs/api.md): off when
  // e2b_host is empty. "localhost" listens on 127.0.0.1 and, when the host
  // has it, ::1 (the SDKs call http://localhost:PORT).
  std::string e2b_host;
  uint16_t e2b_port = 49999;       // E2B's code interpreter (port 0: any free port)
  uint16_t e2b_envd_port = 49983;  // E2B's envd
  std::string e2b_profile;         // the profile of E2B contexts ("": the default)
};

}  // namespace airlock::api
