// The HTTP service's JSON codec (src/model): request parsing and its caps, the response
// shapes, the runner channel parser.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "model/approval.h"
#include "model/base64.h"
#include "model/e2b.h"
#include "model/mcp.h"
#include "model/session.h"
#include "model/execute.h"
#include "model/runner_protocol.h"

namespace airlock::model {
namespace {

bool Parse(const std::string& body, ExecuteRequest* req, ApiError* err, RequestCaps caps = {}) {
  return ParseExecuteRequest(body, caps, req, err);
}

TEST(ParseExecuteRequest, Fields) {
  ExecuteRequest r;
  ApiError e;
  ASSERT_TRUE(Parse(R"j({"code": "print(1)", "timeout": 2.5, "profile": "minimal", "language": "python",
                        "limits": {"memory": "64Mi", "cpu": 0.25, "pids": 4, "output": 1000}, "extra": [1]})j",
                    &r, &e))
      << e.message;
  EXPECT_EQ(r.code, "print(1)");
  EXPECT_EQ(r.timeout_s, 2.5);
  EXPECT_EQ(r.profile, "minimal");
  EXPECT_EQ(r.limits.memory, "64Mi");
  EXPECT_EQ(r.limits.cpu, 0.25);
  EXPECT_EQ(r.limits.pids, 4);
  EXPECT_EQ(r.limits.output, "1000");
  EXPECT_EQ(r.language, "python");
  for (auto [given, normal] : {std::pair{"python3", "python"}, {"js", "javascript"}, {"node", "javascript"},
                               {"javascript", "javascript"}, {"bash", "bash"}}) {
    ASSERT_TRUE(Parse(std::string(R"({"code": "x", "language": ")") + given + "\"}", &r, &e)) << e.message;
    EXPECT_EQ(r.language, normal);
  }
  ExecuteRequest unnamed;
  ASSERT_TRUE(Parse(R"({"code": "x"})", &unnamed, &e));
  EXPECT_EQ(unnamed.language, "");  // the profile's first language
  ASSERT_TRUE(Parse(R"({"code": "x", "timeout": 3})", &r, &e));
  EXPECT_EQ(r.timeout_s, 3.0);
  ASSERT_TRUE(Parse(R"({"code": "x", "timeout": null, "files": []})", &r, &e));
  EXPECT_FALSE(r.timeout_s.has_value());
}

