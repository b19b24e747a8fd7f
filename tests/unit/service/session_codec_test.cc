// The session routes' JSON (model/session.h): what is taken, what is refused, what is answered.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/session.h"

namespace airlock::model {
namespace {

using nlohmann::json;

TEST(ParseSessionCreateRequest, EmptyBodyIsTheDefaultProfile) {
  SessionCreateRequest r;
  ApiError e;
  ASSERT_TRUE(ParseSessionCreateRequest("", RequestCaps(), &r, &e)) << e.message;
  EXPECT_FALSE(r.base.profile);
  EXPECT_FALSE(r.idle_timeout_s);
  ASSERT_TRUE(ParseSessionCreateRequest(" {} ", RequestCaps(), &r, &e)) << e.message;
}

TEST(ParseSessionCreateRequest, Fields) {
  SessionCreateRequest r;
  ApiError e;
  ASSERT_TRUE(ParseSessionCreateRequest(
      R"({"profile":"general","idle_timeout":30,"ttl":600.5,"limits":{"memory":"128Mi","pids":8}})", RequestCaps(),
      &r, &e))
      << e.message;
  EXPECT_EQ(r.base.profile.value_or(""), "general");
  EXPECT_EQ(r.idle_timeout_s.value_or(0), 30);
  EXPECT_EQ(r.ttl_s.value_or(0), 600.5);
  EXPECT_EQ(r.base.limits.memory.value_or(""), "128Mi");
  EXPECT_EQ(r.base.limits.pids.value_or(0), 8);
  EXPECT_TRUE(r.base.code.empty());
  // The session's environment, for its whole life; a call's, for the call.
  ASSERT_TRUE(ParseSessionCreateRequest(R"({"env":{"STAGE":"dev"}})", RequestCaps(), &r, &e)) << e.message;
  EXPECT_EQ(r.base.env.at("STAGE"), "dev");
  ExecuteRequest call;
  ASSERT_TRUE(ParseSessionExecuteRequest(R"({"code":"1","env":{"RUN":"2"}})", RequestCaps(), &call, &e)) << e.message;
  EXPECT_EQ(call.env.at("RUN"), "2");
}

TEST(ParseSessionCreateRequest, RefusalsNameTheField) {
  struct Case {
    const char* body;
    const char* field;
  } cases[] = {
      {R"({"idle_timeout":-1})", "idle_timeout"},
      {R"({"idle_timeout":"10"})", "idle_timeout"},
      {R"({"ttl":1e12})", "ttl"},
      {R"({"limits":{"cpu_time":5}})", "limits.cpu_time"},
      {R"({"language":"ruby"})", "language"},
      {R"({"profile":""})", "profile"},
      {R"({"env":{"A":1}})", "env"},
      {R"([1])", ""},
      {R"({"a":)", ""},
  };
  for (const Case& c : cases) {
    SessionCreateRequest r;
    ApiError e;
    EXPECT_FALSE(ParseSessionCreateRequest(c.body, RequestCaps(), &r, &e)) << c.body;
    EXPECT_EQ(e.kind, ErrorKind::kUnprocessable) << c.body;
    EXPECT_EQ(e.field, c.field) << c.body << ": " << e.message;
  }
}

TEST(ParseSessionExecuteRequest, TakesCodeAndTimeoutOnly) {
  ExecuteRequest r;
  ApiError e;
  ASSERT_TRUE(ParseSessionExecuteRequest(R"({"code":"x = 1","timeout":3})", RequestCaps(), &r, &e));
  EXPECT_EQ(r.code, "x = 1");
  EXPECT_EQ(r.timeout_s.value_or(0), 3);
  EXPECT_FALSE(ParseSessionExecuteRequest(R"({"code":"1","profile":"general"})", RequestCaps(), &r, &e));
  EXPECT_EQ(e.field, "profile");
  EXPECT_FALSE(ParseSessionExecuteRequest(R"({"code":"1","limits":{"pids":3}})", RequestCaps(), &r, &e));
  EXPECT_EQ(e.field, "limits");
  EXPECT_FALSE(ParseSessionExecuteRequest(R"({"timeout":3})", RequestCaps(), &r, &e));
  EXPECT_EQ(e.field, "code");
  // A session is a Python interpreter: another language is refused, python is fine.
  EXPECT_FALSE(ParseSessionExecuteRequest(R"j({"code":"console.log(1)","language":"js"})j", RequestCaps(), &r, &e));
  EXPECT_EQ(e.field, "language");
  EXPECT_NE(e.message.find("POST /v1/execute"), std::string::npos) << e.message;
  EXPECT_TRUE(ParseSessionExecuteRequest(R"({"code":"1","language":"python3"})", RequestCaps(), &r, &e));
}

TEST(SessionJson, CallAnswerExtendsTheExecuteShape) {
  ExecuteResponse resp;
  resp.run.stdout_text = "hi\xff\n";  // invalid UTF-8 stays valid JSON
  resp.run.kill_reason = "timeout";
  SessionCallView call{"s1-01234567-0123456789abcdef0123456789abcdef", 7, true, true, ""};
  json j = json::parse(SessionExecuteToJson(resp, call));
  EXPECT_EQ(j["execution_count"], 7);
  EXPECT_EQ(j["session"]["alive"], true);
  EXPECT_EQ(j["session"]["interrupted"], true);
  EXPECT_FALSE(j["session"].contains("end_reason"));
  EXPECT_EQ(j["kill_reason"], "timeout");
  EXPECT_TRUE(j.contains("stdout") && j.contains("isolation") && j.contains("results"));
  call.alive = false;
  call.end_reason = "memory: out of memory";
  j = json::parse(SessionExecuteToJson(resp, call));
  EXPECT_EQ(j["session"]["end_reason"], "memory: out of memory");
}

TEST(SessionJson, ViewAndTimes) {
  EXPECT_EQ(Rfc3339Ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(Rfc3339Ms(1795449601123), "2026-11-23T16:00:01.123Z");
  SessionView v;
  v.id = "s1-01234567-0123456789abcdef0123456789abcdef";
  v.state = "dead";
  v.end_reason = "idle";
  v.ttl_s = 60;
  json j = json::parse(SessionToJson(v));
  EXPECT_EQ(j["id"], v.id);
  EXPECT_EQ(j["end_reason"], "idle");
  EXPECT_EQ(j["ttl"], 60);
  json list = json::parse(SessionListToJson({v, v}));
  EXPECT_EQ(list["sessions"].size(), 2u);
  SessionFileView f{"out/a.csv", 12, 0, "file"};
  j = json::parse(SessionFileToJson(f));
  EXPECT_TRUE(j["modified"].is_null());
  EXPECT_EQ(j["size"], 12);
}

}  // namespace
}  // namespace airlock::model
