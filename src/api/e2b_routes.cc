#include "api/e2b_routes.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>

#include "api/error_mapping.h"
#include "isolation/sandbox_files.h"
#include "session/session_files.h"

namespace airlock::api {
namespace {

// E2B's 400 for a context or call in another language than Python.
model::ApiError NotPython(const std::string& language) {
  return {model::ErrorKind::kBadRequest,
          "language '" + language.substr(0, 40) +
              "' is not supported here: an E2B context is a live Python interpreter (JavaScript and bash run one "
              "request at a time through POST /v1/execute)",
          ""};
}

constexpr std::string_view kContexts = "/contexts";

E2bReply Error(const model::ApiError& e, const std::vector<model::Violation>& violations = {}) {
  E2bReply r;
  r.status = HttpStatus(e.kind);
  r.body = model::E2bErrorBody(e.message, r.status);
  if (e.kind == model::ErrorKind::kTooManyRequests || e.kind == model::ErrorKind::kUnavailable) {
    r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s > 0 ? e.retry_after_s : 1));
  }
  r.error = e;
  r.violations = violations;
  return r;
}

E2bReply Json(int status, std::string body) {
  E2bReply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

E2bReply NotFound(std::string message) { return Error({model::ErrorKind::kNotFound, std::move(message), ""}); }

E2bReply MethodNotAllowed(const char* allow) {
  E2bReply r = Error({model::ErrorKind::kMethodNotAllowed, std::string("method not allowed; use ") + allow, ""});
  r.headers.emplace_back("Allow", allow);
  return r;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The %-decoded value of `key` in a query string; nullopt when absent or
// malformed (*malformed set then).
std::optional<std::string> QueryValue(std::string_view query, std::string_view key, bool* malformed) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) {
      std::string out;
      std::string_view v = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == '%') {
          int hi = i + 2 < v.size() ? HexValue(v[i + 1]) : -1, lo = i + 2 < v.size() ? HexValue(v[i + 2]) : -1;
          if (hi < 0 || lo < 0) {
            *malformed = true;
            return std::nullopt;
          }
          out.push_back(static_cast<char>(hi * 16 + lo));
          i += 2;
        } else {
          out.push_back(v[i] == '+' ? ' ' : v[i]);
        }
      }
      return out;
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}


// The whole NDJSON answer of an execution whose stream never began.
std::string Lines(const std::vector<model::StreamEvent>& events) {
  std::string out;
  for (const auto& e : events) out += e.json + "\n";
  out += model::E2bEndOfExecution() + "\n";
  return out;
}

bool IsContextId(std::string_view id) {
  return !id.empty() && id.size() <= 64 &&
         std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

}  // namespace

std::string E2bRoutes::RouteName(std::string_view path) {
  if (path == "/execute") return "e2b:/execute";
  if (path == "/health") return "e2b:/health";
  if (path == "/files") return "e2b:/files";
  if (path == kContexts) return "e2b:/contexts";
  if (path.substr(0, kContexts.size() + 1) == "/contexts/") {
    return path.size() > 8 && path.substr(path.size() - 8) == "/restart" ? "e2b:/contexts/{id}/restart"
                                                                          : "e2b:/contexts/{id}";
  }
  return "e2b:other";
}

bool E2bRoutes::IsExecute(std::string_view method, std::string_view path) {
  return method == "POST" && path == "/execute";
}

bool E2bRoutes::IsUpload(std::string_view method, std::string_view path) {
  return method == "POST" && path == "/files";
}

E2bReply E2bRoutes::Handle(const E2bRequest& rq, const E2bHooks& hooks) {
  if (rq.path == "/health") {
    if (rq.method != "GET") return MethodNotAllowed("GET");
    if (rq.port == E2bPort::kEnvd) return Json(204, "");
    return Json(200, "\"OK\"");
  }
  if (rq.path == "/execute") {
    if (rq.method != "POST") return MethodNotAllowed("POST");
    return Execute(rq, hooks);
  }
  if (rq.path == kContexts || rq.path.substr(0, kContexts.size() + 1) == "/contexts/") return Contexts(rq);
  if (rq.path == "/files") return Files(rq);
  return NotFound("no such endpoint: " + rq.path.substr(0, 256) +
                  " (airlock's E2B listener serves /execute, /contexts, /files and /health; docs/api.md)");
}

