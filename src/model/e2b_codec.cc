#include <algorithm>
#include <cctype>
#include <utility>

#include "base/sandbox_path.h"
#include "model/e2b.h"
#include "model/json_util.h"

namespace airlock::model {
namespace {

using internal::Dump;
using internal::json;

constexpr std::string_view kHome = "/home/user";

ApiError Unprocessable(std::string field, std::string message) {
  return ApiError{ErrorKind::kUnprocessable, std::move(message), std::move(field)};
}

// An optional string member (null and absent are the same).
bool OptionalString(const json& doc, const char* field, std::optional<std::string>* out, ApiError* error) {
  auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) return true;
  if (!it->is_string()) {
    *error = Unprocessable(field, std::string(field) + ": must be a string");
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

std::string WithType(std::string_view type, json j) {
  json out = {{"type", std::string(type)}};
  for (auto& [k, v] : j.items()) out[k] = std::move(v);
  return Dump(out);
}

// The E2B field of a MIME type (template/server/api/models/result.py); "" for extra.
const char* E2bField(std::string_view mime) {
  static const std::pair<const char*, const char*> kFields[] = {
      {"text/plain", "text"},        {"text/html", "html"},          {"text/markdown", "markdown"},
      {"image/svg+xml", "svg"},      {"image/png", "png"},           {"image/jpeg", "jpeg"},
      {"application/pdf", "pdf"},    {"text/latex", "latex"},        {"application/json", "json"},
      {"application/javascript", "javascript"}, {"e2b/data", "data"}, {"e2b/chart", "chart"},
  };
  for (const auto& [m, f] : kFields) {
    if (mime == m) return f;
  }
  return "";
}

// What a killed run is called on E2B's "error" line.
const char* KillName(const std::string& reason) {
  if (reason == "timeout") return "TimeoutError";
  if (reason == "memory") return "MemoryError";
  if (reason == "cancelled") return "ExecutionAborted";
  return "SandboxLimitExceeded";
}

}  // namespace

std::string E2bNormalizeLanguage(std::string_view language) {
  std::string l(language);
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l.empty()) return "python";
  if (l == "js") return "javascript";
  if (l == "ts") return "typescript";
  return l;
}

bool ParseE2bExecuteRequest(std::string_view body, const RequestCaps& caps, E2bExecuteRequest* request,
                            ApiError* error) {
  *request = E2bExecuteRequest();
  json doc;
  if (!internal::ParseRequestObject(body, caps, &doc, error)) return false;
  auto code = doc.find("code");
  if (code == doc.end() || !code->is_string()) {
    *error = Unprocessable("code", "code: required, a string");
    return false;
  }
  request->code = code->get<std::string>();
  if (request->code.size() > caps.max_code_bytes) {
    *error = {ErrorKind::kPayloadTooLarge,
              "code is larger than this server's cap of " + std::to_string(caps.max_code_bytes) + " bytes", "code"};
    return false;
  }
  if (!OptionalString(doc, "context_id", &request->context_id, error)) return false;
  if (!OptionalString(doc, "language", &request->language, error)) return false;
  if (request->context_id && request->language) {
    *error = {ErrorKind::kBadRequest, "Only one of context_id or language can be provided", ""};
    return false;
  }
  if (request->language) request->language = E2bNormalizeLanguage(*request->language);
  if (auto env = doc.find("env_vars"); env != doc.end()) {
    if (!internal::ParseEnv(*env, "env_vars", &request->env_vars, error)) return false;
  }
  return true;
}

bool ParseE2bContextRequest(std::string_view body, const RequestCaps& caps, E2bContextRequest* request,
                            ApiError* error) {
  *request = E2bContextRequest();
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return true;
  json doc;
  if (!internal::ParseRequestObject(body, caps, &doc, error)) return false;
  if (!OptionalString(doc, "language", &request->language, error)) return false;
  if (!OptionalString(doc, "cwd", &request->cwd, error)) return false;
  if (request->language) request->language = E2bNormalizeLanguage(*request->language);
  return true;
}

std::string E2bContextToJson(const E2bContext& c) {
  return Dump({{"id", c.id}, {"language", c.language}, {"cwd", c.cwd}});
}

std::string E2bContextListToJson(const std::vector<E2bContext>& contexts) {
  json list = json::array();
  for (const auto& c : contexts) list.push_back({{"id", c.id}, {"language", c.language}, {"cwd", c.cwd}});
  return Dump(list);
}

std::string E2bNumberOfExecutions(int64_t count) {
  return WithType("number_of_executions", {{"execution_count", count}});
}

std::vector<StreamEvent> E2bFinalEvents(const ExecuteResponse& r) {
  std::vector<StreamEvent> out;
  for (const DisplayResult& d : r.results) {
    json data = json::parse(d.data_json, nullptr, /*allow_exceptions=*/false);
    if (data.is_discarded() || !data.is_object()) data = json::object();
    json line = json::object();
    json extra = json::object();
    for (auto& [mime, value] : data.items()) {
      const char* field = E2bField(mime);
      if (mime == "text/plain" && value.is_string()) {
        // E2B's server gives a string's repr without its quotes ('bar' is
        // "bar"), which E2B's clients and tests rely on.
        const std::string& text = value.get_ref<const std::string&>();
        if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') && text.back() == text.front()) {
          value = text.substr(1, text.size() - 2);
        }
      }
      if (*field != '\0') {
        line[field] = std::move(value);
      } else {
        extra[mime] = std::move(value);
      }
    }
    line["extra"] = std::move(extra);
    line["is_main_result"] = d.is_main_result;
    out.push_back({"result", WithType("result", std::move(line))});
  }
  if (r.error) {
    out.push_back({"error", E2bErrorEvent(r.error->name, r.error->value, r.error->traceback)});
  } else if (r.run.kill_reason) {
    // Killed by a limit: E2B's kernel would have said so as an error too.
    out.push_back({"error", E2bErrorEvent(KillName(*r.run.kill_reason), r.run.kill_detail, "")});
  }
  return out;
}

