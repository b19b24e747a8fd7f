// JSON for the MCP server (model/mcp.h).
#include <algorithm>
#include <cmath>

#include "model/base64.h"
#include "model/command.h"
#include "model/json_util.h"
#include "model/mcp.h"
#include "model/session.h"

namespace airlock::model {

using internal::Dump;
using nlohmann::json;

namespace {

void Invalid(McpMessage* out, int code, std::string message) {
  out->kind = McpMessage::kInvalid;
  out->error_code = code;
  out->error_message = std::move(message);
}

// Reads execute_python's arguments into an ExecuteRequest; an argument the
// tool cannot take goes to call->argument_error.
void ReadExecuteArgs(const json& args, const McpCaps& caps, McpToolCall* call) {
  auto fail = [&](std::string m) { call->argument_error = std::move(m); };
  for (const auto& [key, value] : args.items()) {
    if (key == "code") {
      if (!value.is_string()) return fail("code: must be a string of Python source");
      call->execute.code = value.get<std::string>();
      if (call->execute.code.size() > caps.max_code_bytes) {
        return fail("code: larger than " + std::to_string(caps.max_code_bytes) + " bytes");
      }
      if (!IsValidUtf8(call->execute.code)) return fail("code: not valid UTF-8");
    } else if (key == "timeout_seconds") {
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0) {
        return fail("timeout_seconds: must be a number of seconds greater than 0");
      }
      call->execute.timeout_s = value.get<double>();
    } else if (key == "profile") {
      if (!value.is_string()) return fail("profile: must be a string (list_profiles names them)");
      call->execute.profile = value.get<std::string>();
    } else if (key == "session_id") {
      if (!value.is_string() || value.get_ref<const std::string&>().empty() ||
          value.get_ref<const std::string&>().size() > 128) {
        return fail("session_id: must be the id create_session returned");
      }
      call->session_id = value.get<std::string>();
    } else if (key == "env") {
      ApiError error;
      if (!internal::ParseEnv(value, "env", &call->execute.env, &error)) return fail(error.message);
    } else {
      return fail("unknown argument '" + key.substr(0, 64) +
                  "' (execute_python takes code, session_id, timeout_seconds, profile, env)");
    }
  }
  if (!args.contains("code")) return fail("code: required (the Python source to run)");
  if (!call->session_id.empty() && call->execute.profile) {
    fail("profile: a session's profile is fixed when it is created; leave profile out when passing session_id");
  }
}

// The other tools' arguments: each named one of `allowed`, `required` ones present.
void ReadToolArgs(const json& args, const McpCaps& caps, const std::vector<std::string>& allowed,
                  const std::vector<std::string>& required, McpToolCall* call) {
  auto fail = [&](std::string m) { call->argument_error = std::move(m); };
  std::string names;
  for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
  std::string encoding = "utf-8";
  for (const auto& [key, value] : args.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return fail("unknown argument '" + key.substr(0, 64) + "' (" + call->name + " takes " +
                  (names.empty() ? std::string("no arguments") : names) + ")");
    }
    if (key == "env") {
      ApiError error;
      if (!internal::ParseEnv(value, "env", &call->execute.env, &error)) return fail(error.message);
      continue;
    }
    if (!value.is_string()) return fail(key + ": must be a string");
    const std::string& v = value.get_ref<const std::string&>();
    if (key == "session_id") {
      if (v.empty() || v.size() > 128) return fail("session_id: must be the id create_session returned");
      call->session_id = v;
    } else if (key == "profile") {
      call->execute.profile = v;
    } else if (key == "path") {
      if (v.empty() || v.size() > 4096) return fail("path: a relative path in the session's working directory");
      call->path = v;
    } else if (key == "content") {
      if (v.size() > caps.max_bytes) return fail("content: larger than the message cap");
      call->content = v;
    } else if (key == "command") {
      if (v.empty() || v.size() > caps.max_bytes) return fail("command: the command line to run (not empty)");
      call->command = v;
    } else if (key == "encoding") {
      if (v != "utf-8" && v != "base64") return fail("encoding: \"utf-8\" (default) or \"base64\"");
      encoding = v;
    }
  }
  for (const auto& r : required) {
    if (!args.contains(r)) return fail(r + ": required");
  }
  if (encoding == "base64") {
    std::string bytes;
    if (!Base64Decode(call->content, &bytes)) return fail("content: not valid base64");
    call->content = std::move(bytes);
  }
}

std::string Text(std::string_view s) { return std::string(s); }

json TextBlock(const std::string& text) { return {{"type", "text"}, {"text", text}}; }

