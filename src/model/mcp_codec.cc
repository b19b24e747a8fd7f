// JSON for the MCP server (model/mcp.h).
#include <cmath>

#include "model/json_util.h"
#include "model/mcp.h"

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
    } else {
      return fail("unknown argument '" + key.substr(0, 64) + "' (execute_python takes code, timeout_seconds, profile)");
    }
  }
  if (!args.contains("code")) fail("code: required (the Python source to run)");
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
            {"violations",
             {{"type", "array"},
              {"items",
               {{"type", "object"},
                {"properties",
                 {{"rule", {{"type", "string"}}},
                  {"message", {{"type", "string"}}},
                  {"line", {{"type", "integer"}}},
                  {"col", {{"type", "integer"}}}}}}}}}}}};
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
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Invalid(out, kJsonRpcParseError, "parse error: not JSON");
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

std::string McpToolsListResult(const std::string& default_profile, const std::vector<std::string>& profiles,
                               double max_timeout_s) {
  std::string names;
  for (const auto& p : profiles) names += (names.empty() ? "" : ", ") + p;
  json execute = {
      {"name", "execute_python"},
      {"title", "Execute Python"},
      {"description",
       "Run Python 3 code in an isolated sandbox and get back what it printed, the value of its last "
       "expression, the exception with its traceback if it failed, and matplotlib figures as PNG images. "
       "Each call starts from a fresh interpreter: define everything the code needs in the same call. "
       "There is no network and no access to host files; /tmp is an empty scratch directory that is "
       "discarded after the call. Which modules may be imported depends on the profile (default '" +
           default_profile + "'; call list_profiles to see each profile's allowed imports and limits). "
           "Code that imports a module the profile does not allow is rejected before it runs, with the "
           "line and column of each violation."},
      {"inputSchema",
       {{"type", "object"},
        {"properties",
         {{"code", {{"type", "string"}, {"description", "Python 3 source to run, as in a notebook cell"}}},
          {"timeout_seconds",
           {{"type", "number"},
            {"exclusiveMinimum", 0},
            {"maximum", max_timeout_s},
            {"description", "Wall-clock limit for this call; default: the profile's"}}},
          {"profile", {{"type", "string"}, {"enum", profiles}, {"description", "Profile to run under: " + names}}}}},
        {"required", {"code"}},
        {"additionalProperties", false}}},
      {"outputSchema", ExecuteOutputSchema()},
      {"annotations",
       {{"title", "Execute Python"},
        {"readOnlyHint", false},
        {"destructiveHint", false},
        {"idempotentHint", false},
        {"openWorldHint", false}}}};
  json list = {
      {"name", "list_profiles"},
      {"title", "List sandbox profiles"},
      {"description",
       "List the profiles execute_python can run under: for each, its description, the modules code may "
       "import, and its limits (memory, CPU, timeout)."},
      {"inputSchema", {{"type", "object"}, {"additionalProperties", false}}},
      {"annotations",
       {{"title", "List sandbox profiles"},
        {"readOnlyHint", true},
        {"destructiveHint", false},
        {"idempotentHint", true},
        {"openWorldHint", false}}}};
  return Dump({{"tools", json::array({execute, list})}});
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
    for (const char* mime : {"image/png", "image/jpeg"}) {
      auto it = data.find(mime);
      if (it != data.end() && it->is_string()) {
        content.push_back({{"type", "image"}, {"data", it->get<std::string>()}, {"mimeType", mime}});
        ++figures;
        break;
      }
    }
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
    list.push_back({{"rule", v.rule}, {"message", v.message}, {"line", v.line}, {"col", v.col}});
  }
  text += "Change the code (list_profiles shows what each profile allows) and call execute_python again.";
  return Dump({{"content", json::array({TextBlock(text)})},
               {"structuredContent", {{"violations", list}}},
               {"isError", true}});
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
