// base/log: one line per message, whatever the message holds.
#include "base/log.h"

#include <gtest/gtest.h>

namespace airlock::log {
namespace {

// Finding 10 of issue 21: a newline in an MCP client's name wrote a forged line
// into the server's log.
TEST(Log, ControlCharactersAreEscaped) {
  EXPECT_EQ(FormatLine(Level::kInfo, "mcp: initialize from 'x'"), "airlock: info: mcp: initialize from 'x'\n");
  std::string line = FormatLine(Level::kInfo, "from 'evil\nairlock: error: forged\r\x1b[2J\x7f'");
  EXPECT_EQ(line, "airlock: info: from 'evil\\nairlock: error: forged\\x0d\\x1b[2J\\x7f'\n");
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  // Bytes above 0x7f (UTF-8) are left as they are.
  EXPECT_EQ(FormatLine(Level::kWarn, "caf\xc3\xa9"), "airlock: warning: caf\xc3\xa9\n");
}

}  // namespace
}  // namespace airlock::log
