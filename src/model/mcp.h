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
  ExecuteRequest execute;  // execute_python: code, timeout_seconds -> timeout_s, profile;
                           // create_session: profile
  // execute_python (optional), close_session, upload_file, download_file.
  std::string session_id;
  // upload_file / download_file: the path in the session's working directory;
  // upload_file: the bytes (decoded from base64 when encoding was "base64").
  std::string path;
  std::string content;
  // run_command: the command line (bash -l -c), and its timeout in
  // execute.timeout_s (timeout_seconds; absent: the REST default).
  std::string command;
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

// What the tool descriptions and schemas say about this server.
struct McpToolsInfo {
  std::string default_profile;
  std::vector<std::string> profiles;
  double max_timeout_s = 0;
  bool sessions = true;          // the session and file tools are offered
  int64_t max_file_bytes = 0;    // upload_file / download_file cap
};

// The tool names airlock offers (tools/list order).
const std::vector<std::string>& McpToolNames(bool sessions);

// tools/list: execute_python, the session tools, list_profiles, each with its
// input and output schema and annotations.
std::string McpToolsListResult(const McpToolsInfo& info);

// The same tools as ready-to-paste function-calling definitions (GET /v1/tools):
// "mcp" (the tools/list array), "openai" (Chat Completions:
// {"type":"function","function":{...}}), "openai-responses" (Responses API:
// {"type":"function","name",...}) or "anthropic" ({"name","description",
// "input_schema"}). OpenAI's "strict" is true only for tools whose schema
// already meets strict mode (every property required, no extra properties).
// Returns "" for an unknown format.
std::string ToolDefinitions(const std::string& format, const McpToolsInfo& info);

// tools/call results. A run that started: stdout, stderr, the result, the
// error with its traceback as text blocks, every figure or image as an image
// block and every other display() result as a "display: <text/plain>" block,
// in order; structuredContent; isError when the program failed or was killed.
std::string McpToolCallResult(const ExecuteResponse& response);
// The code was not run: the policy's violations (isError, each listed so the
// model can fix its code).
std::string McpRejectedResult(const std::vector<Violation>& violations);
// A session call: the run's result plus structuredContent.session ({id,
// alive, interrupted, execution_count, end_reason?}).
std::string McpSessionCallResult(const ExecuteResponse& response, const std::string& session_id, bool alive,
                                 bool interrupted, int64_t execution_count, const std::string& end_reason);
// create_session: the id, profile, lifetimes.
std::string McpSessionCreatedResult(const std::string& id, const std::string& profile, int64_t expires_at_ms,
                                    double idle_timeout_s);
std::string McpSessionClosedResult(const std::string& id);
// upload_file: where it went and its size.
std::string McpFileWrittenResult(const std::string& session_id, const std::string& path, int64_t size);
// download_file: text content for UTF-8, image content for PNG/JPEG/GIF,
// an embedded resource (base64 blob) for other bytes.
std::string McpFileReadResult(const std::string& session_id, const std::string& path, const std::string& bytes);
// Any other tool failure (bad argument, no such profile, the run could not start).
std::string McpToolErrorResult(const std::string& message);
// run_command: the command's end (model/command.h) as text (exit code, then
// stdout and stderr) and as structuredContent (CommandEndToJson's object).
std::string McpCommandResult(const std::string& session_id, const std::string& end_json, int exit_code,
                             const std::string& out, const std::string& err, const std::string& kill_detail);
// The code is held for a person's approval (not an error, nothing ran):
// `pending_json` is the approval as POST /v1/execute's 202 gives it; it is the
// structuredContent's "approval" and the text says what happens next.
std::string McpPendingApprovalResult(const std::string& pending_json);
// list_profiles: name, description, allowed imports, limits of each.
std::string McpProfilesResult(const std::vector<ProfileView>& profiles, const std::string& default_profile);

}  // namespace airlock::model
