// MCP over stdio: one JSON-RPC message per line on stdin, one answer per line
// on stdout, nothing else ever on stdout (logs go to stderr). Returns at end of
// input (the client closed stdin) or when the cancel fd becomes readable.
#pragma once

#include "base/status.h"
#include "mcp/mcp_server.h"

namespace airlock::mcp {

// in_fd/out_fd: normally 0 and 1. A line longer than the server's message cap
// is answered with an error and skipped, without being held in memory.
Status ServeStdio(McpServer& server, int in_fd, int out_fd, int cancel_fd = -1);

}  // namespace airlock::mcp
