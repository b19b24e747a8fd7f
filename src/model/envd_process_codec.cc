#include <csignal>
#include <cstring>
#include <string>

#include "model/base64.h"
#include "model/envd_process.h"
#include "model/json_util.h"

namespace airlock::model {
namespace {

using internal::Dump;
using internal::json;

// Bounds on a started program (besides the body's own cap).
constexpr size_t kMaxArgs = 1024;
constexpr size_t kMaxArgBytes = 128 * 1024;
constexpr size_t kMaxTagBytes = 256;
constexpr size_t kMaxPathBytes = 4096;

ApiError Invalid(std::string field, std::string message) {
  ApiError e{ErrorKind::kBadRequest, std::move(message), std::move(field)};
  e.code = "invalid_argument";
  return e;
}

ApiError Unimplemented(std::string message) {
  ApiError e{ErrorKind::kBadRequest, std::move(message), ""};
  e.code = "unimplemented";
  return e;
}

bool Parse(std::string_view body, const RequestCaps& caps, json* doc, ApiError* error) {
  if (!internal::ParseRequestObject(body, caps, doc, error)) {
    error->code = "invalid_argument";
    return false;
  }
  return true;
}

// A string member ("" when absent or null); false when it is another type or
// holds a NUL, or is longer than max.
bool String(const json& obj, const char* name, size_t max, std::string* out, ApiError* error) {
  out->clear();
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) {
    *error = Invalid(name, std::string(name) + ": must be a string");
    return false;
  }
  *out = it->get<std::string>();
  if (out->size() > max || out->find('\0') != std::string::npos) {
    *error = Invalid(name, std::string(name) + ": at most " + std::to_string(max) + " bytes, no NUL");
    return false;
  }
  return true;
}

// A uint32 member as proto3's JSON gives it: a number, or a string of digits.
bool Uint32(const json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t n = v.get<uint64_t>();
    if (n > 0xffffffffu) return false;
    *out = static_cast<int64_t>(n);
    return true;
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    const uint64_t n = std::stoull(s);
    if (n > 0xffffffffu) return false;
    *out = static_cast<int64_t>(n);
    return true;
  }
  return false;
}

bool Selector(const json& doc, EnvdSelector* sel, ApiError* error) {
  auto it = doc.find("process");
  if (it == doc.end() || !it->is_object()) {
    *error = Invalid("process", "process: a selector {\"pid\": n} or {\"tag\": \"...\"} is required");
    return false;
  }
  if (auto pid = it->find("pid"); pid != it->end() && !pid->is_null()) {
    if (!Uint32(*pid, &sel->pid)) {
      *error = Invalid("process.pid", "process.pid: must be a number from 0 to 4294967295");
      return false;
    }
    return true;
  }
  if (!String(*it, "tag", kMaxTagBytes, &sel->tag, error)) return false;
  if (sel->tag.empty()) {
    *error = Invalid("process", "process: a selector {\"pid\": n} or {\"tag\": \"...\"} is required");
    return false;
  }
  return true;
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGKILL: return "killed";
    case SIGTERM: return "terminated";
    case SIGINT: return "interrupt";
    case SIGHUP: return "hangup";
    default: break;
  }
  return nullptr;
}

}  // namespace

bool ParseEnvdStart(std::string_view body, const RequestCaps& caps, CommandRequest* request, ApiError* error) {
  json doc;
  if (!Parse(body, caps, &doc, error)) return false;
  if (auto pty = doc.find("pty"); pty != doc.end() && !pty->is_null()) {
    *error = Unimplemented("a PTY is not served here: start the process without one (its output comes as stdout "
                           "and stderr)");
    return false;
  }
  auto proc = doc.find("process");
  if (proc == doc.end() || !proc->is_object()) {
    *error = Invalid("process", "process: {\"cmd\": ...} is required");
    return false;
  }
  std::string cmd;
  if (!String(*proc, "cmd", kMaxPathBytes, &cmd, error)) return false;
  if (cmd.empty()) {
    *error = Invalid("process.cmd", "process.cmd: the program to run is required");
    return false;
  }
  request->argv = {cmd};
  size_t bytes = cmd.size();
  if (auto args = proc->find("args"); args != proc->end() && !args->is_null()) {
    if (!args->is_array() || args->size() > kMaxArgs) {
      *error = Invalid("process.args", "process.args: an array of at most " + std::to_string(kMaxArgs) + " strings");
      return false;
    }
    for (const json& a : *args) {
      if (!a.is_string()) {
        *error = Invalid("process.args", "process.args: every argument must be a string");
        return false;
      }
      std::string s = a.get<std::string>();
      bytes += s.size();
      if (s.find('\0') != std::string::npos || bytes > kMaxArgBytes) {
        *error = Invalid("process.args", "process.args: no NUL, at most " + std::to_string(kMaxArgBytes) +
                                             " bytes with process.cmd");
        return false;
      }
      request->argv.push_back(std::move(s));
    }
  }
  if (auto envs = proc->find("envs"); envs != proc->end()) {
    if (!internal::ParseEnv(*envs, "process.envs", &request->env, error)) {
      error->code = "invalid_argument";
      return false;
    }
  }
  if (!String(*proc, "cwd", kMaxPathBytes, &request->cwd, error)) return false;
  if (!request->cwd.empty() && request->cwd.front() != '/') request->cwd = "/home/user/" + request->cwd;
  if (!String(doc, "tag", kMaxTagBytes, &request->tag, error)) return false;
  // Old SDKs send no "stdin" and get a pipe (envd's default then).
  request->stdin_open = true;
  if (auto in = doc.find("stdin"); in != doc.end() && !in->is_null()) {
    if (!in->is_boolean()) {
      *error = Invalid("stdin", "stdin: must be a boolean");
      return false;
    }
    request->stdin_open = in->get<bool>();
  }
  request->background = true;  // its end is the stream's, whoever watches
  return true;
}

