#include "profile/profile.h"

#include <algorithm>

namespace airlock::profile {

bool Profile::AllowsLanguage(Language language) const {
  return std::find(languages.begin(), languages.end(), language) != languages.end();
}

const Resources& Profile::ResourcesFor(Language language) const {
  for (const auto& [l, r] : language_resources) {
    if (l == language) return r;
  }
  return resources;
}

bool Profile::AllowsImport(std::string_view module) const {
  if (any_import) return true;
  for (const std::string& allowed : allowed_imports) {
    if (module == allowed) return true;
    // A listed package allows its submodules: "numpy" covers "numpy.linalg",
    // but not "numpyx".
    if (module.size() > allowed.size() && module.substr(0, allowed.size()) == allowed &&
        module[allowed.size()] == '.') {
      return true;
    }
  }
  return false;
}

AuditMode Profile::ModeOf(ScanStage stage) const {
  switch (stage) {
    case ScanStage::kAstScan:
      return audit.ast_scan;
    case ScanStage::kBlocklistAudit:
      return audit.blocklist_audit;
    case ScanStage::kAuditPatterns:
      return audit.audit_patterns;
  }
  return AuditMode::kEnforce;
}

std::string_view ScanStageName(ScanStage stage) {
  switch (stage) {
    case ScanStage::kAstScan:
      return "ast_scan";
    case ScanStage::kBlocklistAudit:
      return "blocklist_audit";
    case ScanStage::kAuditPatterns:
      return "audit_patterns";
  }
  return "?";
}

std::optional<ScanStage> ScanStageFromName(std::string_view name) {
  for (ScanStage s : {ScanStage::kAstScan, ScanStage::kBlocklistAudit, ScanStage::kAuditPatterns}) {
    if (ScanStageName(s) == name) return s;
  }
  return std::nullopt;
}

std::string_view AuditModeName(AuditMode mode) {
  switch (mode) {
    case AuditMode::kEnforce:
      return "enforce";
    case AuditMode::kObserve:
      return "observe";
    case AuditMode::kOff:
      return "off";
  }
  return "?";
}

std::string_view ApprovalPolicyName(ApprovalPolicy policy) {
  switch (policy) {
    case ApprovalPolicy::kAlways: return "always";
    case ApprovalPolicy::kOnFindings: return "on_findings";
    case ApprovalPolicy::kNever: break;
  }
  return "never";
}

bool Approval::Holds(std::string_view rule) const {
  return policy != ApprovalPolicy::kNever && std::binary_search(rules.begin(), rules.end(), rule);
}

std::string_view LanguageName(Language language) {
  switch (language) {
    case Language::kPython:
      return "python";
    case Language::kJavaScript:
      return "javascript";
    case Language::kBash:
      return "bash";
    case Language::kTypeScript:
      return "typescript";
    case Language::kR:
      return "r";
    case Language::kJava:
      return "java";
  }
  return "?";
}

std::optional<Language> LanguageFromName(std::string_view name) {
  if (name == "python" || name == "python3") return Language::kPython;
  if (name == "javascript" || name == "js" || name == "node") return Language::kJavaScript;
  if (name == "bash") return Language::kBash;
  if (name == "typescript" || name == "ts") return Language::kTypeScript;
  if (name == "r") return Language::kR;
  if (name == "java") return Language::kJava;
  return std::nullopt;
}

std::string_view NetworkName(Network network) {
  switch (network) {
    case Network::kNone:
      return "none";
  }
  return "?";
}

std::string_view DoorName(Door door) {
  switch (door) {
    case Door::kExecute: return "execute";
    case Door::kApi: return "api";
    case Door::kMcp: return "mcp";
    case Door::kE2b: return "e2b";
  }
  return "?";
}

ProfileSet::ProfileSet(std::vector<Profile> profiles) : profiles_(std::move(profiles)) {
  std::sort(profiles_.begin(), profiles_.end(),
            [](const Profile& a, const Profile& b) { return a.name < b.name; });
  if (Find("minimal") != nullptr) {
    default_name_ = "minimal";
  } else if (!profiles_.empty()) {
    default_name_ = profiles_.front().name;
  }
  // The agent doors: an agent's typical code (open(), import sys, numpy)
  // runs under general's policy; minimal refuses it.
  if (Find("general") != nullptr) {
    for (Door d : {Door::kApi, Door::kMcp, Door::kE2b}) door_default_[static_cast<size_t>(d)] = "general";
  }
}

const Profile& ProfileSet::DefaultFor(Door door) const {
  const std::string& name = door_default_[static_cast<size_t>(door)];
  const Profile* p = name.empty() ? nullptr : Find(name);
  return p != nullptr ? *p : Default();
}

const Profile* ProfileSet::Find(std::string_view name) const {
  auto it = std::lower_bound(profiles_.begin(), profiles_.end(), name,
                             [](const Profile& p, std::string_view n) { return p.name < n; });
  if (it == profiles_.end() || it->name != name) return nullptr;
  return &*it;
}

const Profile& ProfileSet::Default() const {
  const Profile* p = Find(default_name_);
  // Precondition (documented): the set is not empty, so the default exists.
  return p != nullptr ? *p : profiles_.front();
}

std::vector<std::string> ProfileSet::Names() const {
  std::vector<std::string> names;
  names.reserve(profiles_.size());
  for (const Profile& p : profiles_) names.push_back(p.name);
  return names;
}

Status ProfileSet::CheckLoaded(std::string_view name) const {
  if (Find(name) != nullptr) return Status::Ok();
  std::string known;
  for (const Profile& p : profiles_) known += (known.empty() ? "" : ", ") + p.name;
  return NotFound("default profile '" + std::string(name) + "' is not loaded (profiles: " +
                  (known.empty() ? std::string("none") : known) + ")");
}

Status ProfileSet::SetDefault(std::string_view name) {
  RETURN_IF_ERROR(CheckLoaded(name));
  default_name_ = std::string(name);
  for (std::string& d : door_default_) d = std::string(name);
  return Status::Ok();
}

Status ProfileSet::SetDefaultFor(Door door, std::string_view name) {
  RETURN_IF_ERROR(CheckLoaded(name));
  if (door == Door::kExecute) {
    default_name_ = std::string(name);
  } else {
    door_default_[static_cast<size_t>(door)] = std::string(name);
  }
  return Status::Ok();
}

}  // namespace airlock::profile
