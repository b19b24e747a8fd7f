#include "mcp/mcp_server.h"

#include <algorithm>

#include "base/log.h"

namespace airlock::mcp {

McpServer::McpServer(const service::Service& service, McpOptions options)
    : svc_(service), options_(std::move(options)) {}

std::optional<std::string> McpServer::Handle(std::string_view message) {
  model::McpMessage m;
  model::ParseMcpMessage(message, options_.caps, &m);
  switch (m.kind) {
    case model::McpMessage::kInvalid:
      return model::McpErrorLine(m.id_json, m.error_code, m.error_message);
    case model::McpMessage::kResponse:
    case model::McpMessage::kNotification:
      // notifications/initialized, notifications/cancelled (calls run one at
      // a time, so there is never one in flight to cancel), anything else.
      return std::nullopt;
    case model::McpMessage::kRequest:
      break;
  }
  if (m.method == "initialize") {
    const auto* begin = std::begin(kProtocolVersions);
    const auto* end = std::end(kProtocolVersions);
    bool known = std::find(begin, end, m.protocol_version) != end;
    protocol_version_ = known ? m.protocol_version : kProtocolVersions[0];
    log::Info("mcp: initialize from '" + m.client_name + "', protocol " + protocol_version_ +
              (known ? "" : " (the client asked for '" + m.protocol_version + "')"));
    model::McpServerInfo info;
    info.protocol_version = protocol_version_;
    info.version = options_.version;
    info.instructions =
        "airlock runs Python in a kernel-isolated sandbox. Use execute_python to run code (each call is a fresh "
        "interpreter with no network and an empty /tmp); use list_profiles to see which modules each profile "
        "allows.";
    return model::McpResultLine(m.id_json, model::McpInitializeResult(info));
  }
  if (m.method == "ping") return model::McpResultLine(m.id_json, "{}");
  if (m.method == "tools/list") {
    const profile::Profile& def = svc_.profiles().Default();
    double max_timeout = 0;
    for (const profile::Profile& p : svc_.profiles().profiles()) {
      max_timeout = std::max(max_timeout, p.resources.timeout_max_s);
    }
    return model::McpResultLine(
        m.id_json, model::McpToolsListResult(def.name, svc_.profiles().Names(), max_timeout));
  }
  if (m.method == "tools/call") {
    if (m.call.name != "execute_python" && m.call.name != "list_profiles") {
      return model::McpErrorLine(m.id_json, model::kJsonRpcInvalidParams,
                                 "Unknown tool: " + m.call.name + " (tools/list names them)");
    }
    return model::McpResultLine(m.id_json, CallTool(m.call, m.id_json));
  }
  if (m.method == "resources/list") return model::McpResultLine(m.id_json, R"({"resources":[]})");
  if (m.method == "prompts/list") return model::McpResultLine(m.id_json, R"({"prompts":[]})");
  return model::McpErrorLine(m.id_json, model::kJsonRpcMethodNotFound, "Method not found: " + m.method);
}

std::string McpServer::CallTool(const model::McpToolCall& call, const std::string& id) {
  if (!call.argument_error.empty()) return model::McpToolErrorResult(call.name + ": " + call.argument_error);
  if (call.name == "list_profiles") {
    std::vector<model::ProfileView> views;
    for (const profile::Profile& p : svc_.profiles().profiles()) views.push_back(svc_.View(p));
    return model::McpProfilesResult(views, svc_.profiles().default_name());
  }
  const std::string request_id = "mcp_" + std::to_string(++calls_);
  service::Prepared p = svc_.Prepare(call.execute, request_id);
  if (p.verdict == service::Verdict::kRejected) return model::McpRejectedResult(p.violations);
  if (p.verdict == service::Verdict::kInvalid) return model::McpToolErrorResult(p.error.message);
  // Nothing here can hold a request for a person: refuse rather than run it.
  if (p.verdict != service::Verdict::kRun) return model::McpToolErrorResult(p.error.message);
  auto r = svc_.RunBlocking(call.execute, request_id);
  if (!r.ok()) {
    log::Error("mcp: call " + id + ": " + r.status().ToString());
    return model::McpToolErrorResult("the sandbox could not run the code: " + r.status().ToString());
  }
  if (r->run.kill_reason && *r->run.kill_reason == "lost") {
    return model::McpToolErrorResult(r->run.kill_detail);
  }
  return model::McpToolCallResult(*r);
}

}  // namespace airlock::mcp
