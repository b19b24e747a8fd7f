// Each listener's route table, assembled from its doors' rows: the API port
// serves the REST, session, approval, MCP and console doors; the E2B ports
// the E2B door. docs/architecture.md draws them.
#pragma once

#include "api/route.h"

namespace airlock::api {

RouteTable ApiRouteTable();
RouteTable E2bRouteTable();

}  // namespace airlock::api