TEST(ParseExecuteRequest, ErrorsNameTheField) {
  struct Case {
    const char* body;
    ErrorKind kind;
    const char* field;
  } cases[] = {
      {R"({"timeout": 1})", ErrorKind::kUnprocessable, "code"},
      {R"({"code": 5})", ErrorKind::kUnprocessable, "code"},
      {R"({"code": "x", "timeout": "1"})", ErrorKind::kUnprocessable, "timeout"},
      {R"({"code": "x", "timeout": false})", ErrorKind::kUnprocessable, "timeout"},
      {R"({"code": "x", "profile": ""})", ErrorKind::kUnprocessable, "profile"},
      {R"({"code": "x", "language": "ruby"})", ErrorKind::kUnprocessable, "language"},
      {R"({"code": "x", "limits": {"memory": -1}})", ErrorKind::kUnprocessable, "limits.memory"},
      {R"({"code": "x", "limits": {"cpu": 0}})", ErrorKind::kUnprocessable, "limits.cpu"},
      {R"({"code": "x", "limits": {"pids": 0}})", ErrorKind::kUnprocessable, "limits.pids"},
      {R"({"code": "x", "limits": {"typo": 1}})", ErrorKind::kUnprocessable, "limits.typo"},
      {R"({"code": "x", "limits": 3})", ErrorKind::kUnprocessable, "limits"},
      {R"({"code": "x", "files": [{"name": "a"}]})", ErrorKind::kUnprocessable, "files[0].name"},
      {R"({"code": "x", "files": {"a": "b"}})", ErrorKind::kUnprocessable, "files"},
      {R"({"code": "x", "files": [3]})", ErrorKind::kUnprocessable, "files[0]"},
      {R"({"code": "x", "files": [{"content": "a"}]})", ErrorKind::kUnprocessable, "files[0].path"},
      {R"({"code": "x", "files": [{"path": "a"}]})", ErrorKind::kUnprocessable, "files[0].content"},
      {R"({"code": "x", "files": [{"path": "../x", "content": ""}]})", ErrorKind::kUnprocessable, "files[0].path"},
      {R"({"code": "x", "files": [{"path": "/etc/x", "content": ""}]})", ErrorKind::kUnprocessable, "files[0].path"},
      {R"({"code": "x", "files": [{"path": "a\u0000b", "content": ""}]})", ErrorKind::kUnprocessable,
       "files[0].path"},
      {R"({"code": "x", "files": [{"path": "a/", "content": ""}]})", ErrorKind::kUnprocessable, "files[0].path"},
      {R"({"code": "x", "files": [{"path": "a", "content": "", "encoding": "hex"}]})", ErrorKind::kUnprocessable,
       "files[0].encoding"},
      {R"({"code": "x", "files": [{"path": "a", "content": "!!!!", "encoding": "base64"}]})",
       ErrorKind::kUnprocessable, "files[0].content"},
      {R"({"code": "x", "files": [{"path": "a", "content": "YQ", "encoding": "base64"}]})",
       ErrorKind::kUnprocessable, "files[0].content"},
      {R"({"code": "x", "files": [{"path": "a", "content": ""}, {"path": "b", "content": ""},
                                  {"path": "a", "content": ""}]})", ErrorKind::kUnprocessable, "files[2].path"},
      {R"({"code": "x", "files": [{"path": "d/e", "content": ""}, {"path": "d", "content": ""}]})",
       ErrorKind::kUnprocessable, "files[1].path"},
      {R"({"code": "x", "files": [{"path":"1","content":""},{"path":"2","content":""},{"path":"3","content":""},
                                  {"path":"4","content":""},{"path":"5","content":""}]})",
       ErrorKind::kUnprocessable, "files"},
      {R"({"code": "xxxxxxxxxxx"})", ErrorKind::kPayloadTooLarge, "code"},
      {R"([1])", ErrorKind::kUnprocessable, ""},
      {R"({"code": )", ErrorKind::kUnprocessable, ""},
      {"", ErrorKind::kUnprocessable, ""},
  };
  RequestCaps caps;
  caps.max_code_bytes = 10;
  caps.max_files = 4;
  for (const Case& c : cases) {
    ExecuteRequest r;
    ApiError e;
    EXPECT_FALSE(Parse(c.body, &r, &e, caps)) << c.body;
    EXPECT_EQ(e.kind, c.kind) << c.body;
    EXPECT_EQ(e.field, c.field) << c.body << ": " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(ParseExecuteRequest, Files) {
  ExecuteRequest r;
  ApiError e;
  ASSERT_TRUE(Parse(R"j({"code": "x", "files": [
      {"path": "data/in.csv", "content": "a,b\n1,2\n"},
      {"path": "raw.bin", "content": "AP8=", "encoding": "base64"},
      {"path": "wrapped", "content": "aGVs\r\nbG8=\n", "encoding": "base64"},
      {"path": "data/x", "content": "caf\u00e9", "encoding": null},
      {"path": "dat", "content": ""}]})j",
                    &r, &e))
      << e.message;
  ASSERT_EQ(r.files.size(), 5u);
  EXPECT_EQ(r.files[0].path, "data/in.csv");
  EXPECT_EQ(r.files[0].content, "a,b\n1,2\n");
  EXPECT_EQ(r.files[1].content, std::string("\0\xff", 2));
  EXPECT_EQ(r.files[2].content, "hello");
  EXPECT_EQ(r.files[3].content, "caf\xc3\xa9");
  // The error names the escaped path, and the fips-style loc splits the index.
  ASSERT_FALSE(Parse(R"({"code": "x", "files": [{"path": "ok", "content": ""}, {"path": "../\n", "content": ""}]})",
                     &r, &e));
  EXPECT_EQ(e.field, "files[1].path");
  EXPECT_NE(e.message.find("\"../\\x0a\""), std::string::npos) << e.message;
  std::string json = ErrorToJson(e, "req");
  EXPECT_NE(json.find(R"("loc":["body","files",1,"path"])"), std::string::npos) << json;
}

