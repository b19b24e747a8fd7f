// JSON for the HTTP service's requests and responses (model/execute.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "base/sandbox_path.h"
#include "model/base64.h"
#include "model/execute.h"
#include "model/json_util.h"

namespace airlock::model {

using internal::Dump;
using nlohmann::json;

namespace {

ApiError Unprocessable(std::string field, std::string message) {
  return ApiError{ErrorKind::kUnprocessable, std::move(message), std::move(field)};
}

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    default: return "a value";
  }
}

// A JSON number (not a boolean) as a double.
bool AsNumber(const json& v, double* out) {
  if (!v.is_number()) return false;
  *out = v.get<double>();
  return std::isfinite(*out);
}

// A size: a non-negative integer (bytes) or a string like "128Mi".
bool AsSizeText(const json& v, std::string* out) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    *out = std::to_string(v.get<int64_t>());
    return true;
  }
  if (v.is_string()) {
    *out = v.get<std::string>();
    return !out->empty() && out->size() <= 32;
  }
  return false;
}

bool ParseLimits(const json& limits, LimitsRequest* out, ApiError* error) {
  if (!limits.is_object()) {
    *error = Unprocessable("limits", "limits: must be an object, got " + TypeName(limits));
    return false;
  }
  for (const auto& [key, value] : limits.items()) {
    const std::string field = "limits." + key;
    if (value.is_null()) continue;
    if (key == "memory" || key == "disk" || key == "output") {
      std::string text;
      if (!AsSizeText(value, &text)) {
        *error = Unprocessable(field, field + ": must be a size in bytes or a string such as \"128Mi\", got " +
                                          TypeName(value));
        return false;
      }
      (key == "memory" ? out->memory : key == "disk" ? out->disk : out->output) = text;
    } else if (key == "cpu" || key == "cpu_time") {
      double d = 0;
      if (!AsNumber(value, &d) || !(d > 0)) {
        *error = Unprocessable(field, field + ": must be a number greater than 0");
        return false;
      }
      (key == "cpu" ? out->cpu : out->cpu_time) = d;
    } else if (key == "pids") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1) {
        *error = Unprocessable(field, field + ": must be an integer of at least 1");
        return false;
      }
      out->pids = value.get<int64_t>();
    } else {
      *error = Unprocessable(field, field + ": unknown limit (known: memory, cpu, cpu_time, pids, disk, output)");
      return false;
    }
  }
  return true;
}

// "1.0" for whole numbers (as Python prints a float), else the shortest form.
std::string PythonFloat(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) snprintf(buf, sizeof buf, "%.1f", v);
  else snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

json ViolationObject(const Violation& v) {
  json j = {{"rule", v.rule},         {"message", v.message}, {"line", v.line},
            {"col", v.col},           {"severity", v.severity}, {"stage", v.stage}};
  if (v.allowed_in) j["allowed_in"] = *v.allowed_in;
  return j;
}

json ErrorObject(const std::optional<ErrorInfo>& e) {
  if (!e) return nullptr;
  return {{"name", e->name}, {"value", e->value}, {"traceback", e->traceback}};
}

