// Approvals (docs/api.md, "Approvals"): the JSON of a request held for a
// person's decision, and the parsing of that decision. Plain data; the store
// and the routes are api/approvals.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/execute.h"

namespace airlock::model {

// An input file of a held request, as the person deciding sees it.
struct ApprovalFile {
  std::string path;
  int64_t size = 0;
  std::string sha256;
  std::string content;  // the bytes, while `kept`
  bool shown = false;   // small UTF-8 text: `content` is in the JSON; else a download link
  bool kept = true;     // false once decided and done: only path, size and sha256 remain
};

struct ApprovalView {
  std::string id;          // "apr_..."
  std::string status;      // pending | approved | running | ran | failed | denied | expired
  std::string request_id;  // the request that was held
  std::string profile;
  std::string language;    // "python", "bash", ...
  EffectiveLimitsView limits;  // what the run gets (timeout included)
  std::string code;        // shown in full to approvers
  std::string code_sha256;
  int64_t code_bytes = 0;
  std::vector<ApprovalFile> files;  // the request's input files, in its order
  // SHA-256 of RequestDigestJson(): binds everything that runs (code, language,
  // profile, limits, files) to a decision.
  std::string request_sha256;
  std::vector<Violation> findings;
  std::string requested_by;  // token name ("" without tokens)
  std::string created_at, expires_at, decided_at;  // RFC 3339 ("" when not yet)
  std::string decided_by;
  std::string reason;
  std::string error;        // why a run could not start (status failed)
  std::string result_json;  // the run's V1ExecuteToJson once ran ("" before)
  bool result_dropped = false;  // ran, but the result is no longer kept
};

// {"approval_id","status","request_sha256","code_sha256","language","limits",
// "files","findings","expires_at",...}; `code`, the files' contents (or their
// download links) and the result only when asked (GET of one approval; a list
// and a 202 do not carry the code).
std::string ApprovalToJson(const ApprovalView& a, bool with_code, bool with_result);
// The text request_sha256 is the SHA-256 of: canonical JSON (keys sorted, no
// spaces) of {"code","files":[{"path","sha256","size"}],"language","limits":
// {"cpu_cores","cpu_time_s","disk_bytes","memory_bytes","output_bytes","pids",
// "timeout_s"},"profile"} (docs/api.md, Approvals).
std::string RequestDigestJson(const ApprovalView& a);
// GET /v1/approvals/{id}/files/{n}: {"path","size","sha256","content_base64"}.
std::string ApprovalFileToJson(const ApprovalFile& f);
// {"approvals":[...]}, each without its code (fetched by id: a list of held
// requests of a megabyte each must not be one answer of tens of megabytes).
std::string ApprovalListToJson(const std::vector<const ApprovalView*>& list);

struct ApprovalDecision {
  bool approve = false;
  std::string reason;                      // at most 1024 bytes
  std::optional<std::string> code_sha256;     // when given, must be the held code's
  std::optional<std::string> request_sha256;  // when given, must be the held request's
};
// POST /v1/approvals/{id}:
// {"decision":"approve"|"deny","reason"?,"request_sha256"?,"code_sha256"?}.
bool ParseApprovalDecision(std::string_view body, size_t max_depth, ApprovalDecision* out, ApiError* error);

// {"runs":[audit record objects...]} from AuditRecordToJson lines, newest first.
std::string RecentRunsToJson(const std::vector<std::string>& record_lines);

}  // namespace airlock::model