// Finding 9 of issue 21: JSON does not say which of two equal keys counts, and
// parsers differ, so a proxy or an audit reading the first could see other code
// than what runs. Every door's parser refuses a duplicate key, at any depth,
// however it is spelled (an escape names the same key).
TEST(DuplicateKeys, RefusedByEveryRequestParser) {
  RequestCaps caps;
  ApiError e;
  ExecuteRequest r;
  for (const char* body : {R"j({"code": "print(1)", "code": "print(2)"})j",
                           R"j({"code": "print(1)", "\u0063ode": "print(2)"})j",
                           R"j({"code": "1", "limits": {"memory": "64M", "memory": "1G"}})j",
                           R"j({"code": "1", "files": [{"path": "a", "path": "b", "content": ""}]})j"}) {
    EXPECT_FALSE(ParseExecuteRequest(body, caps, &r, &e)) << body;
    EXPECT_EQ(e.kind, ErrorKind::kBadRequest) << body;
    EXPECT_EQ(e.code, "duplicate_key") << body;
  }
  // Equal keys in two different objects are two keys.
  EXPECT_TRUE(ParseExecuteRequest(R"j({"code": "1", "limits": {"pids": 4}, "x": {"pids": 5}})j", caps, &r, &e))
      << e.message;
  SessionCreateRequest create;
  EXPECT_FALSE(ParseSessionCreateRequest(R"j({"profile": "a", "profile": "b"})j", caps, &create, &e));
  EXPECT_EQ(e.code, "duplicate_key");
  EXPECT_FALSE(ParseSessionExecuteRequest(R"j({"code": "1", "code": "2"})j", caps, &r, &e));
  E2bExecuteRequest e2b;
  EXPECT_FALSE(ParseE2bExecuteRequest(R"j({"code": "1", "code": "2"})j", caps, &e2b, &e));
  EXPECT_EQ(e.kind, ErrorKind::kBadRequest);
  E2bContextRequest ctx;
  EXPECT_FALSE(ParseE2bContextRequest(R"j({"cwd": "/home/user", "cwd": "/etc"})j", caps, &ctx, &e));
  ApprovalDecision d;
  EXPECT_FALSE(ParseApprovalDecision(R"j({"decision": "deny", "decision": "approve"})j", 32, &d, &e));
  EXPECT_EQ(e.code, "duplicate_key");
  McpCaps mcp_caps;
  McpMessage m;
  ParseMcpMessage(R"j({"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call",)j"
                  R"j("params":{"name":"execute_python","arguments":{"code":"1"}}})j",
                  mcp_caps, &m);
  EXPECT_EQ(m.kind, McpMessage::kInvalid);
  EXPECT_EQ(m.error_code, kJsonRpcInvalidRequest);
  EXPECT_NE(m.error_message.find("\"method\""), std::string::npos) << m.error_message;
  ParseMcpMessage(R"j({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_python",)j"
                  R"j("arguments":{"code":"print(1)","code":"print(2)"}}})j",
                  mcp_caps, &m);
  EXPECT_EQ(m.kind, McpMessage::kInvalid);
}

TEST(Base64, RoundTripAndStrictness) {
  for (std::string s : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                        std::string("\0\xff\x10\x80", 4), std::string(1000, '\xfe')}) {
    std::string out;
    ASSERT_TRUE(Base64Decode(Base64Encode(s), &out)) << s;
    EXPECT_EQ(out, s);
    EXPECT_EQ(Base64DecodedSize(Base64Encode(s)), s.size());
  }
  EXPECT_EQ(Base64Encode("hello"), "aGVsbG8=");
  std::string out;
  for (const char* bad : {"a", "ab", "abc", "a===", "ab=c", "ab==ab==", "YR==", "YWJ=", "ab cd", "-_==", "===="}) {
    EXPECT_FALSE(Base64Decode(bad, &out)) << bad;
  }
}

