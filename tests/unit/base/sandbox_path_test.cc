// CheckSandboxPath: the one rule for client-named paths in a sandbox directory.
#include "base/sandbox_path.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace airlock {
namespace {

TEST(SandboxPathTest, AcceptsRelativeNames) {
  for (const std::string& p : std::vector<std::string>{"a", "data/in.csv", "a/b/c/d.txt", ".hidden", "..x", "x..", "a b", "caf\xc3\xa9",
                        "line\nbreak", std::string("bad\xff\xfeutf8"), std::string(255, 'n')}) {
    EXPECT_TRUE(CheckSandboxPath(p).ok()) << EscapeSandboxPath(p);
  }
  std::string deep;
  while (deep.size() + 2 <= kMaxSandboxPathBytes) deep += deep.empty() ? "d" : "/d";
  EXPECT_TRUE(CheckSandboxPath(deep).ok());
}

TEST(SandboxPathTest, RefusesEscapesAndOddForms) {
  for (std::string p : {std::string(), std::string("/etc/passwd"), std::string("/"), std::string(".."),
                        std::string("../x"), std::string("a/../../x"), std::string("a/.."), std::string("."),
                        std::string("./a"), std::string("a/./b"), std::string("a//b"), std::string("a/"),
                        std::string("//a"), std::string("a\0b", 3), std::string(256, 'n'),
                        std::string(kMaxSandboxPathBytes + 1, 'a')}) {
    Status s = CheckSandboxPath(p);
    EXPECT_FALSE(s.ok()) << EscapeSandboxPath(p);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(SandboxPathTest, MessagesNameThePathEscaped) {
  Status s = CheckSandboxPath(std::string("../\n\xff\0x", 7));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("\"../\\x0a\\xff\\x00x\""), std::string::npos) << s.message();
  EXPECT_EQ(EscapeSandboxPath("a\"b\\c\x01"), "a\\x22b\\x5cc\\x01");
  EXPECT_LE(EscapeSandboxPath(std::string(10000, '\xff')).size(), 310u);
}

}  // namespace
}  // namespace airlock
