#include "service/policy_check.h"

#include <algorithm>

namespace airlock::service {
namespace {

// The profile stage a finding belongs to; nullopt when the analyzer names a
// stage the profile model does not know (treated as ast_scan).
profile::ScanStage StageOf(const analyzer::Finding& f) {
  std::string_view stage = analyzer::RuleStage(f.rule);
  if (stage == "blocklist_audit") return profile::ScanStage::kBlocklistAudit;
  if (stage == "audit" || stage == "audit_patterns") return profile::ScanStage::kAuditPatterns;
  return profile::ScanStage::kAstScan;
}

model::Violation ToViolation(const analyzer::Finding& f, profile::ScanStage stage) {
  model::Violation v;
  v.rule = f.rule;
  v.message = f.message;
  v.line = f.line;
  v.col = f.col;
  v.severity = std::string(analyzer::SeverityName(f.severity));
  v.stage = std::string(profile::ScanStageName(stage));
  v.compat = analyzer::FormatViolation(f);
  return v;
}

bool IsSyntaxRule(std::string_view rule) { return rule == "syntax" || rule == "encoding" || rule == "nesting"; }

bool SameFinding(const model::Violation& a, const model::Violation& b) {
  return a.rule == b.rule && a.line == b.line && a.col == b.col && a.message == b.message;
}

}  // namespace

PolicyFindings CheckPolicy(const analyzer::Analyzer& analyzer, const profile::Profile& p, std::string_view code) {
  PolicyFindings out;
  if (p.scan_stages.pre.empty()) return out;
  analyzer::Result r = analyzer.Analyze(code);
  for (const analyzer::Finding& f : r.findings) {
    profile::ScanStage stage = StageOf(f);
    bool listed = std::find(p.scan_stages.pre.begin(), p.scan_stages.pre.end(), stage) != p.scan_stages.pre.end();
    // Syntax-level findings belong to ast_scan; without it, Python reports them at run time.
    if (!listed) continue;
    profile::AuditMode mode = p.ModeOf(stage);
    if (mode == profile::AuditMode::kOff) continue;
    model::Violation v = ToViolation(f, stage);
    if (f.severity == analyzer::Severity::kError && mode == profile::AuditMode::kEnforce) {
      out.rejecting.push_back(std::move(v));
    } else {
      out.warnings.push_back(std::move(v));
    }
  }
  return out;
}

std::vector<model::Violation> InvisibleCharacterWarnings(std::string_view code) {
  std::vector<model::Violation> out;
  for (const analyzer::Finding& f : analyzer::InvisibleCharacterFindings(code)) out.push_back(ToViolation(f, StageOf(f)));
  return out;
}

std::optional<model::Violation> TakeSyntaxError(PolicyFindings* f) {
  auto it = std::find_if(f->rejecting.begin(), f->rejecting.end(),
                         [](const model::Violation& v) { return IsSyntaxRule(v.rule); });
  if (it == f->rejecting.end()) return std::nullopt;
  model::Violation syntax = std::move(*it);
  f->rejecting.erase(it);
  // Still reported (an agent sees every violation at once), but the code is
  // not refused for them: it cannot run anyway.
  f->warnings.insert(f->warnings.begin(), std::make_move_iterator(f->rejecting.begin()),
                     std::make_move_iterator(f->rejecting.end()));
  f->rejecting.clear();
  return syntax;
}

void NameAllowingProfiles(const AnalyzerMap& analyzers, const profile::ProfileSet& profiles,
                          const std::string& refused_by, std::string_view code,
                          std::vector<model::Violation>* rejecting) {
  for (model::Violation& v : *rejecting) v.allowed_in.emplace();
  for (const profile::Profile& q : profiles.profiles()) {
    if (q.name == refused_by || !q.AllowsLanguage(profile::Language::kPython)) continue;
    auto an = analyzers.find(q.name);
    if (an == analyzers.end()) continue;
    PolicyFindings theirs = CheckPolicy(an->second, q, code);
    for (model::Violation& v : *rejecting) {
      bool refused = std::any_of(theirs.rejecting.begin(), theirs.rejecting.end(),
                                 [&](const model::Violation& w) { return SameFinding(v, w); });
      if (!refused) v.allowed_in->push_back(q.name);
    }
  }
  for (model::Violation& v : *rejecting) {
    std::string names;
    for (const std::string& n : *v.allowed_in) names += (names.empty() ? "" : ", ") + n;
    std::string where = " in profile '" + refused_by + "'; " +
                        (names.empty() ? std::string("no profile of this server allows it") : "allowed in: " + names);
    v.message += where;
    v.compat += where;
  }
}

}  // namespace airlock::service
