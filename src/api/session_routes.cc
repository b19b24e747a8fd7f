#include "api/session_routes.h"

#include <algorithm>
#include <cstdlib>

#include "api/call_driver.h"
#include "api/error_mapping.h"
#include "api/exchange.h"
#include "api/query.h"
#include "api/server_state.h"
#include "api/upload.h"
#include "isolation/sandbox_files.h"
#include "model/session.h"
#include "model/stream_events.h"
#include "session/session_files.h"

namespace airlock::api {
namespace {

bool IsHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
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

// The file path of a files route ({path...}, %-decoded), checked by the path rule.
std::optional<model::ApiError> FilePath(const Request& rq, std::string* path) {
  if (!PercentDecode(rq.tail, path, false)) {
    return model::ApiError{model::ErrorKind::kBadRequest, "the file path has a malformed %-escape", ""};
  }
  if (Status st = isolation::CheckSandboxPath(*path); !st.ok()) return session::SessionFileError(st);
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// The sessions.

Reply Create(ServerState& s, const Request& rq) {
  if (s.draining) {
    return RefusalFor(rq, {model::ErrorKind::kUnavailable, "the server is shutting down; create the session elsewhere", ""});
  }
  model::SessionCreateRequest create;
  model::ApiError error;
  if (!model::ParseSessionCreateRequest(rq.body, Caps(s), &create, &error)) return RefusalFor(rq, error);
  session::Created made = s.session_mgr->Create(rq.caller.name, rq.headers.route_key, create);
  if (!made.ok) return RefusalFor(rq, made.error);
  Reply r = JsonReply(201, model::SessionToJson(made.view));
  r.headers.emplace_back("Location", "/v1/sessions/" + made.view.id);
  return r;
}

// The caller's live sessions, a page at a time, by id.
Reply List(ServerState& s, const Request& rq) {
  PageRequest page;
  if (auto bad = ParsePage(rq.query, 100, 1000, &page)) return RefusalFor(rq, *bad);
  std::vector<model::SessionView> all = s.session_mgr->List(rq.caller.name);  // sorted by id
  std::vector<model::SessionView> items;
  std::optional<std::string> next;
  for (auto& v : all) {
    if (!page.cursor.empty() && v.id <= page.cursor) continue;
    if (items.size() == page.limit) {
      next = items.back().id;
      break;
    }
    items.push_back(std::move(v));
  }
  std::string body = model::SessionListToJson(items);
  body.pop_back();  // '}'
  return JsonReply(200, body + ",\"next_cursor\":" + CursorJson(next) + "}");
}

void GetOne(const std::shared_ptr<Exchange>& ex) {
  model::ApiError error;
  auto v = ex->s.session_mgr->Get(ex->rq.param, ex->rq.caller.name, &error);
  if (!v) return ex->Refuse(error);
  ex->Respond(JsonReply(200, model::SessionToJson(*v)));
}

Reply Delete(ServerState& s, const Request& rq) {
  model::ApiError error;
  if (!s.session_mgr->Delete(rq.param, rq.caller.name, &error)) return RefusalFor(rq, error);
  return JsonReply(204, "");
}

Reply Restart(ServerState& s, const Request& rq) {
  model::ApiError error;
  auto v = s.session_mgr->Restart(rq.param, rq.caller.name, &error);
  return v ? JsonReply(200, model::SessionToJson(*v)) : RefusalFor(rq, error);
}

// One call, fed from the loop; streamed when the client asks (the response
// begins when the call starts running: refusals before that are plain JSON
// answers with their status, as for /v1/execute).
void Call(const std::shared_ptr<Exchange>& ex) {
  ServerState& s = ex->s;
  ex->execution = true;
  ex->audit.code_bytes = static_cast<int64_t>(ex->rq.body.size());
  ex->ParseBody<model::ExecuteRequest>(
      [caps = Caps(s)](const std::string& body, model::ExecuteRequest* request, model::ApiError* error) {
        return model::ParseSessionExecuteRequest(body, caps, request, error);
      },
      [ex](model::ExecuteRequest request) { CallSession(ex, "", std::move(request)); });
}

}  // namespace

void CallSession(const std::shared_ptr<Exchange>& ex, std::string context_id, model::ExecuteRequest request) {
  ServerState& s = ex->s;
  const model::StreamFormat format = model::NegotiateStreamFormat(ex->rq.headers.accept);
  request.stream_output = format != model::StreamFormat::kNone;
  session::CallHooks hooks;
  if (request.stream_output) hooks = StreamingHooks(ex, format);
  std::weak_ptr<Exchange> weak = ex;
  const std::string id = ex->rq.param;
  const std::string key = context_id.empty() ? id : session::SessionManager::CallKey(id, context_id);
  ex->WatchDisconnect([&s, key] { s.session_mgr->Cancel(key, "the client disconnected"); });
  StartSessionCall(
      s, {id, ex->rq.caller.name, ex->rq.id, std::move(request), std::move(hooks), std::move(context_id)},
      [](const session::CallReply& c) {
        Reply r = JsonReply(200, model::SessionExecuteToJson(c.response, c.call));
        r.final_events = model::FinalEvents(c.response);
        return r;
      },
      [ex](bool ran, session::CallReply c, Reply reply) {
        ex->RecordCode(c.profile, c.code_sha256, c.code_bytes);
        if (!ran) return ex->Refuse(c.error, c.violations);
        ex->RecordRun(c.response.run);
        ex->audit.verdict = ex->gone() ? "client_gone" : "ran";
        if (ex->gone()) return ex->Abandon();
        if (ex->events() && ex->events()->started()) {
          return ex->EndEvents(reply.final_events, "end_of_execution",
                               model::EndOfExecutionEvent(reply.body, ex->events()->StatsJson()));
        }
        ex->Respond(std::move(reply));
      },
      [weak] {
        auto e = weak.lock();
        return !e || e->gone();
      });
}

namespace {

// ---------------------------------------------------------------------------
// The files, resolved beneath the session's working directory with no
// symlink followed (isolation/sandbox_files.h).

Reply ListFiles(ServerState& s, const Request& rq) {
  bool malformed = false;
  std::string path = QueryParam(rq.query, "path", &malformed).value_or("");
  if (malformed) return RefusalFor(rq, {model::ErrorKind::kBadRequest, "the path parameter has a malformed %-escape", ""});
  if (!path.empty()) {
    if (Status st = isolation::CheckSandboxPath(path); !st.ok()) return RefusalFor(rq, session::SessionFileError(st));
  }
  model::ApiError error;
  std::optional<UniqueFd> root = session::OpenSessionRoot(*s.session_mgr, rq.param, rq.caller.name, &error);
  if (!root) return RefusalFor(rq, error);
  bool truncated = false;
  auto entries = isolation::ListSandboxDir(root->get(), path, 1000, 16, &truncated);
  if (!entries.ok()) return RefusalFor(rq, session::SessionFileError(entries.status()));
  std::string body = "{\"files\":[";
  bool first = true;
  for (const auto& f : *entries) {
    if (!first) body += ",";
    first = false;
    body += model::SessionFileToJson({f.path, f.size, f.modified_ms, f.type});
  }
  body += std::string("],\"truncated\":") + (truncated ? "true" : "false") + "}";
  return JsonReply(200, std::move(body));
}

// The whole file, or one Range: opened and sized here, then sent a piece at
// a time by the connection (ReplyPolicy::kSandboxBytes: an attachment).
Reply GetFile(ServerState& s, const Request& rq) {
  std::string path;
  if (auto bad = FilePath(rq, &path)) return RefusalFor(rq, *bad);
  model::ApiError error;
  std::optional<UniqueFd> root = session::OpenSessionRoot(*s.session_mgr, rq.param, rq.caller.name, &error);
  if (!root) return RefusalFor(rq, error);
  auto f = isolation::OpenSandboxFile(root->get(), path);
  if (!f.ok()) return RefusalFor(rq, session::SessionFileError(f.status()));
  const int64_t total = f->size;
  int64_t start = 0, end = -1, length = total;
  bool suffix = false;
  const bool ranged = !rq.headers.range.empty() && ParseRange(rq.headers.range, &start, &end, &suffix);
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
      Reply bad = RefusalFor(rq, {model::ErrorKind::kBadRequest,
                                  "the range is outside the file (" + std::to_string(total) + " bytes)", ""});
      bad.status = 416;
      bad.headers.emplace_back("Content-Range", "bytes */" + std::to_string(total));
      return bad;
    }
  }
  if (length > s.opt.max_file_bytes) {
    return RefusalFor(rq, {model::ErrorKind::kPayloadTooLarge,
                           path + " has " + std::to_string(length) + " bytes to read, more than the " +
                               std::to_string(s.opt.max_file_bytes) + " allowed (--max-file): ask for a range",
                           ""});
  }
  Reply r;
  r.file = std::make_shared<Reply::File>();
  r.file->fd = std::move(f->fd);
  r.file->offset = start;
  r.file->length = length;
  r.file->name = path.substr(path.rfind('/') + 1);
  r.headers.emplace_back("Accept-Ranges", "bytes");
  if (ranged) {
    r.status = 206;
    r.headers.emplace_back("Content-Range", "bytes " + std::to_string(start) + "-" +
                                                std::to_string(start + length - 1) + "/" + std::to_string(total));
  }
  return r;
}

// The file is opened (its parents made) on a worker, then the body goes to it
// as it arrives; nothing is under its name until all of it is there.
void PutFile(const std::shared_ptr<Exchange>& ex) {
  std::string path;
  if (auto bad = FilePath(ex->rq, &path)) return ex->Refuse(*bad);
  struct Opened {
    std::shared_ptr<FileSink> sink;
    model::ApiError error;
  };
  ex->OnWorker(
      [&s = ex->s, id = ex->rq.param, owner = ex->rq.caller.name, path] {
        Opened o;
        std::optional<UniqueFd> root = session::OpenSessionRoot(*s.session_mgr, id, owner, &o.error);
        if (!root) return o;
        auto w = isolation::SandboxFileWriter::Open(root->get(), path, /*make_parents=*/true);
        if (!w.ok()) {
          o.error = session::SessionFileError(w.status());
          return o;
        }
        o.sink = std::make_shared<FileSink>(std::move(*w), s.opt.max_file_bytes);
        return o;
      },
      [ex, path](Opened o) {
        if (!o.sink) return ex->Refuse(o.error);
        std::shared_ptr<FileSink> sink = o.sink;
        ex->ReadBodyInto(sink, [ex, sink, path](Status st) {
          if (st.code() == ErrorCode::kCancelled) return ex->Abandon();
          if (!st.ok()) return ex->Refuse(session::SessionFileError(st));
          ex->Respond(JsonReply(201, model::SessionFileToJson({path, sink->size(), sink->modified_ms(), "file"})));
        });
      });
}

Reply DeleteFile(ServerState& s, const Request& rq) {
  std::string path;
  if (auto bad = FilePath(rq, &path)) return RefusalFor(rq, *bad);
  model::ApiError error;
  std::optional<UniqueFd> root = session::OpenSessionRoot(*s.session_mgr, rq.param, rq.caller.name, &error);
  if (!root) return RefusalFor(rq, error);
  if (Status st = isolation::RemoveSandboxPath(root->get(), path); !st.ok()) {
    return RefusalFor(rq, session::SessionFileError(st));
  }
  return JsonReply(204, "");
}

}  // namespace