std::optional<std::string> E2bRoutes::NewContext(const std::string& owner, const model::E2bContextRequest& request,
                                                 model::ApiError* error) {
  Context c;
  c.owner = owner;
  if (request.language && *request.language != "python") {
    *error = NotPython(*request.language);
    return std::nullopt;
  }
  if (request.cwd) {
    // The sandbox has one working directory, /home/user.
    if (*request.cwd != "/home/user" && *request.cwd != "/home/user/") {
      *error = {model::ErrorKind::kBadRequest,
                "cwd '" + request.cwd->substr(0, 200) + "' is not supported: a context's working directory is /home/user",
                ""};
      return std::nullopt;
    }
  }
  model::SessionCreateRequest create;
  if (!opt_.profile.empty()) create.base.profile = opt_.profile;
  // A session takes a warm run; when none is ready (a burst of contexts, the
  // pool refilling) wait for one a little, as an E2B sandbox start would,
  // rather than fail the SDK call. Blocking is fine: a session-pool thread.
  session::Created made = mgr_.Create(owner, "", create, profile::Door::kE2b);
  for (int i = 0; !made.ok && made.error.kind == model::ErrorKind::kUnavailable && i < opt_.create_retries; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    made = mgr_.Create(owner, "", create, profile::Door::kE2b);
  }
  if (!made.ok) {
    *error = made.error;
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mu_);
  contexts_[made.view.id] = c;
  return made.view.id;
}

std::optional<std::string> E2bRoutes::DefaultContext(const std::string& owner, model::ApiError* error) {
  std::lock_guard<std::mutex> create_lock(create_mu_);
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = defaults_.find(owner); it != defaults_.end()) id = it->second;
  }
  if (!id.empty()) {
    model::ApiError ignored;
    if (mgr_.Live(id, owner, &ignored)) return id;
    // It ended (idle expiry, TTL, a crash): as an E2B sandbox that timed
    // out, its state is gone; the next execution starts a new one (its
    // execution_count starts at 1 again, which tells the client).
    std::lock_guard<std::mutex> lock(mu_);
    contexts_.erase(id);
    defaults_.erase(owner);
  }
  auto made = NewContext(owner, {}, error);
  if (!made) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  defaults_[owner] = *made;
  return made;
}

E2bReply E2bRoutes::Execute(const E2bRequest& rq, const E2bHooks& hooks) {
  model::E2bExecuteRequest req;
  model::ApiError error;
  if (!model::ParseE2bExecuteRequest(rq.body, opt_.caps, &req, &error)) return Error(error);
  if (req.language && *req.language != "python") {
    return Error(NotPython(*req.language));
  }
  std::string id;
  if (req.context_id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = contexts_.find(*req.context_id);
    if (it == contexts_.end() || it->second.owner != rq.owner) {
      return NotFound("Context " + req.context_id->substr(0, 80) + " not found");
    }
    id = *req.context_id;
  } else {
    auto made = DefaultContext(rq.owner, &error);
    if (!made) return Error(error);
    id = *made;
  }
  model::ExecuteRequest request;
  request.code = std::move(req.code);
  request.env = std::move(req.env_vars);  // this execution's only
  request.stream_output = true;
  session::CallHooks call_hooks;
  call_hooks.on_output = hooks.on_output;
  if (hooks.on_started) call_hooks.on_started = [&] { hooks.on_started(id); };
  session::CallReply call = mgr_.Execute(id, rq.owner, request, rq.request_id, call_hooks);
  E2bReply r;
  r.execute = true;
  if (call.kind == session::CallReply::Kind::kRan) {
    // number_of_executions goes with the results, not ahead of the output:
    // the SDKs only record it, and one write less per call is what keeps
    // the adapter's cost near zero on a loaded host (docs/benchmarks.md).
    r.final_events = {{"number_of_executions", model::E2bNumberOfExecutions(call.call.execution_count)}};
    for (auto& e : model::E2bFinalEvents(call.response)) r.final_events.push_back(std::move(e));
    const std::string now = model::StreamTimestamp(std::chrono::system_clock::now());
    std::vector<model::StreamEvent> all = {r.final_events.front()};
    if (!call.response.run.stdout_text.empty()) {
      all.push_back({"stdout", model::OutputEvent("stdout", call.response.run.stdout_text, now)});
    }
    if (!call.response.run.stderr_text.empty()) {
      all.push_back({"stderr", model::OutputEvent("stderr", call.response.run.stderr_text, now)});
    }
    all.insert(all.end(), r.final_events.begin() + 1, r.final_events.end());
    r.body = Lines(all);
    r.content_type = "application/x-ndjson";
  } else if (call.kind == session::CallReply::Kind::kRejected) {
    // The analyzer refused the code before it ran: the SDK's execution.error,
    // so that an agent reads what to change (as a kernel's error would be).
    std::string listing;
    for (const auto& v : call.violations) {
      listing += "line " + std::to_string(v.line) + ": " + v.message + " [" + v.rule + "]\n";
    }
    r.final_events.push_back(
        {"error", model::E2bErrorEvent("PolicyViolation", call.error.message.empty()
                                                              ? "the code was rejected by the sandbox's policy"
                                                              : call.error.message,
                                       listing)});
    r.body = Lines(r.final_events);
    r.content_type = "application/x-ndjson";
    r.error = call.error;
    r.violations = call.violations;
  } else {
    if (call.error.kind == model::ErrorKind::kNotFound || call.error.kind == model::ErrorKind::kGone) {
      std::lock_guard<std::mutex> lock(mu_);
      contexts_.erase(id);
      if (auto it = defaults_.find(rq.owner); it != defaults_.end() && it->second == id) defaults_.erase(it);
    }
    r = Error(call.error);
    r.execute = true;
  }
  r.call = std::move(call);
  return r;
}

