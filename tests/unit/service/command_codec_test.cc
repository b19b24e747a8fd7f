// The commands routes' JSON (model/command.h): what is taken, what is refused, what is answered.
#include <signal.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/command.h"

namespace airlock::model {
namespace {

using nlohmann::json;

TEST(ParseCommandRequest, DefaultsAndFields) {
  CommandRequest r;
  ApiError e;
  ASSERT_TRUE(ParseCommandRequest(R"({"cmd":"ls"})", RequestCaps(), &r, &e)) << e.message;
  EXPECT_EQ(r.cmd, "ls");
  EXPECT_EQ(r.timeout_s, kCommandDefaultTimeoutS);  // a foreground command has E2B's default
  EXPECT_FALSE(r.background);
  ASSERT_TRUE(ParseCommandRequest(R"({"cmd":"x","background":true})", RequestCaps(), &r, &e)) << e.message;
  EXPECT_EQ(r.timeout_s, 0);  // a background one runs until it ends or its session does
  ASSERT_TRUE(ParseCommandRequest(
      R"({"cmd":"x","env":{"A":"1"},"cwd":"/tmp/w","timeout":0,"stdin":true,"tag":"t"})", RequestCaps(), &r, &e))
      << e.message;
  EXPECT_EQ(r.env.at("A"), "1");
  EXPECT_EQ(r.cwd, "/tmp/w");
  EXPECT_EQ(r.timeout_s, 0);
  EXPECT_TRUE(r.stdin_open);
  EXPECT_EQ(r.tag, "t");
}

TEST(ParseCommandRequest, RefusesWhatItCannotRunAsGiven) {
  CommandRequest r;
  ApiError e;
  struct Case {
    const char* body;
    ErrorKind kind;
    const char* field;
  };
  for (const Case& c : {Case{R"({})", ErrorKind::kUnprocessable, "cmd"},
                        Case{R"({"cmd":""})", ErrorKind::kUnprocessable, "cmd"},
                        Case{R"({"cmd":5})", ErrorKind::kUnprocessable, "cmd"},
                        Case{"{\"cmd\":\"a\\u0000b\"}", ErrorKind::kUnprocessable, "cmd"},
                        Case{R"({"cmd":"x","cmdd":1})", ErrorKind::kUnprocessable, "cmdd"},
                        Case{R"({"cmd":"x","timeout":-1})", ErrorKind::kUnprocessable, "timeout"},
                        Case{R"({"cmd":"x","timeout":1e9})", ErrorKind::kUnprocessable, "timeout"},
                        Case{R"({"cmd":"x","background":"yes"})", ErrorKind::kUnprocessable, "background"},
                        Case{R"({"cmd":"x","cwd":"relative"})", ErrorKind::kBadRequest, "cwd"},
                        Case{R"({"cmd":"x","env":{"1A":"v"}})", ErrorKind::kUnprocessable, "env"}}) {
    EXPECT_FALSE(ParseCommandRequest(c.body, RequestCaps(), &r, &e)) << c.body;
    EXPECT_EQ(e.kind, c.kind) << c.body;
    EXPECT_EQ(e.field, c.field) << c.body << ": " << e.message;
  }
  // A key twice: refused, so that what an audit reads is what runs.
  EXPECT_FALSE(ParseCommandRequest(R"({"cmd":"id","cmd":"reboot"})", RequestCaps(), &r, &e));
  EXPECT_EQ(e.kind, ErrorKind::kBadRequest);
}

TEST(ParseSignalRequest, TheFourSignals) {
  int sig = 0;
  ApiError e;
  ASSERT_TRUE(ParseSignalRequest(R"({"signal":"SIGTERM"})", RequestCaps(), &sig, &e));
  EXPECT_EQ(sig, SIGTERM);
  ASSERT_TRUE(ParseSignalRequest(R"({"signal":"kill"})", RequestCaps(), &sig, &e));
  EXPECT_EQ(sig, SIGKILL);
  EXPECT_EQ(CommandSignal("SIGINT"), SIGINT);
  EXPECT_EQ(CommandSignal("hup"), SIGHUP);
  for (const char* bad : {R"({"signal":"SIGSTOP"})", R"({"signal":9})", R"({})", R"({"signal":"TERM","x":1})"}) {
    EXPECT_FALSE(ParseSignalRequest(bad, RequestCaps(), &sig, &e)) << bad;
    EXPECT_EQ(e.kind, ErrorKind::kBadRequest) << bad;
  }
}

TEST(CommandEndToJson, SaysWhatWasKeptAndWhy) {
  CommandEnd end;
  end.pid = 7;
  end.exit_code = 137;
  end.signal = 9;
  end.out = std::string("ok\xff", 3);  // not UTF-8: replaced, never a throw
  end.out_bytes = 5000000;
  end.out_truncated = true;
  end.output_cap = 1 << 20;
  end.kill_reason = "timeout";
  end.kill_detail = "past 1 s";
  end.duration_ms = 1000.25;
  json j = json::parse(CommandEndToJson(end));
  EXPECT_EQ(j["pid"], 7);
  EXPECT_EQ(j["running"], false);
  EXPECT_EQ(j["exit_code"], 137);
  EXPECT_EQ(j["signal"], 9);
  EXPECT_EQ(j["stdout"], "ok\xef\xbf\xbd");
  EXPECT_EQ(j["truncated"]["stdout"], true);
  EXPECT_EQ(j["truncated"]["stdout_bytes"], 5000000);
  EXPECT_EQ(j["truncated"]["cap_bytes"], 1 << 20);
  EXPECT_EQ(j["kill_reason"], "timeout");
  EXPECT_EQ(j["duration_ms"], 1000.25);
  end = CommandEnd();
  end.running = true;
  end.duration_ms = -1;
  j = json::parse(CommandEndToJson(end));
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_FALSE(j.contains("duration_ms"));
  EXPECT_FALSE(j.contains("truncated"));
  EXPECT_FALSE(j.contains("signal"));
}

TEST(CommandListToJson, ListsEachProcess) {
  json j = json::parse(CommandListToJson({{3, "t", {"/bin/bash", "-l", "-c", "ls"}, "/home/user", false, 0, 0},
                                          {4, "", {"/bin/bash"}, "/tmp", true, 0, 0}}));
  ASSERT_EQ(j["commands"].size(), 2u);
  EXPECT_EQ(j["commands"][0]["exit_code"], 0);
  EXPECT_TRUE(j["commands"][1]["exit_code"].is_null());
  EXPECT_EQ(json::parse(CommandStartEvent(12)), (json{{"type", "start"}, {"pid", 12}}));
}

}  // namespace
}  // namespace airlock::model