// "files": [{"path", "content", "encoding"}], decoded into `out`.
bool ParseFiles(const json& files, size_t max_files, std::vector<InputFile>* out, ApiError* error) {
  if (!files.is_array()) {
    *error = Unprocessable("files", "files: must be an array of {\"path\", \"content\", \"encoding\"}, got " +
                                        TypeName(files));
    return false;
  }
  if (files.size() > max_files) {
    *error = Unprocessable("files", "files: " + std::to_string(files.size()) + " entries, more than the " +
                                        std::to_string(max_files) + " allowed");
    return false;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const json& f = files[i];
    const std::string at = "files[" + std::to_string(i) + "]";
    if (!f.is_object()) {
      *error = Unprocessable(at, at + ": must be an object {\"path\", \"content\", \"encoding\"}, got " + TypeName(f));
      return false;
    }
    for (const auto& [key, value] : f.items()) {
      if (key != "path" && key != "content" && key != "encoding") {
        *error = Unprocessable(at + "." + key, at + "." + key + ": unknown field (known: path, content, encoding)");
        return false;
      }
    }
    auto path = f.find("path");
    if (path == f.end() || !path->is_string()) {
      *error = Unprocessable(at + ".path", at + ".path: required, a string such as \"data/in.csv\"");
      return false;
    }
    InputFile file;
    file.path = path->get<std::string>();
    if (Status st = CheckSandboxPath(file.path); !st.ok()) {
      *error = Unprocessable(at + ".path", at + "." + st.message());
      return false;
    }
    std::string encoding = "utf-8";
    if (auto e = f.find("encoding"); e != f.end() && !e->is_null()) {
      if (!e->is_string() || (e->get<std::string>() != "utf-8" && e->get<std::string>() != "base64")) {
        *error = Unprocessable(at + ".encoding", at + ".encoding: must be \"utf-8\" or \"base64\"");
        return false;
      }
      encoding = e->get<std::string>();
    }
    auto content = f.find("content");
    if (content == f.end() || !content->is_string()) {
      *error = Unprocessable(at + ".content", at + ".content: required, a string (" + encoding + ")");
      return false;
    }
    if (encoding == "base64") {
      if (!Base64Decode(content->get_ref<const std::string&>(), &file.content)) {
        *error = Unprocessable(at + ".content", at + ".content: not valid base64 (standard alphabet, '=' padding)");
        return false;
      }
    } else {
      file.content = content->get<std::string>();  // the body was checked to be UTF-8
    }
    out->push_back(std::move(file));
  }
  // No two files at one path, and no file where another needs a directory.
  std::vector<size_t> order(out->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return (*out)[a].path < (*out)[b].path; });
  for (size_t k = 1; k < order.size(); ++k) {
    const std::string& a = (*out)[order[k - 1]].path;
    for (size_t m = k; m < order.size(); ++m) {
      const std::string& b = (*out)[order[m]].path;
      if (b.compare(0, a.size(), a) != 0) break;  // sorted: nothing later starts with a
      if (b.size() == a.size() || b[a.size()] == '/') {
        size_t later = std::max(order[k - 1], order[m]), earlier = std::min(order[k - 1], order[m]);
        const std::string at = "files[" + std::to_string(later) + "].path";
        *error = Unprocessable(at, at + ": \"" + EscapeSandboxPath((*out)[later].path) +
                                       (b.size() == a.size() ? "\" is also files[" : "\" conflicts with files[") +
                                       std::to_string(earlier) + "] (a path may appear once, and a file cannot "
                                       "also be a directory of another)");
        return false;
      }
    }
  }
  return true;
}

json FileObject(const OutputFile& f) {
  return {{"path", f.path}, {"size", f.size}, {"content", f.content_base64}, {"truncated", f.truncated}};
}

json ResultObject(const DisplayResult& r) {
  json data = json::parse(r.data_json, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded() || !data.is_object()) data = json::object();
  return {{"is_main_result", r.is_main_result}, {"data", std::move(data)}};
}

}  // namespace

bool IsValidUtf8(std::string_view s, size_t* bad_offset) {
  size_t i = 0;
  const size_t n = s.size();
  auto fail = [&](size_t at) {
    if (bad_offset) *bad_offset = at;
    return false;
  };
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return fail(i);
    }
    if (i + len > n) return fail(i);
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return fail(i);
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return fail(i);
    }
    i += len;
  }
  return true;
}