E2bReply E2bRoutes::Contexts(const E2bRequest& rq) {
  model::ApiError error;
  if (rq.path == kContexts) {
    if (rq.method == "GET") {
      std::vector<model::E2bContext> list;
      std::vector<std::pair<std::string, Context>> mine;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [id, c] : contexts_) {
          if (c.owner == rq.owner) mine.emplace_back(id, c);
        }
      }
      for (const auto& [id, c] : mine) {
        model::ApiError ignored;
        if (mgr_.Get(id, rq.owner, &ignored)) list.push_back({id, c.language, c.cwd});
      }
      return Json(200, model::E2bContextListToJson(list));
    }
    if (rq.method != "POST") return MethodNotAllowed("GET, POST");
    model::E2bContextRequest req;
    if (!model::ParseE2bContextRequest(rq.body, opt_.caps, &req, &error)) return Error(error);
    auto id = NewContext(rq.owner, req, &error);
    if (!id) return Error(error);
    return Json(200, model::E2bContextToJson({*id, "python", "/home/user"}));
  }
  std::string_view rest = std::string_view(rq.path).substr(kContexts.size() + 1);
  bool restart = false;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    if (rest.substr(slash) != "/restart") return NotFound("no such endpoint: " + rq.path.substr(0, 256));
    restart = true;
    rest = rest.substr(0, slash);
  }
  std::string id(rest);
  bool known = false;
  if (IsContextId(id)) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = contexts_.find(id);
    known = it != contexts_.end() && it->second.owner == rq.owner;
  }
  if (!known) return NotFound("Context " + id.substr(0, 80) + " not found");
  if (restart) {
    if (rq.method != "POST") return MethodNotAllowed("POST");
    if (!mgr_.Restart(id, rq.owner, &error)) return Error(error);
    return Json(204, "");
  }
  if (rq.method != "DELETE") return MethodNotAllowed("DELETE");
  bool deleted = mgr_.Delete(id, rq.owner, &error);
  {
    std::lock_guard<std::mutex> lock(mu_);
    contexts_.erase(id);
    if (auto it = defaults_.find(rq.owner); it != defaults_.end() && it->second == id) defaults_.erase(it);
  }
  if (!deleted && error.kind != model::ErrorKind::kGone) return Error(error);
  return Json(204, "");
}