json ErrorObject(const std::optional<ErrorInfo>& e) {
  if (!e) return nullptr;
  return {{"name", e->name}, {"value", e->value}, {"traceback", e->traceback}};
}

json ExecuteOutputSchema() {
  json str_or_null = {{"type", {"string", "null"}}};
  return {{"type", "object"},
          {"properties",
           {{"stdout", {{"type", "string"}}},
            {"stderr", {{"type", "string"}}},
            {"exit_code", {{"type", "integer"}}},
            {"timed_out", {{"type", "boolean"}}},
            {"kill_reason", str_or_null},
            {"kill_detail", {{"type", "string"}}},
            {"result", str_or_null},
            {"error",
             {{"type", {"object", "null"}},
              {"properties",
               {{"name", {{"type", "string"}}}, {"value", {{"type", "string"}}}, {"traceback", {{"type", "string"}}}}}}},
            {"figures", {{"type", "integer"}, {"description", "PNG images returned as image content"}}},
            {"truncated", {{"type", "object"}}},
            {"duration_ms", {{"type", "number"}}},
            {"approval",
             {{"type", "object"},
              {"description", "Present when the code is held for a person's approval instead of run"},
              {"properties",
               {{"approval_id", {{"type", "string"}}},
                {"status", {{"type", "string"}}},
                {"code_sha256", {{"type", "string"}}},
                {"expires_at", {{"type", "string"}}},
                {"findings", {{"type", "array"}}}}}}},
            {"violations",
             {{"type", "array"},
              {"items",
               {{"type", "object"},
                {"properties",
                 {{"rule", {{"type", "string"}}},
                  {"message", {{"type", "string"}}},
                  {"line", {{"type", "integer"}}},
                  {"col", {{"type", "integer"}}},
                  {"allowed_in",
                   {{"type", "array"},
                    {"items", {{"type", "string"}}},
                    {"description", "The profiles (list_profiles) where this finding would not refuse the code"}}}}}}}}}}}};
}

}  // namespace

void ParseMcpMessage(std::string_view text, const McpCaps& caps, McpMessage* out) {
  *out = McpMessage();
  if (text.size() > caps.max_bytes) {
    return Invalid(out, kJsonRpcInvalidRequest,
                   "message larger than " + std::to_string(caps.max_bytes) + " bytes");
  }
  if (internal::JsonDepth(text) > caps.max_depth) {
    return Invalid(out, kJsonRpcInvalidRequest, "message nested deeper than " + std::to_string(caps.max_depth));
  }
  json j;
  std::string detail;
  switch (internal::ParseClientJson(text, &j, &detail)) {
    case internal::ClientJson::kOk: break;
    case internal::ClientJson::kSyntax: return Invalid(out, kJsonRpcParseError, "parse error: not JSON");
    case internal::ClientJson::kDuplicateKey:
      // A proxy or an audit that reads the first "method" would see another
      // message than the one handled: refused, never guessed.
      return Invalid(out, kJsonRpcInvalidRequest,
                     "the key \"" + detail + "\" appears twice in one object; each key must appear once");
  }
  if (j.is_array()) return Invalid(out, kJsonRpcInvalidRequest, "batches are not supported (MCP >= 2025-06-18)");
  if (!j.is_object()) return Invalid(out, kJsonRpcInvalidRequest, "a JSON-RPC message must be an object");
  bool has_id = j.contains("id");
  if (has_id) {
    const json& id = j["id"];
    if (!id.is_string() && !id.is_number_integer() && !id.is_number_unsigned()) {
      return Invalid(out, kJsonRpcInvalidRequest, "id must be a string or an integer");
    }
    if (id.is_string() && id.get_ref<const std::string&>().size() > 256) {
      return Invalid(out, kJsonRpcInvalidRequest, "id longer than 256 characters");
    }
    out->id_json = Dump(id);
  }
  auto jsonrpc = j.find("jsonrpc");
  if (jsonrpc == j.end() || *jsonrpc != "2.0") return Invalid(out, kJsonRpcInvalidRequest, "jsonrpc must be \"2.0\"");
  auto method = j.find("method");
  if (method == j.end()) {
    if (has_id && (j.contains("result") || j.contains("error"))) {
      out->kind = McpMessage::kResponse;  // to a request we never send: ignored
      return;
    }
    return Invalid(out, kJsonRpcInvalidRequest, "no method");
  }
  if (!method->is_string()) return Invalid(out, kJsonRpcInvalidRequest, "method must be a string");
  out->method = method->get<std::string>().substr(0, 128);
  out->kind = has_id ? McpMessage::kRequest : McpMessage::kNotification;
  json params = j.contains("params") ? j["params"] : json::object();
  if (!params.is_object()) return Invalid(out, kJsonRpcInvalidParams, "params must be an object");

  if (out->method == "initialize") {
    if (auto v = params.find("protocolVersion"); v != params.end() && v->is_string()) {
      out->protocol_version = v->get<std::string>().substr(0, 32);
    }
    if (auto ci = params.find("clientInfo"); ci != params.end() && ci->is_object()) {
      if (auto n = ci->find("name"); n != ci->end() && n->is_string()) out->client_name = n->get<std::string>().substr(0, 64);
    }
  } else if (out->method == "tools/call") {
    auto name = params.find("name");
    if (name == params.end() || !name->is_string()) {
      return Invalid(out, kJsonRpcInvalidParams, "tools/call needs params.name (a tool name)");
    }
    out->call.name = name->get<std::string>().substr(0, 128);
    json args = params.contains("arguments") ? params["arguments"] : json::object();
    if (!args.is_object()) {
      out->call.argument_error = "arguments must be an object";
    } else if (out->call.name == "execute_python") {
      ReadExecuteArgs(args, caps, &out->call);
    } else if (out->call.name == "create_session") {
      ReadToolArgs(args, caps, {"profile", "env"}, {}, &out->call);
    } else if (out->call.name == "close_session") {
      ReadToolArgs(args, caps, {"session_id"}, {"session_id"}, &out->call);
    } else if (out->call.name == "upload_file") {
      ReadToolArgs(args, caps, {"session_id", "path", "content", "encoding"}, {"session_id", "path", "content"},
                   &out->call);
    } else if (out->call.name == "download_file") {
      ReadToolArgs(args, caps, {"session_id", "path"}, {"session_id", "path"}, &out->call);
    } else if (out->call.name == "run_command") {
      json rest = args;
      if (auto t = rest.find("timeout_seconds"); t != rest.end()) {
        if (!t->is_number() || !(t->get<double>() >= 0) || t->get<double>() > kCommandMaxTimeoutS) {
          out->call.argument_error = "timeout_seconds: a number of seconds from 0 (none) to 86400";
        } else {
          out->call.execute.timeout_s = t->get<double>();
        }
        rest.erase("timeout_seconds");
      }
      if (out->call.argument_error.empty()) {
        ReadToolArgs(rest, caps, {"session_id", "command", "timeout_seconds"}, {"session_id", "command"}, &out->call);
      }
    } else if (!args.empty()) {
      out->call.argument_error = out->call.name + " takes no arguments";
    }
  }
}

