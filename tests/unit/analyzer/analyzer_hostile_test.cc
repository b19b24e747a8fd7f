// Hostile input: every case must finish (linear time, bounded memory, no recursion that
// the input controls) and still give a sensible verdict. No timing asserts: the fuzz
// target and the benchmark watch speed; these tests watch behaviour (and run under ASan).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "analyzer/analyzer.h"
#include "analyzer/tokenizer.h"

namespace airlock::analyzer {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool HasRule(const Result& r, std::string_view rule) {
  for (const Finding& f : r.findings) {
    if (f.rule == rule) return true;
  }
  return false;
}

std::string Repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

TEST(AnalyzerHostileTest, OneMegabyteOfOpenParentheses) {
  Result r = Analyze(std::string(kMiB, '('), Policy{});
  EXPECT_FALSE(r.syntax_ok);
  ASSERT_TRUE(HasRule(r, "nesting"));
  for (const Finding& f : r.findings) {
    if (f.rule == "nesting") {
      EXPECT_NE(f.message.find("nesting too deep"), std::string::npos);
      EXPECT_EQ(f.line, 1);
      EXPECT_EQ(f.col, 201);
    }
  }
}

TEST(AnalyzerHostileTest, OneMegabyteOfClosingBrackets) {
  Result r = Analyze(std::string(kMiB, ']'), Policy{});
  EXPECT_FALSE(r.syntax_ok);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].message, "SyntaxError: unmatched ']' (line 1)");
}

TEST(AnalyzerHostileTest, MixedDeepBrackets) {
  Result r = Analyze("x = " + Repeat("[{(", 100000) + Repeat(")}]", 100000), Policy{});
  EXPECT_TRUE(HasRule(r, "nesting"));
}

TEST(AnalyzerHostileTest, HundredThousandNestedFStrings) {
  // Python 3.11 ends a string at its own quote, so this is a flat run of short strings.
  std::string same = Repeat("f'{", 100000) + "x" + Repeat("}'", 100000);
  Result a = Analyze(same, Policy{});
  EXPECT_FALSE(a.syntax_ok);
  // Alternating quote kinds nest a few levels, then break the same way.
  std::string alt;
  for (int i = 0; i < 100000; ++i) alt += (i % 4 == 0) ? "f'{" : (i % 4 == 1) ? "f\"{" : (i % 4 == 2) ? "f'''{" : "f\"\"\"{";
  alt += "x";
  Result b = Analyze(alt, Policy{});
  EXPECT_FALSE(b.syntax_ok);
  // The deepest nesting Python 3.11 accepts is fine.
  Result c = Analyze("f\"{f'{f\\\"{x}\\\"}'}\"", Policy{});  // contains a backslash: an error
  EXPECT_FALSE(c.syntax_ok);
  Result d = Analyze("s = f'''{f\"{f'{x}'}\"}'''\n", Policy{});
  EXPECT_TRUE(d.syntax_ok);
}

TEST(AnalyzerHostileTest, VeryLongLines) {
  std::string sum = "x = " + Repeat("1 + ", 200000) + "1\n";
  Result r = Analyze(sum, Policy{});
  EXPECT_TRUE(r.syntax_ok);
  EXPECT_TRUE(r.findings.empty());
  std::string str = "s = '" + std::string(kMiB - 16, 'a') + "'\n";
  Result s = Analyze(str, Policy{});
  EXPECT_TRUE(s.syntax_ok);
  std::string chain = "x = a" + Repeat(".b", 200000) + "\n";
  EXPECT_TRUE(Analyze(chain, Policy{}).syntax_ok);
  std::string dunder_chain = "x = a" + Repeat(".__name__", 100000) + " = 1\n";
  Result dc = Analyze(dunder_chain, Policy{});
  EXPECT_TRUE(dc.Rejects());  // the last one is written
  std::string concat = "x = " + Repeat("'_' + ", 100000) + "'_'\n";
  EXPECT_TRUE(Analyze(concat, Policy{}).syntax_ok);
  std::string chrs = "x = " + Repeat("chr(95) * 2 + ", 50000) + "''\n";
  EXPECT_TRUE(Analyze(chrs, Policy{}).syntax_ok);
}

