#include "api/mcp_routes.h"

#include <sys/random.h>

#include <algorithm>
#include <future>

#include "base/clock.h"
#include "base/log.h"
#include "base/random.h"

namespace airlock::api {
namespace {

// 128 random bits from getrandom, as hex: visible ASCII, as the spec asks.
std::string NewConversationId() { return "mcp-" + base::RandomHex(16); }

McpHttpReply JsonRpcError(int status, int code, const std::string& message, const std::string& id_json = "null") {
  McpHttpReply r;
  r.status = status;
  r.body = model::McpErrorLine(id_json, code, message);
  return r;
}

bool AcceptsJson(std::string_view accept) {
  if (accept.empty()) return true;
  return accept.find("application/json") != std::string_view::npos || accept.find("*/*") != std::string_view::npos ||
         accept.find("application/*") != std::string_view::npos;
}

std::string QueryValue(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    if (part.size() > key.size() && part.substr(0, key.size()) == key && part[key.size()] == '=') {
      return std::string(part.substr(key.size() + 1, 64));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

}  // namespace

struct McpRoutes::Conversation {
  std::unique_ptr<mcp::McpServer> server;
  std::string owner;
  Clock::time_point last_used;
  int in_flight = 0;  // requests being handled (mu_)
};

McpRoutes::McpRoutes(const service::Service& service, session::SessionManager& sessions, McpRouteOptions options,
                     LaunchOn launch, LaunchOn reap)
    : svc_(service), sessions_(sessions), opt_(std::move(options)), launch_(std::move(launch)), reap_(std::move(reap)) {}

McpRoutes::~McpRoutes() {
  std::map<std::string, std::shared_ptr<Conversation>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(conversations_);
  }
  for (auto& [id, c] : all) c->server->CloseSessions();
}

size_t McpRoutes::conversations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return conversations_.size();
}

void McpRoutes::Sweep() {
  std::vector<std::shared_ptr<Conversation>> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto cutoff = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(opt_.conversation_idle_s));
    for (auto it = conversations_.begin(); it != conversations_.end();) {
      if (it->second->in_flight == 0 && it->second->last_used < cutoff) {
        ended.push_back(it->second);
        it = conversations_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : ended) c->server->CloseSessions();
}

// A one-shot run for an HTTP MCP call: launched on the launcher thread (as
// every run of the server is), supervised here, on this worker thread.
StatusOr<model::ExecuteResponse> McpRoutes::RunOneShot(service::Plan& plan) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (runs_ >= opt_.max_concurrent_runs) {
      return Unavailable("the server is running as many MCP calls as it allows (" +
                         std::to_string(opt_.max_concurrent_runs) + "); retry shortly");
    }
    ++runs_;
  }
  // The run keeps its place in the cap until it is torn down (on the reaper,
  // after the answer), as a run of /v1/execute keeps its slot.
  auto release = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    --runs_;
  };
  auto promise = std::make_shared<std::promise<StatusOr<std::unique_ptr<exec::Execution>>>>();
  auto future = promise->get_future();
  launch_([this, promise, &plan] { promise->set_value(svc_.Start(plan)); });
  StatusOr<std::unique_ptr<exec::Execution>> ex = Unavailable("the server is shutting down");
  try {
    ex = future.get();
  } catch (const std::future_error&) {
    // The launch was dropped (the server stopped its launcher): nothing ran.
  }
  if (!ex.ok()) {
    release();
    return ex.status();
  }
  bool handed = false;
  auto r = svc_.Supervise(plan, std::move(*ex), [this, &handed, release](std::unique_ptr<exec::Execution> done) {
    handed = true;
    auto held = std::make_shared<std::unique_ptr<exec::Execution>>(std::move(done));
    reap_([held, release] {
      held->reset();
      release();
    });
  });
  if (!handed) release();
  return r;
}

