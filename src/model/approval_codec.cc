#include "model/approval.h"

#include "model/json_util.h"

namespace airlock::model {

using internal::Dump;
using internal::json;

namespace {

json FindingObject(const Violation& v) {
  return {{"rule", v.rule}, {"message", v.message}, {"line", v.line},
          {"col", v.col},   {"severity", v.severity}, {"stage", v.stage}};
}

json Nullable(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json ApprovalObject(const ApprovalView& a, bool with_code, bool with_result) {
  json findings = json::array();
  for (const Violation& v : a.findings) findings.push_back(FindingObject(v));
  json j = {{"approval_id", a.id},
            {"status", a.status},
            {"request_id", a.request_id},
            {"profile", a.profile},
            {"code_sha256", a.code_sha256},
            {"code_bytes", a.code_bytes},
            {"findings", std::move(findings)},
            {"requested_by", Nullable(a.requested_by)},
            {"created_at", a.created_at},
            {"expires_at", a.expires_at},
            {"decided_at", Nullable(a.decided_at)},
            {"decided_by", Nullable(a.decided_by)},
            {"reason", Nullable(a.reason)}};
  if (!a.error.empty()) j["error"] = a.error;
  if (with_code) j["code"] = a.code;
  if (with_result && !a.result_json.empty()) {
    // Our own serialization of the run's response: parse it back to nest it.
    j["result"] = json::parse(a.result_json, nullptr, /*allow_exceptions=*/false);
  }
  if (with_result && a.result_dropped) j["result"] = nullptr, j["result_dropped"] = true;
  return j;
}

}  // namespace

std::string ApprovalToJson(const ApprovalView& a, bool with_code, bool with_result) {
  return Dump(ApprovalObject(a, with_code, with_result));
}

std::string ApprovalListToJson(const std::vector<const ApprovalView*>& list) {
  json arr = json::array();
  for (const ApprovalView* a : list) arr.push_back(ApprovalObject(*a, false, false));
  return Dump(json{{"approvals", std::move(arr)}});
}

bool ParseApprovalDecision(std::string_view body, size_t max_depth, ApprovalDecision* out, ApiError* error) {
  auto bad = [&](std::string field, std::string msg) {
    *error = ApiError{ErrorKind::kUnprocessable, std::move(msg), std::move(field)};
    return false;
  };
  if (internal::JsonDepth(body) > max_depth) return bad("", "the body nests deeper than " + std::to_string(max_depth));
  json doc;
  std::string detail;
  internal::ClientJson parsed = internal::ParseClientJson(body, &doc, &detail);
  if (parsed == internal::ClientJson::kDuplicateKey) {
    *error = internal::DuplicateKeyError(detail);
    return false;
  }
  if (parsed != internal::ClientJson::kOk || !doc.is_object()) {
    *error = ApiError{ErrorKind::kBadRequest, "the body is not a JSON object: send {\"decision\": \"approve\"|\"deny\"}", ""};
    return false;
  }
  auto it = doc.find("decision");
  if (it == doc.end() || !it->is_string() || (*it != "approve" && *it != "deny")) {
    return bad("decision", "decision: must be \"approve\" or \"deny\"");
  }
  out->approve = *it == "approve";
  if (it = doc.find("reason"); it != doc.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().size() > 1024) {
      return bad("reason", "reason: must be a string of at most 1024 bytes");
    }
    out->reason = it->get<std::string>();
    if (!IsValidUtf8(out->reason)) return bad("reason", "reason: invalid UTF-8");
  }
  if (it = doc.find("code_sha256"); it != doc.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().size() != 64) {
      return bad("code_sha256", "code_sha256: must be the 64 hex digits of the code's SHA-256");
    }
    out->code_sha256 = it->get<std::string>();
  }
  return true;
}

std::string RecentRunsToJson(const std::vector<std::string>& record_lines) {
  std::string out = "{\"runs\":[";
  for (size_t i = 0; i < record_lines.size(); ++i) {
    if (i) out += ',';
    out += record_lines[i];  // each is one JSON object (AuditRecordToJson)
  }
  out += "]}";
  return out;
}

}  // namespace airlock::model