std::string NormalizeLanguage(std::string_view name) {
  std::string l;
  for (char c : name) {
    if (c != ' ' && c != '\t' && l.size() < 32) l.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (l == "python3") return "python";
  if (l == "js" || l == "node") return "javascript";
  if (l == "ts") return "typescript";
  if (l == "sh") return "bash";
  for (const char* known : {"python", "javascript", "typescript", "r", "java", "bash"}) {
    if (l == known) return l;
  }
  return "";
}

bool ParseExecuteRequest(std::string_view body, const RequestCaps& caps, ExecuteRequest* request, ApiError* error) {
  *request = ExecuteRequest();
  size_t bad = 0;
  if (!IsValidUtf8(body, &bad)) {
    *error = Unprocessable("", "request body: invalid UTF-8 at byte " + std::to_string(bad) +
                                   " (the body must be JSON text in UTF-8; send binary data base64-encoded)");
    return false;
  }
  if (internal::JsonDepth(body) > caps.max_depth) {
    *error = Unprocessable("", "request body: JSON nested deeper than " + std::to_string(caps.max_depth) + " levels");
    return false;
  }
  json doc;
  std::string detail;
  switch (internal::ParseClientJson(body, &doc, &detail)) {
    case internal::ClientJson::kOk: break;
    case internal::ClientJson::kSyntax:
      *error = Unprocessable("", "request body is not valid JSON: " + detail);
      return false;
    case internal::ClientJson::kDuplicateKey:
      *error = internal::DuplicateKeyError(detail);
      return false;
  }
  if (!doc.is_object()) {
    *error = Unprocessable("", "request body must be a JSON object such as {\"code\": \"print(1)\"}, got " +
                                   TypeName(doc));
    return false;
  }

  auto it = doc.find("code");
  if (it == doc.end() || it->is_null()) {
    *error = Unprocessable("code", "code: field required (the Python source to run, as a string)");
    return false;
  }
  if (!it->is_string()) {
    *error = Unprocessable("code", "code: must be a string, got " + TypeName(*it));
    return false;
  }
  request->code = it->get<std::string>();
  if (request->code.size() > caps.max_code_bytes) {
    *error = ApiError{ErrorKind::kPayloadTooLarge,
                      "code: " + std::to_string(request->code.size()) + " bytes is over the limit of " +
                          std::to_string(caps.max_code_bytes) + " bytes",
                      "code"};
    return false;
  }
  if (!IsValidUtf8(request->code, &bad)) {  // the parser checks this already; belt and braces
    *error = Unprocessable("code", "code: invalid UTF-8 at byte " + std::to_string(bad));
    return false;
  }

  if (it = doc.find("timeout"); it != doc.end() && !it->is_null()) {
    double t = 0;
    if (!AsNumber(*it, &t)) {
      *error = Unprocessable("timeout", "timeout: must be a number of seconds, got " + TypeName(*it));
      return false;
    }
    request->timeout_s = t;
  }
  if (it = doc.find("wait"); it != doc.end() && !it->is_null()) {
    double w = 0;
    if (!AsNumber(*it, &w) || !(w > 0 && w <= 3600)) {
      *error = Unprocessable("wait", "wait: must be a number of seconds, 0 < wait <= 3600 (how long to hold the "
                                     "connection for a person's approval)");
      return false;
    }
    request->wait_s = w;
  }
  if (it = doc.find("profile"); it != doc.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty() || it->get<std::string>().size() > 64) {
      *error = Unprocessable("profile", "profile: must be a profile name (a non-empty string of at most 64 bytes)");
      return false;
    }
    request->profile = it->get<std::string>();
  }
  if (it = doc.find("language"); it != doc.end() && !it->is_null()) {
    if (!it->is_string()) {
      *error = Unprocessable("language", "language: must be a string, got " + TypeName(*it));
      return false;
    }
    std::string lang = NormalizeLanguage(it->get<std::string>());
    if (lang.empty()) {
      *error = Unprocessable("language", "language: '" + it->get<std::string>().substr(0, 64) +
                                             "' is not supported (supported: python, javascript, typescript, r, "
                                             "java, bash)");
      return false;
    }
    request->language = std::move(lang);
  }
  if (it = doc.find("limits"); it != doc.end() && !it->is_null()) {
    if (!ParseLimits(*it, &request->limits, error)) return false;
  }
  if (it = doc.find("files"); it != doc.end() && !it->is_null()) {
    if (!ParseFiles(*it, caps.max_files, &request->files, error)) return false;
  }
  if (it = doc.find("env"); it != doc.end()) {
    if (!internal::ParseEnv(*it, "env", &request->env, error)) return false;
  }
  return true;
}