McpHttpReply McpRoutes::Handle(const McpHttpRequest& rq) {
  if (rq.method == "GET") {
    McpHttpReply r = JsonRpcError(405, -32000, "Method not allowed: this server sends no server-initiated stream; "
                                               "POST JSON-RPC messages to /mcp");
    r.headers.emplace_back("Allow", "POST, DELETE");
    return r;
  }
  if (rq.method != "POST" && rq.method != "DELETE") {
    McpHttpReply r = JsonRpcError(405, -32000, "Method not allowed; use POST (or DELETE to end the session)");
    r.headers.emplace_back("Allow", "POST, DELETE");
    return r;
  }
  Sweep();
  if (!rq.protocol_version.empty()) {
    const auto* b = std::begin(mcp::kProtocolVersions);
    const auto* e = std::end(mcp::kProtocolVersions);
    if (std::find(b, e, rq.protocol_version) == e) {
      return JsonRpcError(400, -32000, "Bad Request: unsupported MCP-Protocol-Version '" +
                                           rq.protocol_version.substr(0, 32) + "' (supported: 2025-11-25, "
                                           "2025-06-18, 2025-03-26)");
    }
  }
  auto find = [&](McpHttpReply* refusal) -> std::shared_ptr<Conversation> {
    if (rq.session_id.empty()) {
      *refusal = JsonRpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required (initialize first)");
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = conversations_.find(rq.session_id);
    // Another token's MCP session is answered exactly as one that never existed.
    if (it == conversations_.end() || it->second->owner != rq.owner) {
      *refusal = JsonRpcError(404, -32001, "Session not found (it ended or expired): initialize again");
      return nullptr;
    }
    it->second->last_used = Clock::now();
    ++it->second->in_flight;
    return it->second;
  };

  if (rq.method == "DELETE") {
    McpHttpReply refusal;
    std::shared_ptr<Conversation> c = find(&refusal);
    if (!c) return refusal;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --c->in_flight;
      conversations_.erase(rq.session_id);
    }
    c->server->CloseSessions();
    McpHttpReply r;
    r.status = 200;
    r.body = "{}";
    return r;
  }

  if (!AcceptsJson(rq.accept)) {
    return JsonRpcError(406, -32000, "Not Acceptable: this server answers application/json; list it in Accept");
  }
  model::McpCaps caps;
  caps.max_bytes = opt_.max_message_bytes;
  caps.max_depth = opt_.max_depth;
  caps.max_code_bytes = opt_.max_code_bytes;
  model::McpMessage m;
  model::ParseMcpMessage(rq.body, caps, &m);
  if (m.kind == model::McpMessage::kInvalid) {
    // What the TS SDK's server answers too: 400 with the JSON-RPC error.
    return JsonRpcError(400, m.error_code, m.error_message, m.id_json);
  }

  std::shared_ptr<Conversation> conv;
  std::string new_id;
  if (m.kind == model::McpMessage::kRequest && m.method == "initialize") {
    if (!rq.session_id.empty()) {
      return JsonRpcError(400, model::kJsonRpcInvalidRequest,
                          "Bad Request: initialize opens a new MCP session; send it without Mcp-Session-Id",
                          m.id_json);
    }
    conv = std::make_shared<Conversation>();
    new_id = NewConversationId();
    mcp::McpOptions o;
    o.version = opt_.version;
    o.caps = caps;
    o.owner = rq.owner;
    o.max_file_bytes = opt_.max_file_bytes;
    o.hold = opt_.hold;
    if (opt_.audit) {
      o.audit = [audit = opt_.audit, address = rq.client_address](model::AuditRecord r) {
        r.client_address = address;
        r.http_status = 200;
        audit(std::move(r));
      };
    }
    // Request ids reach logs and the audit trail: never derived from the MCP session id.
    o.request_id_prefix = "mcp_" + NewConversationId().substr(4, 8) + "_";
    conv->server = std::make_unique<mcp::McpServer>(
        svc_, &sessions_, std::move(o), [this](service::Plan& plan) { return RunOneShot(plan); });
    conv->owner = rq.owner;
    conv->last_used = Clock::now();
    conv->in_flight = 1;
    std::lock_guard<std::mutex> lock(mu_);
    if (conversations_.size() >= opt_.max_conversations) {
      McpHttpReply r = JsonRpcError(503, -32000, "too many open MCP sessions (" +
                                                     std::to_string(opt_.max_conversations) +
                                                     "); end one with DELETE /mcp or retry later", m.id_json);
      r.headers.emplace_back("Retry-After", "5");
      return r;
    }
    conversations_[new_id] = conv;
  } else {
    McpHttpReply refusal;
    conv = find(&refusal);
    if (!conv) return refusal;
  }
  std::optional<std::string> answer = conv->server->Handle(rq.body);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --conv->in_flight;
    conv->last_used = Clock::now();
  }
  McpHttpReply r;
  if (!new_id.empty()) r.headers.emplace_back("Mcp-Session-Id", new_id);
  if (!answer) {
    r.status = 202;
    r.content_type = "text/plain";
    return r;
  }
  r.body = std::move(*answer);
  return r;
}

McpHttpReply McpRoutes::Tools(std::string_view query) const {
  std::string format = QueryValue(query, "format");
  if (format.empty()) format = "openai";
  model::McpToolsInfo info;
  info.default_profile = svc_.profiles().DefaultFor(profile::Door::kMcp).name;
  info.profiles = svc_.profiles().Names();
  for (const profile::Profile& p : svc_.profiles().profiles()) {
    info.max_timeout_s = std::max(info.max_timeout_s, p.resources.timeout_max_s);
  }
  info.max_file_bytes = opt_.max_file_bytes;
  McpHttpReply r;
  r.body = model::ToolDefinitions(format, info);
  if (r.body.empty()) {
    r.status = 400;
    r.body = model::ErrorToJson({model::ErrorKind::kBadRequest,
                                 "format must be openai, openai-responses, anthropic or mcp", "format"},
                                "");
  }
  return r;
}

}  // namespace airlock::api
