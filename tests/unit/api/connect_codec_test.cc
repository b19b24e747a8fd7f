// Connect's JSON codec (model/connect.h) and envd's process messages
// (model/envd_process.h): untrusted envelopes and bodies are refused with
// Connect's codes, the answers have the shapes E2B's SDKs read.
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include <nlohmann/json.hpp>

#include "model/connect.h"
#include "model/envd_process.h"

namespace airlock::model {
namespace {

using nlohmann::json;

std::string Envelope(const std::string& message, unsigned char flags = 0) {
  std::string out(1, static_cast<char>(flags));
  const uint32_t n = static_cast<uint32_t>(message.size());
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
  return out + message;
}

TEST(Connect, FramesAndUnwrapsOneMessage) {
  EXPECT_EQ(ConnectFrame("{}", false), Envelope("{}"));
  EXPECT_EQ(ConnectFrame("{}", true), Envelope("{}", 2));
  std::string msg, why;
  ASSERT_TRUE(ConnectUnwrap(Envelope(R"({"a":1})"), 100, &msg, &why)) << why;
  EXPECT_EQ(msg, R"({"a":1})");
  ASSERT_TRUE(ConnectUnwrap(Envelope(""), 100, &msg, &why));
  EXPECT_EQ(msg, "");
}

TEST(Connect, RefusesEveryMalformedEnvelope) {
  std::string msg, why;
  EXPECT_FALSE(ConnectUnwrap("", 100, &msg, &why));
  EXPECT_FALSE(ConnectUnwrap(std::string("\0\0\0", 3), 100, &msg, &why));
  EXPECT_FALSE(ConnectUnwrap(Envelope("{}", 1), 100, &msg, &why));
  EXPECT_NE(why.find("compressed"), std::string::npos) << why;
  EXPECT_FALSE(ConnectUnwrap(Envelope("{}", 2), 100, &msg, &why));
  EXPECT_FALSE(ConnectUnwrap(Envelope("{}") + "x", 100, &msg, &why));  // trailing bytes
  EXPECT_FALSE(ConnectUnwrap(Envelope("{}") + Envelope("{}"), 100, &msg, &why));  // two messages
  EXPECT_FALSE(ConnectUnwrap(Envelope("{}").substr(0, 6), 100, &msg, &why));      // truncated
  // A length that claims 4 GiB is refused on its header, before anything is allocated.
  EXPECT_FALSE(ConnectUnwrap(std::string("\0\xff\xff\xff\xff{}", 7), 100, &msg, &why));
  EXPECT_NE(why.find("more than the 100"), std::string::npos) << why;
}

TEST(Connect, ErrorsCarryConnectCodesAndStatuses) {
  ApiError nf{ErrorKind::kNotFound, "no such", ""};
  EXPECT_EQ(ConnectCode(nf), "not_found");
  EXPECT_EQ(ConnectHttpStatus("not_found"), 404);
  ApiError chosen{ErrorKind::kBadRequest, "x", ""};
  chosen.code = "already_exists";
  EXPECT_EQ(ConnectCode(chosen), "already_exists");
  EXPECT_EQ(ConnectHttpStatus("already_exists"), 409);
  ApiError other{ErrorKind::kTooManyRequests, "x", ""};
  other.code = "quota_exceeded";  // not a Connect code: the kind decides
  EXPECT_EQ(ConnectCode(other), "resource_exhausted");
  EXPECT_EQ(ConnectHttpStatus("unimplemented"), 501);
  EXPECT_EQ(ConnectHttpStatus("nonsense"), 500);
  json body = json::parse(ConnectErrorBody(nf));
  EXPECT_EQ(body["code"], "not_found");
  EXPECT_EQ(body["message"], "no such");
  EXPECT_EQ(ConnectEndStream(nullptr), "{}");
  EXPECT_EQ(json::parse(ConnectEndStream(&nf))["error"]["code"], "not_found");
  // Invalid UTF-8 in a message never breaks the JSON.
  ApiError bad{ErrorKind::kInternal, std::string("\xff\xfe"), ""};
  EXPECT_NO_THROW(json::parse(ConnectErrorBody(bad)));
}

TEST(EnvdProcess, ParsesTheSdksStart) {
  CommandRequest r;
  ApiError e;
  ASSERT_TRUE(ParseEnvdStart(
      R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"A":"b"},"cwd":"/tmp"},"stdin":false,"tag":"t"})",
      {}, &r, &e))
      << e.message;
  EXPECT_EQ(r.argv, (std::vector<std::string>{"/bin/bash", "-l", "-c", "echo hi"}));
  EXPECT_EQ(r.env.at("A"), "b");
  EXPECT_EQ(r.cwd, "/tmp");
  EXPECT_EQ(r.tag, "t");
  EXPECT_FALSE(r.stdin_open);
  // No stdin field (an old SDK): a pipe, as envd gave then; a relative cwd is under /home/user.
  ASSERT_TRUE(ParseEnvdStart(R"({"process":{"cmd":"ls","cwd":"sub"}})", {}, &r, &e));
  EXPECT_TRUE(r.stdin_open);
  EXPECT_EQ(r.cwd, "/home/user/sub");
}

