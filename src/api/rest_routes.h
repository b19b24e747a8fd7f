// The REST door (docs/api.md, "Endpoints"): its rows of the API's route table
// and their handlers. The pipeline has gated, authenticated, authorized and
// admitted each request, and read its body, before any of these runs.
//
//   GET  /healthz, /readyz                 the probes: no token, no gate         loop
//   GET  /profile, /v1/profiles[/{name}]   the profiles                          loop
//   GET  /metrics                          Prometheus text                       loop
//   GET  /v1/runs[?limit&cursor]           the last runs, a page                 loop
//   GET  /v1/tools?format=                 tool definitions for function calling loop
//   POST /execute, /v1/execute             a one-shot run (JSON, or events)      driver
//
// A one-shot run: its code is analyzed (on the loop when small, on a worker
// when large), held for a person when its profile says so (api/approvals.h),
// then given a run slot (api/run_slots.h) and driven from the loop
// (api/run_driver.h); a streamed answer begins once the run is launched.
#pragma once

#include <vector>

#include "api/route.h"

namespace airlock::api {

class RestRoutes {
 public:
  static std::vector<Route> Table();
};

}  // namespace airlock::api
