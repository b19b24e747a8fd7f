#include "api/e2b_routes.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <set>

#include "api/call_driver.h"
#include "api/exchange.h"
#include "api/pipeline.h"
#include "api/query.h"
#include "api/server_state.h"
#include "api/session_routes.h"
#include "api/upload.h"
#include "isolation/sandbox_files.h"
#include "isolation/sandbox_xattrs.h"
#include "model/e2b.h"
#include "session/session_files.h"

namespace airlock::api {
namespace {

constexpr size_t kMaxUploadParts = 64;
// A context needs a warm run: while none is ready, retried every 100 ms this
// many times (15 s) before answering 503, as an E2B sandbox start would wait.
constexpr int kCreateTries = 150;

// E2B's 400 for a language no context can have. (One the profile does not
// allow, or whose runtime this host lacks, is refused by the session's call.)
model::ApiError UnknownLanguage(const std::string& language) {
  return {model::ErrorKind::kBadRequest,
          "language '" + language.substr(0, 40) +
              "' is not one of python, javascript (js), typescript (ts), r, java, bash",
          ""};
}

bool KnownLanguage(const std::string& language) { return !model::NormalizeLanguage(language).empty(); }

// A context's session: its id is the session's (Python) or "<session id>-<language>".
std::string SessionOfContext(const std::string& id) {
  constexpr size_t kSessionIdSize = 3 + 8 + 1 + 32;
  if (id.size() > kSessionIdSize && id[kSessionIdSize] == '-' && IsSessionId(id.substr(0, kSessionIdSize))) {
    return id.substr(0, kSessionIdSize);
  }
  return id;
}

model::ApiError ContextNotFound(const std::string& id) {
  return {model::ErrorKind::kNotFound, "Context " + id.substr(0, 80) + " not found", ""};
}

bool IsContextId(std::string_view id) {
  return !id.empty() && id.size() <= 64 &&
         std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

model::SessionCreateRequest ContextSession(const ServerState& s) {
  model::SessionCreateRequest create;
  if (!s.opt.e2b_profile.empty()) create.base.profile = s.opt.e2b_profile;
  return create;
}

// The whole NDJSON answer of an execution whose stream never began.
std::string Lines(const std::vector<model::StreamEvent>& events) {
  std::string out;
  for (const auto& e : events) out += e.json + "\n";
  out += model::E2bEndOfExecution() + "\n";
  return out;
}

// ---------------------------------------------------------------------------
// POST /execute: a call in the context's session, E2B's NDJSON lines streamed
// as the code prints.

// The answer of a finished call, made where the call finishes (figures can
// be megabytes): the final events, and the whole answer for a stream that
// never began.
Reply FinishedCall(const session::CallReply& call) {
  Reply r;
  r.content_type = "application/x-ndjson";
  // number_of_executions goes with the results, not ahead of the output:
  // the SDKs only record it, and one write less per call is what keeps the
  // adapter's cost near zero on a loaded host (docs/benchmarks.md).
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
  return r;
}

// `request` has the code and this execution's env_vars.
// `context`: a context made by POST /contexts ("": the session's interpreter
// of request.language).
void Call(const std::shared_ptr<Exchange>& ex, const std::string& id, model::ExecuteRequest request,
          std::string context = "") {
  ServerState& s = ex->s;
  request.stream_output = true;
  session::CallHooks hooks = StreamingHooks(ex, model::StreamFormat::kNdjson);
  std::weak_ptr<Exchange> weak = ex;
  const std::string key = context.empty() ? id : session::SessionManager::CallKey(id, context);
  ex->WatchDisconnect([&s, key] { s.session_mgr->Cancel(key, "the client disconnected"); });
  StartSessionCall(
      s, {id, ex->rq.caller.name, ex->rq.id, std::move(request), std::move(hooks), std::move(context)},
      &FinishedCall,
      [ex, id](bool ran, session::CallReply call, Reply reply) {
        ex->RecordCode(call.profile, call.code_sha256, call.code_bytes);
        if (!ran && call.kind == session::CallReply::Kind::kRejected) {
          // The analyzer refused the code before it ran: the SDK's
          // execution.error, so that an agent reads what to change (as a
          // kernel's error would be).
          std::string listing;
          for (const auto& v : call.violations) {
            listing += "line " + std::to_string(v.line) + ": " + v.message + " [" + v.rule + "]\n";
          }
          std::vector<model::StreamEvent> lines = {
              {"error", model::E2bErrorEvent("PolicyViolation",
                                             call.error.message.empty()
                                                 ? "the code was rejected by the sandbox's policy"
                                                 : call.error.message,
                                             listing)}};
          Reply r = JsonReply(200, Lines(lines));
          r.content_type = "application/x-ndjson";
          r.error = call.error;
          r.violations = call.violations;
          return ex->Respond(std::move(r));
        }
        if (!ran) {
          if (call.error.kind == model::ErrorKind::kNotFound || call.error.kind == model::ErrorKind::kGone) {
            ex->s.e2b->ForgetSession(id);
          }
          return ex->Refuse(call.error);
        }
        ex->RecordRun(call.response.run);
        ex->audit.verdict = ex->gone() ? "client_gone" : "ran";
        if (ex->gone()) return ex->Abandon();
        if (ex->events() && ex->events()->started()) {
          return ex->EndEvents(reply.final_events, "end_of_execution", model::E2bEndOfExecution());
        }
        ex->Respond(std::move(reply));
      },
      [weak] {
        auto e = weak.lock();
        return !e || e->gone();
      });
}

void ExecuteParsed(const std::shared_ptr<Exchange>& ex, model::E2bExecuteRequest req);

void Execute(const std::shared_ptr<Exchange>& ex) {
  ServerState& s = ex->s;
  ex->execution = true;
  ex->audit.code_bytes = static_cast<int64_t>(ex->rq.body.size());
  if (s.draining) {
    return ex->Refuse({model::ErrorKind::kUnavailable, "the server is shutting down; retry on another instance", ""});
  }
  ex->ParseBody<model::E2bExecuteRequest>(
      [caps = Caps(s)](const std::string& body, model::E2bExecuteRequest* req, model::ApiError* error) {
        return model::ParseE2bExecuteRequest(body, caps, req, error);
      },
      [ex](model::E2bExecuteRequest req) { ExecuteParsed(ex, std::move(req)); });
}

void ExecuteParsed(const std::shared_ptr<Exchange>& ex, model::E2bExecuteRequest req) {
  ServerState& s = ex->s;
  if (req.language && !KnownLanguage(*req.language)) return ex->Refuse(UnknownLanguage(*req.language));
  model::ExecuteRequest request;
  request.code = std::move(req.code);
  request.env = std::move(req.env_vars);  // this execution's only
  // The context named in the body (OwnerRule::kInBody): the caller's, or 404.
  if (req.context_id) {
    if (s.e2b->Owner(*req.context_id, ex->rq.caller.name)) return ex->Refuse(ContextNotFound(*req.context_id));
    const E2bContexts::Context* c = s.e2b->Find(*req.context_id);
    // A context of its own: a call in that interpreter.
    if (!c->context.empty()) return Call(ex, c->session, std::move(request), c->context);
    // A default context: a session call in its language (the session's own for Python).
    if (c->language != "python") request.language = c->language;
    return Call(ex, c->session, std::move(request));
  }
  // No context: the default session's interpreter of the language (python:
  // the session's own), as E2B's default contexts.
  const std::string language = model::NormalizeLanguage(req.language.value_or("python"));
  if (language != "python") request.language = language;
  s.e2b->Default(ex->rq.caller.name, [ex, language, request = std::move(request)](std::optional<std::string> id,
                                                                                    model::ApiError why) mutable {
    if (!id) return ex->Refuse(why);
    if (language != "python") ex->s.e2b->OfLanguage(ex->rq.caller.name, language, [](auto, auto) {});  // listed
    Call(ex, *id, std::move(request));
  });
}

// ---------------------------------------------------------------------------
// Contexts.

void Health(const std::shared_ptr<Exchange>& ex) {
  if (ex->rq.door == Door::kE2bEnvd) return ex->Respond(JsonReply(204, ""));
  ex->Respond(JsonReply(200, "\"OK\""));
}

void NewContext(const std::shared_ptr<Exchange>& ex) {
  ServerState& s = ex->s;
  model::E2bContextRequest req;
  model::ApiError error;
  if (!model::ParseE2bContextRequest(ex->rq.body, Caps(s), &req, &error)) return ex->Refuse(error);
  if (req.language && !KnownLanguage(*req.language)) return ex->Refuse(UnknownLanguage(*req.language));
  s.e2b->Prune();
  model::ContextCreateRequest create;
  create.language = model::NormalizeLanguage(req.language.value_or("python"));
  if (req.cwd && !req.cwd->empty()) {
    create.cwd = *req.cwd;
    while (create.cwd.size() > 1 && create.cwd.back() == '/') create.cwd.pop_back();
  }
  // A new interpreter in the caller's default sandbox: its files are the
  // other contexts' (a cwd must be one of the sandbox's directories).
  s.e2b->Default(ex->rq.caller.name, [ex, create](std::optional<std::string> id, model::ApiError why) {
    if (!id) return ex->Refuse(why);
    ex->OnWorker(
        [&s = ex->s, session = *id, owner = ex->rq.caller.name, create] {
          model::ApiError e;
          auto v = s.session_mgr->CreateContext(session, owner, create, &e);
          return std::make_pair(v, e);
        },
        [ex, session = *id](std::pair<std::optional<model::ContextView>, model::ApiError> made) {
          if (!made.first) return ex->Refuse(made.second);
          const model::ContextView& v = *made.first;
          const std::string context_id = session + "-" + v.id;
          ex->s.e2b->AddContext(context_id, ex->rq.caller.name, session, v.language, v.cwd, v.id);
          ex->Respond(JsonReply(200, model::E2bContextToJson({context_id, v.language, v.cwd})));
        });
  });
}

void ListPage(const std::shared_ptr<Exchange>& ex, const PageRequest& page);

// The caller's live contexts, a page at a time (X-Next-Cursor: the SDKs read
// an array).
void ListContexts(const std::shared_ptr<Exchange>& ex) {
  PageRequest page;
  if (auto bad = ParsePage(ex->rq.query, 100, 1000, &page)) return ex->Refuse(*bad);
  ex->s.e2b->Prune();
  // A sandbox always has its default contexts: made now when it has none.
  ex->s.e2b->Default(ex->rq.caller.name, [ex, page](std::optional<std::string> id, model::ApiError why) {
    if (!id) return ex->Refuse(why);
    ListPage(ex, page);
  });
}

void ListPage(const std::shared_ptr<Exchange>& ex, const PageRequest& page) {
  std::vector<model::E2bContext> list;
  std::optional<std::string> next;
  // (A list is short, defaults first: the cursor is the count of the
  // owner's contexts listed before.)
  const uint64_t after = page.cursor.empty() ? 0 : std::strtoull(page.cursor.c_str(), nullptr, 10);
  uint64_t index = 0;
  for (const auto& [id, c] : ex->s.e2b->Of(ex->rq.caller.name)) {
    if (index++ < after) continue;
    if (list.size() == page.limit) {
      next = std::to_string(index - 1);
      break;
    }
    list.push_back({id, c.language, c.cwd});
  }
  Reply r = JsonReply(200, model::E2bContextListToJson(list));
  if (next) r.headers.emplace_back("X-Next-Cursor", *next);
  ex->Respond(std::move(r));
}

// A context made by POST /contexts: a fresh interpreter of it; a default
// context: its session's interpreters (a context of another language than
// Python shares its session's). The context is looked up on the loop (the
// contexts are the loop's), the restart done on a worker.
void RestartContext(const std::shared_ptr<Exchange>& ex) {
  ex->OnWorker(
      [&s = ex->s, rq = ex->rq, context = ex->s.e2b->ContextIdOf(ex->rq.param)] {
        model::ApiError error;
        const std::string session = SessionOfContext(rq.param);
        const bool done = context.empty()
                              ? s.session_mgr->Restart(session, rq.caller.name, &error).has_value()
                              : s.session_mgr->RestartContext(session, rq.caller.name, context, &error).has_value();
        return done ? JsonReply(204, "") : RefusalFor(rq, error);
      },
      [ex](Reply r) { ex->Respond(std::move(r)); });
}

void DeleteContext(const std::shared_ptr<Exchange>& ex) {
  const std::string session = SessionOfContext(ex->rq.param);
  if (std::string context = ex->s.e2b->ContextIdOf(ex->rq.param); !context.empty()) {
    // A context of its own: its interpreter ends (forgotten once it did: a
    // busy one is refused and stays).
    return ex->OnWorker(
        [&s = ex->s, session, owner = ex->rq.caller.name, context] {
          model::ApiError error;
          bool deleted = s.session_mgr->DeleteContext(session, owner, context, &error);
          return std::make_pair(deleted || error.kind == model::ErrorKind::kGone ||
                                    error.kind == model::ErrorKind::kNotFound,
                                error);
        },
        [ex](std::pair<bool, model::ApiError> r) {
          if (!r.first) return ex->Refuse(r.second);
          ex->s.e2b->Forget(ex->rq.param);
          ex->Respond(JsonReply(204, ""));
        });
  }
  if (session != ex->rq.param) {
    // A context of another language: no longer listed (its interpreter ends
    // with its session).
    ex->s.e2b->Forget(ex->rq.param);
    return ex->Respond(JsonReply(204, ""));
  }
  ex->s.e2b->ForgetSession(session);
  ex->OnWorker(
      [&s = ex->s, id = session, owner = ex->rq.caller.name] {
        model::ApiError error;
        bool deleted = s.session_mgr->Delete(id, owner, &error);
        return std::make_pair(deleted || error.kind == model::ErrorKind::kGone, error);
      },
      [ex](std::pair<bool, model::ApiError> r) {
        if (!r.first) return ex->Refuse(r.second);
        ex->Respond(JsonReply(204, ""));
      });
}

// ---------------------------------------------------------------------------
// /files: the default sandbox's /home/user and /tmp.

// ?path= (and ?username=, which must be E2B's one user); where it is.
std::optional<model::ApiError> FilesQuery(const Request& rq, bool path_required, std::optional<std::string>* e2b_path,
                                          model::E2bPlace* place) {
  bool malformed = false;
  *e2b_path = QueryParam(rq.query, "path", &malformed);
  if (malformed) return model::ApiError{model::ErrorKind::kBadRequest, "the path parameter has a malformed %-escape", ""};
  if (std::optional<std::string> user = QueryParam(rq.query, "username", &malformed);
      user && !user->empty() && *user != "user") {
    return model::ApiError{model::ErrorKind::kUnauthorized,
                           "user '" + user->substr(0, 40) + "' does not exist here: the sandbox has one user, 'user'", ""};
  }
  if (!*e2b_path) {
    if (path_required) return model::ApiError{model::ErrorKind::kBadRequest, rq.method + " /files needs ?path=", ""};
    return std::nullopt;
  }
  std::string why;
  if (!model::E2bPathToPlace(**e2b_path, place, &why)) return model::ApiError{model::ErrorKind::kBadRequest, why, ""};
  return std::nullopt;
}

void GetFile(const std::shared_ptr<Exchange>& ex) {
  std::optional<std::string> e2b_path;
  model::E2bPlace place;
  if (auto bad = FilesQuery(ex->rq, true, &e2b_path, &place)) return ex->Refuse(*bad);
  ex->s.e2b->Default(ex->rq.caller.name, [ex, place](std::optional<std::string> id, model::ApiError error) {
    if (!id) return ex->Refuse(error);
    ex->OnWorker(
        [&s = ex->s, id = *id, owner = ex->rq.caller.name, place, rq = ex->rq] {
          model::ApiError e;
          std::optional<UniqueFd> root = session::OpenSessionDir(*s.session_mgr, id, owner, place.dir(), &e);
          if (!root) return RefusalFor(rq, e);
          const std::string& relative = place.relative;
          auto f = isolation::OpenSandboxFile(root->get(), relative);
          if (!f.ok()) return RefusalFor(rq, session::SessionFileError(f.status()));
          if (f->size > s.opt.max_file_bytes) {
            return RefusalFor(rq, {model::ErrorKind::kPayloadTooLarge,
                                   relative + " has " + std::to_string(f->size) + " bytes, more than the " +
                                       std::to_string(s.opt.max_file_bytes) + " allowed (--max-file)",
                                   ""});
          }
          Reply r;
          r.file = std::make_shared<Reply::File>();
          r.file->length = f->size;
          r.file->fd = std::move(f->fd);
          r.file->name = relative.substr(relative.rfind('/') + 1);
          return r;
        },
        [ex](Reply r) { ex->Respond(std::move(r)); });
  });
}

// An upload's Content-Encoding: none (or identity) or gzip; 415 for another.
std::optional<model::ApiError> UploadEncoding(const RequestHeaders& h, bool* gzip) {
  std::string enc = h.content_encoding;
  enc.erase(0, enc.find_first_not_of(" \t"));
  enc.erase(enc.find_last_not_of(" \t") + 1);
  std::transform(enc.begin(), enc.end(), enc.begin(), [](unsigned char c) { return std::tolower(c); });
  *gzip = enc == "gzip" || enc == "x-gzip";
  if (*gzip || enc.empty() || enc == "identity") return std::nullopt;
  return model::ApiError{model::ErrorKind::kUnsupportedMediaType,
                         "Content-Encoding '" + h.content_encoding.substr(0, 40) +
                             "' is not supported: send the body as it is, or gzip it (Content-Encoding: gzip)",
                         ""};
}

// E2B's file metadata, from the X-Metadata-<key> headers, checked (400).
std::optional<model::ApiError> UploadMetadata(const RequestHeaders& h, isolation::SandboxMetadata* metadata) {
  for (const auto& [key, value] : h.metadata) metadata->emplace(key, value);
  if (Status st = isolation::CheckSandboxMetadata(*metadata); !st.ok()) {
    return model::ApiError{model::ErrorKind::kBadRequest, st.message(), ""};
  }
  return std::nullopt;
}

// What POST /files writes: a raw body to ?path=, or the multipart parts named
// "file", each to ?path= (one part) or to its filename; a gzip body inflated
// as it arrives; the X-Metadata-* headers stored on every file written. The
// default context is made first (before the body is read), then the body goes
// to the files as it arrives.
void PostFile(const std::shared_ptr<Exchange>& ex) {
  std::optional<std::string> e2b_path;
  model::E2bPlace place;
  bool gzip = false;
  isolation::SandboxMetadata metadata;
  if (auto bad = FilesQuery(ex->rq, false, &e2b_path, &place)) return ex->Refuse(*bad);
  if (auto bad = UploadEncoding(ex->rq.headers, &gzip)) return ex->Refuse(*bad);
  if (auto bad = UploadMetadata(ex->rq.headers, &metadata)) return ex->Refuse(*bad);
  std::string ct = ex->rq.headers.content_type;
  std::transform(ct.begin(), ct.end(), ct.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool raw = ct.rfind("application/octet-stream", 0) == 0;
  std::unique_ptr<model::MultipartReader> reader;
  if (raw && !e2b_path) return ex->Refuse({model::ErrorKind::kBadRequest, "POST /files with a raw body needs ?path=", ""});
  if (!raw) {
    std::string why;
    if (!model::MultipartReader::Create(ex->rq.headers.content_type, kMaxUploadParts, &reader, &why)) {
      return ex->Refuse({model::ErrorKind::kBadRequest, why, ""});
    }
  }
  auto shared_reader = std::make_shared<std::unique_ptr<model::MultipartReader>>(std::move(reader));
  ex->s.e2b->Default(ex->rq.caller.name, [ex, raw, gzip, metadata, e2b_path, place, shared_reader](
                                              std::optional<std::string> id, model::ApiError error) {
    if (!id) return ex->Refuse(error);
    struct Opened {
      std::shared_ptr<BodySink> sink;
      std::shared_ptr<FileSink> file;
      std::shared_ptr<MultipartSink> parts;
      model::ApiError error;
    };
    ex->OnWorker(
        [&s = ex->s, id = *id, owner = ex->rq.caller.name, raw, gzip, metadata, e2b_path, place, shared_reader] {
          Opened o;
          if (raw) {
            std::optional<UniqueFd> root = session::OpenSessionDir(*s.session_mgr, id, owner, place.dir(), &o.error);
            if (!root) return o;
            auto w = isolation::SandboxFileWriter::Open(root->get(), place.relative, /*make_parents=*/true);
            if (!w.ok()) {
              o.error = session::SessionFileError(w.status());
              return o;
            }
            (*w)->SetMetadata(metadata);
            o.file = std::make_shared<FileSink>(std::move(*w), s.opt.max_file_bytes);
            o.sink = o.file;
          } else {
            // Each part may go to /home/user or /tmp (its filename, or ?path=).
            std::optional<UniqueFd> home = session::OpenSessionDir(*s.session_mgr, id, owner, "/home/user", &o.error);
            if (!home) return o;
            std::optional<UniqueFd> tmp = session::OpenSessionDir(*s.session_mgr, id, owner, "/tmp", &o.error);
            if (!tmp) return o;
            o.parts = std::make_shared<MultipartSink>(std::move(*home), std::move(*tmp), std::move(*shared_reader),
                                                      e2b_path, s.opt.max_file_bytes, metadata);
            o.sink = o.parts;
          }
          // Inflated as it arrives, under the cap of the body it stands for
          // (a file; a multipart body's part headers besides).
          if (gzip) {
            o.sink = std::make_shared<GzipSink>(
                o.sink, s.opt.max_file_bytes + (raw ? 0 : static_cast<int64_t>(kMultipartSlack)));
          }
          return o;
        },
        [ex, place, metadata](Opened o) {
          if (!o.sink) return ex->Refuse(o.error);
          ex->ReadBodyInto(o.sink, [ex, o, place, metadata](Status st) {
            if (st.code() == ErrorCode::kCancelled) return ex->Abandon();
            if (!st.ok()) return ex->Refuse(session::SessionFileError(st));
            std::vector<std::string> written;
            if (o.file) written.push_back(place.e2b_path());
            if (o.parts) written = o.parts->written();
            ex->Respond(JsonReply(200, model::E2bWrittenFilesToJson(written, metadata)));
          });
        });
  });
}

}  // namespace

std::vector<Route> E2bContexts::Table() {
  using B = BodyPolicy;
  using O = OwnerRule;
  using P = ReplyPolicy;
  using A = Accounting;
  const Role kRun = Role::kRun;
  return {
      Row("GET", "/health", Role::kAny, O::kNone, B::kNone, RunsOn::kLoop, P::kJson, A::kNone, &Health),
      Row("POST", "/execute", kRun, O::kInBody, B::kJson, RunsOn::kDriver, P::kRun, A::kRun, &Execute),
      SmallJson(Row("POST", "/contexts", kRun, O::kCaller, B::kJson, RunsOn::kDriver, P::kJson, A::kRequest,
                    &NewContext)),
      Row("GET", "/contexts", kRun, O::kCaller, B::kNone, RunsOn::kDriver, P::kJson, A::kRequest, &ListContexts),
      Row("POST", "/contexts/{id}/restart", kRun, O::kContext, B::kNone, RunsOn::kDriver, P::kJson, A::kRequest,
          &RestartContext),
      Row("DELETE", "/contexts/{id}", kRun, O::kContext, B::kNone, RunsOn::kDriver, P::kJson, A::kRequest,
          &DeleteContext),
      Row("GET", "/files", kRun, O::kCaller, B::kNone, RunsOn::kDriver, P::kSandboxBytes, A::kRequest, &GetFile),
      Row("POST", "/files", kRun, O::kCaller, B::kUpload, RunsOn::kDriver, P::kJson, A::kRequest, &PostFile),
  };
}

std::optional<model::ApiError> E2bContexts::Owner(const std::string& id, const std::string& owner) const {
  auto it = IsContextId(id) ? contexts_.find(id) : contexts_.end();
  if (it == contexts_.end() || it->second.owner != owner) return ContextNotFound(id);
  return std::nullopt;
}

void E2bContexts::AddContext(const std::string& id, const std::string& owner, const std::string& session,
                             const std::string& language, const std::string& cwd, const std::string& context) {
  Context c{owner, session, language, cwd};
  c.context = context;
  Put(id, std::move(c));
}

std::string E2bContexts::ContextIdOf(const std::string& id) const {
  const Context* c = Find(id);
  return c == nullptr ? "" : c->context;
}

const E2bContexts::Context* E2bContexts::Find(const std::string& id) const {
  auto it = contexts_.find(id);
  return it == contexts_.end() ? nullptr : &it->second;
}

void E2bContexts::Forget(const std::string& id) {
  auto it = contexts_.find(id);
  if (it == contexts_.end()) return;
  if (auto d = defaults_.find(it->second.owner); d != defaults_.end() && d->second == id) defaults_.erase(d);
  contexts_.erase(it);
}

void E2bContexts::ForgetSession(const std::string& session) {
  for (auto it = contexts_.begin(); it != contexts_.end();) {
    if (it->second.session != session) {
      ++it;
      continue;
    }
    if (auto d = defaults_.find(it->second.owner); d != defaults_.end() && d->second == session) defaults_.erase(d);
    it = contexts_.erase(it);
  }
}

void E2bContexts::Prune() {
  std::set<std::string> ended;
  for (const auto& [id, c] : contexts_) {
    if (ended.count(c.session)) continue;
    model::ApiError error;
    auto v = s_.session_mgr->Get(c.session, c.owner, &error);
    if (!v || v->state == "dead") ended.insert(c.session);
  }
  for (const std::string& session : ended) ForgetSession(session);
}

void E2bContexts::OfLanguage(const std::string& owner, const std::string& language, Made done) {
  Default(owner, [this, owner, language, done = std::move(done)](std::optional<std::string> id, model::ApiError why) {
    if (!id) return done(std::nullopt, why);
    const std::string context = *id + "-" + language;
    if (!contexts_.count(context)) Put(context, Context{owner, *id, language});
    done(context, {});
  });
}

std::vector<std::pair<std::string, E2bContexts::Context>> E2bContexts::Of(const std::string& owner) const {
  std::vector<std::pair<std::string, Context>> out;
  for (const auto& [id, c] : contexts_) {
    if (c.owner == owner) out.emplace_back(id, c);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::make_pair(!a.second.is_default, a.second.seq) < std::make_pair(!b.second.is_default, b.second.seq);
  });
  return out;
}

void E2bContexts::Default(const std::string& owner, Made done) {
  if (auto it = defaults_.find(owner); it != defaults_.end()) {
    model::ApiError ignored;
    if (s_.session_mgr->Live(it->second, owner, &ignored)) return done(it->second, {});
    // It ended (idle expiry, TTL, a crash): as an E2B sandbox that timed out,
    // its state is gone; the next execution starts a new one (its
    // execution_count starts at 1 again, which tells the client).
    ForgetSession(it->second);
  }
  std::vector<Made>& waiting = making_[owner];
  waiting.push_back(std::move(done));
  if (waiting.size() > 1) return;  // being made: this one waits for it
  Prune();
  CreateSessionFromLoop(s_, owner, ContextSession(s_), profile::Door::kE2b, kCreateTries, [this, owner](session::Created made) {
    std::vector<Made> waiters = std::move(making_[owner]);
    making_.erase(owner);
    if (made.ok) {
      Put(made.view.id, Context{owner, made.view.id, "python", "/home/user", 0, true});
      defaults_[owner] = made.view.id;
      // E2B's default contexts are python and javascript: listed when the
      // profile lets the session run JavaScript (its interpreter starts on its
      // first call).
      const profile::Profile* p = s_.svc.profiles().Find(made.view.profile);
      if (p != nullptr && std::find(p->languages.begin(), p->languages.end(), profile::Language::kJavaScript) !=
                              p->languages.end()) {
        Put(made.view.id + "-javascript", Context{owner, made.view.id, "javascript", "/home/user", 0, true});
      }
    }
    for (Made& w : waiters) {
      if (made.ok) w(made.view.id, {});
      else w(std::nullopt, made.error);
    }
  });
}

}  // namespace airlock::api
