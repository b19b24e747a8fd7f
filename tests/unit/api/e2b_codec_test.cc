// E2B's wire shapes (model/e2b.h): the execute and context bodies, the NDJSON
// lines, the path mapping of /home/user, and the multipart parser the envd
// upload goes through (untrusted input: every malformed form is refused).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "model/e2b.h"

namespace airlock::model {
namespace {

using nlohmann::json;

TEST(E2bExecuteRequest, ParsesTheSdkBody) {
  E2bExecuteRequest r;
  ApiError e;
  ASSERT_TRUE(ParseE2bExecuteRequest(R"j({"code":"print(1)","context_id":"s1-x"})j", {}, &r, &e)) << e.message;
  EXPECT_EQ(r.code, "print(1)");
  EXPECT_EQ(r.context_id.value_or(""), "s1-x");
  EXPECT_FALSE(r.language);
  ASSERT_TRUE(ParseE2bExecuteRequest(R"j({"code":"1","language":"JS","env_vars":null})j", {}, &r, &e));
  EXPECT_EQ(r.language.value_or(""), "javascript");
  EXPECT_TRUE(r.env_vars.empty());
  ASSERT_TRUE(ParseE2bExecuteRequest(R"j({"code":"1","env_vars":{"A":"b","_x1":""}})j", {}, &r, &e));
  EXPECT_EQ(r.env_vars, (std::map<std::string, std::string>{{"A", "b"}, {"_x1", ""}}));
}

// runCode's envs: bounded as every request's env (model/json_util.h ParseEnv).
TEST(E2bExecuteRequest, EnvVarsAreBounded) {
  E2bExecuteRequest r;
  ApiError e;
  std::string many = R"({"code":"1","env_vars":{)";
  for (size_t i = 0; i <= kMaxEnvVars; ++i) many += (i ? "," : "") + std::string("\"V") + std::to_string(i) + "\":\"x\"";
  many += "}}";
  const std::string long_value(kMaxEnvValueBytes + 1, 'v');
  std::string big = R"({"code":"1","env_vars":{)";
  for (int i = 0; i < 5; ++i) big += (i ? "," : "") + std::string("\"B") + std::to_string(i) + "\":\"" + std::string(kMaxEnvValueBytes, 'b') + "\"";
  big += "}}";
  for (const std::string& bad :
       {std::string(R"({"code":"1","env_vars":[]})"), std::string(R"({"code":"1","env_vars":{"A":1}})"),
        std::string(R"({"code":"1","env_vars":{"1A":"x"}})"), std::string(R"({"code":"1","env_vars":{"A=B":"x"}})"),
        std::string(R"({"code":"1","env_vars":{"":"x"}})"), std::string(R"({"code":"1","env_vars":{"A B":"x"}})"),
        std::string(R"({"code":"1","env_vars":{"A":"x\u0000y"}})"), std::string(R"({"code":"1","env_vars":{"é":"x"}})"),
        R"({"code":"1","env_vars":{")" + std::string(kMaxEnvNameBytes + 1, 'N') + R"(":"x"}})",
        R"({"code":"1","env_vars":{"L":")" + long_value + R"("}})", many, big}) {
    EXPECT_FALSE(ParseE2bExecuteRequest(bad, {}, &r, &e)) << bad.substr(0, 80);
    EXPECT_EQ(e.kind, ErrorKind::kUnprocessable) << bad.substr(0, 80);
    EXPECT_EQ(e.field, "env_vars") << bad.substr(0, 80);
  }
}

TEST(E2bExecuteRequest, RefusesWhatE2bRefusesAndMalformedBodies) {
  E2bExecuteRequest r;
  ApiError e;
  EXPECT_FALSE(ParseE2bExecuteRequest(R"j({"code":"1","context_id":"a","language":"python"})j", {}, &r, &e));
  EXPECT_EQ(e.kind, ErrorKind::kBadRequest);
  EXPECT_EQ(e.message, "Only one of context_id or language can be provided");
  for (const char* bad : {"", "{", "[1]", R"j({"code":1})j", R"j({"nocode":"1"})j", R"j({"code":"1","language":3})j",
                          "{\"code\":\"1\"}\n{\"code\":\"2\"}", "{\"code\":\"\xff\"}"}) {
    EXPECT_FALSE(ParseE2bExecuteRequest(bad, {}, &r, &e)) << bad;
    EXPECT_EQ(e.kind, ErrorKind::kUnprocessable) << bad;
  }
  RequestCaps caps;
  caps.max_code_bytes = 4;
  EXPECT_FALSE(ParseE2bExecuteRequest(R"j({"code":"12345"})j", caps, &r, &e));
  EXPECT_EQ(e.kind, ErrorKind::kPayloadTooLarge);
  caps = RequestCaps();
  caps.max_depth = 3;
  EXPECT_FALSE(ParseE2bExecuteRequest(R"j({"code":"1","env_vars":{"a":{"b":{"c":1}}}})j", caps, &r, &e));
}

TEST(E2bContext, ParsesAndRenders) {
  E2bContextRequest r;
  ApiError e;
  ASSERT_TRUE(ParseE2bContextRequest("", {}, &r, &e));
  EXPECT_FALSE(r.language);
  ASSERT_TRUE(ParseE2bContextRequest(R"j({"language":"python","cwd":"/home/user"})j", {}, &r, &e));
  EXPECT_EQ(r.cwd.value_or(""), "/home/user");
  EXPECT_FALSE(ParseE2bContextRequest(R"j({"cwd":5})j", {}, &r, &e));
  json c = json::parse(E2bContextToJson({"s1-a", "python", "/home/user"}));
  EXPECT_EQ(c, json({{"id", "s1-a"}, {"language", "python"}, {"cwd", "/home/user"}}));
  EXPECT_EQ(json::parse(E2bContextListToJson({})), json::array());
}

TEST(E2bLines, ResultsHaveE2bFieldsAtTopLevelAndErrorsTheirTriple) {
  ExecuteResponse r;
  r.results.push_back({false, R"j({"image/png":"iVBOR","text/plain":"<Figure>","application/x-foo":"f"})j", "<Figure>"});
  r.results.push_back({true, R"j({"text/plain":"42"})j", "42"});
  r.error = ErrorInfo{"ZeroDivisionError", "division by zero", "Traceback...\n"};
  auto events = E2bFinalEvents(r);
  ASSERT_EQ(events.size(), 3u);
  json fig = json::parse(events[0].json);
  EXPECT_EQ(fig["type"], "result");
  EXPECT_EQ(fig["png"], "iVBOR");
  EXPECT_EQ(fig["text"], "<Figure>");
  EXPECT_EQ(fig["is_main_result"], false);
  EXPECT_EQ(fig["extra"], json({{"application/x-foo", "f"}}));
  EXPECT_FALSE(fig.contains("data"));
  json main = json::parse(events[1].json);
  EXPECT_EQ(main["text"], "42");
  EXPECT_EQ(main["is_main_result"], true);
  json err = json::parse(events[2].json);
  EXPECT_EQ(err, json({{"type", "error"}, {"name", "ZeroDivisionError"}, {"value", "division by zero"},
                       {"traceback", "Traceback...\n"}}));
  EXPECT_EQ(json::parse(E2bNumberOfExecutions(3)), json({{"type", "number_of_executions"}, {"execution_count", 3}}));
  EXPECT_EQ(json::parse(E2bEndOfExecution()), json({{"type", "end_of_execution"}}));
}

// What E2B's server does to a result that E2B's clients rely on: a chart and a
// DataFrame's data in their own fields, a string's repr without its quotes.
TEST(E2bLines, ChartsDataAndStringsAsE2bGivesThem) {
  ExecuteResponse r;
  r.results.push_back({false, R"j({"text/plain":"<Figure>","image/png":"iVBOR","e2b/chart":{"type":"line","elements":[]}})j", ""});
  r.results.push_back({false, R"j({"text/plain":"\"double\"","e2b/data":{"a":[1,2]},"text/html":"<table>"})j", ""});
  r.results.push_back({false, R"j({"text/plain":"'"})j", ""});
  r.results.push_back({false, R"j({"text/plain":"'a\" b'"})j", ""});
  r.results.push_back({true, R"j({"text/plain":"'bar'"})j", "'bar'"});
  auto events = E2bFinalEvents(r);
  ASSERT_EQ(events.size(), 5u);
  json chart = json::parse(events[0].json);
  EXPECT_EQ(chart["chart"], json({{"type", "line"}, {"elements", json::array()}}));
  EXPECT_EQ(chart["extra"], json::object());
  json data = json::parse(events[1].json);
  EXPECT_EQ(data["data"], json({{"a", {1, 2}}}));
  EXPECT_EQ(data["html"], "<table>");
  EXPECT_EQ(data["text"], "double");
  EXPECT_EQ(json::parse(events[2].json)["text"], "'");  // one quote is no pair
  EXPECT_EQ(json::parse(events[3].json)["text"], "a\" b");
  EXPECT_EQ(json::parse(events[4].json)["text"], "bar");
}

TEST(E2bLines, AKilledRunIsAnErrorLine) {
  RunReport run;
  run.kill_reason = "timeout";
  run.kill_detail = "wall-clock timeout of 5 s";
  ExecuteResponse r;
  r.run = run;
  auto events = E2bFinalEvents(r);
  ASSERT_EQ(events.size(), 1u);
  json err = json::parse(events[0].json);
  EXPECT_EQ(err["name"], "TimeoutError");
  EXPECT_EQ(err["value"], "wall-clock timeout of 5 s");
}

TEST(E2bPaths, HomeUserIsTheWorkingDirectoryAndNothingElseIsReached) {
  std::string rel, why;
  ASSERT_TRUE(E2bPathToSandbox("/home/user/data/in.csv", &rel, &why)) << why;
  EXPECT_EQ(rel, "data/in.csv");
  ASSERT_TRUE(E2bPathToSandbox("notes.txt", &rel, &why));
  EXPECT_EQ(rel, "notes.txt");
  for (const char* bad : {"/etc/passwd", "/home/user", "/home/user/", "/home/userx/a", "/home/user/../x",
                          "../x", "/home/user/a/../../b", "", "/", "/tmp", "/tmp/x", "/home/user//a", "a/./b"}) {
    EXPECT_FALSE(E2bPathToSandbox(bad, &rel, &why)) << bad;
    EXPECT_FALSE(why.empty());
  }
  EXPECT_EQ(E2bPathFromSandbox("a/b.txt"), "/home/user/a/b.txt");
}

TEST(E2bPaths, FilesReachTmpToo) {
  E2bPlace p;
  std::string why;
  ASSERT_TRUE(E2bPathToPlace("/tmp/a/b.txt", &p, &why)) << why;
  EXPECT_TRUE(p.tmp);
  EXPECT_EQ(p.relative, "a/b.txt");
  EXPECT_EQ(p.e2b_path(), "/tmp/a/b.txt");
  ASSERT_TRUE(E2bPathToPlace("/home/user/c.txt", &p, &why));
  EXPECT_FALSE(p.tmp);
  EXPECT_EQ(p.e2b_path(), "/home/user/c.txt");
  ASSERT_TRUE(E2bPathToPlace("rel/d.txt", &p, &why));
  EXPECT_FALSE(p.tmp);
  EXPECT_EQ(p.relative, "rel/d.txt");
  for (const char* bad : {"/tmp", "/tmp/", "/tmp/../etc/passwd", "/tmp//x", "/tmpx/a", "/tmp/a/./b", "/etc/x",
                          "/var/tmp/x", "/home/user"}) {
    EXPECT_FALSE(E2bPathToPlace(bad, &p, &why)) << bad;
    EXPECT_FALSE(why.empty());
  }
  EXPECT_FALSE(E2bPathToPlace(std::string_view("/tmp/a\0b", 8), &p, &why));  // a NUL
}

TEST(Multipart, ParsesTheSdkUpload) {
  std::string body =
      "--b0undary\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"/home/user/a.txt\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\n"
      "line1\r\nline2\r\n"
      "--b0undary\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"b.bin\"\r\n\r\n"
      "Z\x01--b0undar\r\n"
      "--b0undary--\r\n";
  body[body.find('Z')] = '\0';  // a NUL byte in the file
  std::vector<MultipartPart> parts;
  std::string why;
  ASSERT_TRUE(ParseMultipartFormData("multipart/form-data; boundary=b0undary", body, 8, &parts, &why)) << why;
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "file");
  EXPECT_EQ(parts[0].filename, "/home/user/a.txt");
  EXPECT_EQ(parts[0].body, "line1\r\nline2");
  EXPECT_EQ(parts[1].filename, "b.bin");
  EXPECT_EQ(parts[1].body, std::string("\0\x01--b0undar", 11));
  // A quoted boundary, as undici writes none but others do.
  ASSERT_TRUE(ParseMultipartFormData("Multipart/Form-Data; charset=x; boundary=\"b0undary\"", body, 8, &parts, &why));
}

TEST(Multipart, RefusesMalformedBodies) {
  std::vector<MultipartPart> parts;
  std::string why;
  const std::string ok = "--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--x--\r\n";
  EXPECT_FALSE(ParseMultipartFormData("application/json", ok, 8, &parts, &why));
  EXPECT_FALSE(ParseMultipartFormData("multipart/form-data", ok, 8, &parts, &why));
  EXPECT_FALSE(ParseMultipartFormData("multipart/form-data; boundary=", ok, 8, &parts, &why));
  EXPECT_FALSE(ParseMultipartFormData("multipart/form-data; boundary=\"x", ok, 8, &parts, &why));
  EXPECT_FALSE(ParseMultipartFormData("multipart/form-data; boundary=" + std::string(71, 'x'), ok, 8, &parts, &why));
  for (const std::string& bad : {std::string("--x\r\nbroken"), std::string("no boundary at all"),
                                 std::string("--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc"),
                                 std::string("--xjunk"), std::string("--x\r\n") + std::string(9000, 'h') + "\r\n\r\n"}) {
    EXPECT_FALSE(ParseMultipartFormData("multipart/form-data; boundary=x", bad, 8, &parts, &why)) << bad;
    EXPECT_FALSE(why.empty());
  }
  ASSERT_TRUE(ParseMultipartFormData("multipart/form-data; boundary=x", ok, 8, &parts, &why)) << why;
  std::string many;
  for (int i = 0; i < 5; ++i) many += "--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nz\r\n";
  many += "--x--";
  EXPECT_FALSE(ParseMultipartFormData("multipart/form-data; boundary=x", many, 4, &parts, &why));
  EXPECT_TRUE(ParseMultipartFormData("multipart/form-data; boundary=x", many, 5, &parts, &why)) << why;
}

// Finding 10 of issue 21: a part with no header at all (the empty line right
// after the delimiter) was refused as "headers do not end" (an unsigned
// underflow in the length check).
TEST(Multipart, APartWithoutHeaders) {
  std::vector<MultipartPart> parts;
  std::string why;
  ASSERT_TRUE(ParseMultipartFormData("multipart/form-data; boundary=x", "--x\r\n\r\nbare\r\n--x--", 8, &parts, &why))
      << why;
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].name, "");
  EXPECT_EQ(parts[0].body, "bare");
}

// The reader is fed the body as it arrives: any split gives the same parts, and
// what it holds stays bounded whatever a part's size.
struct Collect : MultipartReader::Handler {
  std::vector<MultipartPart> parts;
  bool OnPartBegin(const MultipartPartInfo& p) override {
    parts.push_back({p.name, p.filename, ""});
    return true;
  }
  bool OnPartData(std::string_view b) override {
    parts.back().body.append(b);
    return true;
  }
  bool OnPartEnd() override { return true; }
};

TEST(Multipart, ReadInPiecesOfAnySize) {
  std::string body = "preamble\r\n--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n";
  body += "\r\n--b0undar\r\n-\r\n--b0undarX";  // almost delimiters inside the data
  body += "\r\n--b0undary  \r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nsecond\r\n--b0undary--epilogue";
  const std::string want0 = "\r\n--b0undar\r\n-\r\n--b0undarX";
  for (size_t piece = 1; piece <= body.size(); ++piece) {
    std::unique_ptr<MultipartReader> r;
    std::string why;
    ASSERT_TRUE(MultipartReader::Create("multipart/form-data; boundary=b0undary", 8, &r, &why)) << why;
    Collect c;
    for (size_t at = 0; at < body.size(); at += piece) {
      ASSERT_TRUE(r->Feed(std::string_view(body).substr(at, piece), c)) << piece << ": " << r->error();
    }
    ASSERT_TRUE(r->Finish(c)) << piece << ": " << r->error();
    ASSERT_EQ(c.parts.size(), 2u) << piece;
    EXPECT_EQ(c.parts[0].filename, "a");
    EXPECT_EQ(c.parts[0].body, want0) << piece;
    EXPECT_EQ(c.parts[1].body, "second") << piece;
  }
}

TEST(Multipart, HoldsLittleWhateverThePartsSize) {
  std::unique_ptr<MultipartReader> r;
  std::string why;
  ASSERT_TRUE(MultipartReader::Create("multipart/form-data; boundary=x", 8, &r, &why));
  struct Count : MultipartReader::Handler {
    size_t bytes = 0;
    bool OnPartBegin(const MultipartPartInfo&) override { return true; }
    bool OnPartData(std::string_view b) override {
      bytes += b.size();
      return true;
    }
    bool OnPartEnd() override { return true; }
  } c;
  ASSERT_TRUE(r->Feed("--x\r\n\r\n", c));
  const std::string chunk(64 * 1024, 'z');
  for (int i = 0; i < 160; ++i) {  // 10 MiB
    ASSERT_TRUE(r->Feed(chunk, c));
    EXPECT_LT(r->buffered(), chunk.size() + 8);  // a piece, and what may begin a delimiter
  }
  ASSERT_TRUE(r->Feed("\r\n--x--\r\n", c));
  ASSERT_TRUE(r->Finish(c));
  EXPECT_EQ(c.bytes, 160u * chunk.size());
}

TEST(Multipart, AHandlerStopsTheReader) {
  std::unique_ptr<MultipartReader> r;
  std::string why;
  ASSERT_TRUE(MultipartReader::Create("multipart/form-data; boundary=x", 8, &r, &why));
  struct Refuse : MultipartReader::Handler {
    MultipartReader* reader = nullptr;
    bool OnPartBegin(const MultipartPartInfo&) override {
      reader->Stop("no parts today");
      return false;
    }
    bool OnPartData(std::string_view) override { return true; }
    bool OnPartEnd() override { return true; }
  } h;
  h.reader = r.get();
  EXPECT_FALSE(r->Feed("--x\r\n\r\nabc\r\n--x--", h));
  EXPECT_EQ(r->error(), "no parts today");
  EXPECT_FALSE(r->Finish(h));
}

}  // namespace
}  // namespace airlock::model
