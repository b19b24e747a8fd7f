#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "model/command.h"
#include "model/json_util.h"

namespace airlock::model {
namespace {

using internal::Dump;
using internal::json;
using internal::UnprocessableField;

bool String(const json& doc, const char* field, size_t max, std::string* out, ApiError* error) {
  auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) return true;
  if (!it->is_string()) {
    *error = UnprocessableField(field, std::string(field) + ": must be a string");
    return false;
  }
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > max || s.find('\0') != std::string::npos) {
    *error = UnprocessableField(field, std::string(field) + ": must be at most " + std::to_string(max) +
                                      " bytes, without NUL");
    return false;
  }
  *out = s;
  return true;
}

bool Bool(const json& doc, const char* field, bool* out, ApiError* error) {
  auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *error = UnprocessableField(field, std::string(field) + ": must be true or false");
    return false;
  }
  *out = it->get<bool>();
  return true;
}

}  // namespace

bool ParseCommandRequest(std::string_view body, const RequestCaps& caps, CommandRequest* request, ApiError* error) {
  *request = CommandRequest();
  json doc;
  if (!internal::ParseRequestObject(body, caps, &doc, error)) return false;
  static constexpr const char* kKeys[] = {"cmd", "env", "cwd", "timeout", "background", "stdin", "tag"};
  for (const auto& item : doc.items()) {
    // A plain name: clang (the fuzz build) does not capture structured bindings in a lambda.
    const std::string& key = item.key();
    if (std::find_if(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; }) == std::end(kKeys)) {
      *error = UnprocessableField(key.substr(0, 64), "'" + key.substr(0, 64) +
                                                     "' is not a command option (cmd, env, cwd, timeout, background, "
                                                     "stdin, tag)");
      return false;
    }
  }
  if (!String(doc, "cmd", caps.max_code_bytes, &request->cmd, error)) return false;
  if (request->cmd.empty()) {
    *error = UnprocessableField("cmd", "cmd: the command line to run (with /bin/bash -l -c) is missing or empty");
    return false;
  }
  if (!String(doc, "cwd", 4096, &request->cwd, error) || !String(doc, "tag", 256, &request->tag, error) ||
      !Bool(doc, "background", &request->background, error) || !Bool(doc, "stdin", &request->stdin_open, error)) {
    return false;
  }
  if (!request->cwd.empty() && request->cwd.front() != '/') {
    *error = {ErrorKind::kBadRequest, "cwd: must be an absolute path beneath /home/user or /tmp", "cwd"};
    return false;
  }
  if (auto it = doc.find("env"); it != doc.end() && !internal::ParseEnv(*it, "env", &request->env, error)) return false;
  request->timeout_s = request->background ? 0 : kCommandDefaultTimeoutS;
  if (auto it = doc.find("timeout"); it != doc.end() && !it->is_null()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0 ||
        it->get<double>() > kCommandMaxTimeoutS) {
      *error = UnprocessableField("timeout", "timeout: must be a number of seconds from 0 (none) to " +
                                            std::to_string(static_cast<int>(kCommandMaxTimeoutS)));
      return false;
    }
    request->timeout_s = it->get<double>();
  }
  return true;
}

std::optional<int> CommandSignal(std::string_view name) {
  std::string n;
  for (char c : name.substr(0, 16)) n += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (n.rfind("SIG", 0) == 0) n.erase(0, 3);
  if (n == "TERM") return SIGTERM;
  if (n == "KILL") return SIGKILL;
  if (n == "INT") return SIGINT;
  if (n == "HUP") return SIGHUP;
  return std::nullopt;
}

bool ParseSignalRequest(std::string_view body, const RequestCaps& caps, int* signal, ApiError* error) {
  json doc;
  if (!internal::ParseRequestObject(body, caps, &doc, error)) return false;
  auto it = doc.find("signal");
  std::optional<int> sig;
  if (it != doc.end() && it->is_string()) sig = CommandSignal(it->get_ref<const std::string&>());
  if (!sig || doc.size() != 1) {
    *error = {ErrorKind::kBadRequest, "the body must be {\"signal\": \"SIGTERM\"|\"SIGKILL\"|\"SIGINT\"|\"SIGHUP\"}",
              "signal"};
    return false;
  }
  *signal = *sig;
  return true;
}

std::string CommandEndToJson(const CommandEnd& e) {
  json j = json::object();
  j["pid"] = e.pid;
  if (!e.tag.empty()) j["tag"] = e.tag;
  j["running"] = e.running;
  j["exit_code"] = e.running ? json(nullptr) : json(e.exit_code);
  if (e.signal) j["signal"] = e.signal;
  j["stdout"] = e.out;
  j["stderr"] = e.err;
  if (e.out_truncated || e.err_truncated) {
    j["truncated"] = {{"stdout", e.out_truncated}, {"stderr", e.err_truncated}, {"cap_bytes", e.output_cap},
                      {"stdout_bytes", e.out_bytes}, {"stderr_bytes", e.err_bytes}};
  }
  if (!e.kill_reason.empty()) {
    j["kill_reason"] = e.kill_reason;
    j["kill_detail"] = e.kill_detail;
  }
  if (e.duration_ms >= 0) j["duration_ms"] = std::round(e.duration_ms * 1000) / 1000;
  return Dump(j);
}

namespace {
json InfoObject(const CommandInfo& i) {
  json j = {{"pid", i.pid}, {"tag", i.tag}, {"argv", i.argv}, {"cwd", i.cwd}, {"running", i.running}};
  j["exit_code"] = i.running ? json(nullptr) : json(i.exit_code);
  if (!i.running && i.signal) j["signal"] = i.signal;
  return j;
}
}  // namespace

std::string CommandInfoToJson(const CommandInfo& info) { return Dump(InfoObject(info)); }

std::string CommandListToJson(const std::vector<CommandInfo>& items) {
  json list = json::array();
  for (const auto& i : items) list.push_back(InfoObject(i));
  return Dump(json{{"commands", std::move(list)}});
}

std::string CommandStartEvent(int64_t pid) { return R"({"type":"start","pid":)" + std::to_string(pid) + "}"; }

}  // namespace airlock::model