std::string CompatExecuteToJson(const ExecuteResponse& r) {
  const RunReport& run = r.run;
  std::string out = run.stdout_text, err = run.stderr_text;
  auto marker = [&](int64_t cap) {
    if (cap > 0 && cap % 1024 == 0) return "[output truncated at " + std::to_string(cap / 1024) + " KB]";
    return "[output truncated at " + std::to_string(cap) + " bytes]";
  };
  if (run.stdout_truncated) out += "\n" + marker(r.limits.output_bytes);
  if (run.stderr_truncated) err += "\n" + marker(r.limits.output_bytes);
  if (run.timed_out) {
    if (!err.empty() && err.back() != '\n') err += '\n';
    err += "Execution timed out after " + PythonFloat(r.limits.timeout_s) + "s";
  }
  json error = nullptr;
  if (r.error) {
    error = r.error->value.empty() ? r.error->name : r.error->name + ": " + r.error->value;
  } else if (run.kill_reason) {
    error = "Killed (" + *run.kill_reason + "): " + run.kill_detail;
  }
  json j = {
      {"stdout", std::move(out)},
      {"stderr", std::move(err)},
      {"exit_code", run.signal ? -run.signal : run.exit_code},
      {"timed_out", run.timed_out},
      {"result", r.result ? json(*r.result) : json(nullptr)},
      {"error", std::move(error)},
  };
  if (!r.files.empty() || r.files_truncated) {
    json files = json::array();
    for (const OutputFile& f : r.files) files.push_back(FileObject(f));
    j["files"] = std::move(files);
    j["files_truncated"] = r.files_truncated;
  }
  return Dump(j);
}

std::string V1ExecuteToJson(const ExecuteResponse& r) {
  json j = internal::RunReportObject(r.run);
  j["request_id"] = r.request_id;
  j["result"] = r.result ? json(*r.result) : json(nullptr);
  json results = json::array();
  for (const DisplayResult& d : r.results) results.push_back(ResultObject(d));
  j["results"] = std::move(results);
  j["error"] = ErrorObject(r.error);
  j["truncated"]["results"] = r.results_truncated;
  j["truncated"]["files"] = r.files_truncated;
  json files = json::array();
  for (const OutputFile& f : r.files) files.push_back(FileObject(f));
  j["files"] = std::move(files);
  const EffectiveLimitsView& l = r.limits;
  j["profile"] = {{"name", l.profile},
                  {"timeout_s", l.timeout_s},
                  {"memory_bytes", l.memory_bytes},
                  {"cpu_cores", l.cpu_cores},
                  {"cpu_time_s", l.cpu_time_s},
                  {"pids", l.pids},
                  {"disk_bytes", l.disk_bytes},
                  {"output_bytes", l.output_bytes},
                  {"clamped", l.clamped}};
  json warnings = json::array();
  for (const Violation& v : r.warnings) warnings.push_back(ViolationObject(v));
  j["warnings"] = std::move(warnings);
  return Dump(j);
}

std::string RejectionToJson(const std::vector<Violation>& violations, bool compat, const std::string& request_id) {
  json list = json::array();
  for (const Violation& v : violations) {
    if (compat) list.push_back(v.compat);
    else list.push_back(ViolationObject(v));
  }
  json j = {{"error", "Code validation failed"}, {"violations", std::move(list)}};
  if (!compat) j["request_id"] = request_id;
  return Dump(j);
}

