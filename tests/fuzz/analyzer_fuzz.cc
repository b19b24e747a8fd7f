// libFuzzer target for the Python analyzer: any byte string must be analyzed without a
// crash, a sanitizer report or an unbounded loop, and the result must be consistent.
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
//         -DAIRLOCK_FUZZ=ON && ninja -C build-fuzz analyzer_fuzz
//   build-fuzz/tests/fuzz/analyzer_fuzz -max_len=4096 tests/fuzz/corpus/analyzer
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/tokenizer.h"

namespace {

using airlock::analyzer::Analyzer;
using airlock::analyzer::Finding;
using airlock::analyzer::Policy;
using airlock::analyzer::Result;
using airlock::analyzer::Segment;
using airlock::analyzer::Severity;
using airlock::analyzer::Token;
using airlock::analyzer::TokenizedSource;
using airlock::analyzer::TokenKind;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

const Analyzer& DataScience() {
  static const Analyzer* a = [] {
    Policy p;
    p.allowed_imports = std::vector<std::string>{"collections", "json", "math", "operator",
                                                 "re", "numpy", "pandas", "scipy"};
    p.blocklist = {{"pandas", "read_pickle"}, {"scipy.io", "loadmat"}, {"numpy", "ctypeslib"}};
    return new Analyzer(std::move(p));
  }();
  return *a;
}

const Analyzer& General() {
  static const Analyzer* a = new Analyzer(Policy{});
  return *a;
}

void CheckResult(const Result& r) {
  bool syntax_finding = false, error = false;
  for (const Finding& f : r.findings) {
    Check(f.line >= 1 && f.col >= 1);
    Check(!f.rule.empty() && !f.message.empty());
    if (f.rule == "syntax" || f.rule == "encoding" || f.rule == "nesting") syntax_finding = true;
    if (f.severity == Severity::kError) error = true;
  }
  Check(r.syntax_ok != syntax_finding);
  Check(r.Rejects() == error);
}

void CheckTokens(std::string_view src) {
  TokenizedSource ts = airlock::analyzer::Tokenize(src);
  size_t modules = 0;
  size_t covered = 0;
  for (const Segment& s : ts.segments) {
    Check(s.first <= s.last && s.last <= ts.tokens.size());
    covered += s.last - s.first;
    if (!s.field) {
      ++modules;
      Check(s.last > s.first && ts.tokens[s.last - 1].kind == TokenKind::kEnd);
    }
  }
  Check(modules == 1);
  Check(covered == ts.tokens.size());
  for (const Token& t : ts.tokens) {
    Check(t.begin <= t.end && t.end <= src.size());
    Check(t.line >= 1 && t.col >= 1);
    if (t.kind == TokenKind::kString) Check(t.aux < ts.values.size());
    if (t.normalized) Check(t.aux < ts.names.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view src(reinterpret_cast<const char*>(data), size);
  CheckTokens(src);
  CheckResult(DataScience().Analyze(src));
  CheckResult(General().Analyze(src));
  return 0;
}
