// One MCP conversation (a stdio connection, or later an Mcp-Session-Id over
// HTTP): protocol version negotiation, the tools, and the JSON-RPC error
// answers. It goes through service::Service like every other surface and never
// reaches into exec/ or isolation/.
//
//   mcp::McpServer server(service, {.version = "0.1.0"});
//   std::optional<std::string> reply = server.Handle(line);   // one message in
//   if (reply) write(*reply + "\n");                           // at most one out
//
// Tools: execute_python {code, timeout_seconds?, profile?} (one fresh sandboxed
// interpreter per call; session_id comes with sessions), list_profiles.
// Tool state will be passed as explicit arguments (session_id), which is what
// the stateless 2026-07-28 revision needs too (docs/agents.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "model/mcp.h"
#include "service/service.h"

namespace airlock::mcp {

// The revisions this server speaks, newest first; an initialize asking for
// another gets the newest (the client then decides whether to go on).
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

struct McpOptions {
  std::string version;         // airlock's version, in serverInfo
  model::McpCaps caps;
};

class McpServer {
 public:
  McpServer(const service::Service& service, McpOptions options);

  // Handles one message; returns the answer (a JSON line without '\n'), or
  // nullopt for notifications and responses. Blocking: a tools/call runs the
  // code to its end on the calling thread, which must be the one thread that
  // launches runs (service::Service::Start).
  std::optional<std::string> Handle(std::string_view message);

  const std::string& protocol_version() const { return protocol_version_; }

 private:
  std::string CallTool(const model::McpToolCall& call, const std::string& id);

  const service::Service& svc_;
  McpOptions options_;
  std::string protocol_version_;  // "" until initialize
  uint64_t calls_ = 0;
};

}  // namespace airlock::mcp
