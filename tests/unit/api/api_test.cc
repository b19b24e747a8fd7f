// api/: tokens, the status mapping, metrics rendering, the loopback rule.
#include <gtest/gtest.h>

#include "api/auth.h"
#include "api/error_mapping.h"
#include "api/metrics.h"
#include "api/server.h"

namespace airlock::api {
namespace {

const char* kA = "0123456789abcdef0123";
const char* kB = "fedcba9876543210fedc";

TEST(Authenticator, ParsesNamedAndBareTokens) {
  auto a = Authenticator::Parse(std::string("# comment\nagent:") + kA + "\n\n" + kB + "\n", "tokens");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->enabled());
  EXPECT_EQ(a->size(), 2u);
  EXPECT_EQ(a->Check(std::string("Bearer ") + kA, ""), "agent");
  EXPECT_EQ(a->Check(std::string("bearer  ") + kB + " ", ""), "token-2");
  EXPECT_EQ(a->Check("", kA), "agent");
  EXPECT_EQ(a->Check("Bearer wrong-wrong-wrong-wrong", kA), std::nullopt);  // a wrong bearer is not rescued
  EXPECT_EQ(a->Check(std::string("Basic ") + kA, ""), std::nullopt);
  EXPECT_EQ(a->Check(std::string("Bearer ") + std::string(kA).substr(1), ""), std::nullopt);
  EXPECT_EQ(a->Check("", ""), std::nullopt);
  EXPECT_EQ(a->Check("Bearer ", ""), std::nullopt);
}

TEST(Authenticator, RolesRunByDefaultApproveWhenNamed) {
  const std::string kC = "0a1b2c3d4e5f6a7b8c9d";
  auto a = Authenticator::Parse(std::string("agent:") + kA + "\nalice:" + kB + ":approve\nbob:" + kC +
                                    ":run+approve\n",
                                "tokens");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto agent = a->Identify(std::string("Bearer ") + kA, "");
  ASSERT_TRUE(agent);
  EXPECT_EQ(agent->name, "agent");
  EXPECT_TRUE(agent->run);
  EXPECT_FALSE(agent->approve);
  auto alice = a->Identify("", kB);  // the role suffix is not part of the token
  ASSERT_TRUE(alice);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_FALSE(alice->run);
  EXPECT_TRUE(alice->approve);
  EXPECT_FALSE(a->Identify("", kB + std::string(":approve")));
  auto bob = a->Identify(std::string("Bearer ") + kC, "");
  ASSERT_TRUE(bob);
  EXPECT_TRUE(bob->run && bob->approve);
  // A token with a colon of its own keeps working (the suffix must be a role word).
  auto c = Authenticator::Parse(std::string("x:") + kA + ":notarole", "tokens");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Check("", kA + std::string(":notarole")), "x");
}

TEST(Authenticator, CommaSeparatedAndErrors) {
  auto a = Authenticator::Parse(std::string("a:") + kA + ",b:" + kB, "AIRLOCK_TOKENS");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->Check("", kB), "b");
  EXPECT_FALSE(Authenticator::Parse("short", "x").ok());
  EXPECT_FALSE(Authenticator::Parse(std::string(":") + kA, "x").ok());
  EXPECT_FALSE(Authenticator::Parse(std::string("a:") + kA + ",a:" + kB, "x").ok());
  auto empty = Authenticator::Parse("", "x");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->enabled());
  EXPECT_FALSE(Authenticator::Load("/nonexistent/tokens", nullptr).ok());
}

TEST(ErrorMapping, OnePlace) {
  EXPECT_EQ(HttpStatus(model::ErrorKind::kBadRequest), 400);
  EXPECT_EQ(HttpStatus(model::ErrorKind::kPolicy), 400);
  EXPECT_EQ(HttpStatus(model::ErrorKind::kUnauthorized), 401);
  EXPECT_EQ(HttpStatus(model::ErrorKind::kPayloadTooLarge), 413);
  EXPECT_EQ(HttpStatus(model::ErrorKind::kUnprocessable), 422);
  EXPECT_EQ(HttpStatus(model::ErrorKind::kTooManyRequests), 429);
  EXPECT_EQ(HttpStatus(model::ErrorKind::kUnavailable), 503);
  ErrorReply r = MakeErrorReply({model::ErrorKind::kTooManyRequests, "busy", ""}, {}, true, "r");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
  r = MakeErrorReply({model::ErrorKind::kUnauthorized, "no", ""}, {}, true, "r");
  EXPECT_EQ(r.headers[0].first, "WWW-Authenticate");
  model::Violation v{"import-not-allowed", "m", 1, 1, "error", "ast_scan", "Line 1: m"};
  r = MakeErrorReply({model::ErrorKind::kPolicy, "Code validation failed", ""}, {v}, true, "r");
  EXPECT_EQ(r.body, R"({"error":"Code validation failed","violations":["Line 1: m"]})");
}

TEST(Metrics, Render) {
  Metrics m;
  m.CountExecution("ok", 0.02);
  m.CountExecution("timeout", 1.5);
  m.CountPolicyRule("dunder");
  m.CountHttp("/execute", 200);
  m.SetInFlight(3);
  std::string t = m.Render();
  EXPECT_NE(t.find("airlock_executions_total{outcome=\"ok\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("airlock_executions_total{outcome=\"memory\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("airlock_execution_duration_seconds_bucket{le=\"0.025\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("airlock_execution_duration_seconds_bucket{le=\"2.5\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("airlock_execution_duration_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("airlock_execution_duration_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(t.find("airlock_policy_rejections_total{rule=\"dunder\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("airlock_http_requests_total{route=\"/execute\",code=\"200\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("airlock_executions_in_flight 3\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE airlock_execution_duration_seconds histogram\n"), std::string::npos);
}

TEST(Listen, Loopback) {
  EXPECT_TRUE(IsLoopback("127.0.0.1"));
  EXPECT_TRUE(IsLoopback("127.1.2.3"));
  EXPECT_TRUE(IsLoopback("::1"));
  EXPECT_TRUE(IsLoopback("localhost"));
  EXPECT_FALSE(IsLoopback("0.0.0.0"));
  EXPECT_FALSE(IsLoopback("::"));
  EXPECT_FALSE(IsLoopback("10.0.0.1"));
  EXPECT_FALSE(IsLoopback("example.com"));
}

}  // namespace
}  // namespace airlock::api
