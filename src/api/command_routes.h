// The sandbox's commands (docs/api.md "Commands", issue 22): shell commands
// run beside a session's Python interpreter, in its sandbox, over the same
// /home/user. Rows of the API's route table; the pipeline has checked the
// token's run role and that the session {id} is the caller's (404 otherwise)
// before any of these runs.
//
//   POST /v1/sessions/{id}/commands                 run one: its end (JSON or events), or   driver
//                                                   201 {pid} at once in the background
//   GET  /v1/sessions/{id}/commands                 the sandbox's processes                 worker
//   GET  /v1/sessions/{id}/commands/{pid}[?wait=s]  its state and what it wrote since the   driver
//                                                   last read (waits up to s for its end)
//   POST /v1/sessions/{id}/commands/{pid}/stdin[?close=true]  body: bytes to its stdin      driver (upload)
//   POST /v1/sessions/{id}/commands/{pid}/signal    {"signal":"SIGTERM"}                    driver (upload)
//
// No thread is held for a running command: it is started on a worker (a fork
// and an execve by the sandbox's init), then watched from the loop
// (api/command_driver.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/route.h"
#include "model/command.h"

namespace airlock::api {

class Exchange;

class CommandRoutes {
 public:
  static std::vector<Route> Table();
};

// A foreground command for a door without a request of its own to stream on
// (MCP's run_command over /mcp): started on a worker, watched from the loop
// (no thread held while it runs), then `done` on the loop with the refusal,
// or with its end (output capped, its timeout enforced). A client of `ex`
// that disconnects kills it (kill_reason "cancelled"), as a run's does.
void RunCommandFromLoop(const std::shared_ptr<Exchange>& ex, std::string session_id, model::CommandRequest request,
                        std::function<void(std::optional<model::ApiError> refused, model::CommandEnd end)> done);

}  // namespace airlock::api