std::string ErrorToJson(const ApiError& e, const std::string& request_id) {
  json j = {{"error", e.message}};
  if (!e.code.empty()) j["code"] = e.code;
  if (!e.quota.empty()) j["quota"] = e.quota;
  if (!e.field.empty()) {
    j["field"] = e.field;
    if (e.kind == ErrorKind::kUnprocessable) {
      json loc = json::array({"body"});
      // "limits.memory" -> ["body", "limits", "memory"], "files[2].path" ->
      // ["body", "files", 2, "path"], as pydantic writes it.
      std::string_view rest = e.field;
      while (!rest.empty()) {
        size_t dot = rest.find('.');
        std::string_view part = rest.substr(0, dot);
        size_t bracket = part.find('[');
        std::string_view index =
            bracket == std::string_view::npos || part.back() != ']' ? std::string_view()
                                                                     : part.substr(bracket + 1, part.size() - bracket - 2);
        if (!index.empty() && index.size() <= 9 &&
            std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          loc.push_back(std::string(part.substr(0, bracket)));
          loc.push_back(std::stoll(std::string(index)));
        } else {
          loc.push_back(std::string(part));
        }
        rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
      }
      j["detail"] = json::array({{{"loc", std::move(loc)}, {"msg", e.message}, {"type", "value_error"}}});
    }
  }
  (void)request_id;  // carried by the X-Request-Id header: the fips bodies stay exact
  return Dump(j);
}

std::string ProfileToJson(const ProfileView& p, const std::vector<LayerReport>& isolation) {
  json imports = json::array();
  if (p.any_import) imports.push_back("*");
  else for (const auto& m : p.allowed_imports) imports.push_back(m);
  json blocklist = json::array();
  for (const auto& [m, a] : p.blocklist) blocklist.push_back(json::array({m, a}));
  json modes = json::object();
  for (const auto& [layer, mode] : p.audit_modes) modes[layer] = mode;
  auto resources_json = [](const ResourcesView& r) {
    return json{{"memory_bytes", r.memory_bytes},
                {"cpu_cores", r.cpu_cores},
                {"timeout_max", r.timeout_max_s},
                {"timeout_default", r.timeout_default_s},
                {"pids", r.pids},
                {"disk_bytes", r.disk_bytes},
                {"output_bytes", r.output_bytes},
                {"cpu_time", r.cpu_time_s ? json(*r.cpu_time_s) : json(nullptr)}};
  };
  json resources = resources_json(p);
  json language_layers = json::object();
  for (const LanguageLayers& l : p.layers) {
    language_layers[l.language] = {{"kernel", true},
                          {"analyzer", l.analyzer},
                          {"import_allowlist", l.import_allowlist},
                          {"blocklist", l.blocklist},
                          {"runtime_import_hook", l.runtime_import_hook}};
  }
  json language_resources = json::object();
  for (const auto& [language, r] : p.language_resources) language_resources[language] = resources_json(r);
  json j = {
      {"name", p.name},
      {"description", p.description},
      {"allowed_imports", std::move(imports)},
      {"blocklist_entries", p.blocklist.size()},
      {"scan_stages", {{"pre", p.scan_pre}, {"post", p.scan_post}}},
      {"extends", p.extends.empty() ? json(nullptr) : json(p.extends)},
      {"any_import", p.any_import},
      {"blocklist", std::move(blocklist)},
      {"preimport", p.preimport},
      {"resources", std::move(resources)},
      {"audit", {{"mode", std::move(modes)}}},
      {"language", p.language},
      {"languages", p.languages},
      {"language_resources", std::move(language_resources)},
      {"layers", std::move(language_layers)},
      {"network", p.network},
      {"matplotlib", p.matplotlib},
      {"approval", {{"policy", p.approval_policy}, {"rules", p.approval_rules},
                    {"expires", p.approval_expires_s}, {"self_approve", p.approval_self}}},
      {"default", p.is_default},
  };
  if (!isolation.empty()) {
    json layers = json::object();
    for (const LayerReport& l : isolation) {
      json layer = {{"enforced", l.enforced}};
      if (!l.detail.empty()) layer["detail"] = l.detail;
      layers[l.name] = std::move(layer);
    }
    j["isolation"] = std::move(layers);
  }
  return Dump(j);
}

