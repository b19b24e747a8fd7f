#include "analyzer/audit_patterns.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <cstdlib>
#include <memory>

namespace airlock::analyzer {
namespace {

struct Pattern {
  const char* regex;
  std::string_view rule;
  std::string_view message;
  Severity severity;
  size_t min_length;  // the peer only looks for secrets in literals of 16+ characters
  bool secret;
};

// Severities: see analyzer.h. Messages follow the peer's guardrails.py wording.
constexpr Pattern kPatterns[] = {
    {R"(AKIA[0-9A-Z]{16})", "secret", "string literal matches AWS access key ID pattern",
     Severity::kError, 16, true},
    {R"((?:api[_-]?key|api[_-]?secret|token|secret[_-]?key|password|passwd|auth[_-]?token))"
     R"(\s*[:=]\s*['"][A-Za-z0-9+/=_-]{16,}['"])",
     "secret", "string literal matches generic secret assignment pattern", Severity::kWarning, 16,
     true},
    {R"(-----BEGIN (?:RSA |EC |DSA |OPENSSH )?PRIVATE KEY-----)", "secret",
     "string literal matches PEM private key pattern", Severity::kError, 16, true},
    {R"(\b[0-9a-fA-F]{32,}\b)", "secret",
     "string literal matches high-entropy hex string pattern (git SHAs and checksums look the "
     "same)",
     Severity::kInfo, 16, true},
    {R"(\.\./)", "path-traversal", "string literal contains path traversal sequence ('../')",
     Severity::kWarning, 0, false},
    {R"((?i)\b(?:javascript:|(?:file|gopher|dict)://|data:[a-z]+/))", "c2-pattern",
     "string literal contains a suspicious URI scheme (javascript:, file://, gopher://, "
     "dict://, data:)",
     Severity::kInfo, 0, false},
    {R"(\w\s*&&\s*\w|`[^`]+`|\$\()", "c2-pattern",
     "string literal contains shell meta-characters (&&, backticks, $()", Severity::kInfo, 0,
     false},
    {R"([A-Za-z0-9+/]{64,}={0,2})", "c2-pattern", "string literal contains a long base64 payload",
     Severity::kInfo, 0, false},
    {R"((?i)(?:ignore\s+(?:previous|above|all)\s+instructions|you\s+are\s+now)"
     R"(|disregard\s+(?:previous|prior|all)|new\s+instructions|forget\s+(?:everything|all|your))"
     R"(|override\s+(?:previous|system)|system\s*:\s*you))",
     "prompt-injection", "string literal contains a prompt-injection phrase", Severity::kInfo, 21,
     false},
};

RE2::Options Latin1Options() {
  RE2::Options o;
  // Every pattern is ASCII; Latin-1 matches bytes, so invalid UTF-8 cannot trip it.
  o.set_encoding(RE2::Options::EncodingLatin1);
  o.set_max_mem(32 << 20);
  return o;
}

struct Compiled {
  std::unique_ptr<RE2::Set> set;
  std::unique_ptr<RE2> sql;
};

const Compiled& Patterns() {
  static const Compiled* compiled = [] {
    auto* c = new Compiled();
    c->set = std::make_unique<RE2::Set>(Latin1Options(), RE2::UNANCHORED);
    for (const Pattern& p : kPatterns) {
      std::string error;
      if (c->set->Add(p.regex, &error) < 0) std::abort();  // a bug in the table above
    }
    if (!c->set->Compile()) std::abort();
    c->sql = std::make_unique<RE2>(
        R"((?i)\b(?:SELECT|INSERT|UPDATE|DELETE|DROP|ALTER|CREATE|EXEC|UNION)\b)",
        Latin1Options());
    if (!c->sql->ok()) std::abort();
    return c;
  }();
  return *compiled;
}

}  // namespace

void ScanLiteral(std::string_view value, std::vector<PatternHit>* hits) {
  if (value.size() < 3) return;
  std::vector<int> matched;
  if (!Patterns().set->Match(re2::StringPiece(value.data(), value.size()), &matched)) return;
  bool secret_reported = false;
  // Report in table order, whatever order the set returns.
  for (size_t k = 0; k < std::size(kPatterns); ++k) {
    bool hit = false;
    for (int m : matched) hit |= (m == static_cast<int>(k));
    if (!hit) continue;
    const Pattern& p = kPatterns[k];
    if (value.size() < p.min_length) continue;
    if (p.secret) {
      if (secret_reported) continue;
      secret_reported = true;
    }
    hits->push_back(PatternHit{p.rule, p.message, p.severity});
  }
}

bool HasSqlKeyword(std::string_view value) {
  return RE2::PartialMatch(re2::StringPiece(value.data(), value.size()), *Patterns().sql);
}

}  // namespace airlock::analyzer
