// The doors' route tables are data (api/route.h): this walks every row of
// every door and checks that it declares what each phase of the pipeline
// needs (a role, an owner rule, a body policy, where it runs, a reply policy,
// its accounting, a handler of the right kind), so that a route cannot be
// added without them, and that each row is found for its own paths.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "api/doors.h"
#include "api/route.h"

namespace airlock::api {
namespace {

// A concrete path of a pattern: {name} -> an id, {name...} -> a/b.txt.
std::string Concrete(std::string pattern) {
  for (size_t at = pattern.find('{'); at != std::string::npos; at = pattern.find('{')) {
    size_t end = pattern.find('}', at);
    const bool tail = pattern.compare(end - 3, 3, "...") == 0;
    pattern.replace(at, end - at + 1, tail ? "a/b.txt" : "s1-0123abcd-0123456789abcdef0123456789abcdef");
  }
  return pattern;
}

std::vector<RouteTable> Doors() { return {ApiRouteTable(), E2bRouteTable()}; }

TEST(RouteTables, EveryRowDeclaresEveryPhase) {
  size_t rows = 0;
  for (const RouteTable& t : Doors()) {
    EXPECT_EQ(CheckTable(t), "") << t.door;
    for (const Route& r : t.routes) {
      ++rows;
      SCOPED_TRACE(std::string(t.door) + " " + r.method + " " + r.pattern);
      EXPECT_NE(r.role, Role::kUnset);
      EXPECT_NE(r.owner, OwnerRule::kUnset);
      EXPECT_NE(r.body, BodyPolicy::kUnset);
      EXPECT_NE(r.runs_on, RunsOn::kUnset);
      EXPECT_NE(r.reply, ReplyPolicy::kUnset);
      EXPECT_NE(r.account, Accounting::kUnset);
      EXPECT_TRUE((r.on_loop != nullptr) != (r.on_worker != nullptr));
      EXPECT_EQ(r.on_worker != nullptr, r.runs_on == RunsOn::kWorker);
    }
  }
  EXPECT_GE(rows, 30u);  // every door is there (REST, sessions, approvals, MCP, console, E2B)
}

TEST(RouteTables, EachRowIsFoundForItsOwnPaths) {
  for (const RouteTable& t : Doors()) {
    for (const Route& r : t.routes) {
      const std::string path = Concrete(r.pattern);
      RouteMatch m = FindRoute(t, r.method, path);
      ASSERT_EQ(m.route, &r) << t.door << " " << r.method << " " << path;
      EXPECT_FALSE(m.label.empty());
      EXPECT_EQ(m.label.find("other"), std::string::npos);
    }
  }
}

// The rules the phases rely on, stated over the tables rather than per route.
TEST(RouteTables, WhatTheFindingsOfIssue21NeedOfEveryRow) {
  std::set<std::string> sandbox_bytes;
  for (const RouteTable& t : Doors()) {
    for (const Route& r : t.routes) {
      const std::string where = std::string(t.door) + " " + r.method + " " + r.pattern;
      const std::string pattern = r.pattern;
      // Only the probes skip the gate and the token.
      if (r.role == Role::kOpen) {
        EXPECT_TRUE(pattern == "/healthz" || pattern == "/readyz") << where;
      }
      // A route that names a session, context or approval in its path finds its owner before the body.
      if (pattern.find("/sessions/{id}") != std::string::npos) {
        EXPECT_EQ(r.owner, OwnerRule::kSession) << where;
      }
      if (pattern.find("/contexts/{id}") != std::string::npos) {
        EXPECT_EQ(r.owner, OwnerRule::kContext) << where;
      }
      if (pattern.find("/approvals/{id}") != std::string::npos && std::string(r.method) == "GET") {
        EXPECT_EQ(r.owner, OwnerRule::kApproval) << where;
      }
      // Uploads are streamed by a driver, never buffered.
      const bool files = pattern.find("/files/") != std::string::npos || pattern.ends_with("/files");
      if (files && (std::string(r.method) == "PUT" || std::string(r.method) == "POST")) {
        EXPECT_EQ(r.body, BodyPolicy::kUpload) << where;
      }
      // Whatever serves a sandbox's files serves them as sandbox bytes. (An approval's input
      // file is a request's, not a sandbox's, and is answered as JSON with its bytes in base64:
      // never raw bytes a browser could render.)
      const bool approval_file = pattern.rfind("/v1/approvals/", 0) == 0;
      if (approval_file && pattern.find("/files/") != std::string::npos) {
        EXPECT_EQ(r.reply, ReplyPolicy::kJson) << where;
      }
      if (std::string(r.method) == "GET" && !approval_file &&
          (pattern.find("/files/") != std::string::npos || pattern == "/files")) {
        EXPECT_EQ(r.reply, ReplyPolicy::kSandboxBytes) << where;
      }
      if (r.reply == ReplyPolicy::kSandboxBytes) sandbox_bytes.insert(where);
      // Runs are accounted as runs; code runs only for the run role.
      if (r.account == Accounting::kRun) {
        EXPECT_EQ(r.role, Role::kRun) << where;
      }
      // No route holds a thread for a call: runs and calls are driven.
      if (r.reply == ReplyPolicy::kRun) {
        EXPECT_EQ(r.runs_on, RunsOn::kDriver) << where;
      }
    }
  }
  EXPECT_EQ(sandbox_bytes, (std::set<std::string>{"api GET /v1/sessions/{id}/files/{path...}", "e2b GET /files"}));
}

TEST(RouteTables, LookupGives404And405WithAllow) {
  RouteTable t = ApiRouteTable();
  RouteMatch m = FindRoute(t, "GET", "/nope");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.allow, "");
  EXPECT_EQ(m.label, "other");
  m = FindRoute(t, "PATCH", "/v1/sessions/abc");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.allow, "DELETE, GET");
  ASSERT_NE(m.path_route, nullptr);
  m = FindRoute(t, "GET", "/mcp");
  EXPECT_EQ(m.allow, "DELETE, POST");
  EXPECT_EQ(m.path_route->reply, ReplyPolicy::kJsonRpc);  // its 405 is a JSON-RPC error
  m = FindRoute(t, "GET", "/v1/sessions/s1-x/files/dir/a%20b.csv");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.param, "s1-x");
  EXPECT_EQ(m.tail, "dir/a%20b.csv");
  // A {name} is one segment; a {name...} at least one byte.
  EXPECT_EQ(FindRoute(t, "GET", "/v1/sessions/a/b").route, nullptr);
  EXPECT_EQ(FindRoute(t, "GET", "/v1/sessions/s1-x/files/").route, nullptr);
  EXPECT_EQ(FindRoute(E2bRouteTable(), "GET", "/files").label, "e2b:/files");
}

TEST(RouteTables, CheckTableNamesWhatARowLeavesOut) {
  RouteTable t;
  t.door = "test";
  t.routes.push_back({.method = "GET", .pattern = "/a"});
  Route worker_without_handler{.method = "GET",
                               .pattern = "/b/{id}",
                               .role = Role::kRun,
                               .owner = OwnerRule::kSession,
                               .body = BodyPolicy::kUpload,
                               .runs_on = RunsOn::kWorker,
                               .reply = ReplyPolicy::kJson,
                               .account = Accounting::kRequest};
  t.routes.push_back(worker_without_handler);
  Route no_param = worker_without_handler;
  no_param.pattern = "/c";
  t.routes.push_back(no_param);
  std::string problems = CheckTable(t);
  for (const char* want : {"GET /a: no role", "GET /a: no owner rule", "GET /a: no body policy",
                           "GET /a: no place to run", "GET /a: no reply policy", "GET /a: no accounting",
                           "GET /b/{id}: runs on a worker: on_worker only", "GET /b/{id}: an upload must be driven",
                           "GET /c: owner rule session {id} needs a {name}"}) {
    EXPECT_NE(problems.find(want), std::string::npos) << want << "\n" << problems;
  }
}

}  // namespace
}  // namespace airlock::api
