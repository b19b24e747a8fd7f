// Profile: what a run may import, which analyzer stages check it, and the
// ceilings of its resources. Plain data; loader.h reads profiles from YAML
// (the only place that knows YAML), limits.h clamps a request to a profile.
//
//   ASSIGN_OR_RETURN(ProfileSet set, LoadProfiles(DefaultProfilesDir()));
//   const Profile* p = set.Find(request_profile_name);
//   if (!p) p = &set.Default();
//   if (!p->AllowsImport("numpy")) ...
//
// Every value here is the resolved one: a profile that `extends` another has
// already inherited its parent's values (see loader.h for the rules).
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace airlock::profile {

// The analyzer's pre-execution stages, in the profile's `scan_stages.pre`.
enum class ScanStage {
  kAstScan,         // "ast_scan": tokenizer + rules (imports, dunders, calls)
  kBlocklistAudit,  // "blocklist_audit": the profile's [module, attr] blocklist
  kAuditPatterns,   // "audit_patterns": RE2 patterns (secrets, traversal, ...)
};

// What a layer does with what it finds (`audit.mode.<layer>`).
enum class AuditMode {
  kEnforce,  // findings reject the run (400) / the import raises ImportError
  kObserve,  // findings are reported and audited, the run goes ahead
  kOff,      // the layer does not run (not allowed for runtime_imports)
};

// What a run's code is written in. Python runs under airlock's runner (the
// analyzer, the import hook, results and the warm path); the others run cold,
// launched by the runner, with the kernel layers as their only check.
// kTypeScript, kR and kJava run only as contexts of a session (a persistent
// kernel in its sandbox: session/context.h); the others also one-shot.
enum class Language { kPython, kJavaScript, kBash, kTypeScript, kR, kJava };
enum class Network { kNone };  // loopback only; the one mode there is

struct BlocklistEntry {
  std::string module;  // "numpy", or dotted: "scipy.io"
  std::string attr;    // "ctypeslib"
  bool operator==(const BlocklistEntry&) const = default;
};

// Ceilings (and defaults) of a run's resources. A request may ask for less,
// never for more: limits.h.
struct Resources {
  int64_t memory_bytes = 256ll << 20;  // cgroup memory limit of the run
  double cpu_cores = 0.5;              // CPU bandwidth (cgroup cpu quota), in cores
  double timeout_max_s = 30.0;         // wall-clock ceiling a request may ask for
  double timeout_default_s = 10.0;     // wall clock when the request names none
  int64_t pids = 32;                   // processes + threads (cgroup pids.max)
  int64_t disk_bytes = 64ll << 20;     // size of the writable working dir (tmpfs)
  int64_t output_bytes = 51200;        // cap per stream (stdout, stderr), like the peer's 50 KB
  std::optional<double> cpu_time_s;    // CPU seconds (RLIMIT_CPU); unset: derived, limits.h
};

struct ScanStages {
  std::vector<ScanStage> pre = {ScanStage::kAstScan};
  std::vector<ScanStage> post;  // no post-execution stage exists yet; always empty
};

struct AuditModes {
  AuditMode ast_scan = AuditMode::kEnforce;
  AuditMode blocklist_audit = AuditMode::kEnforce;
  AuditMode audit_patterns = AuditMode::kEnforce;
  AuditMode runtime_imports = AuditMode::kEnforce;  // the in-run import hook: enforce|observe
};

// Files a request may bring in and a run may hand back.
struct FileLimits {
  int64_t max_in_bytes = 10ll << 20;   // total size of the request's files
  int64_t max_out_bytes = 10ll << 20;  // total size of files returned
  int64_t max_out_files = 64;          // number of files returned
};

// Lifetimes of the profile's sessions (docs/api.md, Sessions), in seconds;
// 0: the server's flag (--session-idle-timeout and friends).
struct SessionLifetimes {
  double idle_timeout_s = 0;      // default idle expiry
  double max_idle_timeout_s = 0;  // the most a request may ask
  double ttl_s = 0;               // default hard lifetime
  double max_ttl_s = 0;           // the most a request may ask
};

// Human approval (docs/api.md, Approvals): whether a run of this profile waits
// for a person. `never`: runs go ahead (the default). `always`: every request
// that passes the analyzer waits. `on_findings`: a request waits when the
// analyzer reports a finding whose rule is in `rules`; under either policy, a
// finding of a listed rule that would reject the code holds it for a person
// instead (all its rejecting findings must be listed, else it is rejected).
enum class ApprovalPolicy { kNever, kAlways, kOnFindings };

struct Approval {
  ApprovalPolicy policy = ApprovalPolicy::kNever;
  std::vector<std::string> rules;  // analyzer rule ids ("import-not-allowed"), sorted
  double expires_s = 600;          // a pending request not decided by then is denied
  bool self_approve = false;       // the token that sent it may approve it
  bool Holds(std::string_view rule) const;
};

struct Profile {
  std::string name;         // [a-z0-9][a-z0-9_-]*, the file's stem
  std::string description;  // verbatim (a `>` scalar keeps its trailing newline)
  std::string extends;      // the parent's name, "" for a root profile
  std::string source;       // the file it was loaded from, for messages

  // true: no import allowlist (the `general` profile); allowed_imports is empty.
  bool any_import = false;
  // Sorted, without duplicates: the peer's GET /profile `allowed_imports`.
  std::vector<std::string> allowed_imports;
  std::vector<BlocklistEntry> blocklist;  // the parent's entries first
  std::vector<std::string> preimport;     // imported in the zygote before any restriction

  Resources resources;
  ScanStages scan_stages;
  AuditModes audit;
  // The languages a request may ask for, in the order written (never empty);
  // the first is the one a request that names none gets.
  std::vector<Language> languages = {Language::kPython};
  // `language_resources`: a language's own limits (the profile's resources
  // with that language's keys over them), for the languages that have any.
  std::vector<std::pair<Language, Resources>> language_resources;
  Network network = Network::kNone;
  FileLimits files;
  SessionLifetimes sessions;
  bool matplotlib = false;  // capture figures (Agg backend) as image/png results
  Approval approval;

  // Whether `import module` is allowed: true when any_import, or when the
  // module or one of its parent packages is listed ("numpy" allows
  // "numpy.linalg"; a listed "os.path" allows "os.path", not "os").
  bool AllowsImport(std::string_view module) const;
  bool AllowsLanguage(Language language) const;
  // The resources a run in `language` gets: its language_resources entry, or `resources`.
  const Resources& ResourcesFor(Language language) const;
  // The mode of a stage's layer (audit.mode).
  AuditMode ModeOf(ScanStage stage) const;
};

// "ast_scan", "blocklist_audit", "audit_patterns".
std::string_view ScanStageName(ScanStage stage);
std::optional<ScanStage> ScanStageFromName(std::string_view name);
// "enforce", "observe", "off".
std::string_view AuditModeName(AuditMode mode);
std::string_view LanguageName(Language language);  // "python", "javascript", "bash", "typescript", "r", "java"
// A language's name as requests and profiles write it: "python" (or
// "python3"), "javascript" (or "js", "node"), "bash"; nullopt otherwise.
std::optional<Language> LanguageFromName(std::string_view name);
std::string_view NetworkName(Network network);     // "none"
std::string_view ApprovalPolicyName(ApprovalPolicy policy);  // "never", "always", "on_findings"

// The ways a request comes in; each has a default profile of its own
// (ProfileSet::DefaultFor), for requests that name none.
enum class Door {
  kExecute,  // the fips-compatible POST /execute (and GET /profile)
  kApi,      // airlock's /v1/ (execute, sessions, the console)
  kMcp,      // MCP over stdio and /mcp
  kE2b,      // the E2B-compatible listener's contexts
};
inline constexpr Door kDoors[] = {Door::kExecute, Door::kApi, Door::kMcp, Door::kE2b};
std::string_view DoorName(Door door);  // "execute", "api", "mcp", "e2b"

// Every loaded profile, by name, and which one a request without a `profile`
// gets at each door. Built by LoadProfiles / ParseProfiles (loader.h), never
// empty then.
class ProfileSet {
 public:
  ProfileSet() = default;
  // Sorts the profiles by name. Names must be unique (the loader guarantees
  // it). The defaults: /execute gets "minimal" (the fips sidecar's default)
  // when present, else the first by name; the agent doors (/v1, MCP, E2B) get
  // "general" when present (typical agent code runs there: any import,
  // open(), the kernel layers as the boundary), else /execute's.
  explicit ProfileSet(std::vector<Profile> profiles);

  // nullptr when there is no profile of that name.
  const Profile* Find(std::string_view name) const;
  // /execute's default (DefaultFor(Door::kExecute)). Precondition: not empty.
  const Profile& Default() const;
  const std::string& default_name() const { return default_name_; }
  // The default profile of requests that come in by `door`.
  const Profile& DefaultFor(Door door) const;
  // Makes `name` the default of every door (--default-profile); NotFound
  // (listing the names) when absent.
  Status SetDefault(std::string_view name);
  // Makes `name` the default of one door (--execute-profile, --api-profile, ...).
  Status SetDefaultFor(Door door, std::string_view name);
  // All profiles, sorted by name.
  const std::vector<Profile>& profiles() const { return profiles_; }
  std::vector<std::string> Names() const;
  bool empty() const { return profiles_.empty(); }

 private:
  Status CheckLoaded(std::string_view name) const;

  std::vector<Profile> profiles_;
  std::string default_name_;
  std::string door_default_[std::size(kDoors)];  // by Door; "": default_name_ (kExecute's is default_name_ always)
};

}  // namespace airlock::profile
