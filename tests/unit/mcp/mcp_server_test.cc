// The MCP protocol layer without running code: negotiation, the tool list, and
// a JSON-RPC answer for every malformed message (tests/interop drives the real
// SDK against `airlock mcp` for the rest).
#include "mcp/mcp_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <thread>
#include <unistd.h>

#include "mcp/stdio_transport.h"
#include "profile/loader.h"
#include "session/session_manager.h"

namespace airlock::mcp {
namespace {

using nlohmann::json;

constexpr const char* kMinimal = R"(name: minimal
description: test
imports:
  allowed: [math]
resources: {timeout_max: 5, timeout_default: 2}
scan_stages: {pre: [ast_scan], post: []}
)";

class McpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto set = profile::ParseProfiles({{"minimal.yaml", kMinimal}});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    service::ServiceOptions o;
    o.profiles = std::move(*set);
    o.host = &host_;
    auto s = service::Service::Create(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    svc_ = std::move(*s);
    server_ = std::make_unique<McpServer>(*svc_, nullptr, McpOptions{"0.0.0-test", {}});
    sessions_ = std::make_unique<session::SessionManager>(*svc_, session::SessionOptions());
    with_sessions_ = std::make_unique<McpServer>(*svc_, sessions_.get(), McpOptions{"0.0.0-test", {}});
  }

  json Ask(const std::string& message) {
    auto reply = server_->Handle(message);
    EXPECT_TRUE(reply.has_value()) << message;
    if (!reply) return nullptr;
    EXPECT_EQ(reply->find('\n'), std::string::npos) << "a stdio message must be one line";
    return json::parse(*reply);
  }

  isolation::HostSetup host_;
  std::unique_ptr<service::Service> svc_;
  std::unique_ptr<McpServer> server_;
  std::unique_ptr<session::SessionManager> sessions_;
  std::unique_ptr<McpServer> with_sessions_;

  json AskSessions(const std::string& message) {
    auto reply = with_sessions_->Handle(message);
    EXPECT_TRUE(reply.has_value()) << message;
    return reply ? json::parse(*reply) : json(nullptr);
  }
  json Call(const std::string& tool, const json& args) {
    json m = {{"jsonrpc", "2.0"}, {"id", 7}, {"method", "tools/call"}, {"params", {{"name", tool}, {"arguments", args}}}};
    return AskSessions(m.dump())["result"];
  }
};

TEST_F(McpServerTest, NegotiatesTheProtocolVersion) {
  json r = Ask(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}})");
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-03-26");
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "airlock");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  r = Ask(R"({"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"1999-01-01"}})");
  EXPECT_EQ(r["result"]["protocolVersion"], kProtocolVersions[0]);
  EXPECT_EQ(r["id"], "a");
}

