#include "model/approval.h"

#include "model/base64.h"
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

json LimitsObject(const EffectiveLimitsView& l) {
  return {{"timeout_s", l.timeout_s},   {"memory_bytes", l.memory_bytes}, {"cpu_cores", l.cpu_cores},
          {"cpu_time_s", l.cpu_time_s}, {"pids", l.pids},                 {"disk_bytes", l.disk_bytes},
          {"output_bytes", l.output_bytes}};
}

json FileObject(const ApprovalView& a, size_t index, bool with_content) {
  const ApprovalFile& f = a.files[index];
  json j = {{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}};
  if (!with_content) return j;
  if (!f.kept) {
    j["content_dropped"] = true;
  } else if (f.shown) {
    j["content"] = f.content;
  } else {
    j["download"] = "/v1/approvals/" + a.id + "/files/" + std::to_string(index);
  }
  return j;
}

json ApprovalObject(const ApprovalView& a, bool with_code, bool with_result) {
  json findings = json::array();
  for (const Violation& v : a.findings) findings.push_back(FindingObject(v));
  json j = {{"approval_id", a.id},
            {"status", a.status},
            {"request_id", a.request_id},
            {"profile", a.profile},
            {"language", a.language},
            {"limits", LimitsObject(a.limits)},
            {"request_sha256", a.request_sha256},
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
  json files = json::array();
  for (size_t i = 0; i < a.files.size(); ++i) files.push_back(FileObject(a, i, with_code));
  j["files"] = std::move(files);
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

std::string RequestDigestJson(const ApprovalView& a) {
  json files = json::array();
  for (const ApprovalFile& f : a.files) files.push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
  json j = {{"code", a.code},
            {"language", a.language},
            {"profile", a.profile},
            {"limits", LimitsObject(a.limits)},
            {"files", std::move(files)}};
  return Dump(j);  // nlohmann's objects keep their keys sorted
}

std::string ApprovalFileToJson(const ApprovalFile& f) {
  return Dump(json{{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}, {"content_base64", Base64Encode(f.content)}});
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
  for (const char* field : {"code_sha256", "request_sha256"}) {
    if (it = doc.find(field); it != doc.end() && !it->is_null()) {
      std::string hex = it->is_string() ? it->get<std::string>() : std::string();
      bool ok = hex.size() == 64;
      for (char& c : hex) {
        if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
        ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
      }
      if (!ok) return bad(field, std::string(field) + ": must be the 64 hex digits the approval shows as " + field);
      (field[0] == 'c' ? out->code_sha256 : out->request_sha256) = std::move(hex);
    }
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
