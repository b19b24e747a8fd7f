// File access to a session's working directory for callers that do not reach
// into isolation/ themselves (the MCP tools upload_file / download_file): the
// same checks and primitives as the HTTP file routes (api/session_routes.cc,
// isolation/sandbox_files.h): the path rule, the owner check, resolution
// beneath the session's own /tmp with no symlink followed.
//
//   model::ApiError error;
//   if (!WriteSessionFile(mgr, id, owner, "data/in.csv", bytes, cap, &error)) ... error.message
//   std::optional<std::string> data = ReadSessionFile(mgr, id, owner, "out.png", cap, &error);
//
// Blocking (file I/O on the session's tmpfs): worker threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/execute.h"
#include "session/session_manager.h"

namespace airlock::session {

bool WriteSessionFile(SessionManager& manager, const std::string& id, const std::string& owner,
                      std::string_view path, std::string_view data, int64_t max_bytes, model::ApiError* error);

std::optional<std::string> ReadSessionFile(SessionManager& manager, const std::string& id, const std::string& owner,
                                           std::string_view path, int64_t max_bytes, model::ApiError* error);

}  // namespace airlock::session
