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
  // "language" picks the session's context of that language (issue 22):
  // normalized as E2B's SDKs send it; an unknown one is refused, naming all six.
  ASSERT_TRUE(ParseSessionExecuteRequest(R"j({"code":"console.log(1)","language":"js"})j", RequestCaps(), &r, &e));
  EXPECT_EQ(r.language, "javascript");
  ASSERT_TRUE(ParseSessionExecuteRequest(R"({"code":"1","language":"python3"})", RequestCaps(), &r, &e));
  EXPECT_EQ(r.language, "python");
  ASSERT_TRUE(ParseSessionExecuteRequest(R"({"code":"1","language":"R"})", RequestCaps(), &r, &e));
  EXPECT_EQ(r.language, "r");
  ASSERT_TRUE(ParseSessionExecuteRequest(R"({"code":"1"})", RequestCaps(), &r, &e));
  EXPECT_EQ(r.language, "");  // the session's own
  EXPECT_FALSE(ParseSessionExecuteRequest(R"({"code":"1","language":"cobol"})", RequestCaps(), &r, &e));
  EXPECT_EQ(e.field, "language");
  EXPECT_NE(e.message.find("python, javascript, typescript, r, java, bash"), std::string::npos) << e.message;
  EXPECT_FALSE(ParseSessionExecuteRequest(R"({"code":"1","language":7})", RequestCaps(), &r, &e));
  EXPECT_EQ(e.field, "language");
}

TEST(NormalizeLanguage, AliasesCaseAndUnknown) {
  EXPECT_EQ(NormalizeLanguage("Python3"), "python");
  EXPECT_EQ(NormalizeLanguage("node"), "javascript");
  EXPECT_EQ(NormalizeLanguage("JS"), "javascript");
  EXPECT_EQ(NormalizeLanguage("ts"), "typescript");
  EXPECT_EQ(NormalizeLanguage(" TypeScript "), "typescript");
  EXPECT_EQ(NormalizeLanguage("R"), "r");
  EXPECT_EQ(NormalizeLanguage("java"), "java");
  EXPECT_EQ(NormalizeLanguage("sh"), "bash");
  EXPECT_EQ(NormalizeLanguage("ruby"), "");
  EXPECT_EQ(NormalizeLanguage(""), "");
  // Bounded: a long name is cut, never matched by its prefix.
  EXPECT_EQ(NormalizeLanguage("python" + std::string(100, 'x')), "");
}

TEST(ParseSessionCreateRequest, TakesEveryLanguage) {
  for (const char* l : {"python", "javascript", "typescript", "r", "java", "bash", "ts", "js"}) {
    SessionCreateRequest r;
    ApiError e;
    ASSERT_TRUE(ParseSessionCreateRequest(std::string(R"({"language":")") + l + "\"}", RequestCaps(), &r, &e))
        << l << ": " << e.message;
    EXPECT_EQ(r.base.language, NormalizeLanguage(l));
  }
}

TEST(ParseContextRequests, FieldsAndRefusals) {
  ContextCreateRequest c;
  ApiError e;
  ASSERT_TRUE(ParseContextCreateRequest("", RequestCaps(), &c, &e)) << e.message;
  EXPECT_EQ(c.language, "python");
  EXPECT_EQ(c.cwd, "/home/user");
  ASSERT_TRUE(ParseContextCreateRequest(R"({"language":"ts","cwd":"/tmp/w/","env":{"A":"1"}})", RequestCaps(), &c,
                                        &e))
      << e.message;
  EXPECT_EQ(c.language, "typescript");
  EXPECT_EQ(c.cwd, "/tmp/w");
  EXPECT_EQ(c.env.at("A"), "1");
  for (const char* cwd : {"relative", "/a/../b", "/a//b", "/./a", ""}) {
    EXPECT_FALSE(ParseContextCreateRequest(std::string(R"({"cwd":")") + cwd + "\"}", RequestCaps(), &c, &e)) << cwd;
    EXPECT_EQ(e.field, "cwd") << cwd;
  }
  EXPECT_FALSE(ParseContextCreateRequest(R"({"language":"cobol"})", RequestCaps(), &c, &e));
  EXPECT_EQ(e.field, "language");
  EXPECT_FALSE(ParseContextCreateRequest(R"({"shell":"zsh"})", RequestCaps(), &c, &e));
  EXPECT_EQ(e.field, "shell");
  ExecuteRequest x;
  ASSERT_TRUE(ParseContextExecuteRequest(R"({"code":"1","env":{"B":"2"}})", RequestCaps(), &x, &e)) << e.message;
  EXPECT_EQ(x.env.at("B"), "2");
  for (const char* key : {"language", "profile", "limits"}) {
    const std::string body = std::string(R"({"code":"1",")") + key +
                             (std::string(key) == "limits" ? R"(":{"pids":2}})" : R"(":"python"})");
    EXPECT_FALSE(ParseContextExecuteRequest(body, RequestCaps(), &x, &e)) << body;
    EXPECT_EQ(e.field, key);
  }
}

TEST(SessionJson, ContextViews) {
  ContextView v;
  v.id = "c-0123456789abcdef";
  v.language = "r";
  v.cwd = "/home/user";
  v.state = "ended";
  v.end_reason = "exited: the context's interpreter exited with code 3";
  v.execution_count = 4;
  v.env = {"A"};
  json j = json::parse(ContextToJson(v));
  EXPECT_EQ(j["language"], "r");
  EXPECT_EQ(j["default"], false);
  EXPECT_EQ(j["state"], "ended");
  EXPECT_EQ(j["end_reason"], v.end_reason);
  EXPECT_EQ(j["execution_count"], 4);
  EXPECT_EQ(j["env"], json::array({"A"}));
  v.end_reason.clear();
  EXPECT_FALSE(json::parse(ContextToJson(v)).contains("end_reason"));
  EXPECT_EQ(json::parse(ContextListToJson({v, v}))["contexts"].size(), 2u);
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
  EXPECT_FALSE(j.contains("context"));  // Python's own interpreter: the shape it always had
  call.alive = false;
  call.end_reason = "memory: out of memory";
  j = json::parse(SessionExecuteToJson(resp, call));
  EXPECT_EQ(j["session"]["end_reason"], "memory: out of memory");
  // A call in a context of another language says which, and whether it restarted.
  call.context_id = "c-0123456789abcdef";
  call.context_language = "bash";
  j = json::parse(SessionExecuteToJson(resp, call));
  EXPECT_EQ(j["context"], json({{"id", "c-0123456789abcdef"}, {"language", "bash"}, {"restarted", false}}));
  call.context_restarted = true;
  call.context_end_reason = "exited: the context's interpreter exited with code 3";
  j = json::parse(SessionExecuteToJson(resp, call));
  EXPECT_EQ(j["context"]["restarted"], true);
  EXPECT_EQ(j["context"]["end_reason"], call.context_end_reason);
  EXPECT_EQ(j["execution_count"], 7);
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
  EXPECT_EQ(j["language"], "python");
  v.language = "java";
  EXPECT_EQ(json::parse(SessionToJson(v))["language"], "java");
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
