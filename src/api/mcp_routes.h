// MCP over Streamable HTTP at /mcp (protocol 2025-11-25 back to 2025-03-26,
// JSON answers, no SSE): its rows of the API's route table, and the MCP
// sessions (Mcp-Session-Id, issued at initialize), each one mcp::McpServer
// bound to the token that opened it. Everything here runs on the event loop:
// a message is answered there (mcp::McpServer::Begin never blocks) and its
// tool calls are driven from there like every other door's work: a one-shot
// execute_python takes a run slot of the API's (api/run_slots.h), a session
// call is fed from the loop (api/call_driver.h), create_session is retried
// from the loop while no warm run is ready, and only the file tools and
// close_session block a worker thread, for the call alone.
//
//   POST   /mcp   one JSON-RPC message: 200 application/json (a request), 202 (a
//                 notification or response); initialize mints Mcp-Session-Id;
//                 every other message needs it: missing 400, unknown or another
//                 token's 404 (phase 5, before the body is read)
//   DELETE /mcp   ends the MCP session and the airlock sessions it created: 200
//   GET    /mcp   405 (no server-initiated stream)
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/route.h"
#include "base/clock.h"
#include "mcp/mcp_server.h"
#include "model/execute.h"

namespace airlock::api {

class ServerState;

class McpSessions {
 public:
  struct Options {
    std::string version;                // airlock's, in serverInfo
    size_t max_sessions = 256;          // MCP sessions at once (--max-mcp-sessions)
    size_t max_per_owner = 64;          // of them, one token's (--max-mcp-sessions-per-owner)
    bool per_owner = false;             // tokens configured
    double idle_s = 3600;               // an MCP session unused this long is ended
  };

  McpSessions(ServerState& s, Options options) : s_(s), opt_(std::move(options)) {}
  // Ends the MCP sessions and the airlock sessions they made (blocking: the
  // server's shutdown).
  ~McpSessions();

  static std::vector<Route> Table();
  // Phase 5's owner check of OwnerRule::kMcpSession: another token's MCP
  // session is answered exactly as one that never existed.
  std::optional<model::ApiError> Owner(const std::string& id, const std::string& owner) const;
  size_t size() const { return sessions_.size(); }

 private:
  friend struct McpHandlers;
  struct Conversation {
    std::shared_ptr<mcp::McpServer> server;
    std::string owner;
    Clock::time_point last_used;
    int in_flight = 0;  // tool calls under way
  };
  // Ends the MCP sessions unused for idle_s (their airlock sessions on a worker).
  void Sweep();
  // initialize: the quotas (server-wide, then the token's); a server for a
  // new MCP session, and keeping it under its id.
  std::optional<model::ApiError> Admit(const std::string& owner) const;
  std::shared_ptr<mcp::McpServer> New(const std::string& owner, const model::McpCaps& caps);
  void Keep(const std::string& id, const std::string& owner, std::shared_ptr<mcp::McpServer> server);

  ServerState& s_;
  Options opt_;
  std::map<std::string, Conversation> sessions_;
};

}  // namespace airlock::api
