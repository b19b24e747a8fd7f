// The rule for a path a client names inside a sandbox directory (a session's or
// a run's working directory), shared by the request parser (model/) and the
// host-side file access (isolation/sandbox_files.h), so both refuse the same
// names. Pure functions: no file system access.
//
//   RETURN_IF_ERROR(CheckSandboxPath(req_path));           // before touching anything
//   log("refused " + EscapeSandboxPath(name));              // safe to print or put in JSON
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace airlock {

// Longest path (bytes) and component (bytes) a client may name.
inline constexpr size_t kMaxSandboxPathBytes = 4095;  // PATH_MAX less its NUL
inline constexpr size_t kMaxSandboxNameBytes = 255;   // NAME_MAX

// OK when `path` is relative, '/'-separated, not empty, has no empty, "." or
// ".." component (so no leading, trailing or doubled '/'), no NUL byte, is at
// most kMaxSandboxPathBytes long and each component at most kMaxSandboxNameBytes.
// Newlines and invalid UTF-8 are allowed (the sandbox may name its files so).
// Otherwise InvalidArgument naming the escaped path and what to change.
Status CheckSandboxPath(std::string_view path);

// `path` with every byte that is not printable ASCII (and '\\' and '"') written
// as \xNN, cut to about 300 bytes: safe to put in a message, a log line or JSON.
std::string EscapeSandboxPath(std::string_view path);

}  // namespace airlock
