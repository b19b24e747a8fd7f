// Every rule id the analyzer reports, with what it catches: the table behind
// GET /v1/rules and docs/api.md "Analyzer rules", and the ids a profile's
// approval.rules may name.
//
//   for (const RuleInfo& r : RuleCatalog()) ... r.id, r.stage, r.severity, r.catches
//   if (FindRule("blocked_call") == nullptr) ... not a rule id
#pragma once

#include <span>
#include <string_view>

namespace airlock::analyzer {

struct RuleInfo {
  std::string_view id;        // "import-not-allowed"
  std::string_view family;    // "always", "python_guardrails" or "audit_patterns" (analyzer.h)
  std::string_view stage;     // the profile scan stage (RuleStage): ast_scan, blocklist_audit, audit
  std::string_view severity;  // "error", "warning", "info", or two of them ("error or warning")
  std::string_view catches;   // what it finds, in a sentence
};

// In the order docs/api.md lists them.
std::span<const RuleInfo> RuleCatalog();
// nullptr when `id` is not a rule of the analyzer.
const RuleInfo* FindRule(std::string_view id);

}  // namespace airlock::analyzer