E2bReply E2bRoutes::Files(const E2bRequest& rq) {
  if (rq.method != "GET" && rq.method != "POST") return MethodNotAllowed("GET, POST");
  bool malformed = false;
  std::optional<std::string> path = QueryValue(rq.query, "path", &malformed);
  if (malformed) return Error({model::ErrorKind::kBadRequest, "the path parameter has a malformed %-escape", ""});
  if (std::optional<std::string> user = QueryValue(rq.query, "username", &malformed);
      user && !user->empty() && *user != "user") {
    return Error({model::ErrorKind::kUnauthorized,
                  "user '" + user->substr(0, 40) + "' does not exist here: the sandbox has one user, 'user'", ""});
  }
  // What to write: a raw body to `path`, or the multipart parts named
  // "file", each to `path` (one part) or to its filename.
  std::vector<std::pair<std::string, std::string_view>> writes;  // (E2B path, bytes)
  std::vector<model::MultipartPart> parts;
  if (rq.method == "POST") {
    std::string ct = rq.content_type;
    std::transform(ct.begin(), ct.end(), ct.begin(), [](unsigned char c) { return std::tolower(c); });
    if (ct.rfind("application/octet-stream", 0) == 0) {
      if (!path) return Error({model::ErrorKind::kBadRequest, "POST /files with a raw body needs ?path=", ""});
      writes.emplace_back(*path, rq.body);
    } else {
      std::string why;
      if (!model::ParseMultipartFormData(rq.content_type, rq.body, opt_.max_upload_parts, &parts, &why)) {
        return Error({model::ErrorKind::kBadRequest, why, ""});
      }
      for (const auto& p : parts) {
        if (p.name != "file") continue;
        std::string target = path ? *path : p.filename;
        if (target.empty()) {
          return Error({model::ErrorKind::kBadRequest, "an uploaded file has neither ?path= nor a filename", ""});
        }
        writes.emplace_back(std::move(target), p.body);
      }
      if (writes.empty()) return Error({model::ErrorKind::kBadRequest, "no multipart field named 'file'", ""});
      if (path && writes.size() > 1) {
        return Error({model::ErrorKind::kBadRequest, "?path= names one file but the body has several", ""});
      }
    }
  } else if (!path) {
    return Error({model::ErrorKind::kBadRequest, "GET /files needs ?path=", ""});
  }
  // Every path is checked before anything is written.
  std::vector<std::string> relative;
  for (const auto& w : writes) {
    std::string rel, why;
    if (!model::E2bPathToSandbox(w.first, &rel, &why)) return Error({model::ErrorKind::kBadRequest, why, ""});
    if (static_cast<int64_t>(w.second.size()) > opt_.max_file_bytes) {
      return Error({model::ErrorKind::kPayloadTooLarge,
                    "the upload is over this server's cap of " + std::to_string(opt_.max_file_bytes) + " bytes", ""});
    }
    relative.push_back(std::move(rel));
  }
  std::string read_rel;
  if (rq.method == "GET") {
    std::string why;
    if (!model::E2bPathToSandbox(*path, &read_rel, &why)) return Error({model::ErrorKind::kBadRequest, why, ""});
  }
  model::ApiError error;
  auto id = DefaultContext(rq.owner, &error);
  if (!id) return Error(error);
  std::shared_ptr<session::LiveSession> live = mgr_.Live(*id, rq.owner, &error);
  if (!live) return Error(error);
  // The session's working directory through its init's root: every path is
  // resolved beneath it with no symlink followed (isolation/sandbox_files.h).
  auto root = isolation::OpenRunDir(live->init_pid(), live->pidfd(), isolation::kWorkspaceDir);
  if (!root.ok()) {
    return Error({model::ErrorKind::kGone, "the sandbox's working directory is gone: " + root.status().ToString(), ""});
  }
  if (rq.method == "GET") {
    int64_t total = 0;
    auto data = isolation::ReadSandboxFile(root->get(), read_rel, opt_.max_file_bytes, 0, -1, &total);
    if (!data.ok()) return Error(session::SessionFileError(data.status()));
    E2bReply r;
    r.content_type = "application/octet-stream";
    r.body = std::move(*data);
    return r;
  }
  std::vector<std::string> written;
  for (size_t i = 0; i < writes.size(); ++i) {
    if (Status s = isolation::WriteSandboxFile(root->get(), relative[i], writes[i].second, /*make_parents=*/true);
        !s.ok()) {
      return Error(session::SessionFileError(s));
    }
    written.push_back(model::E2bPathFromSandbox(relative[i]));
  }
  return Json(200, model::E2bWrittenFilesToJson(written));
}

}  // namespace airlock::api