TEST(EnvdProcess, RefusesBadStartsWithConnectCodes) {
  CommandRequest r;
  ApiError e;
  for (const char* body : {R"({})", R"({"process":{}})", R"({"process":{"cmd":""}})", R"({"process":{"cmd":1}})",
                           R"({"process":{"cmd":"x","args":"a"}})", R"({"process":{"cmd":"x","args":[1]}})",
                           R"({"process":{"cmd":"x","envs":{"LD PRELOAD":"x"}}})", R"({"process":{"cmd":"x"},"stdin":1})",
                           "[1]", "{", R"({"process":{"cmd":"x"},"process":{"cmd":"y"}})"}) {
    EXPECT_FALSE(ParseEnvdStart(body, {}, &r, &e)) << body;
    EXPECT_EQ(ConnectCode(e), "invalid_argument") << body;
  }
  EXPECT_FALSE(ParseEnvdStart(R"({"process":{"cmd":"x","args":["a\u0000b"]}})", {}, &r, &e));
  EXPECT_FALSE(ParseEnvdStart(R"({"process":{"cmd":"bash"},"pty":{"size":{"cols":80,"rows":24}}})", {}, &r, &e));
  EXPECT_EQ(ConnectCode(e), "unimplemented");
  std::string many = R"({"process":{"cmd":"x","args":[)";
  for (int i = 0; i < 2000; ++i) many += std::string(i ? "," : "") + "\"a\"";
  EXPECT_FALSE(ParseEnvdStart(many + "]}}", {}, &r, &e));
}

TEST(EnvdProcess, SelectorsInputAndSignals) {
  EnvdSelector sel;
  ApiError e;
  ASSERT_TRUE(ParseEnvdSelectorRequest(R"({"process":{"pid":42}})", {}, &sel, &e));
  EXPECT_EQ(sel.pid, 42);
  ASSERT_TRUE(ParseEnvdSelectorRequest(R"({"process":{"pid":"43"}})", {}, &sel, &e));  // proto3 JSON's uint32 as a string
  EXPECT_EQ(sel.pid, 43);
  EnvdSelector by_tag;
  ASSERT_TRUE(ParseEnvdSelectorRequest(R"({"process":{"tag":"srv"}})", {}, &by_tag, &e));
  EXPECT_EQ(by_tag.pid, -1);
  EXPECT_EQ(by_tag.tag, "srv");
  for (const char* body : {R"({})", R"({"process":{}})", R"({"process":{"pid":-1}})",
                           R"({"process":{"pid":4294967296}})", R"({"process":{"pid":"1e3"}})"}) {
    EXPECT_FALSE(ParseEnvdSelectorRequest(body, {}, &sel, &e)) << body;
  }
  std::string data;
  ASSERT_TRUE(ParseEnvdSendInput(R"({"process":{"pid":1},"input":{"stdin":"aGk="}})", {}, &sel, &data, &e));
  EXPECT_EQ(data, "hi");
  ASSERT_TRUE(ParseEnvdSendInput(R"({"process":{"pid":1},"input":{}})", {}, &sel, &data, &e));
  EXPECT_EQ(data, "");
  EXPECT_FALSE(ParseEnvdSendInput(R"({"process":{"pid":1},"input":{"stdin":"!!"}})", {}, &sel, &data, &e));
  EXPECT_FALSE(ParseEnvdSendInput(R"({"process":{"pid":1},"input":{"pty":"aGk="}})", {}, &sel, &data, &e));
  EXPECT_EQ(ConnectCode(e), "unimplemented");
  int sig = 0;
  ASSERT_TRUE(ParseEnvdSendSignal(R"({"process":{"pid":1},"signal":"SIGNAL_SIGKILL"})", {}, &sel, &sig, &e));
  EXPECT_EQ(sig, SIGKILL);
  ASSERT_TRUE(ParseEnvdSendSignal(R"({"process":{"pid":1},"signal":15})", {}, &sel, &sig, &e));
  EXPECT_EQ(sig, SIGTERM);
  EXPECT_FALSE(ParseEnvdSendSignal(R"({"process":{"pid":1},"signal":"SIGNAL_SIGSTOP"})", {}, &sel, &sig, &e));
  EXPECT_FALSE(ParseEnvdSendSignal(R"({"process":{"pid":1}})", {}, &sel, &sig, &e));
}

TEST(EnvdProcess, EventsHaveEnvdsShapes) {
  EXPECT_EQ(json::parse(EnvdStartEvent(7))["event"]["start"]["pid"], 7);
  EXPECT_EQ(json::parse(EnvdDataEvent(true, "hi"))["event"]["data"]["stdout"], "aGk=");
  EXPECT_EQ(json::parse(EnvdDataEvent(false, std::string("\xff\0", 2)))["event"]["data"]["stderr"], "/wA=");
  json exited = json::parse(EnvdEndEvent({true, 3, 0, ""}))["event"]["end"];
  EXPECT_EQ(exited["exitCode"], 3);
  EXPECT_EQ(exited["exited"], true);
  EXPECT_EQ(exited["status"], "exit status 3");
  EXPECT_FALSE(exited.contains("error"));
  json killed = json::parse(EnvdEndEvent({false, 137, SIGKILL, "why"}))["event"]["end"];
  EXPECT_EQ(killed["exitCode"], -1);
  EXPECT_EQ(killed["exited"], false);
  EXPECT_EQ(killed["status"], "signal: killed");
  EXPECT_EQ(killed["error"], "why");
  json list = json::parse(EnvdProcessListToJson({{5, "t", {"/bin/bash", "-c", "x"}, "/home/user", {}}}));
  EXPECT_EQ(list["processes"][0]["pid"], 5);
  EXPECT_EQ(list["processes"][0]["tag"], "t");
  EXPECT_EQ(list["processes"][0]["config"]["cmd"], "/bin/bash");
  EXPECT_EQ(list["processes"][0]["config"]["args"], json::array({"-c", "x"}));
}

}  // namespace
}  // namespace airlock::model
