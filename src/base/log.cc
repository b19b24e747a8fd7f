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

std::string FormatLine(Level level, std::string_view message) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string line = "airlock: ";
  line += kNames[static_cast<int>(level)];
  line += ": ";
  line.reserve(line.size() + message.size() + 1);
  for (char c : message) {
    auto u = static_cast<unsigned char>(c);
    if (u == '\n') {
      line += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      line += "\\x";
      line += kHex[u >> 4];
      line += kHex[u & 15];
    } else {
      line += c;
    }
  }
  line += '\n';
  return line;
}

void Write(Level level, std::string_view message) {
  if (level < g_level.load()) return;
  std::string line = FormatLine(level, message);
  // One write(2) per line so concurrent threads do not interleave within a line.
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace airlock::log
