// The Model Context Protocol's JSON-RPC messages, as airlock's MCP server reads
// and writes them (src/mcp/ holds the protocol logic; JSON stays here).
// Protocol revisions 2025-11-25 back to 2025-03-26 (initialize-based);
// research/ecosystem.md §1 has the shapes.
//
//   McpMessage m;
//   ParseMcpMessage(line, caps, &m);          // bounded: size and nesting
//   if (m.kind == McpMessage::kRequest && m.method == "tools/call") { ... m.call ... }
//   std::string reply = McpResultLine(m.id_json, McpToolCallResult(response));
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/execute.h"

namespace airlock::model {

// JSON-RPC error codes.
inline constexpr int kJsonRpcParseError = -32700;
inline constexpr int kJsonRpcInvalidRequest = -32600;
inline constexpr int kJsonRpcMethodNotFound = -32601;
inline constexpr int kJsonRpcInvalidParams = -32602;
inline constexpr int kJsonRpcInternalError = -32603;

// tools/call of one of airlock's tools, its arguments read and checked.
struct McpToolCall {
  std::string name;  // "execute_python", "list_profiles", ...
  ExecuteRequest execute;  // execute_python: code, timeout_seconds -> timeout_s, profile
  // An argument the tool cannot take (wrong type, unknown name): a tool
  // execution error for the model to fix, not a protocol error.
  std::string argument_error;
};

struct McpMessage {
  enum Kind { kRequest, kNotification, kResponse, kInvalid } kind = kInvalid;
  std::string id_json = "null";  // the request id as JSON text, echoed in the answer
  std::string method;
  // kInvalid: the JSON-RPC error to answer with (id_json when it could be read).
  int error_code = 0;
  std::string error_message;
  // initialize
  std::string protocol_version;
  std::string client_name;
  // tools/call
  McpToolCall call;
};

struct McpCaps {
  size_t max_bytes = size_t{4} << 20;  // one message (a line on stdio, a body on HTTP)
  size_t max_depth = 32;
  size_t max_code_bytes = size_t{1} << 20;
};

// Parses one JSON-RPC message. Never throws; anything malformed is kInvalid
// with the code to answer (a batch array is kInvalid: MCP >= 2025-06-18 has none).
void ParseMcpMessage(std::string_view text, const McpCaps& caps, McpMessage* out);

// {"jsonrpc":"2.0","id":<id>,"result":<result_json>} and the error form, each
// one line (no newline inside; stdio framing adds the '\n').
std::string McpResultLine(const std::string& id_json, const std::string& result_json);
std::string McpErrorLine(const std::string& id_json, int code, const std::string& message);

struct McpServerInfo {
  std::string protocol_version;  // negotiated
  std::string name = "airlock";
  std::string version;
  std::string instructions;
};
std::string McpInitializeResult(const McpServerInfo& info);

// tools/list: execute_python and list_profiles, with input and output schemas.
// `default_profile` and `profiles` go into the descriptions.
std::string McpToolsListResult(const std::string& default_profile, const std::vector<std::string>& profiles,
                               double max_timeout_s);

// tools/call results. A run that started: stdout, stderr, the result, the
// error with its traceback as text blocks, every figure as an image block,
// structuredContent; isError when the program failed or was killed.
std::string McpToolCallResult(const ExecuteResponse& response);
// The code was not run: the policy's violations (isError, each listed so the
// model can fix its code).
std::string McpRejectedResult(const std::vector<Violation>& violations);
// Any other tool failure (bad argument, no such profile, the run could not start).
std::string McpToolErrorResult(const std::string& message);
// list_profiles: name, description, allowed imports, limits of each.
std::string McpProfilesResult(const std::vector<ProfileView>& profiles, const std::string& default_profile);

}  // namespace airlock::model