void CreateSessionFromLoop(ServerState& s, std::string owner, model::SessionCreateRequest request,
                           profile::Door door, int tries, std::function<void(session::Created)> done) {
  struct Attempt : std::enable_shared_from_this<Attempt> {
    Attempt(ServerState& state) : s(state), timer(*state.io) {}
    ServerState& s;
    std::string owner;
    model::SessionCreateRequest request;
    profile::Door door = profile::Door::kApi;
    int left = 0;
    std::function<void(session::Created)> done;
    net::steady_timer timer;

    void Go() {
      // The attempt is moved to the loop's function: never released on the worker.
      net::post(*s.session_pool, [self = shared_from_this()]() mutable {
        session::Created made = self->s.session_mgr->Create(self->owner, "", self->request, self->door);
        Attempt* raw = self.get();
        net::post(*raw->s.io, [self = std::move(self), made = std::move(made)]() mutable { self->Then(std::move(made)); });
      });
    }
    void Then(session::Created made) {
      if (!made.ok && made.error.kind == model::ErrorKind::kUnavailable && left-- > 0 && !s.draining) {
        timer.expires_after(std::chrono::milliseconds(100));
        timer.async_wait([self = shared_from_this()](const error_code& ec) {
          if (!ec) self->Go();
        });
        return;
      }
      if (auto d = std::move(done)) d(std::move(made));
    }
  };
  auto a = std::make_shared<Attempt>(s);
  a->owner = std::move(owner);
  a->request = std::move(request);
  a->door = door;
  a->left = tries;
  a->done = std::move(done);
  a->Go();
}