TEST(ParseExecuteRequest, DepthAndEncoding) {
  ExecuteRequest r;
  ApiError e;
  std::string deep = R"({"code": "x", "a": )" + std::string(40, '[') + std::string(40, ']') + "}";
  EXPECT_FALSE(Parse(deep, &r, &e));
  EXPECT_NE(e.message.find("nested deeper than 32"), std::string::npos);
  // A million brackets: rejected before the parser sees them (no recursion).
  EXPECT_FALSE(Parse(std::string(1 << 20, '['), &r, &e));
  // Brackets inside strings do not count.
  EXPECT_TRUE(Parse(R"({"code": ")" + std::string(100, '[') + R"("})", &r, &e));
  EXPECT_FALSE(Parse("{\"code\": \"\xff\"}", &r, &e));
  EXPECT_NE(e.message.find("UTF-8"), std::string::npos);
  EXPECT_FALSE(Parse(R"({"code": "\udc80"})", &r, &e));  // a lone surrogate
  EXPECT_TRUE(Parse("{\"code\": \"print('\xe4\xb8\x96')\"}", &r, &e));
}

TEST(IsValidUtf8, Rejects) {
  size_t at = 0;
  EXPECT_TRUE(IsValidUtf8("abc \xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("ab\xc0\xaf", &at));  // overlong
  EXPECT_EQ(at, 2u);
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe4\xb8"));          // cut short
}

TEST(Responses, CompatShape) {
  ExecuteResponse r;
  r.run.stdout_text = "x\xff";
  r.run.stdout_truncated = true;
  r.run.signal = 9;
  r.run.exit_code = 137;
  r.run.timed_out = true;
  r.run.kill_reason = "timeout";
  r.limits.output_bytes = 51200;
  r.limits.timeout_s = 1;
  std::string j = CompatExecuteToJson(r);
  // The invalid byte becomes U+FFFD (UTF-8 EF BF BD); the newline is escaped.
  EXPECT_NE(j.find("\"stdout\":\"x\xEF\xBF\xBD\\n[output truncated at 50 KB]\""), std::string::npos) << j;
  EXPECT_NE(j.find(R"("exit_code":-9)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"(Execution timed out after 1.0s)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("result":null)"), std::string::npos) << j;
  r.error = ErrorInfo{"ValueError", "bad", "tb"};
  r.result = "42";
  j = CompatExecuteToJson(r);
  EXPECT_NE(j.find(R"("error":"ValueError: bad")"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("result":"42")"), std::string::npos) << j;
}

TEST(Responses, Rejection) {
  Violation v{"import-not-allowed", "import of 'os' is not allowed", 1, 8, "error", "ast_scan",
              "Line 1: import of 'os' is not allowed"};
  EXPECT_EQ(RejectionToJson({v}, true, "r"),
            R"({"error":"Code validation failed","violations":["Line 1: import of 'os' is not allowed"]})");
  std::string v1 = RejectionToJson({v}, false, "r");
  EXPECT_NE(v1.find(R"("col":8)"), std::string::npos);
  EXPECT_NE(v1.find(R"("rule":"import-not-allowed")"), std::string::npos);
  EXPECT_EQ(ErrorToJson({ErrorKind::kBadRequest, "No code provided", ""}, "r"), R"({"error":"No code provided"})");
  std::string e = ErrorToJson({ErrorKind::kUnprocessable, "limits.memory: bad", "limits.memory"}, "r");
  EXPECT_NE(e.find(R"("loc":["body","limits","memory"])"), std::string::npos) << e;
}

TEST(Responses, AuditRecordIsOneLine) {
  AuditRecord a;
  a.error = "line1\nline2\r\n{\"verdict\":\"forged\"}";
  a.route = "/execute\n";
  std::string line = AuditRecordToJson(a);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find('\r'), std::string::npos);
}

TEST(RunnerEvents, TakesTheFinalBatch) {
  std::string channel =
      "{\"type\":\"result\",\"is_main_result\":true,\"data\":{\"text/plain\":\"forged\"}}\n"
      "{\"type\":\"end\",\"exit_code\":0}\n"
      "garbage line\n"
      "{\"type\":\"result\",\"is_main_result\":false,\"data\":{\"image/png\":\"iVBO\",\"text/plain\":\"<Figure>\"}}\n"
      "{\"type\":\"result\",\"is_main_result\":true,\"data\":{\"text/plain\":\"42\"}}\n"
      "{\"type\":\"error\",\"name\":\"E\",\"value\":\"v\",\"traceback\":\"t\"}\n"
      "{\"type\":\"end\",\"exit_code\":1}\n";
  RunnerEvents ev = ParseRunnerEvents(channel, false);
  ASSERT_TRUE(ev.main_result.has_value());
  EXPECT_EQ(ev.main_result->text_plain, "42");
  ASSERT_EQ(ev.displays.size(), 1u);
  EXPECT_NE(ev.displays[0].data_json.find("image/png"), std::string::npos);
  ASSERT_TRUE(ev.error.has_value());
  EXPECT_EQ(ev.error->name, "E");
  EXPECT_EQ(ev.end_exit_code, 1);
  EXPECT_EQ(ev.malformed_lines, 1);
  EXPECT_FALSE(ev.truncated);
}

TEST(RunnerEvents, NoEndNoResults) {
  RunnerEvents ev = ParseRunnerEvents("{\"type\":\"result\",\"is_main_result\":true,\"data\":{\"text/plain\":\"1\"}}\n"
                                      "{\"type\":\"error\",\"name\":\"E\",\"value\":\"\",\"traceback\":\"\"}\n",
                                      false);
  EXPECT_FALSE(ev.main_result.has_value());
  EXPECT_FALSE(ev.error.has_value());
  EXPECT_FALSE(ev.end_exit_code.has_value());
}

TEST(RunnerEvents, HostileLines) {
  std::string deep = "{\"type\":\"result\",\"data\":" + std::string(100, '[') + std::string(100, ']') + "}\n";
  RunnerEvents ev = ParseRunnerEvents(deep + "{\"type\":1}\n[]\n\xff\xfe\n{\"type\":\"end\",\"exit_code\":0}\n"
                                      "{\"type\":\"end\",\"exit_code\":0",
                                      true);
  EXPECT_EQ(ev.malformed_lines, 4);
  EXPECT_EQ(ev.end_exit_code, 0);
  EXPECT_TRUE(ev.truncated);
}

TEST(RunnerEvents, NestedDataIsKeptAsWritten) {
  // A `_repr_json_` result nests; its text comes back as the same JSON.
  RunnerEvents ev = ParseRunnerEvents(
      "{\"type\":\"result\",\"is_main_result\":true,\"data\":{\"text/plain\":\"x\",\"text/plain\":\"y\","
      "\"application/json\":{\"a\":[1,-2,3.5e0,true,null,{\"b\":\"\\u00e9\\n\"}],\"c\":{}},\"k\":[]}}\n"
      "{\"type\":\"end\",\"exit_code\":0}\n",
      false);
  ASSERT_TRUE(ev.main_result.has_value());
  EXPECT_EQ(ev.main_result->text_plain, "y");  // the last of repeated keys, as a DOM would keep
  EXPECT_EQ(ev.main_result->data_json,
            "{\"application/json\":{\"a\":[1,-2,3.5e0,true,null,{\"b\":\"\xc3\xa9\\n\"}],\"c\":{}},\"k\":[],"
            "\"text/plain\":\"y\"}");
  EXPECT_EQ(ev.malformed_lines, 0);
}

TEST(RunnerEvents, OnlyDataMayNest) {
  // The protocol's other fields are flat: a nested one is a forged line.
  RunnerEvents ev = ParseRunnerEvents(
      "{\"type\":\"error\",\"name\":{\"a\":1},\"value\":\"v\",\"traceback\":\"t\"}\n"
      "{\"type\":\"truncated\",\"what\":[[[[1]]]]}\n"
      "{\"type\":\"end\",\"exit_code\":0}\n",
      false);
  EXPECT_EQ(ev.malformed_lines, 2);
  EXPECT_FALSE(ev.error.has_value());
  EXPECT_FALSE(ev.truncated);
  EXPECT_EQ(ev.end_exit_code, 0);
}

TEST(RunnerEvents, ResultNodesAreBounded) {
  // A million empty lists in the final batch would be ~50 MB of response DOM:
  // results past the node budget are dropped and marked.
  std::string many = "[";
  for (int i = 0; i < 70000; ++i) many += i ? ",[]" : "[]";
  many += "]";
  RunnerEvents ev = ParseRunnerEvents(
      "{\"type\":\"result\",\"is_main_result\":false,\"data\":{\"application/json\":" + many + "}}\n"
      "{\"type\":\"result\",\"is_main_result\":true,\"data\":{\"text/plain\":\"42\"}}\n"
      "{\"type\":\"end\",\"exit_code\":0}\n",
      false);
  EXPECT_TRUE(ev.displays.empty());
  ASSERT_TRUE(ev.main_result.has_value());
  EXPECT_EQ(ev.main_result->text_plain, "42");
  EXPECT_TRUE(ev.truncated);
}

TEST(RunnerEvents, AWideResultStopsAtTheNodeBudget) {
  // One line of 100,000 distinct keys in "data" (each would be a map node of
  // the parser): parsing stops at the budget; the result is dropped and marked.
  std::string wide = "{";
  for (int i = 0; i < 100000; ++i) wide += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  wide += "}";
  RunnerEvents ev = ParseRunnerEvents(
      "{\"type\":\"result\",\"is_main_result\":false,\"data\":" + wide + "}\n"
      "{\"type\":\"end\",\"exit_code\":0}\n",
      false);
  EXPECT_TRUE(ev.displays.empty());
  EXPECT_TRUE(ev.truncated);
  EXPECT_EQ(ev.malformed_lines, 0);
}

TEST(RunnerEvents, ABatchIsBounded) {
  // More events in one batch than any runner writes: the rest are dropped.
  std::string channel;
  // (A batch holds results, file events and a few more: 64 + kMaxFileEvents.)
  for (int i = 0; i < 250; ++i) channel += "{\"type\":\"result\",\"data\":{\"text/plain\":\"x\"}}\n";
  channel += "{\"type\":\"end\",\"exit_code\":0}\n";
  RunnerEvents ev = ParseRunnerEvents(channel, false);
  EXPECT_EQ(ev.malformed_lines, static_cast<int>(250 - (64 + kMaxFileEvents)));
  EXPECT_TRUE(ev.truncated);
  EXPECT_EQ(ev.displays.size(), 64u);
}

TEST(RunnerEvents, FileEvents) {
  std::string ch =
      R"({"type":"file","path":"out.csv","size":3,"content":"YWJj","truncated":false})"
      "\n"
      R"({"type":"file","path":"big.bin","size":100,"content":"YQ==","truncated":true})"
      "\n"
      // Malformed: bad path, bad base64, content larger than size, untruncated short content, no size.
      R"({"type":"file","path":"../x","size":1,"content":"YQ==","truncated":false})"
      "\n"
      R"({"type":"file","path":"a","size":1,"content":"Y","truncated":false})"
      "\n"
      R"({"type":"file","path":"a","size":0,"content":"YQ==","truncated":true})"
      "\n"
      R"({"type":"file","path":"a","size":5,"content":"YQ==","truncated":false})"
      "\n"
      R"({"type":"file","path":"a","content":"YQ=="})"
      "\n"
      R"({"type":"file","path":{"x":1},"size":1,"content":"YQ=="})"
      "\n"
      R"({"type":"truncated","what":"files","dropped":2})"
      "\n"
      R"({"type":"end","exit_code":0})"
      "\n";
  RunnerEvents ev = ParseRunnerEvents(ch, false);
  ASSERT_EQ(ev.files.size(), 2u);
  EXPECT_EQ(ev.files[0].path, "out.csv");
  EXPECT_EQ(ev.files[0].size, 3);
  EXPECT_EQ(ev.files[0].content_base64, "YWJj");
  EXPECT_FALSE(ev.files[0].truncated);
  EXPECT_TRUE(ev.files[1].truncated);
  EXPECT_TRUE(ev.files_truncated);
  EXPECT_FALSE(ev.truncated);  // results were not cut
  EXPECT_EQ(ev.malformed_lines, 6);
  // Bounded: more file events than kMaxFileEvents are dropped and flagged.
  std::string flood;
  for (size_t i = 0; i < kMaxFileEvents + 10; ++i) {
    flood += R"({"type":"file","path":"f)" + std::to_string(i) + R"(","size":0,"content":"","truncated":false})" "\n";
  }
  flood += R"({"type":"end","exit_code":0})" "\n";
  RunnerEvents f = ParseRunnerEvents(flood, false);
  EXPECT_EQ(f.files.size(), kMaxFileEvents);
  EXPECT_TRUE(f.files_truncated);
  // No end event: no files (what user code may have forged before dying).
  RunnerEvents none = ParseRunnerEvents(
      R"({"type":"file","path":"a","size":1,"content":"YQ==","truncated":false})" "\n", false);
  EXPECT_TRUE(none.files.empty());
}

TEST(Responses, FilesInBothShapes) {
  ExecuteResponse r;
  EXPECT_EQ(CompatExecuteToJson(r).find("files"), std::string::npos);  // the fips body stays exact
  EXPECT_NE(V1ExecuteToJson(r).find(R"("files":[])"), std::string::npos);
  r.files.push_back({"chart.png", 4, "iVBORw==", false});
  r.files_truncated = true;
  std::string v1 = V1ExecuteToJson(r);
  EXPECT_NE(v1.find(R"({"content":"iVBORw==","path":"chart.png","size":4,"truncated":false})"), std::string::npos)
      << v1;
  EXPECT_NE(v1.find(R"("files":true)"), std::string::npos) << v1;
  std::string compat = CompatExecuteToJson(r);
  EXPECT_NE(compat.find(R"("path":"chart.png")"), std::string::npos) << compat;
  EXPECT_NE(compat.find(R"("files_truncated":true)"), std::string::npos) << compat;
}

TEST(RunnerConfig, Files) {
  RunnerConfig c;
  EXPECT_EQ(RunnerConfigToJson(c).find("files"), std::string::npos);
  c.files.push_back({"in/a.bin", std::string("\0\xff", 2)});
  c.max_out_files = 3;
  c.max_out_bytes = 100;
  std::string j = RunnerConfigToJson(c);
  EXPECT_NE(j.find(R"("files":[{"content":"AP8=","path":"in/a.bin"}])"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("max_out_files":3)"), std::string::npos) << j;
}

TEST(ProgramEnd, OnlyAnEndEventAsTheLastWholeLine) {
  auto end = ParseProgramEnd("{\"type\":\"result\",\"data\":{}}\n{\"type\":\"end\",\"exit_code\":3,\"max_rss_kb\":9000}\n",
                             false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->exit_code, 3);
  EXPECT_EQ(end->max_rss_kb, 9000);
  end = ParseProgramEnd("{\"type\":\"end\",\"exit_code\":0}\n", false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->max_rss_kb, 0);  // not said: unknown
  EXPECT_EQ(ParseProgramEnd("{\"type\":\"end\",\"exit_code\":0,\"max_rss_kb\":18446744073709551615}\n", false)
                ->max_rss_kb,
            0);  // not a peak anyone has
  // As the process status would say it: the low 8 bits.
  EXPECT_EQ(ParseProgramEnd("{\"type\":\"end\",\"exit_code\":300}\n", false)->exit_code, 44);
  EXPECT_EQ(ParseProgramEnd("{\"type\":\"end\",\"exit_code\":-1}\n", false)->exit_code, 255);

  for (const char* bad : {"", "\n", "{\"type\":\"end\",\"exit_code\":0}",  // no newline: cut short
                          "{\"type\":\"end\",\"exit_code\":0}\n{\"type\":\"result\"}\n",  // not last
                          "{\"type\":\"end\",\"exit_code\":\"0\"}\n", "{\"type\":\"end\"}\n",
                          "{\"type\":\"end\",\"exit_code\":1.5}\n", "[\"end\"]\n", "\xff\xfe\n",
                          "{\"type\":\"end\",\"exit_code\":99999999999}\n",
                          "{\"type\":\"end\",\"exit_code\":18446744073709551615}\n"}) {
    EXPECT_FALSE(ParseProgramEnd(bad, false).has_value()) << bad;
  }
  // The server stopped keeping the channel: its tail is not the runner's.
  EXPECT_FALSE(ParseProgramEnd("{\"type\":\"end\",\"exit_code\":0}\n", true).has_value());
  // A line longer than any end event is not parsed at all.
  EXPECT_FALSE(ParseProgramEnd("{\"type\":\"end\",\"exit_code\":0,\"pad\":\"" + std::string(300, 'x') + "\"}\n",
                               false)
                   .has_value());
}

TEST(ParseExecuteRequest, Env) {
  ExecuteRequest r;
  ApiError e;
  ASSERT_TRUE(Parse(R"({"code": "x", "env": {"MODE": "test", "_N2": "", "UNICODE": "\u00fc"}})", &r, &e)) << e.message;
  EXPECT_EQ(r.env, (std::map<std::string, std::string>{{"MODE", "test"}, {"_N2", ""}, {"UNICODE", "\xc3\xbc"}}));
  ASSERT_TRUE(Parse(R"({"code": "x", "env": null})", &r, &e)) << e.message;
  EXPECT_TRUE(r.env.empty());
  for (const char* bad : {R"({"code": "x", "env": "A=1"})", R"({"code": "x", "env": {"A": null}})",
                          R"({"code": "x", "env": {"A-B": "1"}})", R"({"code": "x", "env": {"9A": "1"}})",
                          R"({"code": "x", "env": {"A": "\u0000"}})"}) {
    EXPECT_FALSE(Parse(bad, &r, &e)) << bad;
    EXPECT_EQ(e.kind, ErrorKind::kUnprocessable) << bad;
    EXPECT_EQ(e.field, "env") << bad;
  }
}

TEST(RunnerConfig, EnvValuesAndTheCallFrame) {
  RunnerConfig c;
  std::string j = RunnerConfigToJson(c);
  EXPECT_EQ(j.find(R"("env")"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("max_result_values":65536)"), std::string::npos) << j;
  c.env = {{"A", "1"}, {"B", "two words"}};
  j = RunnerConfigToJson(c);
  EXPECT_NE(j.find(R"("env":{"A":"1","B":"two words"})"), std::string::npos) << j;
  RunnerConfig call;
  call.code = "x";
  call.stream = true;
  EXPECT_EQ(RunnerCallFrameToJson(call, 3), R"({"call":3,"code":"x","frame":"call","stream":true})");
  call.stream = false;
  call.env = {{"K", "v"}};
  EXPECT_EQ(RunnerCallFrameToJson(call, 3), R"({"call":3,"code":"x","env":{"K":"v"},"frame":"call","stream":false})");
}

TEST(RunnerConfig, Json) {
  RunnerConfig c;
  c.any_import = true;
  std::string j = RunnerConfigToJson(c);
  EXPECT_NE(j.find(R"("allowed_imports":null)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("result_fd":3)"), std::string::npos) << j;
  c.any_import = false;
  c.allowed_imports = {"math"};
  c.blocklist = {{"pandas", "read_pickle"}};
  j = RunnerConfigToJson(c);
  EXPECT_NE(j.find(R"("allowed_imports":["math"])"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("blocklist":[["pandas","read_pickle"]])"), std::string::npos) << j;
}

}  // namespace
}  // namespace airlock::model
