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

#include <vector>

#include "api/route.h"

namespace airlock::api {

class CommandRoutes {
 public:
  static std::vector<Route> Table();
};

}  // namespace airlock::api
