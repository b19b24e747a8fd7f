// Operator-facing logging to stderr, one line each: "airlock: <level>: <message>".
// Logs are for operators; the per-run audit trail is a separate stream.
//
// A message is often partly a client's (an MCP clientInfo.name, a path, a
// header): every control character in it (a newline above all) is written
// escaped, "\n" or "\xNN", so that nothing a client sends can split a line or
// forge one.
#pragma once

#include <string>
#include <string_view>

namespace airlock::log {

enum class Level { kDebug = 0, kInfo, kWarn, kError };

void SetLevel(Level level);
void Write(Level level, std::string_view message);
// The line Write() writes (with its newline), for tests.
std::string FormatLine(Level level, std::string_view message);
inline void Debug(std::string_view m) { Write(Level::kDebug, m); }
inline void Info(std::string_view m) { Write(Level::kInfo, m); }
inline void Warn(std::string_view m) { Write(Level::kWarn, m); }
inline void Error(std::string_view m) { Write(Level::kError, m); }

}  // namespace airlock::log
