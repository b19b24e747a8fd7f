#include "api/session_routes.h"

#include <algorithm>
#include <cstdlib>

#include "api/error_mapping.h"
#include "isolation/sandbox_files.h"
#include "model/session.h"
#include "session/session_files.h"

namespace airlock::api {
namespace {

constexpr std::string_view kPrefix = "/v1/sessions";

bool IsHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool IsSessionId(std::string_view id) {
  // s1-<8 hex>-<32 hex>
  return id.size() == 3 + 8 + 1 + 32 && id.substr(0, 3) == "s1-" && IsHex(id.substr(3, 8)) && id[11] == '-' &&
         IsHex(id.substr(12));
}

// The part of the path after /v1/sessions/{id} ("" / "/execute" / "/files/x").
std::string_view Rest(std::string_view path) {
  path.remove_prefix(kPrefix.size());
  if (path.empty()) return path;
  path.remove_prefix(1);  // '/'
  size_t slash = path.find('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(slash);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX-decodes a path or query value; false on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out, bool plus_is_space) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

// The value of `key` in a query string ("" when absent).
std::string QueryValue(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key && eq != std::string_view::npos) {
      std::string v;
      if (PercentDecode(pair.substr(eq + 1), &v, true)) return v;
      return "";
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

RouteReply Error(const model::ApiError& e, const std::string& request_id,
                 const std::vector<model::Violation>& violations = {}) {
  ErrorReply er = MakeErrorReply(e, violations, false, request_id);
  RouteReply r;
  r.status = er.status;
  r.body = std::move(er.body);
  r.headers = std::move(er.headers);
  r.error = e;
  r.violations = violations;
  return r;
}

RouteReply Json(int status, std::string body) {
  RouteReply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

RouteReply MethodNotAllowed(const char* allow, const std::string& request_id) {
  RouteReply r = Error({model::ErrorKind::kMethodNotAllowed, std::string("method not allowed; use ") + allow, ""},
                       request_id);
  r.headers.emplace_back("Allow", allow);
  return r;
}


// The content type a download is served with, from its name (never sniffed).
std::string ContentTypeFor(std::string_view path) {
  size_t dot = path.rfind('.');
  std::string ext = dot == std::string_view::npos ? "" : std::string(path.substr(dot + 1));
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::pair<const char*, const char*> kTypes[] = {
      {"txt", "text/plain; charset=utf-8"}, {"csv", "text/csv; charset=utf-8"}, {"json", "application/json"},
      {"png", "image/png"}, {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"}, {"gif", "image/gif"},
      {"svg", "image/svg+xml"}, {"pdf", "application/pdf"}, {"html", "text/html; charset=utf-8"},
      {"md", "text/markdown; charset=utf-8"}, {"py", "text/x-python; charset=utf-8"},
      {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
      {"parquet", "application/vnd.apache.parquet"}, {"zip", "application/zip"}, {"npy", "application/octet-stream"},
  };
  for (const auto& [e, t] : kTypes) {
    if (ext == e) return t;
  }
  return "application/octet-stream";
}

// "bytes=START-END" / "bytes=START-" / "bytes=-SUFFIX" (one range only).
bool ParseRange(std::string_view h, int64_t* start, int64_t* end, bool* suffix) {
  if (h.substr(0, 6) != "bytes=") return false;
  h.remove_prefix(6);
  if (h.find(',') != std::string_view::npos) return false;
  size_t dash = h.find('-');
  if (dash == std::string_view::npos) return false;
  std::string a(h.substr(0, dash)), b(h.substr(dash + 1));
  auto num = [](const std::string& s, int64_t* v) {
    if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), ::isdigit)) return false;
    *v = std::strtoll(s.c_str(), nullptr, 10);
    return true;
  };
  *suffix = a.empty();
  if (*suffix) return num(b, end);
  if (!num(a, start)) return false;
  *end = -1;
  return b.empty() || num(b, end);
}

}  // namespace

bool SessionRoutes::Matches(std::string_view path) {
  return path == kPrefix || (path.size() > kPrefix.size() && path.substr(0, kPrefix.size() + 1) == "/v1/sessions/");
}

std::string SessionRoutes::SessionId(std::string_view path) {
  if (path.size() <= kPrefix.size() + 1) return "";
  path.remove_prefix(kPrefix.size() + 1);
  return std::string(path.substr(0, path.find('/')));
}

std::string SessionRoutes::RouteName(std::string_view method, std::string_view path) {
  (void)method;
  if (path == kPrefix) return "/v1/sessions";
  std::string_view rest = Rest(path);
  if (rest.empty()) return "/v1/sessions/{id}";
  if (rest == "/execute") return "/v1/sessions/{id}/execute";
  if (rest == "/restart") return "/v1/sessions/{id}/restart";
  if (rest == "/files") return "/v1/sessions/{id}/files";
  if (rest.substr(0, 7) == "/files/") return "/v1/sessions/{id}/files/{path}";
  return "other";
}

bool SessionRoutes::IsCall(std::string_view method, std::string_view path) {
  return method == "POST" && Matches(path) && Rest(path) == "/execute";
}

bool SessionRoutes::IsUpload(std::string_view method, std::string_view path) {
  return method == "PUT" && Matches(path) && Rest(path).substr(0, 7) == "/files/";
}

std::unique_ptr<session::PendingCall> SessionRoutes::BeginCall(const RouteRequest& rq,
                                                               const session::CallHooks& hooks,
                                                               RouteReply* refused) {
  const std::string& rid = rq.request_id;
  std::string id = SessionId(rq.path);
  model::ApiError error;
  if (!IsSessionId(id)) {
    error = {model::ErrorKind::kNotFound,
             "'" + id.substr(0, 80) + "' is not a session id (they look like s1-0123abcd-<32 hex digits>)", ""};
    error.code = "session_not_found";
    *refused = Error(error, rid);
    return nullptr;
  }
  model::ExecuteRequest request;
  if (!model::ParseSessionExecuteRequest(rq.body, opt_.caps, &request, &error)) {
    *refused = Error(error, rid);
    return nullptr;
  }
  request.stream_output = rq.stream_output;
  session::CallReply call;
  std::unique_ptr<session::PendingCall> pending = mgr_.BeginCall(id, rq.owner, request, rid, hooks, &call);
  if (!pending) {
    *refused = Error(call.error, rid, call.violations);
    refused->call = std::move(call);
  }
  return pending;
}

RouteReply SessionRoutes::FinishCall(std::unique_ptr<session::PendingCall> pending) {
  session::CallReply call = mgr_.FinishCall(std::move(pending));
  RouteReply r = Json(200, model::SessionExecuteToJson(call.response, call.call));
  r.call = std::move(call);
  return r;
}

RouteReply SessionRoutes::Handle(const RouteRequest& rq, const session::CallHooks& hooks) {
  const std::string& rid = rq.request_id;
  if (rq.path == kPrefix) {
    if (rq.method == "GET") return Json(200, model::SessionListToJson(mgr_.List(rq.owner)));
    if (rq.method != "POST") return MethodNotAllowed("GET, POST", rid);
    model::SessionCreateRequest create;
    model::ApiError error;
    if (!model::ParseSessionCreateRequest(rq.body, opt_.caps, &create, &error)) return Error(error, rid);
    session::Created made = mgr_.Create(rq.owner, rq.route_key, create);
    if (!made.ok) return Error(made.error, rid);
    RouteReply r = Json(201, model::SessionToJson(made.view));
    r.headers.emplace_back("Location", "/v1/sessions/" + made.view.id);
    return r;
  }
  std::string id = SessionId(rq.path);
  std::string_view rest = Rest(rq.path);
  model::ApiError error;
  if (!IsSessionId(id)) {
    error = {model::ErrorKind::kNotFound,
             "'" + id.substr(0, 80) + "' is not a session id (they look like s1-0123abcd-<32 hex digits>)", ""};
    error.code = "session_not_found";
    return Error(error, rid);
  }
  if (rest.empty()) {
    if (rq.method == "GET") {
      auto v = mgr_.Get(id, rq.owner, &error);
      return v ? Json(200, model::SessionToJson(*v)) : Error(error, rid);
    }
    if (rq.method == "DELETE") {
      if (!mgr_.Delete(id, rq.owner, &error)) return Error(error, rid);
      RouteReply r;
      r.status = 204;
      return r;
    }
    return MethodNotAllowed("GET, DELETE", rid);
  }
  if (rest == "/execute") {
    if (rq.method != "POST") return MethodNotAllowed("POST", rid);
    RouteReply refused;
    std::unique_ptr<session::PendingCall> pending = BeginCall(rq, hooks, &refused);
    if (!pending) return refused;
    pending->call().WaitDone();
    return FinishCall(std::move(pending));
  }
  if (rest == "/restart") {
    if (rq.method != "POST") return MethodNotAllowed("POST", rid);
    auto v = mgr_.Restart(id, rq.owner, &error);
    return v ? Json(200, model::SessionToJson(*v)) : Error(error, rid);
  }
  if (rest == "/files" || rest.substr(0, 7) == "/files/") return Files(rq, id, rest);
  return Error({model::ErrorKind::kNotFound, "no such endpoint: " + rq.path.substr(0, 256) + " (see docs/api.md)", ""},
               rid);
}

RouteReply SessionRoutes::Files(const RouteRequest& rq, const std::string& id, std::string_view rest) {
  const std::string& rid = rq.request_id;

  model::ApiError error;
  const bool listing = rest == "/files";
  if (listing && rq.method != "GET") return MethodNotAllowed("GET", rid);
  if (!listing && rq.method != "GET" && rq.method != "PUT" && rq.method != "DELETE") {
    return MethodNotAllowed("GET, PUT, DELETE", rid);
  }
  std::string path;
  if (listing) {
    path = QueryValue(rq.query, "path");
  } else if (!PercentDecode(rest.substr(7), &path, false)) {
    return Error({model::ErrorKind::kBadRequest, "the file path has a malformed %-escape", ""}, rid);
  }
  if (!path.empty() || !listing) {
    if (Status s = isolation::CheckSandboxPath(path); !s.ok()) return Error(session::SessionFileError(s), rid);
  }
  std::shared_ptr<session::LiveSession> live = mgr_.Live(id, rq.owner, &error);
  if (!live) return Error(error, rid);
  // The session's working directory, opened through its init's root: every
  // path below is resolved beneath it with no symlink followed
  // (isolation/sandbox_files.h).
  auto root = isolation::OpenRunDir(live->init_pid(), live->pidfd(), isolation::kWorkspaceDir);
  if (!root.ok()) {
    return Error({model::ErrorKind::kGone, "the session's working directory is gone: " + root.status().ToString(), ""},
                 rid);
  }
  if (listing) {
    bool truncated = false;
    auto entries = isolation::ListSandboxDir(root->get(), path, opt_.max_list_entries, 16, &truncated);
    if (!entries.ok()) return Error(session::SessionFileError(entries.status()), rid);
    std::string body = "{\"files\":[";
    bool first = true;
    for (const auto& f : *entries) {
      model::SessionFileView v{f.path, f.size, f.modified_ms, f.type};
      if (!first) body += ",";
      first = false;
      body += model::SessionFileToJson(v);
    }
    body += std::string("],\"truncated\":") + (truncated ? "true" : "false") + "}";
    return Json(200, std::move(body));
  }
  if (rq.method == "PUT") {
    if (static_cast<int64_t>(rq.body.size()) > opt_.max_file_bytes) {
      return Error({model::ErrorKind::kPayloadTooLarge,
                    "the upload is over this server's cap of " + std::to_string(opt_.max_file_bytes) + " bytes", ""},
                   rid);
    }
    int64_t modified_ms = 0;
    if (Status s = isolation::WriteSandboxFile(root->get(), path, rq.body, /*make_parents=*/true, &modified_ms);
        !s.ok()) {
      return Error(session::SessionFileError(s), rid);
    }
    model::SessionFileView v{path, static_cast<int64_t>(rq.body.size()), modified_ms, "file"};
    return Json(201, model::SessionFileToJson(v));
  }
  if (rq.method == "DELETE") {
    if (Status s = isolation::RemoveSandboxPath(root->get(), path); !s.ok()) return Error(session::SessionFileError(s), rid);
    RouteReply r;
    r.status = 204;
    return r;
  }
  // GET: the whole file, or one Range. The size first (a zero-byte read, which
  // also refuses what is not a regular file), then what is asked.
  int64_t total = 0;
  if (auto probe = isolation::ReadSandboxFile(root->get(), path, 0, 0, 0, &total); !probe.ok()) {
    return Error(session::SessionFileError(probe.status()), rid);
  }
  int64_t start = 0, end = -1, length = -1;
  bool suffix = false;
  const bool ranged = !rq.range.empty() && ParseRange(rq.range, &start, &end, &suffix);
  if (ranged) {
    if (suffix) {
      start = std::max<int64_t>(0, total - end);
      length = total - start;
    } else if (end >= 0) {
      length = std::min(end, total - 1) - start + 1;
    } else {
      length = total - start;
    }
    if (start >= total || length <= 0) {
      RouteReply bad =
          Error({model::ErrorKind::kBadRequest, "the range is outside the file (" + std::to_string(total) + " bytes)", ""},
                rid);
      bad.status = 416;
      bad.headers.emplace_back("Content-Range", "bytes */" + std::to_string(total));
      return bad;
    }
  }
  auto data = isolation::ReadSandboxFile(root->get(), path, opt_.max_file_bytes, start, length, &total);
  if (!data.ok()) return Error(session::SessionFileError(data.status()), rid);
  RouteReply r;
  r.content_type = ContentTypeFor(path);
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Accept-Ranges", "bytes");
  if (ranged) {
    r.status = 206;
    r.headers.emplace_back("Content-Range", "bytes " + std::to_string(start) + "-" +
                                                std::to_string(start + static_cast<int64_t>(data->size()) - 1) + "/" +
                                                std::to_string(total));
  }
  r.body = std::move(*data);
  return r;
}

std::string RenderSessionMetrics(const session::SessionStats& s) {
  std::string out;
  out += "# HELP airlock_sessions_live Sessions alive now.\n# TYPE airlock_sessions_live gauge\n";
  out += "airlock_sessions_live " + std::to_string(s.live) + "\n";
  out += "# HELP airlock_sessions_busy Sessions running a call now.\n# TYPE airlock_sessions_busy gauge\n";
  out += "airlock_sessions_busy " + std::to_string(s.busy) + "\n";
  out += "# HELP airlock_sessions_memory_reserved_bytes Sum of the live sessions' memory limits.\n"
         "# TYPE airlock_sessions_memory_reserved_bytes gauge\n";
  out += "airlock_sessions_memory_reserved_bytes " + std::to_string(s.memory_reserved_bytes) + "\n";
  out += "# HELP airlock_sessions_retired_zygotes Replaced zygotes that live sessions keep alive.\n"
         "# TYPE airlock_sessions_retired_zygotes gauge\n";
  out += "airlock_sessions_retired_zygotes " + std::to_string(s.retired_zygotes) + "\n";
  out += "# HELP airlock_sessions_retired_zygote_memory_bytes Their private memory (counted in --session-memory).\n"
         "# TYPE airlock_sessions_retired_zygote_memory_bytes gauge\n";
  out += "airlock_sessions_retired_zygote_memory_bytes " + std::to_string(s.retired_zygote_memory_bytes) + "\n";
  out += "# HELP airlock_sessions_created_total Sessions created.\n# TYPE airlock_sessions_created_total counter\n";
  out += "airlock_sessions_created_total " + std::to_string(s.created) + "\n";
  out += "# HELP airlock_sessions_ended_total Sessions ended, by reason.\n# TYPE airlock_sessions_ended_total counter\n";
  for (const auto& [reason, n] : s.ended) {
    out += "airlock_sessions_ended_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  }
  return out;
}

}  // namespace airlock::api