std::string McpResultLine(const std::string& id_json, const std::string& result_json) {
  return R"({"jsonrpc":"2.0","id":)" + id_json + R"(,"result":)" + result_json + "}";
}

std::string McpErrorLine(const std::string& id_json, int code, const std::string& message) {
  json j = {{"jsonrpc", "2.0"}, {"error", {{"code", code}, {"message", message}}}};
  j["id"] = json::parse(id_json, nullptr, false);
  if (j["id"].is_discarded()) j["id"] = nullptr;
  return Dump(j);
}

std::string McpInitializeResult(const McpServerInfo& info) {
  json j = {{"protocolVersion", info.protocol_version},
            {"capabilities", {{"tools", {{"listChanged", false}}}}},
            {"serverInfo", {{"name", info.name}, {"title", "airlock sandbox"}, {"version", info.version}}}};
  if (!info.instructions.empty()) j["instructions"] = info.instructions;
  return Dump(j);
}

namespace {

json Annotations(const std::string& title, bool read_only, bool destructive, bool idempotent) {
  return {{"title", title},
          {"readOnlyHint", read_only},
          {"destructiveHint", destructive},
          {"idempotentHint", idempotent},
          {"openWorldHint", false}};
}

json SessionIdProperty(const std::string& what) {
  return {{"type", "string"}, {"minLength", 1}, {"maxLength", 128}, {"description", what}};
}

json PathProperty() {
  return {{"type", "string"},
          {"minLength", 1},
          {"maxLength", 4096},
          {"description",
           "Path relative to the session's working directory (the code's current directory), e.g. 'data/in.csv'; "
           "no '..' and no absolute paths"}};
}

json EnvProperty(const std::string& what) {
  return {{"type", "object"},
          {"maxProperties", kMaxEnvVars},
          {"propertyNames", {{"pattern", "^[A-Za-z_][A-Za-z0-9_]{0,127}$"}}},
          {"additionalProperties", {{"type", "string"}, {"maxLength", kMaxEnvValueBytes}}},
          {"description",
           what + ". Names the sandbox sets itself (PATH, HOME, LANG, ...) or that change how programs start "
                  "(LD_*, PYTHON*, ...) are refused."}};
}

// Every tool, in tools/list order, as MCP tool objects.
json ToolObjects(const McpToolsInfo& info) {
  std::string names;
  for (const auto& p : info.profiles) names += (names.empty() ? "" : ", ") + p;
  json profile_prop = {{"type", "string"}, {"enum", info.profiles}, {"description", "Profile to run under: " + names}};
  json tools = json::array();

  json exec_props = {
      {"code", {{"type", "string"}, {"description", "Python 3 source to run, as in a notebook cell"}}},
      {"timeout_seconds",
       {{"type", "number"},
        {"exclusiveMinimum", 0},
        {"maximum", info.max_timeout_s},
        {"description", "Wall-clock limit for this call; default: the profile's"}}},
      {"profile", profile_prop},
      {"env", EnvProperty("Environment variables for this call's code (os.environ), e.g. {\"MODE\": \"test\"}")}};
  std::string exec_desc =
      "Run Python 3 code in an isolated sandbox and get back what it printed, the value of its last "
      "expression, the exception with its traceback if it failed, and matplotlib figures as PNG images. "
      "There is no network and no access to host files. Which modules may be imported depends on the profile "
      "(default '" + info.default_profile + "'; call list_profiles to see each profile's allowed imports and "
      "limits). Code that imports a module the profile does not allow is rejected before it runs, with the "
      "line and column of each violation.";
  if (info.sessions) {
    exec_props["session_id"] = SessionIdProperty(
        "Run in this session (from create_session): variables, imports and files of earlier calls are kept. "
        "Omit for a fresh one-shot interpreter. Do not pass profile with it.");
    exec_desc +=
        " Without session_id each call starts from a fresh interpreter with an empty working directory, "
        "discarded after the call: define everything the code needs in the same call. To keep state between "
        "calls, call create_session first and pass its session_id. A call that times out in a session is "
        "interrupted (KeyboardInterrupt) and the session lives on.";
  } else {
    exec_desc +=
        " Each call starts from a fresh interpreter: define everything the code needs in the same call; /tmp "
        "is an empty scratch directory discarded after the call.";
  }
  json exec_out = ExecuteOutputSchema();
  exec_out["properties"]["session"] = {
      {"type", "object"},
      {"description", "Present for a call in a session"},
      {"properties",
       {{"id", {{"type", "string"}}},
        {"alive", {{"type", "boolean"}}},
        {"interrupted", {{"type", "boolean"}}},
        {"execution_count", {{"type", "integer"}}},
        {"end_reason", {{"type", "string"}}}}}};
  tools.push_back({{"name", "execute_python"},
                   {"title", "Execute Python"},
                   {"description", exec_desc},
                   {"inputSchema",
                    {{"type", "object"},
                     {"properties", exec_props},
                     {"required", {"code"}},
                     {"additionalProperties", false}}},
                   {"outputSchema", exec_out},
                   {"annotations", Annotations("Execute Python", false, false, false)}});
  if (info.sessions) {
    tools.push_back(
        {{"name", "create_session"},
         {"title", "Create a Python session"},
         {"description",
          "Start a persistent sandboxed Python interpreter and return its session_id. Pass the session_id to "
          "execute_python to keep variables, imports and files between calls, and to upload_file / download_file "
          "to move files in and out of its working directory. The profile (default '" + info.default_profile +
              "') is fixed for the session's life. A session ends when idle too long or at its expiry time (both "
              "returned), or when you call close_session; call close_session when you are done."},
         {"inputSchema",
          {{"type", "object"},
           {"properties",
            {{"profile", profile_prop},
             {"env", EnvProperty("Environment variables for the session's code, for its whole life")}}},
           {"additionalProperties", false}}},
         {"outputSchema",
          {{"type", "object"},
           {"properties",
            {{"session_id", {{"type", "string"}}},
             {"profile", {{"type", "string"}}},
             {"expires_at", {{"type", "string"}, {"description", "RFC 3339 time of the hard expiry"}}},
             {"idle_timeout_seconds", {{"type", "number"}}}}},
           {"required", {"session_id", "profile"}}}},
         {"annotations", Annotations("Create a Python session", false, false, false)}});
    tools.push_back(
        {{"name", "close_session"},
         {"title", "Close a Python session"},
         {"description",
          "End a session from create_session now: its interpreter, its variables and every file in its working "
          "directory are gone for good (download_file what you need first). Other sessions are not touched."},
         {"inputSchema",
          {{"type", "object"},
           {"properties", {{"session_id", SessionIdProperty("The session to end (from create_session)")}}},
           {"required", {"session_id"}},
           {"additionalProperties", false}}},
         {"outputSchema",
          {{"type", "object"},
           {"properties", {{"session_id", {{"type", "string"}}}, {"closed", {{"type", "boolean"}}}}},
           {"required", {"session_id", "closed"}}}},
         // Destroys the session's state: honest about it. Idempotent: closing
         // again changes nothing more (it answers that the session is gone).
         {"annotations", Annotations("Close a Python session", false, true, true)}});
    std::string cap = std::to_string(info.max_file_bytes >> 20) + " MiB";
    tools.push_back(
        {{"name", "upload_file"},
         {"title", "Upload a file into a session"},
         {"description",
          "Write a file into a session's working directory (parent directories are created; an existing file "
          "is replaced), so that code run with execute_python in that session can open it by the same relative "
          "path. Text goes as content with encoding 'utf-8' (the default); binary data as base64 with encoding "
          "'base64'. At most " + cap + "."},
         {"inputSchema",
          {{"type", "object"},
           {"properties",
            {{"session_id", SessionIdProperty("The session (from create_session)")},
             {"path", PathProperty()},
             {"content", {{"type", "string"}, {"description", "The file's content: text, or base64 when encoding is 'base64'"}}},
             {"encoding", {{"type", "string"}, {"enum", {"utf-8", "base64"}}, {"description", "How content is written; default 'utf-8'"}}}}},
           {"required", {"session_id", "path", "content"}},
           {"additionalProperties", false}}},
         {"outputSchema",
          {{"type", "object"},
           {"properties", {{"session_id", {{"type", "string"}}}, {"path", {{"type", "string"}}}, {"size", {{"type", "integer"}}}}},
           {"required", {"path", "size"}}}},
         // Overwrites a file of the same name, but only inside the session's
         // own scratch directory: not destructive of anything outside it.
         {"annotations", Annotations("Upload a file into a session", false, false, true)}});
    tools.push_back(
        {{"name", "run_command"},
         {"title", "Run a shell command in a session"},
         {"description",
          "Run a shell command (bash -l -c) in a session's sandbox, beside its Python interpreter: it sees the "
          "same working directory (/home/user), so files written by execute_python are there and files it "
          "writes are seen by the next execute_python. Returns the exit code, stdout and stderr (1 MiB each "
          "kept). Same isolation as the interpreter: no network, nothing outside the sandbox. The session's "
          "profile must allow bash."},
         {"inputSchema",
          {{"type", "object"},
           {"properties",
            {{"session_id", SessionIdProperty("The session (from create_session)")},
             {"command", {{"type", "string"}, {"description", "The command line, e.g. 'ls -la && wc -l data.csv'"}}},
             {"timeout_seconds",
              {{"type", "number"}, {"minimum", 0}, {"maximum", kCommandMaxTimeoutS},
               {"description", "Kill it after this many seconds (default 60; 0: none)"}}}}},
           {"required", {"session_id", "command"}},
           {"additionalProperties", false}}},
         {"outputSchema",
          {{"type", "object"},
           {"properties",
            {{"session_id", {{"type", "string"}}},
             {"pid", {{"type", "integer"}}},
             {"exit_code", {{"type", "integer"}}},
             {"stdout", {{"type", "string"}}},
             {"stderr", {{"type", "string"}}},
             {"kill_reason", {{"type", "string"}}}}},
           {"required", {"exit_code", "stdout", "stderr"}}}},
         {"annotations", Annotations("Run a shell command in a session", false, true, false)}});
    tools.push_back(
        {{"name", "download_file"},
         {"title", "Download a file from a session"},
         {"description",
          "Read a file from a session's working directory, e.g. one the code wrote. Text files come back as "
          "text, PNG/JPEG/GIF images as image content, other files as base64. At most " + cap + "."},
         {"inputSchema",
          {{"type", "object"},
           {"properties", {{"session_id", SessionIdProperty("The session (from create_session)")}, {"path", PathProperty()}}},
           {"required", {"session_id", "path"}},
           {"additionalProperties", false}}},
         {"outputSchema",
          {{"type", "object"},
           {"properties",
            {{"session_id", {{"type", "string"}}},
             {"path", {{"type", "string"}}},
             {"size", {{"type", "integer"}}},
             {"encoding", {{"type", "string"}, {"enum", {"utf-8", "base64"}}}},
             {"content", {{"type", "string"}}}}},
           {"required", {"path", "size", "encoding", "content"}}}},
         {"annotations", Annotations("Download a file from a session", true, false, true)}});
  }
  tools.push_back({{"name", "list_profiles"},
                   {"title", "List sandbox profiles"},
                   {"description",
                    "List the profiles execute_python can run under: for each, its description, the modules code "
                    "may import, and its limits (memory, CPU, timeout)."},
                   {"inputSchema", {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}}},
                   {"annotations", Annotations("List sandbox profiles", true, false, true)}});
  return tools;
}