TEST(AnalyzerHostileTest, DeepIndentation) {
  std::string code;
  for (int i = 0; i < 150; ++i) code += std::string(static_cast<size_t>(i), ' ') + "if x:\n";
  code += std::string(150, ' ') + "pass\n";
  Result r = Analyze(code, Policy{});
  EXPECT_FALSE(r.syntax_ok);
  EXPECT_TRUE(HasRule(r, "nesting"));
}

TEST(AnalyzerHostileTest, NulBytes) {
  std::string code("print(1)\0\0\0eval(x)\0'\0'", 21);
  Result r = Analyze(code, Policy{});
  EXPECT_FALSE(r.syntax_ok);
  EXPECT_EQ(r.findings[0].message,
            "SyntaxError: source code cannot contain null bytes (line 1)");
  EXPECT_TRUE(HasRule(r, "blocked-call"));
  Result all = Analyze(std::string(kMiB, '\0'), Policy{});
  EXPECT_FALSE(all.syntax_ok);
}

TEST(AnalyzerHostileTest, InvalidUtf8) {
  for (std::string bad : {std::string("x = '\xff'"), std::string("\xc3"), std::string("\xe2\x82"),
                          std::string("a\xed\xa0\x80 = 1"), std::string(1000, '\x80'),
                          std::string("\xf8\x88\x80\x80\x80")}) {
    Result r = Analyze(bad, Policy{});
    EXPECT_FALSE(r.syntax_ok);
    ASSERT_FALSE(r.findings.empty());
    EXPECT_EQ(r.findings[0].rule, "encoding");
  }
}

TEST(AnalyzerHostileTest, ManyViolationsAreCapped) {
  Result r = Analyze(Repeat("eval(x); ", 100000), Policy{});
  EXPECT_EQ(r.findings.size(), Policy{}.max_findings + 1);
  EXPECT_EQ(r.findings.back().rule, "too-many-findings");
}

TEST(AnalyzerHostileTest, UnclosedDefinitions) {
  Result r = Analyze(Repeat("def f(", 100000), Policy{});
  EXPECT_FALSE(r.syntax_ok);
  Result l = Analyze(Repeat("lambda ", 100000), Policy{});  // a parser error we do not claim
  EXPECT_FALSE(l.Rejects());
  Result g = Analyze(Repeat("attrgetter(", 100000), Policy{});
  EXPECT_FALSE(g.syntax_ok);
}

TEST(AnalyzerHostileTest, ContinuationsAndCarriageReturns) {
  EXPECT_TRUE(Analyze(Repeat("\\\n", 100000) + "x = 1\n", Policy{}).syntax_ok);
  EXPECT_TRUE(Analyze(Repeat("x = 1\r", 100000), Policy{}).syntax_ok);
  EXPECT_TRUE(Analyze(Repeat("\n", kMiB - 1), Policy{}).syntax_ok);
}

TEST(AnalyzerHostileTest, LongImportsAndNames) {
  EXPECT_TRUE(Analyze("import a" + Repeat(".a", 100000) + "\n", Policy{}).syntax_ok);
  EXPECT_TRUE(Analyze(std::string(kMiB - 10, 'n') + " = 1\n", Policy{}).syntax_ok);
  // 100k distinct import aliases.
  std::string many;
  for (int i = 0; i < 20000; ++i) many += "import m" + std::to_string(i) + " as a" + std::to_string(i) + "\n";
  EXPECT_TRUE(Analyze(many, Policy{}).syntax_ok);
}

TEST(AnalyzerHostileTest, OverSizeIsNotAnalyzed) {
  Result r = Analyze(std::string(kMiB + 1, 'x'), Policy{});
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].rule, "size");
}

TEST(AnalyzerHostileTest, RandomBytesDoNotCrash) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  // Python's alphabet, weighted towards the characters that change the tokenizer's state.
  const std::string alphabet = "()[]{}'\"\\#\n\r\t :.,=+*fbrux0_19eEjJ!@$\x00\x80\xc3\xa9\xff";
  for (int round = 0; round < 200; ++round) {
    std::string code;
    size_t len = next() % 4096;
    for (size_t i = 0; i < len; ++i) {
      code += (next() % 4 == 0) ? static_cast<char>(next() % 256)
                                : alphabet[next() % alphabet.size()];
    }
    Result r = Analyze(code, Policy{});
    for (const Finding& f : r.findings) {
      EXPECT_GE(f.line, 1);
      EXPECT_GE(f.col, 1);
      EXPECT_FALSE(f.rule.empty());
    }
  }
}

}  // namespace
}  // namespace airlock::analyzer
