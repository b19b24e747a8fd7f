// The "invisible-character" rule and the JSON escapes of invisible characters
// (issue 23.2): what a person reading the code or an approval sees.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/unicode.h"

namespace airlock::analyzer {
namespace {

std::vector<std::string> Invisible(const Result& r) {
  std::vector<std::string> out;
  for (const Finding& f : r.findings) {
    if (f.rule == "invisible-character") {
      out.push_back(std::to_string(f.line) + ":" + std::to_string(f.col) + " " + std::string(SeverityName(f.severity)) +
                    " " + f.message.substr(0, f.message.find(')') + 1));
    }
  }
  return out;
}

// Trojan Source's "commenting out": the comment's RLO/LRI/PDI make the line show
// `if access_level != "user": # Check if admin` while the condition Python runs
// compares against "user\u202e \u2066# Check if admin\u2069 \u2066".
TEST(InvisibleCharactersTest, BidiControlsAreAWarningOnTheirLine) {
  const std::string code =
      "access_level = 'user'\n"
      "if access_level != \"user\u202e \u2066# Check if admin\u2069 \u2066\":\n"
      "    print('You are an admin.')\n";
  Result r = Analyze(code, Policy{});
  EXPECT_EQ(Invisible(r), (std::vector<std::string>{
                              "2:25 warning invisible characters (U+202E RIGHT-TO-LEFT OVERRIDE, U+2066 "
                              "LEFT-TO-RIGHT ISOLATE, U+2069 POP DIRECTIONAL ISOLATE)"}));
  EXPECT_FALSE(r.Rejects());  // reported, not enforced: a profile's approval rules may hold on it
}

TEST(InvisibleCharactersTest, OtherFormatCharactersAndHangulFillersAreInfo) {
  Result r = Analyze("x = 'a\u200bb'  # zero width space\n\u3164 = 1\ny = '\U000E0041'\n", Policy{});
  std::vector<std::string> got = Invisible(r);
  ASSERT_EQ(got.size(), 3u) << ::testing::PrintToString(got);
  EXPECT_EQ(got[0], "1:7 info an invisible character (U+200B ZERO WIDTH SPACE)");
  EXPECT_EQ(got[1], "2:1 info an invisible character (U+3164 HANGUL FILLER)");
  EXPECT_EQ(got[2], "3:6 info an invisible character (U+E0041 TAG LATIN CAPITAL LETTER A)");
}

TEST(InvisibleCharactersTest, AnyLanguageAndEveryLineEnding) {
  // bash: `. ./setup.sh` with a right-to-left override hiding what follows.
  std::vector<Finding> f = InvisibleCharacterFindings("echo ok\r\n. ./setup.sh \u202e#\rx\u200d\n");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].line, 2);
  EXPECT_EQ(f[0].col, 14);
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  EXPECT_EQ(f[1].line, 3);
  EXPECT_EQ(f[1].col, 2);
  EXPECT_EQ(f[1].severity, Severity::kInfo);
  EXPECT_TRUE(InvisibleCharacterFindings("plain ascii\nand \u00e9t\u00e9 \u4e2d\u6587\n").empty());
}

TEST(InvisibleCharactersTest, ManyOnOneLineAreOneFindingAndTheCapHolds) {
  std::string line;
  for (int i = 0; i < 1000; ++i) line += "\u200b\u200c\u200d\u2060\ufeff";
  std::vector<Finding> one = InvisibleCharacterFindings(line);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_NE(one[0].message.find(", ...)"), std::string::npos) << one[0].message;
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += "\u202e\n";
  std::vector<Finding> capped = InvisibleCharacterFindings(lines, 50);
  ASSERT_EQ(capped.size(), 51u);
  EXPECT_EQ(capped.back().rule, "too-many-findings");
}

TEST(InvisibleCharactersTest, JsonEscapesOnlyTheInvisibleOnes) {
  EXPECT_EQ(EscapeInvisibleInJson("{\"code\":\"a\u202eb \u00e9 \u4e2d\u200b\"}"),
            "{\"code\":\"a\\u202eb \u00e9 \u4e2d\\u200b\"}");
  // Above U+FFFF: a surrogate pair, as JSON writes it.
  EXPECT_EQ(EscapeInvisibleInJson("\"\U000E0041\""), "\"\\udb40\\udc41\"");
  // Invalid UTF-8 (a JSON writer replaces it; here it is passed through as it was).
  EXPECT_EQ(EscapeInvisibleInJson(std::string("\"\xe2\x80\"")), std::string("\"\xe2\x80\""));
  EXPECT_EQ(InvisibleCharacterName(U'a'), nullptr);
  EXPECT_STREQ(InvisibleCharacterName(0x2066), "LEFT-TO-RIGHT ISOLATE");
  EXPECT_TRUE(IsBidiControl(0x202E));
  EXPECT_FALSE(IsBidiControl(0x200B));
}

}  // namespace
}  // namespace airlock::analyzer
