#include <algorithm>
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

// 422 for any of `keys` present (not null) in the request object `body`:
// fields fixed at creation, refused rather than ignored; `why` follows the name.
bool RefuseFixed(std::string_view body, const RequestCaps& caps, std::initializer_list<const char*> keys,
                 const char* why, ApiError* error) {
  json doc;
  if (!internal::ParseRequestObject(body, caps, &doc, error)) return false;
  for (const char* key : keys) {
    if (auto it = doc.find(key); it != doc.end() && !it->is_null()) {
      *error = Unprocessable(key, std::string(key) + why);
      return false;
    }
  }
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
  // "language" (any NormalizeLanguage name) picks the session's context of
  // that language; absent, the session's own language.
  if (!ParseExecuteRequest(body, caps, request, error)) return false;
  return RefuseFixed(body, caps, {"profile", "limits"},
                     ": a session's profile and limits are fixed when it is created (POST /v1/sessions); leave this "
                     "field out",
                     error);
}

bool ParseContextExecuteRequest(std::string_view body, const RequestCaps& caps, ExecuteRequest* request,
                                ApiError* error) {
  if (!ParseExecuteRequest(body, caps, request, error)) return false;
  return RefuseFixed(body, caps, {"profile", "limits", "language"},
                     ": a context's language, and its session's profile and limits, are fixed when they are "
                     "created; leave this field out",
                     error);
}

bool ParseContextCreateRequest(std::string_view body, const RequestCaps& caps, ContextCreateRequest* request,
                               ApiError* error) {
  *request = ContextCreateRequest();
  json doc = json::object();
  if (body.find_first_not_of(" \t\r\n") != std::string_view::npos && !internal::ParseRequestObject(body, caps, &doc, error)) {
    return false;
  }
  for (const auto& [key, value] : doc.items()) {
    if (key != "language" && key != "cwd" && key != "env") {
      *error = Unprocessable(key, key.substr(0, 64) + ": not a field of a context (language, cwd, env)");
      return false;
    }
  }
  if (auto it = doc.find("language"); it != doc.end() && !it->is_null()) {
    request->language = it->is_string() ? NormalizeLanguage(it->get<std::string>()) : "";
    if (request->language.empty()) {
      *error = Unprocessable("language",
                             "language: must be one of python, javascript, typescript, r, java, bash (or js, ts)");
      return false;
    }
  }
  if (auto it = doc.find("cwd"); it != doc.end() && !it->is_null()) {
    const std::string cwd = it->is_string() ? it->get<std::string>() : "";
    bool ok = !cwd.empty() && cwd[0] == '/' && cwd.size() <= 1024 && cwd.find('\0') == std::string::npos;
    for (size_t pos = 1; ok && pos <= cwd.size();) {
      size_t next = std::min(cwd.find('/', pos), cwd.size());
      std::string_view part(cwd.data() + pos, next - pos);
      ok = part != "." && part != ".." && (!part.empty() || next == cwd.size());
      pos = next + 1;
    }
    if (!ok) {
      *error = Unprocessable("cwd", "cwd: must be an absolute path without '.', '..' or '//' (at most 1024 bytes)");
      return false;
    }
    request->cwd = cwd.size() > 1 && cwd.back() == '/' ? cwd.substr(0, cwd.size() - 1) : cwd;
  }
  if (auto it = doc.find("env"); it != doc.end()) {
    if (!internal::ParseEnv(*it, "env", &request->env, error)) return false;
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
      {"language", s.language},
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
  out += ",\"execution_count\":" + std::to_string(call.execution_count) + ",\"session\":" + Dump(session);
  if (!call.context_id.empty()) {
    json context = {{"id", call.context_id}, {"language", call.context_language}, {"restarted", call.context_restarted}};
    if (!call.context_end_reason.empty()) context["end_reason"] = call.context_end_reason;
    out += ",\"context\":" + Dump(context);
  }
  return out + "}";
}

namespace {

json ContextObject(const ContextView& c) {
  json j = {{"id", c.id},
            {"language", c.language},
            {"cwd", c.cwd},
            {"default", c.is_default},
            {"state", c.state},
            {"execution_count", c.execution_count},
            {"created_at", Rfc3339Ms(c.created_at_ms)},
            {"env", c.env}};
  if (!c.end_reason.empty()) j["end_reason"] = c.end_reason;
  return j;
}

}  // namespace

std::string ContextToJson(const ContextView& c) { return Dump(ContextObject(c)); }

std::string ContextListToJson(const std::vector<ContextView>& contexts) {
  json list = json::array();
  for (const ContextView& c : contexts) list.push_back(ContextObject(c));
  return Dump(json{{"contexts", std::move(list)}});
}

}  // namespace airlock::model
