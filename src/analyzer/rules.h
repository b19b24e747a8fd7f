// The policy rules over the token stream (internal to the analyzer; analyzer.h is the API).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/tokenizer.h"

namespace airlock::analyzer {

// A Policy with its lists turned into sets once.
struct CompiledPolicy {
  explicit CompiledPolicy(Policy p);

  Policy policy;
  std::optional<std::unordered_set<std::string>> allowed;  // top-level module names
  std::unordered_set<std::string> blocklist;               // "module.attr"
  std::unordered_set<std::string> blocklist_tops;          // "pandas", "scipy", ...
  std::unordered_map<std::string, std::vector<std::string>> blocklist_by_module;
};

// Collects findings up to a cap; the cap keeps the answer to hostile input small.
class FindingSink {
 public:
  explicit FindingSink(size_t max) : max_(max) {}
  void Add(std::string_view rule, std::string message, uint32_t line, uint32_t col,
           Severity severity);
  bool full() const { return overflowed_; }
  // The findings in source order, plus a "too-many-findings" finding if some were dropped
  // (with the highest severity of those dropped).
  std::vector<Finding> Take();

 private:
  size_t max_;
  bool overflowed_ = false;
  Severity dropped_severity_ = Severity::kInfo;  // the highest among dropped findings
  std::vector<Finding> findings_;
};

// The "invisible-character" rule over raw text (invisible.cc): one finding per line
// that holds invisible characters (unicode.h), naming them; a warning when one of them
// is a bidirectional control, else an info.
void FindInvisibleCharacters(std::string_view text, FindingSink& sink);

// Runs every policy rule over the tokens (syntax issues are reported by the caller).
void RunRules(const TokenizedSource& ts, const CompiledPolicy& policy, FindingSink& sink);

}  // namespace airlock::analyzer