// OpenAI strict mode holds only when every property is required and no other
// is allowed (OpenAI's "Structured Outputs" rules).
bool StrictCompatible(const json& schema) {
  if (schema.value("additionalProperties", true) != false) return false;
  const json& props = schema.contains("properties") ? schema["properties"] : json::object();
  std::vector<std::string> required = schema.value("required", std::vector<std::string>{});
  for (const auto& [name, _] : props.items()) {
    if (std::find(required.begin(), required.end(), name) == required.end()) return false;
  }
  return true;
}

}  // namespace

const std::vector<std::string>& McpToolNames(bool sessions) {
  static const std::vector<std::string> kAll = {"execute_python", "create_session", "close_session", "upload_file",
                                                "run_command",    "download_file",  "list_profiles"};
  static const std::vector<std::string> kOneShot = {"execute_python", "list_profiles"};
  return sessions ? kAll : kOneShot;
}

std::string McpToolsListResult(const McpToolsInfo& info) { return Dump({{"tools", ToolObjects(info)}}); }

std::string ToolDefinitions(const std::string& format, const McpToolsInfo& info) {
  json tools = ToolObjects(info);
  json out = json::array();
  for (json& t : tools) {
    json& schema = t["inputSchema"];
    if (format == "mcp") {
      out.push_back(t);
    } else if (format == "anthropic") {
      out.push_back({{"name", t["name"]}, {"description", t["description"]}, {"input_schema", schema}});
    } else if (format == "openai" || format == "openai-responses") {
      json fn = {{"name", t["name"]}, {"description", t["description"]}, {"parameters", schema}};
      bool strict = StrictCompatible(schema);
      if (strict) {
        fn["strict"] = true;
        if (!schema.contains("required")) fn["parameters"]["required"] = json::array();
      } else {
        fn["strict"] = false;
      }
      if (format == "openai") {
        out.push_back({{"type", "function"}, {"function", fn}});
      } else {
        fn["type"] = "function";
        out.push_back(fn);
      }
    } else {
      return "";
    }
  }
  return Dump({{"format", format}, {"tools", out}});
}

