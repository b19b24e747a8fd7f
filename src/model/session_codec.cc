#include <ctime>

#include "model/json_util.h"
#include "model/session.h"

namespace airlock::model {
namespace {

using internal::Dump;
using internal::json;

ApiError Unprocessable(std::string field, std::string message) {
  return ApiError{ErrorKind::kUnprocessable, std::move(message), std::move(field)};
}

bool Seconds(const json& doc, const char* field, std::optional<double>* out, ApiError* error) {
  auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) return true;
  if (!it->is_number() || it->get<double>() <= 0 || it->get<double>() > 366.0 * 86400) {
    *error = Unprocessable(field, std::string(field) + ": must be a positive number of seconds");
    return false;
  }
  *out = it->get<double>();
  return true;
}

}  // namespace

bool ParseSessionCreateRequest(std::string_view body, const RequestCaps& caps, SessionCreateRequest* request,
                               ApiError* error) {
  *request = SessionCreateRequest();
  json doc = json::object();
  if (body.find_first_not_of(" \t\r\n") != std::string_view::npos && !internal::ParseRequestObject(body, caps, &doc, error)) {
    return false;
  }
  if (!Seconds(doc, "idle_timeout", &request->idle_timeout_s, error) || !Seconds(doc, "ttl", &request->ttl_s, error)) {
    return false;
  }
  // profile, language and limits are checked exactly as /v1/execute checks them.
  json base = {{"code", "pass"}};
  for (const char* key : {"profile", "language", "limits", "env"}) {
    if (auto it = doc.find(key); it != doc.end()) base[key] = *it;
  }
  if (!ParseExecuteRequest(Dump(base), caps, &request->base, error)) return false;
  if (request->base.limits.cpu_time) {
    *error = Unprocessable("limits.cpu_time",
                           "limits.cpu_time: not taken by sessions (each call is bounded by its timeout)");
    return false;
  }
  request->base.code.clear();
  return true;
}

bool ParseSessionExecuteRequest(std::string_view body, const RequestCaps& caps, ExecuteRequest* request,
                                ApiError* error) {
  if (!ParseExecuteRequest(body, caps, request, error)) return false;
  if (!request->language.empty() && request->language != "python") {
    *error = Unprocessable("language", "language: a session is a live Python interpreter; run '" + request->language +
                                           "' code one request at a time with POST /v1/execute");
    return false;
  }
  json doc;
  if (!internal::ParseRequestObject(body, caps, &doc, error)) return false;
  for (const char* key : {"profile", "limits"}) {
    if (auto it = doc.find(key); it != doc.end() && !it->is_null()) {
      *error = Unprocessable(key, std::string(key) +
                                      ": a session's profile and limits are fixed when it is created "
                                      "(POST /v1/sessions); leave this field out");
      return false;
    }
  }
  return true;
}

std::string Rfc3339Ms(int64_t unix_ms) {
  time_t secs = static_cast<time_t>(unix_ms / 1000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[96];
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(unix_ms % 1000));
  return buf;
}

namespace {

json SessionObject(const SessionView& s) {
  const EffectiveLimitsView& l = s.limits;
  json isolation = internal::RunReportObject(s.isolation)["isolation"];
  json j = {
      {"id", s.id},
      {"profile", s.profile},
      {"state", s.state},
      {"created_at", Rfc3339Ms(s.created_at_ms)},
      {"expires_at", Rfc3339Ms(s.expires_at_ms)},
      {"last_used_at", Rfc3339Ms(s.last_used_ms)},
      {"idle_timeout", s.idle_timeout_s},
      {"ttl", s.ttl_s},
      {"execution_count", s.execution_count},
      {"limits",
       {{"timeout_s", l.timeout_s},
        {"memory_bytes", l.memory_bytes},
        {"cpu_cores", l.cpu_cores},
        {"pids", l.pids},
        {"disk_bytes", l.disk_bytes},
        {"output_bytes", l.output_bytes},
        {"clamped", l.clamped}}},
      {"isolation", std::move(isolation)},
  };
  if (!s.end_reason.empty()) j["end_reason"] = s.end_reason;
  return j;
}

}  // namespace

std::string SessionFileToJson(const SessionFileView& f) {
  return Dump(json{{"path", f.path},
                   {"size", f.size},
                   {"modified", f.modified_ms > 0 ? json(Rfc3339Ms(f.modified_ms)) : json(nullptr)},
                   {"type", f.type}});
}

std::string SessionToJson(const SessionView& s) { return Dump(SessionObject(s)); }

std::string SessionListToJson(const std::vector<SessionView>& sessions) {
  json list = json::array();
  for (const SessionView& s : sessions) list.push_back(SessionObject(s));
  return Dump(json{{"sessions", std::move(list)}});
}

std::string SessionExecuteToJson(const ExecuteResponse& response, const SessionCallView& call) {
  std::string out = V1ExecuteToJson(response);  // a JSON object: extended in place
  json session = {{"id", call.session_id}, {"alive", call.alive}, {"interrupted", call.interrupted}};
  if (!call.alive) session["end_reason"] = call.end_reason;
  out.pop_back();  // '}'
  out += ",\"execution_count\":" + std::to_string(call.execution_count) + ",\"session\":" + Dump(session) + "}";
  return out;
}

}  // namespace airlock::model
