// Operator-facing logging to stderr, one line each: "airlock: <level>: <message>".
// Logs are for operators; the per-run audit trail is a separate stream.
#pragma once

#include <string_view>

namespace airlock::log {

enum class Level { kDebug = 0, kInfo, kWarn, kError };

void SetLevel(Level level);
void Write(Level level, std::string_view message);
inline void Debug(std::string_view m) { Write(Level::kDebug, m); }
inline void Info(std::string_view m) { Write(Level::kInfo, m); }
inline void Warn(std::string_view m) { Write(Level::kWarn, m); }
inline void Error(std::string_view m) { Write(Level::kError, m); }

}  // namespace airlock::log