std::string McpToolCallResult(const ExecuteResponse& r) {
  const RunReport& run = r.run;
  json content = json::array();
  if (!run.stdout_text.empty()) {
    content.push_back(TextBlock(run.stdout_text + (run.stdout_truncated ? "\n[stdout truncated]" : "")));
  }
  if (!run.stderr_text.empty()) {
    content.push_back(TextBlock("stderr:\n" + run.stderr_text + (run.stderr_truncated ? "\n[stderr truncated]" : "")));
  }
  if (r.result) content.push_back(TextBlock("result: " + *r.result));
  // The runner prints an uncaught exception's traceback to stderr, as python3
  // does; say it again only when stderr does not already hold it.
  if (r.error && run.stderr_text.find(r.error->traceback.empty() ? r.error->value : r.error->traceback) ==
                     std::string::npos) {
    content.push_back(TextBlock(!r.error->traceback.empty() ? r.error->traceback : r.error->name + ": " + r.error->value));
  }
  if (run.kill_reason) content.push_back(TextBlock("killed (" + *run.kill_reason + "): " + run.kill_detail));
  int figures = 0;
  for (const DisplayResult& d : r.results) {
    json data = json::parse(d.data_json, nullptr, false);
    if (!data.is_object()) continue;
    bool image = false;
    for (const char* mime : {"image/png", "image/jpeg"}) {
      auto it = data.find(mime);
      if (it != data.end() && it->is_string()) {
        content.push_back({{"type", "image"}, {"data", it->get<std::string>()}, {"mimeType", mime}});
        ++figures;
        image = true;
        break;
      }
    }
    // What display() showed that is no image, in order, as its text (the
    // main result is the "result:" block above).
    if (!image && !d.is_main_result && !d.text_plain.empty()) content.push_back(TextBlock("display: " + d.text_plain));
  }
  if (content.empty()) content.push_back(TextBlock("(no output)"));
  json structured = {{"stdout", run.stdout_text},
                     {"stderr", run.stderr_text},
                     {"exit_code", run.exit_code},
                     {"timed_out", run.timed_out},
                     {"kill_reason", run.kill_reason ? json(*run.kill_reason) : json(nullptr)},
                     {"kill_detail", run.kill_detail},
                     {"result", r.result ? json(*r.result) : json(nullptr)},
                     {"error", ErrorObject(r.error)},
                     {"figures", figures},
                     {"truncated", {{"stdout", run.stdout_truncated}, {"stderr", run.stderr_truncated},
                                    {"results", r.results_truncated}}},
                     {"duration_ms", run.duration_ms}};
  bool failed = run.exit_code != 0 || run.kill_reason.has_value();
  return Dump({{"content", content}, {"structuredContent", structured}, {"isError", failed}});
}