bool ParseEnvdListRequest(std::string_view body, const RequestCaps& caps, ApiError* error) {
  json doc;
  return body.empty() || Parse(body, caps, &doc, error);
}

bool ParseEnvdSelectorRequest(std::string_view body, const RequestCaps& caps, EnvdSelector* selector,
                              ApiError* error) {
  json doc;
  return Parse(body, caps, &doc, error) && Selector(doc, selector, error);
}

bool ParseEnvdSendInput(std::string_view body, const RequestCaps& caps, EnvdSelector* selector, std::string* data,
                        ApiError* error) {
  json doc;
  if (!Parse(body, caps, &doc, error) || !Selector(doc, selector, error)) return false;
  data->clear();
  auto in = doc.find("input");
  if (in == doc.end() || in->is_null()) return true;  // nothing to send
  if (!in->is_object()) {
    *error = Invalid("input", "input: {\"stdin\": base64} expected");
    return false;
  }
  if (auto pty = in->find("pty"); pty != in->end() && !pty->is_null()) {
    *error = Unimplemented("a PTY is not served here: send the input as stdin");
    return false;
  }
  auto stdin_b64 = in->find("stdin");
  if (stdin_b64 == in->end() || stdin_b64->is_null()) return true;
  if (!stdin_b64->is_string() || !Base64Decode(stdin_b64->get<std::string>(), data)) {
    *error = Invalid("input.stdin", "input.stdin: must be base64 (standard alphabet, padded)");
    return false;
  }
  return true;
}

bool ParseEnvdSendSignal(std::string_view body, const RequestCaps& caps, EnvdSelector* selector, int* signal,
                         ApiError* error) {
  json doc;
  if (!Parse(body, caps, &doc, error) || !Selector(doc, selector, error)) return false;
  auto it = doc.find("signal");
  int64_t n = 0;
  if (it != doc.end() && it->is_string()) {
    const std::string name = it->get<std::string>();
    if (name == "SIGNAL_SIGKILL") n = SIGKILL;
    if (name == "SIGNAL_SIGTERM") n = SIGTERM;
  } else if (it != doc.end()) {
    (void)Uint32(*it, &n);
  }
  if (n != SIGKILL && n != SIGTERM) {
    *error = Invalid("signal", "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM");
    return false;
  }
  *signal = static_cast<int>(n);
  return true;
}

std::string EnvdStartEvent(int64_t pid) { return Dump(json{{"event", {{"start", {{"pid", pid}}}}}}); }

std::string EnvdDataEvent(bool stdout_stream, std::string_view bytes) {
  return Dump(json{{"event", {{"data", {{stdout_stream ? "stdout" : "stderr", Base64Encode(bytes)}}}}}});
}

std::string EnvdKeepaliveEvent() { return R"({"event":{"keepalive":{}}})"; }

std::string EnvdEndEvent(const EnvdEnd& end) {
  json e = json::object();
  if (end.exited) {
    e["exitCode"] = end.exit_code;
    e["exited"] = true;
    e["status"] = "exit status " + std::to_string(end.exit_code);
  } else {
    // Go's ExitCode() of a signalled process.
    e["exitCode"] = -1;
    e["exited"] = false;
    const char* name = SignalName(end.signal);
    e["status"] = name != nullptr ? std::string("signal: ") + name : "signal: " + std::to_string(end.signal);
  }
  if (!end.error.empty()) e["error"] = end.error;
  return Dump(json{{"event", {{"end", std::move(e)}}}});
}

std::string EnvdProcessListToJson(const std::vector<EnvdProcessInfo>& processes) {
  json list = json::array();
  for (const EnvdProcessInfo& p : processes) {
    json config = {{"cmd", p.argv.empty() ? "" : p.argv.front()},
                   {"args", p.argv.size() > 1 ? json(std::vector<std::string>(p.argv.begin() + 1, p.argv.end()))
                                              : json::array()},
                   {"envs", p.envs}};
    if (!p.cwd.empty()) config["cwd"] = p.cwd;
    json one = {{"config", std::move(config)}, {"pid", p.pid}};
    if (!p.tag.empty()) one["tag"] = p.tag;
    list.push_back(std::move(one));
  }
  return Dump(json{{"processes", std::move(list)}});
}

}  // namespace airlock::model
