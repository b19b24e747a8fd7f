#include "analyzer/analyzer.h"

#include <utility>

#include "analyzer/rules.h"
#include "analyzer/tokenizer.h"

namespace airlock::analyzer {

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "error";
}

bool Result::Rejects() const {
  for (const Finding& f : findings) {
    if (f.severity == Severity::kError) return true;
  }
  return false;
}

namespace {
bool IsSyntaxRule(std::string_view rule) {
  return rule == "syntax" || rule == "encoding" || rule == "nesting" || rule == "size";
}
}  // namespace

std::string_view RuleStage(std::string_view rule) {
  if (rule == "blocklist") return "blocklist_audit";
  if (rule == "secret" || rule == "path-traversal" || rule == "sql-injection" ||
      rule == "c2-pattern" || rule == "prompt-injection" || rule == "weak-crypto") {
    return "audit";
  }
  return "ast_scan";
}

std::string FormatViolation(const Finding& f) {
  if (IsSyntaxRule(f.rule)) return f.message;
  return "Line " + std::to_string(f.line) + ": " + f.message;
}

Analyzer::Analyzer(Policy policy)
    : compiled_(std::make_unique<CompiledPolicy>(std::move(policy))) {}
Analyzer::~Analyzer() = default;
Analyzer::Analyzer(Analyzer&&) noexcept = default;
Analyzer& Analyzer::operator=(Analyzer&&) noexcept = default;

const Policy& Analyzer::policy() const { return compiled_->policy; }

Result Analyzer::Analyze(std::string_view code) const {
  Result result;
  const Policy& policy = compiled_->policy;
  if (code.size() > policy.max_code_bytes) {
    Finding f;
    f.rule = "size";
    f.message = "code is " + std::to_string(code.size()) + " bytes, more than the limit of " +
                std::to_string(policy.max_code_bytes) + " bytes; it was not analyzed";
    f.line = 1;
    f.col = 1;
    result.findings.push_back(std::move(f));
    result.syntax_ok = false;
    return result;
  }
  TokenizedSource ts = Tokenize(code);
  FindingSink sink(policy.max_findings);
  if (const SyntaxIssue* issue = ts.FirstIssue()) {
    result.syntax_ok = false;
    // The fips-agents format: "SyntaxError: <Python's message> (line N)".
    sink.Add(issue->rule,
             "SyntaxError: " + issue->message + " (line " + std::to_string(issue->line) + ")",
             issue->line, issue->col, Severity::kError);
  }
  FindInvisibleCharacters(code, sink);
  RunRules(ts, *compiled_, sink);
  result.findings = sink.Take();
  return result;
}

Result Analyze(std::string_view code, const Policy& policy) {
  return Analyzer(policy).Analyze(code);
}

}  // namespace airlock::analyzer