std::string McpRejectedResult(const std::vector<Violation>& violations) {
  std::string text = "The code was not run: the profile's policy rejected it.\n";
  json list = json::array();
  for (const Violation& v : violations) {
    text += "- line " + std::to_string(v.line) + ", column " + std::to_string(v.col) + ": " + v.message + " [" +
            v.rule + "]\n";
    json one = {{"rule", v.rule}, {"message", v.message}, {"line", v.line}, {"col", v.col}};
    if (v.allowed_in) one["allowed_in"] = *v.allowed_in;
    list.push_back(std::move(one));
  }
  text += "Change the code, or pass a profile that allows it (list_profiles shows what each profile allows), and call "
          "execute_python again.";
  return Dump({{"content", json::array({TextBlock(text)})},
               {"structuredContent", {{"violations", list}}},
               {"isError", true}});
}

std::string McpSessionCallResult(const ExecuteResponse& response, const std::string& session_id, bool alive,
                                 bool interrupted, int64_t execution_count, const std::string& end_reason) {
  json j = json::parse(McpToolCallResult(response));
  json session = {{"id", session_id}, {"alive", alive}, {"interrupted", interrupted},
                  {"execution_count", execution_count}};
  if (!alive) {
    session["end_reason"] = end_reason;
    j["content"].push_back(TextBlock("The session has ended (" + end_reason +
                                     "): its state is gone; call create_session for a new one."));
    j["isError"] = true;
  } else if (interrupted) {
    j["content"].push_back(TextBlock("The call was interrupted (KeyboardInterrupt); the session lives on with the "
                                     "state it had when interrupted."));
  }
  j["structuredContent"]["session"] = session;
  return Dump(j);
}

