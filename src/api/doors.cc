#include "api/doors.h"

#include "api/approval_routes.h"
#include "api/command_routes.h"
#include "api/console_routes.h"
#include "api/context_routes.h"
#include "api/e2b_routes.h"
#include "api/envd_process_routes.h"
#include "api/envd_filesystem_routes.h"
#include "api/mcp_routes.h"
#include "api/rest_routes.h"
#include "api/session_routes.h"

namespace airlock::api {

RouteTable ApiRouteTable() {
  RouteTable t;
  t.door = "api";
  for (auto part : {RestRoutes::Table(), SessionRoutes::Table(), CommandRoutes::Table(), ContextRoutes::Table(), ApprovalRoutes::Table(), McpSessions::Table(),
                    ConsoleRoutes::Table()}) {
    for (Route& r : part) t.routes.push_back(r);
  }
  return t;
}

RouteTable E2bRouteTable() {
  RouteTable t;
  t.door = "e2b";
  t.label_prefix = "e2b:";
  t.routes = E2bContexts::Table();
  for (Route& r : EnvdProcesses::Table()) t.routes.push_back(r);
  for (Route& r : EnvdFilesystemRoutes::Table()) t.routes.push_back(r);
  return t;
}

}  // namespace airlock::api