TEST_F(McpServerTest, NotificationsAndResponsesGetNoAnswer) {
  EXPECT_FALSE(server_->Handle(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
  EXPECT_FALSE(server_->Handle(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})"));
  EXPECT_FALSE(server_->Handle(R"({"jsonrpc":"2.0","id":9,"result":{}})"));
}

TEST_F(McpServerTest, ListsToolsWithSchemas) {
  json r = Ask(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})");
  ASSERT_EQ(r["result"]["tools"].size(), 2u);
  const json& exec = r["result"]["tools"][0];
  EXPECT_EQ(exec["name"], "execute_python");
  EXPECT_EQ(exec["inputSchema"]["required"], json::array({"code"}));
  EXPECT_EQ(exec["inputSchema"]["properties"]["timeout_seconds"]["maximum"], 5.0);
  EXPECT_EQ(exec["inputSchema"]["properties"]["env"]["type"], "object");
  EXPECT_EQ(exec["inputSchema"]["properties"]["env"]["additionalProperties"]["type"], "string");
  EXPECT_EQ(exec["annotations"]["openWorldHint"], false);
}

// env: bounded by the codec (an argument error), its names by the service (a
// name the sandbox reserves is refused before anything runs).
TEST_F(McpServerTest, EnvArgumentsAreCheckedAsToolErrors) {
  auto text = [](const json& result) { return result["content"][0]["text"].get<std::string>(); };
  json r = Call("execute_python", {{"code", "1"}, {"env", {{"A", 1}}}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_NE(text(r).find("env: A: the value must be a string"), std::string::npos) << text(r);
  r = Call("execute_python", {{"code", "1"}, {"env", "A=1"}});
  EXPECT_EQ(r["isError"], true);
  for (const char* name : {"PATH", "LD_PRELOAD", "PYTHONPATH", "HOME"}) {
    r = Call("execute_python", {{"code", "1"}, {"env", {{name, "/tmp/x"}}}});
    EXPECT_EQ(r["isError"], true) << name;
    EXPECT_NE(text(r).find(std::string("env: ") + name + ": "), std::string::npos) << text(r);
  }
  r = Call("create_session", {{"env", {{"LD_LIBRARY_PATH", "/tmp"}}}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_NE(text(r).find("LD_"), std::string::npos) << text(r);
  json tools = AskSessions(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})")["result"]["tools"];
  EXPECT_TRUE(tools[1]["inputSchema"]["properties"].contains("env")) << tools[1]["name"];
}

TEST_F(McpServerTest, ListsTheSessionToolsWithHonestAnnotations) {
  json r = AskSessions(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})");
  std::vector<std::string> names;
  for (const json& t : r["result"]["tools"]) {
    names.push_back(t["name"]);
    EXPECT_EQ(t["annotations"]["openWorldHint"], false) << t["name"];
    // run_command can remove the session's files: destructive, as close_session is.
    EXPECT_EQ(t["annotations"]["destructiveHint"], t["name"] == "close_session" || t["name"] == "run_command")
        << t["name"];
    EXPECT_EQ(t["inputSchema"]["type"], "object");
    EXPECT_EQ(t["inputSchema"]["additionalProperties"], false);
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"execute_python", "create_session", "close_session", "upload_file",
                                             "run_command", "download_file", "list_profiles"}));
  const json& exec = r["result"]["tools"][0];
  EXPECT_TRUE(exec["inputSchema"]["properties"].contains("session_id"));
  EXPECT_TRUE(exec["outputSchema"]["properties"].contains("session"));
}

TEST_F(McpServerTest, SessionToolArgumentsAreCheckedAsToolErrors) {
  auto text = [](const json& result) { return result["content"][0]["text"].get<std::string>(); };
  json r = Call("close_session", json::object());
  EXPECT_EQ(r["isError"], true);
  EXPECT_NE(text(r).find("session_id: required"), std::string::npos) << text(r);
  r = Call("execute_python", {{"code", "1"}, {"session_id", "s1-x"}, {"profile", "minimal"}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_NE(text(r).find("profile is fixed"), std::string::npos) << text(r);
  // An id that does not exist (or belongs to another token): not found.
  r = Call("execute_python", {{"code", "1"}, {"session_id", "s1-abcd-0123"}});
  EXPECT_EQ(r["isError"], true);
  r = Call("close_session", {{"session_id", "s1-abcd-0123"}});
  EXPECT_EQ(r["isError"], true);
  r = Call("upload_file", {{"session_id", "s1-abcd-0123"}, {"path", "a.txt"}, {"content", "@@"}, {"encoding", "base64"}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_NE(text(r).find("base64"), std::string::npos) << text(r);
  r = Call("upload_file", {{"session_id", "s1-abcd-0123"}, {"path", "../etc/passwd"}, {"content", "x"}});
  EXPECT_EQ(r["isError"], true);
  r = Call("run_command", {{"session_id", "s1-abcd-0123"}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_NE(text(r).find("command: required"), std::string::npos) << text(r);
  r = Call("run_command", {{"session_id", "s1-abcd-0123"}, {"command", "id"}, {"timeout_seconds", "soon"}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_NE(text(r).find("timeout_seconds"), std::string::npos) << text(r);
  r = Call("run_command", {{"session_id", "s1-abcd-0123"}, {"command", "id"}});
  EXPECT_EQ(r["isError"], true);  // no such session
  r = Call("download_file", {{"session_id", "s1-abcd-0123"}, {"path", "/etc/shadow"}});
  EXPECT_EQ(r["isError"], true);
  r = Call("download_file", {{"session_id", "s1-abcd-0123"}, {"path", "a"}, {"mode", "x"}});
  EXPECT_NE(text(r).find("unknown argument 'mode'"), std::string::npos) << text(r);
}

TEST_F(McpServerTest, ToolDefinitionsForEachVendor) {
  model::McpToolsInfo info;
  info.default_profile = "minimal";
  info.profiles = {"minimal"};
  info.max_timeout_s = 5;
  info.max_file_bytes = 1 << 20;
  json openai = json::parse(model::ToolDefinitions("openai", info));
  ASSERT_EQ(openai["tools"].size(), 7u);
  for (const json& t : openai["tools"]) {
    EXPECT_EQ(t["type"], "function");
    const json& fn = t["function"];
    // strict only where every property is required and no other allowed.
    bool all_required = true;
    for (const auto& [name, _] : fn["parameters"]["properties"].items()) {
      const json& req = fn["parameters"].value("required", json::array());
      all_required = all_required && std::find(req.begin(), req.end(), name) != req.end();
    }
    EXPECT_EQ(fn["strict"], all_required) << fn["name"];
  }
  EXPECT_EQ(openai["tools"][0]["function"]["strict"], false);  // execute_python has optional arguments
  json responses = json::parse(model::ToolDefinitions("openai-responses", info));
  EXPECT_EQ(responses["tools"][0]["type"], "function");
  EXPECT_EQ(responses["tools"][0]["name"], "execute_python");
  json anthropic = json::parse(model::ToolDefinitions("anthropic", info));
  EXPECT_EQ(anthropic["tools"][0]["input_schema"]["required"], json::array({"code"}));
  EXPECT_FALSE(anthropic["tools"][0].contains("inputSchema"));
  json mcp = json::parse(model::ToolDefinitions("mcp", info));
  EXPECT_TRUE(mcp["tools"][0].contains("outputSchema"));
  EXPECT_EQ(model::ToolDefinitions("gemini", info), "");
}

TEST_F(McpServerTest, MalformedMessagesGetTheRightErrorCodes) {
  struct Case {
    std::string message;
    int code;
  } cases[] = {
      {"not json", -32700},
      {"[1,2]", -32600},
      {"42", -32600},
      {R"({"jsonrpc":"1.0","id":1,"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":1,"method":7})", -32600},
      {R"({"jsonrpc":"2.0","id":1})", -32600},
      {R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]})", -32602},
      {R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}})", -32602},
      {R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm_rf"}})", -32602},
      {R"({"jsonrpc":"2.0","id":1,"method":"sampling/createMessage"})", -32601},
      {std::string(100, '[') + std::string(100, ']'), -32600},
  };
  for (const Case& c : cases) {
    json r = Ask(c.message);
    EXPECT_EQ(r["error"]["code"], c.code) << c.message.substr(0, 80) << " -> " << r.dump();
    EXPECT_EQ(r["jsonrpc"], "2.0");
  }
}

TEST_F(McpServerTest, BadArgumentsAndPolicyAreToolErrorsNotProtocolErrors) {
  json r = Ask(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_python","arguments":{"code":1}}})");
  EXPECT_EQ(r["result"]["isError"], true);
  r = Ask(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_python","arguments":{"cod":"1"}}})");
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("unknown argument 'cod'"), std::string::npos);
  r = Ask(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_python","arguments":{"code":"1","timeout_seconds":99}}})");
  EXPECT_EQ(r["result"]["isError"], true);
  r = Ask(R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"execute_python","arguments":{"code":"import os"}}})");
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_EQ(r["result"]["structuredContent"]["violations"][0]["line"], 1);
  EXPECT_EQ(r["result"]["structuredContent"]["violations"][0]["rule"], "import-not-allowed");
}

// A profile that holds requests for a person: stdio MCP has no one to ask and
// no way to hold the call, so the code is refused as a tool error, never run.
TEST(McpApprovalTest, HeldCodeIsAToolErrorNotARun) {
  auto set = profile::ParseProfiles(
      {{"minimal.yaml", kMinimal}, {"gated.yaml", "name: gated\nextends: minimal\napproval:\n  policy: always\n"}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  isolation::HostSetup host;
  service::ServiceOptions o;
  o.profiles = std::move(*set);
  o.host = &host;
  auto svc = service::Service::Create(std::move(o));
  ASSERT_TRUE(svc.ok()) << svc.status().ToString();
  McpServer server(**svc, nullptr, McpOptions{"0.0.0-test", {}});
  auto reply = server.Handle(
      R"j({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute_python","arguments":{"code":"print(1)","profile":"gated"}}})j");
  ASSERT_TRUE(reply.has_value());
  json r = json::parse(*reply);
  EXPECT_EQ(r["result"]["isError"], true);
  const std::string text = r["result"]["content"][0]["text"].get<std::string>();
  EXPECT_NE(text.find("needs a person's approval"), std::string::npos) << text;
  EXPECT_EQ(text.find("could not run"), std::string::npos) << "refused before any run was tried: " << text;
}

TEST_F(McpServerTest, StdioSkipsAnOversizedLineAndGoesOn) {
  int in[2], out[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(out), 0);
  std::string big = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":")" + std::string(5 << 20, 'a') + "\"}}\n";
  std::string ok = R"({"jsonrpc":"2.0","id":2,"method":"ping"})" "\n";
  std::thread writer([&] {
    for (const std::string* s : {&big, &ok}) {
      size_t off = 0;
      while (off < s->size()) {
        ssize_t n = write(in[1], s->data() + off, s->size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
    }
    close(in[1]);
  });
  ASSERT_TRUE(ServeStdio(*server_, in[0], out[1]).ok());
  writer.join();
  close(out[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  close(in[0]);
  close(out[0]);
  size_t nl = got.find('\n');
  ASSERT_NE(nl, std::string::npos) << got;
  EXPECT_EQ(json::parse(got.substr(0, nl))["error"]["code"], -32600);
  EXPECT_EQ(json::parse(got.substr(nl + 1))["id"], 2);
}

}  // namespace
}  // namespace airlock::mcp