std::string McpSessionCreatedResult(const std::string& id, const std::string& profile, int64_t expires_at_ms,
                                    double idle_timeout_s) {
  std::string text = "Session " + id + " created (profile " + profile + "). Pass session_id \"" + id +
                     "\" to execute_python, upload_file and download_file. It ends after " +
                     std::to_string(static_cast<int64_t>(idle_timeout_s)) + " s without a call, at " +
                     Rfc3339Ms(expires_at_ms) + " at the latest, or when you call close_session.";
  return Dump({{"content", json::array({TextBlock(text)})},
               {"structuredContent",
                {{"session_id", id},
                 {"profile", profile},
                 {"expires_at", Rfc3339Ms(expires_at_ms)},
                 {"idle_timeout_seconds", idle_timeout_s}}},
               {"isError", false}});
}

std::string McpSessionClosedResult(const std::string& id) {
  return Dump({{"content", json::array({TextBlock("Session " + id + " closed: its interpreter and files are gone.")})},
               {"structuredContent", {{"session_id", id}, {"closed", true}}},
               {"isError", false}});
}

std::string McpFileWrittenResult(const std::string& session_id, const std::string& path, int64_t size) {
  return Dump({{"content", json::array({TextBlock("Wrote " + std::to_string(size) + " bytes to " + path +
                                                  " in session " + session_id + ".")})},
               {"structuredContent", {{"session_id", session_id}, {"path", path}, {"size", size}}},
               {"isError", false}});
}

