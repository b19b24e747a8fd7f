#include "model/json_util.h"

#include <unordered_set>
#include <vector>

#include "model/run_report.h"

namespace airlock::model {

using nlohmann::json;

namespace internal {

ClientJson ParseClientJson(std::string_view text, json* doc, std::string* detail) {
  // One set of keys per object being parsed: the innermost open object is the
  // top (arrays in between hold no keys). Memory is bounded by the text.
  std::vector<std::unordered_set<std::string>> open;
  std::string duplicate;
  bool found = false;
  json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open.empty() && parsed.is_string() && !open.back().insert(parsed.get<std::string>()).second && !found) {
          found = true;
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    *doc = json::parse(text, check, /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, ..." -> "parse error at line 1, ..."
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    *detail = what;
    *doc = json();
    return ClientJson::kSyntax;
  }
  if (found) {
    *detail = duplicate.substr(0, 64);
    *doc = json();
    return ClientJson::kDuplicateKey;
  }
  return ClientJson::kOk;
}

ApiError DuplicateKeyError(const std::string& key) {
  ApiError e{ErrorKind::kBadRequest,
             "request body: the key \"" + key +
                 "\" appears twice in one object; a JSON object must name each key once (parsers differ on which "
                 "one counts)",
             ""};
  e.code = "duplicate_key";
  return e;
}

bool ParseRequestObject(std::string_view body, const RequestCaps& caps, json* doc, ApiError* error) {
  auto fail = [&](std::string message) {
    *error = ApiError{ErrorKind::kUnprocessable, std::move(message), ""};
    return false;
  };
  if (!IsValidUtf8(body)) return fail("request body: invalid UTF-8 (the body must be JSON text in UTF-8)");
  if (JsonDepth(body) > caps.max_depth) {
    return fail("request body: JSON nested deeper than " + std::to_string(caps.max_depth) + " levels");
  }
  std::string detail;
  switch (ParseClientJson(body, doc, &detail)) {
    case ClientJson::kOk: break;
    case ClientJson::kSyntax: return fail("request body is not valid JSON: " + detail);
    case ClientJson::kDuplicateKey:
      *error = DuplicateKeyError(detail);
      return false;
  }
  if (!doc->is_object()) return fail("request body must be a JSON object");
  return true;
}

bool ParseEnv(const json& value, const std::string& field, std::map<std::string, std::string>* out, ApiError* error) {
  out->clear();
  auto fail = [&](std::string message) {
    *error = ApiError{ErrorKind::kUnprocessable, field + ": " + message, field};
    return false;
  };
  if (value.is_null()) return true;
  if (!value.is_object()) return fail("must be an object of variable names to string values");
  if (value.size() > kMaxEnvVars) {
    return fail(std::to_string(value.size()) + " variables, more than the " + std::to_string(kMaxEnvVars) +
                " allowed");
  }
  size_t total = 0;
  for (const auto& [name, v] : value.items()) {
    bool ok = !name.empty() && name.size() <= kMaxEnvNameBytes && !(name[0] >= '0' && name[0] <= '9');
    for (char c : name) {
      ok = ok && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    }
    if (!ok) {
      return fail("'" + name.substr(0, 64) + "' is not a variable name (letters, digits and _, not starting with " +
                  "a digit, at most " + std::to_string(kMaxEnvNameBytes) + " bytes)");
    }
    if (!v.is_string()) return fail(name + ": the value must be a string");
    const std::string& text = v.get_ref<const std::string&>();
    if (text.size() > kMaxEnvValueBytes || text.find('\0') != std::string::npos) {
      return fail(name + ": the value must be at most " + std::to_string(kMaxEnvValueBytes) +
                  " bytes, without NUL");
    }
    total += name.size() + text.size();
    if (total > kMaxEnvBytes) return fail("more than " + std::to_string(kMaxEnvBytes) + " bytes of names and values");
    (*out)[name] = text;
  }
  return true;
}

size_t JsonDepth(std::string_view text) {
  size_t depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > max_depth) max_depth = depth;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return max_depth;
}

json RunReportObject(const RunReport& r) {
  json isolation = json::object();
  for (const LayerReport& l : r.layers) {
    json layer = {{"enforced", l.enforced}};
    if (!l.detail.empty()) layer["detail"] = l.detail;
    isolation[l.name] = std::move(layer);
  }
  isolation["landlock_abi"] = r.landlock_abi;
  isolation["cgroup_version"] = r.cgroup_version;
  isolation["mode"] = r.mode;
  isolation["host_uid"] = r.host_uid >= 0 ? json(r.host_uid) : json(nullptr);
  json j = {
      {"exit_code", r.exit_code},
      {"signal", r.signal ? json(r.signal) : json(nullptr)},
      {"timed_out", r.timed_out},
      {"kill_reason", r.kill_reason ? json(*r.kill_reason) : json(nullptr)},
      {"stdout", r.stdout_text},
      {"stderr", r.stderr_text},
      {"truncated", {{"stdout", r.stdout_truncated}, {"stderr", r.stderr_truncated}}},
      {"duration_ms", r.duration_ms},
      {"usage", {{"cpu_ms", r.cpu_ms}, {"max_rss_kb", r.max_rss_kb}}},
      {"isolation", std::move(isolation)},
  };
  if (r.kill_reason) j["kill_detail"] = r.kill_detail;
  return j;
}

}  // namespace internal

std::string RunReportToJson(const RunReport& r, bool pretty) {
  return internal::Dump(internal::RunReportObject(r), pretty);
}

std::string LayerToJson(const LayerReport& l, bool required) {
  return internal::Dump({{"name", l.name}, {"ok", l.enforced}, {"required", required}, {"detail", l.detail}});
}

}  // namespace airlock::model
