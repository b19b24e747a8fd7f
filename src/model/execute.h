// The HTTP service's wire types: an execute request, its response, policy
// violations, error bodies, profile views and audit records. Plain data; the
// JSON codec (api_codec.cc) is the only code that knows JSON.
//
//   model::ExecuteRequest req;
//   model::ApiError err;
//   if (!model::ParseExecuteRequest(body, caps, &req, &err)) return Reply(err);
//   ...
//   std::string json = model::V1ExecuteToJson(response);
//
// Every string that came from a run (stdout, stderr, results, tracebacks) is
// arbitrary bytes; the encoders replace invalid UTF-8 with U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/run_report.h"

namespace airlock::model {

// ---------------------------------------------------------------------------
// Errors

// What went wrong with a request, independent of the transport. The HTTP
// status of each kind is decided in one place: api/error_mapping.cc.
enum class ErrorKind {
  kBadRequest,        // 400: empty code ("No code provided")
  kPolicy,            // 400: the analyzer rejected the code (violations)
  kUnauthorized,      // 401
  kForbidden,         // 403: a web origin that may not call (api/request_gate.h)
  kNotFound,          // 404
  kMethodNotAllowed,  // 405
  kConflict,          // 409: a session already running a call; a path that is not a regular file
  kGone,              // 410: a session that died (memory, crash, its zygote lost)
  kPayloadTooLarge,   // 413: body or code over the cap
  kUnsupportedMediaType,  // 415: a body that is not declared application/json
  kMisdirected,       // 421: a Host header that does not name this server
  kUnprocessable,     // 422: bad JSON, wrong type, out of range, unknown profile
  kTooManyRequests,   // 429: concurrency limit and queue full
  kInternal,          // 500: a run could not be started
  kUnavailable,       // 503: not ready, or shutting down
};

struct ApiError {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  std::string field;  // the request field at fault ("timeout"), "" when none
  std::string code;   // a stable machine-readable code ("session_not_found"), "" when none
  std::string quota;  // a 429's quota ("sessions_per_owner"; code "quota_exceeded"), "" when none
  // Seconds for a Retry-After header (429/503); 0: the default.
  int retry_after_s = 0;
};

// ---------------------------------------------------------------------------
// Request

// Caps on untrusted input, checked while parsing.
struct RequestCaps {
  size_t max_depth = 32;               // nesting of JSON arrays/objects
  size_t max_code_bytes = size_t{1} << 20;
  size_t max_files = 256;              // entries of "files" (bytes: the body cap, then the profile's)
};

// Bounds on the environment variables a request may set ("env"; E2B's
// "env_vars"): the runner sets them for the code, so they are bounded like
// any other input and their names are plain identifiers.
inline constexpr size_t kMaxEnvVars = 128;
inline constexpr size_t kMaxEnvNameBytes = 128;
inline constexpr size_t kMaxEnvValueBytes = 32 << 10;
inline constexpr size_t kMaxEnvBytes = 128 << 10;  // names and values of one request together

// A file given to a run ("files" of POST /v1/execute and /execute), decoded.
// `path` passed CheckSandboxPath (base/sandbox_path.h); no two paths are equal
// and none is a directory of another.
struct InputFile {
  std::string path;
  std::string content;  // raw bytes
};

// A file a run created or changed in its working directory, as returned.
struct OutputFile {
  std::string path;            // relative to the working directory, valid UTF-8
  int64_t size = 0;            // the file's size in the sandbox
  std::string content_base64;  // all of it, or a prefix when truncated
  bool truncated = false;      // the byte cap cut the content (maybe to nothing)
};

// Limits a /v1/execute request may ask for (below the profile's ceilings).
// Sizes are kept as text ("128Mi" or "134217728"); the service parses them
// with the profile's unit syntax.
struct LimitsRequest {
  std::optional<std::string> memory;
  std::optional<double> cpu;       // cores
  std::optional<double> cpu_time;  // seconds
  std::optional<int64_t> pids;
  std::optional<std::string> disk;
  std::optional<std::string> output;  // bytes kept per stream
};

struct ExecuteRequest {
  std::string code;                    // valid UTF-8 (checked)
  std::optional<double> timeout_s;     // absent: the profile's default
  std::optional<std::string> profile;  // absent: the server's default profile
  // "python", "javascript", "typescript", "r", "java" or "bash" (aliases
  // normalized: NormalizeLanguage); empty: the profile's first language.
  std::string language;
  LimitsRequest limits;
  // Set by the transport, never read from the body: the response is streamed
  // (Accept: application/x-ndjson or text/event-stream), so the run's stdout
  // is line-buffered and output reaches the client as it is printed.
  bool stream_output = false;
  // Set by the session manager for a call into a live session, never read
  // from a body: Prepare then builds only what the call needs (the checks,
  // the limits and the warm config), not a cold run's Spec and files.
  bool session_call = false;
  std::vector<InputFile> files;        // placed in the working directory before the run
  // Environment variables for the code (name -> value): the runner sets them
  // once the sandbox and the interpreter have started, so they change what
  // the code and the processes it starts see, never how the sandbox starts;
  // the service refuses the names the sandbox reserves (ReservedEnvName in
  // service.h). For a session call they hold for that call only; given when
  // a session is created, for its whole life.
  std::map<std::string, std::string> env;
  // A request that needs a person's approval: how long to hold the connection
  // for the decision and the run (0 < wait <= 3600; absent: answer 202 at once).
  std::optional<double> wait_s;
};

// A language's canonical name ("python", "javascript", "typescript", "r",
// "java", "bash") from what a client sends (case and spaces ignored; "js",
// "node", "ts", "python3", "sh" are aliases, as E2B's SDKs send them), or ""
// when it is none of them.
std::string NormalizeLanguage(std::string_view name);

// Parses a POST /execute or /v1/execute body. On failure fills `error`
// (kUnprocessable naming the field, or kPayloadTooLarge for code over the cap)
// and returns false. Unknown fields are ignored (as the fips sidecar does).
// "files": [{"path", "content", "encoding": "utf-8" (default) | "base64"}]:
// a bad path, bad base64, a duplicate or more than caps.max_files entries is a
// kUnprocessable naming files[i].path / files[i].content.
// "env": {NAME: "value"}: names [A-Za-z_][A-Za-z0-9_]*, values without NUL,
// within the kMaxEnv* bounds; otherwise a kUnprocessable naming "env".
bool ParseExecuteRequest(std::string_view body, const RequestCaps& caps, ExecuteRequest* request,
                         ApiError* error);

// Whether `text` is well-formed UTF-8 (no overlongs, no surrogates). On false,
// *bad_offset is the offset of the first bad byte.
bool IsValidUtf8(std::string_view text, size_t* bad_offset = nullptr);

// ---------------------------------------------------------------------------
// Response

struct Violation {
  std::string rule;     // analyzer rule id ("import-not-allowed")
  std::string message;  // "import of 'os' is not allowed (not in allowed imports)"
  int line = 0, col = 0;
  std::string severity;  // "error", "warning", "info"
  std::string stage;     // profile scan stage: "ast_scan", "blocklist_audit", "audit_patterns"
  std::string compat;    // the fips one-line form: "Line 1: import of 'os' is not allowed ..."
  // A finding that refused the code: the server's profiles where it would
  // not (empty: none), also named at the end of `message` and `compat`.
  std::optional<std::vector<std::string>> allowed_in;
};

struct ErrorInfo {
  std::string name;       // "ZeroDivisionError"
  std::string value;      // "division by zero"
  std::string traceback;  // with the user's own line numbers
};

// One display result: a mime bundle, kept as a JSON object text produced by
// the runner events parser (runner_protocol.h).
struct DisplayResult {
  bool is_main_result = false;
  std::string data_json;  // {"text/plain": "...", "image/png": "..."}
  std::string text_plain;  // data["text/plain"] when it is a string, else ""
};

// The limits a run got after clamping (echoed as `profile`).
struct EffectiveLimitsView {
  std::string profile;
  double timeout_s = 0;
  int64_t memory_bytes = 0;
  double cpu_cores = 0;
  double cpu_time_s = 0;
  int64_t pids = 0;
  int64_t disk_bytes = 0;
  int64_t output_bytes = 0;
  std::vector<std::string> clamped;
};

struct ExecuteResponse {
  std::string request_id;
  RunReport run;                        // output, exit status, kill reason, usage, isolation
  std::optional<std::string> result;    // repr of the last expression (text/plain)
  std::vector<DisplayResult> results;   // display results, main result included
  bool results_truncated = false;       // the runner or the server dropped results
  std::optional<ErrorInfo> error;       // uncaught exception in user code
  EffectiveLimitsView limits;
  std::vector<Violation> warnings;      // findings that did not reject the code
  std::vector<OutputFile> files;        // files the run created or changed, by path
  bool files_truncated = false;         // the profile's caps left files out or cut them
};

// POST /execute (the fips sidecar's shape): stdout, stderr, exit_code
// (negative signal number when killed, as Python's subprocess reports it),
// timed_out, plus result (string or null) and error ("Name: value" or null),
// plus "files" (as /v1/execute's) only when the run returned files.
std::string CompatExecuteToJson(const ExecuteResponse& response);
// POST /v1/execute: the superset (DESIGN §1).
std::string V1ExecuteToJson(const ExecuteResponse& response);

// 400 for a policy rejection. compat: violations as the fips strings;
// otherwise as objects {rule, message, line, col, severity, stage}.
std::string RejectionToJson(const std::vector<Violation>& violations, bool compat,
                            const std::string& request_id);
// Every other error: {"error": message, "field": ..., "request_id": ...}. A 422
// with a field also carries pydantic's "detail" list, as the fips sidecar does.
std::string ErrorToJson(const ApiError& error, const std::string& request_id);

// ---------------------------------------------------------------------------
// Profiles (GET /profile, /v1/profiles, /v1/profiles/{name})

// A profile's resources as views show them: its ceilings and default timeout
// (the profile's own, or one language's language_resources).
struct ResourcesView {
  int64_t memory_bytes = 0;
  double cpu_cores = 0;
  double timeout_max_s = 0;
  double timeout_default_s = 0;
  int64_t pids = 0;
  int64_t disk_bytes = 0;
  int64_t output_bytes = 0;
  std::optional<double> cpu_time_s;
};

// The resource fields (memory_bytes, ...) are the profile's own `resources`.
// Which of airlock's layers hold for one language of a profile (issue 23.3):
// the kernel's always; the others bind Python code only.
struct LanguageLayers {
  std::string language;
  // Python: the analyzer's ast_scan mode ("enforce", "observe", "off"); other
  // languages: "invisible-characters" (the one rule that reads any text).
  std::string analyzer;
  bool import_allowlist = false;     // imports are checked against an allowlist
  bool blocklist = false;            // [module, attribute] entries are checked
  std::string runtime_import_hook;   // Python: the in-run hook's mode; others: "none"
};

struct ProfileView : ResourcesView {
  std::string name;
  std::string description;
  std::string extends;
  bool any_import = false;
  std::vector<std::string> allowed_imports;
  std::vector<std::pair<std::string, std::string>> blocklist;
  std::vector<std::string> preimport;
  std::vector<std::string> scan_pre, scan_post;
  std::vector<std::pair<std::string, std::string>> audit_modes;  // layer -> enforce|observe|off
  std::string language;                // the first of languages: what a request gets by default
  std::vector<std::string> languages;  // what the profile allows
  std::vector<LanguageLayers> layers;  // per language of `languages`, in its order
  // language_resources: language name -> that language's own resources.
  std::vector<std::pair<std::string, ResourcesView>> language_resources;
  std::string network;
  bool matplotlib = false;
  bool is_default = false;
  // approval: never|always|on_findings, the rules that hold, seconds to expiry
  std::string approval_policy = "never";
  std::vector<std::string> approval_rules;
  double approval_expires_s = 0;
  bool approval_self = false;
};

// The fips shape {"name","description","allowed_imports","blocklist_entries",
// "scan_stages"} plus airlock's fields ("resources", "audit", ...). When
// `isolation` is not empty it is added as {"layers":[...]} (the layers this
// server enforces).
std::string ProfileToJson(const ProfileView& profile, const std::vector<LayerReport>& isolation);
// {"default": name, "defaults": {door: name, ...}, "profiles": [ProfileToJson...]}.
std::string ProfileListToJson(const std::vector<ProfileView>& profiles, const std::string& default_name,
                              const std::vector<std::pair<std::string, std::string>>& door_defaults = {});

// One analyzer rule, as GET /v1/rules lists them (analyzer/rule_catalog.h).
struct RuleView {
  std::string id, family, stage, severity, catches;
};
// {"rules": [{"id","family","stage","severity","catches"}, ...]}.
std::string RulesToJson(const std::vector<RuleView>& rules);

// ---------------------------------------------------------------------------
// Health

// {"status": status} plus, when not empty, {"detail": detail}.
std::string StatusToJson(const std::string& status, const std::string& detail);

// One warm pool, as /readyz and /metrics show it.
struct PoolView {
  std::string profile;
  int ready = 0, target = 0;
  std::string zygote;  // "up", "starting", "down"
  std::string detail;
  uint64_t handoffs = 0, refills = 0, cold_fallbacks = 0, restarts = 0;
  std::string state = "ok";  // "ok" or "degraded" (cannot make ready runs; see reason)
  std::string reason;        // when degraded: zygote_start, zygote_died, run_setup, run_prepare, run_timeout
  std::map<std::string, uint64_t> failures;  // reason -> count
  uint64_t recycles = 0;  // zygotes replaced on purpose (--pool-recycle, --pool-recycle-seconds)
};
// {"status":..., "detail":..., "pools":{profile:{"ready","target","zygote","state","reason","detail"}}}
std::string ReadyToJson(const std::string& status, const std::string& detail, const std::vector<PoolView>& pools);

// ---------------------------------------------------------------------------
// Audit

// One record per execute request (and per refused authentication). Built from
// server-side data only: nothing a run printed ends up in it.
struct AuditRecord {
  std::string time;  // RFC 3339 UTC with milliseconds
  std::string request_id;
  std::string route;        // "/execute", "/v1/execute", ... (the path, at most 256 bytes)
  std::string method;       // the HTTP method ("" for records that are not a request's)
  std::string token_name;   // "" when auth is off or failed
  std::string client_address;
  std::string profile;
  std::string code_sha256;  // hex, "" when there was no code
  int64_t code_bytes = 0;
  std::string verdict;      // "ran", "rejected", "invalid", "unauthorized", "overloaded", "error", ...
  int http_status = 0;
  std::vector<Violation> violations;  // rejecting findings, or observed ones
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<std::string> kill_reason;
  bool client_gone = false;
  double duration_ms = 0;   // the whole request, admission included
  double run_ms = 0;        // the run alone
  int64_t cpu_ms = 0;
  int64_t max_rss_kb = 0;
  std::string error;        // the error message for non-200 verdicts
  // Approvals (docs/api.md): the approval this record is about, and for a
  // decision the token that sent the request and the person's reason.
  std::string type = "execution";  // "execution" | "approval" | "request" (a request that ran no code)
  std::string approval_id;
  std::string request_sha256;  // approvals: what the decision bound (api::Approvals), else ""
  std::string requested_by;
  std::string reason;
};

// A run's outcome in its audit record: exit code, signal, kill reason, its
// time and usage.
inline void RecordRunIn(AuditRecord* a, const RunReport& run) {
  a->exit_code = run.exit_code;
  if (run.signal) a->signal = run.signal;
  a->kill_reason = run.kill_reason;
  a->run_ms = run.duration_ms;
  a->cpu_ms = run.cpu_ms;
  a->max_rss_kb = run.max_rss_kb;
}

// A single line (no newline at the end), valid UTF-8.
std::string AuditRecordToJson(const AuditRecord& record);

}  // namespace airlock::model