std::string McpFileReadResult(const std::string& session_id, const std::string& path, const std::string& bytes) {
  auto ends = [&](const char* ext) {
    std::string e = ext;
    if (path.size() < e.size()) return false;
    std::string tail = path.substr(path.size() - e.size());
    std::transform(tail.begin(), tail.end(), tail.begin(), [](unsigned char c) { return std::tolower(c); });
    return tail == e;
  };
  json content = json::array();
  json structured = {{"session_id", session_id}, {"path", path}, {"size", static_cast<int64_t>(bytes.size())}};
  // Images by their magic bytes (never by name alone).
  const char* image = nullptr;
  if (bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0) image = "image/png";
  else if (bytes.rfind("\xff\xd8\xff", 0) == 0) image = "image/jpeg";
  else if (bytes.rfind("GIF8", 0) == 0) image = "image/gif";
  if (image == nullptr && IsValidUtf8(bytes) && bytes.find('\0') == std::string::npos) {
    content.push_back(TextBlock(bytes));
    structured["encoding"] = "utf-8";
    structured["content"] = bytes;
  } else {
    std::string b64 = Base64Encode(bytes);
    if (image) {
      content.push_back({{"type", "image"}, {"data", b64}, {"mimeType", image}});
    } else {
      std::string mime = ends(".pdf") ? "application/pdf" : ends(".zip") ? "application/zip" : "application/octet-stream";
      content.push_back({{"type", "resource"},
                         {"resource", {{"uri", "airlock://sessions/" + session_id + "/files/" + path},
                                       {"mimeType", mime},
                                       {"blob", b64}}}});
    }
    structured["encoding"] = "base64";
    structured["content"] = b64;
  }
  return Dump({{"content", content}, {"structuredContent", structured}, {"isError", false}});
}

std::string McpPendingApprovalResult(const std::string& pending_json) {
  json approval = json::parse(pending_json, nullptr, false);
  if (!approval.is_object()) approval = json::object();
  auto field = [&](const char* key) {
    auto it = approval.find(key);
    return it != approval.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string findings;
  if (auto it = approval.find("findings"); it != approval.end() && it->is_array()) {
    for (const json& f : *it) {
      if (f.is_object() && f.contains("rule") && f["rule"].is_string()) {
        findings += (findings.empty() ? "" : ", ") + f["rule"].get<std::string>();
      }
    }
  }
  std::string text = "Not run yet: profile " + field("profile") + " holds this code for a person's approval (approval_id " +
                     field("approval_id") + ", code sha256 " + field("code_sha256") +
                     (findings.empty() ? "" : ", findings: " + findings) + "). A person with the approve role decides " +
                     "it in airlock's console or at POST /v1/approvals/" + field("approval_id") +
                     " before " + field("expires_at") + " (undecided, it is denied then); once approved it runs " +
                     "exactly as sent, and its result is at GET /v1/approvals/" + field("approval_id") +
                     ". Do not resend it: that would make a second request.";
  return Dump({{"content", json::array({TextBlock(Text(text))})},
               {"structuredContent", {{"approval", approval}}},
               {"isError", false}});
}

std::string McpCommandResult(const std::string& session_id, const std::string& end_json, int exit_code,
                             const std::string& out, const std::string& err, const std::string& kill_detail) {
  json structured = json::parse(end_json, nullptr, false);
  if (!structured.is_object()) structured = json::object();
  structured["session_id"] = session_id;
  std::string text = "exit code " + std::to_string(exit_code) + (kill_detail.empty() ? "" : " (" + kill_detail + ")");
  if (!out.empty()) text += "\n--- stdout ---\n" + out;
  if (!err.empty()) text += "\n--- stderr ---\n" + err;
  return Dump({{"content", json::array({TextBlock(Text(text))})},
               {"structuredContent", std::move(structured)},
               {"isError", false}});
}

std::string McpToolErrorResult(const std::string& message) {
  return Dump({{"content", json::array({TextBlock(Text(message))})}, {"isError", true}});
}

std::string McpProfilesResult(const std::vector<ProfileView>& profiles, const std::string& default_profile) {
  json list = json::array();
  std::string text;
  for (const ProfileView& p : profiles) {
    json imports = p.any_import ? json::array({"*"}) : json(p.allowed_imports);
    list.push_back({{"name", p.name},
                    {"default", p.name == default_profile},
                    {"description", p.description},
                    {"allowed_imports", imports},
                    {"memory_bytes", p.memory_bytes},
                    {"cpu_cores", p.cpu_cores},
                    {"timeout_max_s", p.timeout_max_s},
                    {"timeout_default_s", p.timeout_default_s}});
    std::string mods;
    if (p.any_import) {
      mods = "any installed module";
    } else {
      for (const auto& m : p.allowed_imports) mods += (mods.empty() ? "" : ", ") + m;
    }
    text += p.name + (p.name == default_profile ? " (default)" : "") + ": " + p.description;
    if (!text.empty() && text.back() != '\n') text += "\n";
    text += "  imports: " + mods + "\n  limits: " + std::to_string(p.memory_bytes >> 20) + " MiB memory, timeout up to " +
            std::to_string(static_cast<int>(p.timeout_max_s)) + " s\n";
  }
  return Dump({{"content", json::array({TextBlock(text)})}, {"structuredContent", {{"profiles", list}}},
               {"isError", false}});
}

}  // namespace airlock::model