std::string ProfileListToJson(const std::vector<ProfileView>& profiles, const std::string& default_name,
                              const std::vector<std::pair<std::string, std::string>>& door_defaults) {
  json list = json::array();
  for (const ProfileView& p : profiles) list.push_back(json::parse(ProfileToJson(p, {})));
  json j = {{"default", default_name}, {"profiles", std::move(list)}};
  if (!door_defaults.empty()) {
    json d = json::object();
    for (const auto& [door, name] : door_defaults) d[door] = name;
    j["defaults"] = std::move(d);
  }
  return Dump(j);
}

std::string RulesToJson(const std::vector<RuleView>& rules) {
  json list = json::array();
  for (const RuleView& r : rules) {
    list.push_back({{"id", r.id}, {"family", r.family}, {"stage", r.stage}, {"severity", r.severity},
                    {"catches", r.catches}});
  }
  return Dump({{"rules", std::move(list)}});
}

std::string StatusToJson(const std::string& status, const std::string& detail) {
  json j = {{"status", status}};
  if (!detail.empty()) j["detail"] = detail;
  return Dump(j);
}

std::string ReadyToJson(const std::string& status, const std::string& detail, const std::vector<PoolView>& pools) {
  json j = {{"status", status}};
  if (!detail.empty()) j["detail"] = detail;
  json p = json::object();
  for (const PoolView& v : pools) {
    json one = {{"ready", v.ready}, {"target", v.target}, {"zygote", v.zygote}, {"state", v.state}};
    if (!v.reason.empty()) one["reason"] = v.reason;
    if (!v.detail.empty()) one["detail"] = v.detail;
    p[v.profile] = std::move(one);
  }
  j["pools"] = std::move(p);
  return Dump(j);
}

std::string AuditRecordToJson(const AuditRecord& a) {
  json violations = json::array();
  for (const Violation& v : a.violations) violations.push_back(ViolationObject(v));
  json j = {
      {"time", a.time},
      {"type", a.type},
      {"request_id", a.request_id},
      {"route", a.route},
      {"client", {{"token", a.token_name.empty() ? json(nullptr) : json(a.token_name)},
                  {"address", a.client_address}}},
      {"profile", a.profile.empty() ? json(nullptr) : json(a.profile)},
      {"code_sha256", a.code_sha256.empty() ? json(nullptr) : json(a.code_sha256)},
      {"code_bytes", a.code_bytes},
      {"verdict", a.verdict},
      {"http_status", a.http_status},
      {"violations", std::move(violations)},
      {"exit_code", a.exit_code ? json(*a.exit_code) : json(nullptr)},
      {"signal", a.signal ? json(*a.signal) : json(nullptr)},
      {"kill_reason", a.kill_reason ? json(*a.kill_reason) : json(nullptr)},
      {"client_gone", a.client_gone},
      {"duration_ms", a.duration_ms},
      {"run_ms", a.run_ms},
      {"usage", {{"cpu_ms", a.cpu_ms}, {"max_rss_kb", a.max_rss_kb}}},
  };
  if (!a.error.empty()) j["error"] = a.error;
  if (!a.method.empty()) j["method"] = a.method;
  if (!a.approval_id.empty()) j["approval_id"] = a.approval_id;
  if (!a.request_sha256.empty()) j["request_sha256"] = a.request_sha256;
  if (!a.requested_by.empty()) j["requested_by"] = a.requested_by;
  if (!a.reason.empty()) j["reason"] = a.reason;
  return Dump(j);
}

}  // namespace airlock::model
