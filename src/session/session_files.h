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

#include "base/status.h"
#include "base/unique_fd.h"
#include "model/execute.h"
#include "session/session_manager.h"

namespace airlock::session {

// A file operation's failure (isolation/sandbox_files.h's status codes) as an
// API error: not found 404, a bad path 400, a path that leaves the working
// directory or is not a regular file 409, too large 413, gone 503. `path`,
// when given, leads the message.
model::ApiError SessionFileError(const Status& s, std::string_view path = {});

// The session's working directory (its /tmp, opened through its init's
// root: isolation::OpenRunDir), after the owner check: nullopt with *error
// (404 not found or another's, 410 ended or gone).
std::optional<UniqueFd> OpenSessionRoot(SessionManager& manager, const std::string& id, const std::string& owner,
                                        model::ApiError* error);

// The session's directory `dir` as the sandbox sees it: "/home/user" (its
// working directory: OpenSessionRoot) or "/tmp", opened through its init's
// root with no symlink followed (isolation::OpenRunDir). Errors as
// OpenSessionRoot's.
std::optional<UniqueFd> OpenSessionDir(SessionManager& manager, const std::string& id, const std::string& owner,
                                       std::string_view dir, model::ApiError* error);

bool WriteSessionFile(SessionManager& manager, const std::string& id, const std::string& owner,
                      std::string_view path, std::string_view data, int64_t max_bytes, model::ApiError* error);

std::optional<std::string> ReadSessionFile(SessionManager& manager, const std::string& id, const std::string& owner,
                                           std::string_view path, int64_t max_bytes, model::ApiError* error);

}  // namespace airlock::session