bool IsSessionId(std::string_view id) {
  // s1-<8 hex>-<32 hex>
  return id.size() == 3 + 8 + 1 + 32 && id.substr(0, 3) == "s1-" && IsHex(id.substr(3, 8)) && id[11] == '-' &&
         IsHex(id.substr(12));
}

std::optional<model::ApiError> SessionRoutes::Owner(session::SessionManager& mgr, const std::string& id,
                                                    const std::string& owner) {
  model::ApiError error;
  if (!IsSessionId(id)) {
    error = {model::ErrorKind::kNotFound,
             "'" + id.substr(0, 80) + "' is not a session id (they look like s1-0123abcd-<32 hex digits>)", ""};
    error.code = "session_not_found";
    return error;
  }
  if (!mgr.Get(id, owner, &error)) return error;
  return std::nullopt;
}

std::vector<Route> SessionRoutes::Table() {
  using B = BodyPolicy;
  using O = OwnerRule;
  using P = ReplyPolicy;
  using A = Accounting;
  const char* kFile = "/v1/sessions/{id}/files/{path...}";
  const Role kRun = Role::kRun;
  const RunsOn kLoop = RunsOn::kLoop, kWorker = RunsOn::kWorker, kDriver = RunsOn::kDriver;
  std::vector<Route> t = {
      SmallJson(Row("POST", "/v1/sessions", kRun, O::kCaller, B::kJson, kWorker, P::kJson, A::kRequest, nullptr,
                    &Create)),
      Row("GET", "/v1/sessions", kRun, O::kCaller, B::kNone, kWorker, P::kJson, A::kRequest, nullptr, &List),
      Row("GET", "/v1/sessions/{id}", kRun, O::kSession, B::kNone, kLoop, P::kJson, A::kRequest, &GetOne),
      Row("DELETE", "/v1/sessions/{id}", kRun, O::kSession, B::kNone, kWorker, P::kJson, A::kRequest, nullptr,
          &Delete),
      Row("POST", "/v1/sessions/{id}/execute", kRun, O::kSession, B::kJson, kDriver, P::kRun, A::kRun, &Call),
      Row("POST", "/v1/sessions/{id}/restart", kRun, O::kSession, B::kNone, kWorker, P::kJson, A::kRequest, nullptr,
          &Restart),
      Row("GET", "/v1/sessions/{id}/files", kRun, O::kSession, B::kNone, kWorker, P::kJson, A::kRequest, nullptr,
          &ListFiles),
      Row("GET", kFile, kRun, O::kSession, B::kNone, kWorker, P::kSandboxBytes, A::kRequest, nullptr, &GetFile),
      Row("PUT", kFile, kRun, O::kSession, B::kUpload, kDriver, P::kJson, A::kRequest, &PutFile),
      Row("DELETE", kFile, kRun, O::kSession, B::kNone, kWorker, P::kJson, A::kRequest, nullptr, &DeleteFile),
  };
  for (Route& r : t) {
    if (std::string_view(r.pattern) == kFile) r.name = "/v1/sessions/{id}/files/{path}";
  }
  return t;
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
