// RE2 audit patterns on the decoded value of string literals: secrets, path traversal,
// suspicious URI schemes, shell meta-characters, base64 blobs, prompt-injection phrases,
// and the SQL keyword test. RE2 runs in linear time on untrusted text; the patterns are
// compiled once per process and are safe to use from many threads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/analyzer.h"

namespace airlock::analyzer {

struct PatternHit {
  std::string_view rule;  // "secret", "path-traversal", "c2-pattern", "prompt-injection"
  std::string_view message;
  Severity severity;
};

// Appends the patterns `value` matches (at most one "secret", as the peer reports).
void ScanLiteral(std::string_view value, std::vector<PatternHit>* hits);

// SELECT INSERT UPDATE DELETE DROP ALTER CREATE EXEC UNION as a word, any case.
bool HasSqlKeyword(std::string_view value);

}  // namespace airlock::analyzer