std::string E2bErrorEvent(std::string_view name, std::string_view value, std::string_view traceback) {
  return WithType("error",
                  {{"name", std::string(name)}, {"value", std::string(value)}, {"traceback", std::string(traceback)}});
}

std::string E2bEndOfExecution() { return R"({"type":"end_of_execution"})"; }

std::string E2bErrorBody(std::string_view message, int code) {
  return Dump({{"message", std::string(message)}, {"code", code}});
}

std::string E2bWrittenFilesToJson(const std::vector<std::string>& paths,
                                  const std::map<std::string, std::string>& metadata) {
  json list = json::array();
  for (const auto& p : paths) {
    size_t slash = p.rfind('/');
    json entry = {{"path", p}, {"name", slash == std::string::npos ? p : p.substr(slash + 1)}, {"type", "file"}};
    if (!metadata.empty()) entry["metadata"] = metadata;
    list.push_back(std::move(entry));
  }
  return Dump(list);
}

bool E2bPathToSandbox(std::string_view p, std::string* relative, std::string* error) {
  std::string_view rel = p;
  if (!p.empty() && p.front() == '/') {
    rel = std::string_view();
    if (p.size() > kHome.size() + 1 && p.substr(0, kHome.size()) == kHome && p[kHome.size()] == '/') {
      rel = p.substr(kHome.size() + 1);
    }
    if (rel.empty()) {
      *error = "path '" + EscapeSandboxPath(p.substr(0, 200)) +
               "': only files under /home/user (the sandbox's working directory) can be reached";
      return false;
    }
  }
  if (Status s = CheckSandboxPath(rel); !s.ok()) {
    *error = s.message();
    return false;
  }
  *relative = std::string(rel);
  return true;
}

std::string E2bPathFromSandbox(std::string_view relative) { return std::string(kHome) + "/" + std::string(relative); }

bool E2bPathToPlace(std::string_view p, E2bPlace* place, std::string* error) {
  constexpr std::string_view kTmp = "/tmp/";
  if (p.substr(0, kTmp.size()) != kTmp) {
    place->tmp = false;
    if (!E2bPathToSandbox(p, &place->relative, error)) {
      *error += " (or under /tmp, the sandbox's other writable directory)";
      return false;
    }
    return true;
  }
  std::string_view rel = p.substr(kTmp.size());
  if (Status s = CheckSandboxPath(rel); !s.ok()) {
    *error = s.message();
    return false;
  }
  place->tmp = true;
  place->relative = std::string(rel);
  return true;
}

}  // namespace airlock::model
