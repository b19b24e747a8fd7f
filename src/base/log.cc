#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <string>

namespace airlock::log {
namespace {
std::atomic<Level> g_level{Level::kInfo};
constexpr std::string_view kNames[] = {"debug", "info", "warning", "error"};
}  // namespace

void SetLevel(Level level) { g_level = level; }

void Write(Level level, std::string_view message) {
  if (level < g_level.load()) return;
  std::string line = "airlock: ";
  line += kNames[static_cast<int>(level)];
  line += ": ";
  line += message;
  line += '\n';
  // One write(2) per line so concurrent threads do not interleave within a line.
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace airlock::log
