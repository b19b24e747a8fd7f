#include "api/connection.h"

#include <sys/socket.h>

#include <cstdio>

#include "api/call_driver.h"
#include "api/console_routes.h"
#include "api/error_mapping.h"
#include "base/log.h"

namespace airlock::api {

namespace {

// Requests whose code is larger than this are prepared (analyzed) on a worker
// thread, so that a big program does not hold up the event loop.
constexpr size_t kInlinePrepareBytes = 64 * 1024;
constexpr size_t kHeaderLimit = 16 * 1024;

}  // namespace

Connection::Connection(ServerState& s, tcp::socket socket, Door door)
    : s_(s), stream_(std::move(socket)), door_(door) {
  error_code ec;
  auto ep = stream_.socket().remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  s_.sessions.insert(this);
}

Connection::~Connection() {
  if (s_.destroying) return;
  s_.sessions.erase(this);
  s_.MaybeStop();
}

// Drain: a connection waiting for its next request is closed now.
void Connection::CloseIfIdle() {
  if (state_ == State::kReading) Close();
}

// Admission put the request in the queue.
void Connection::EnterQueue() {
  state_ = State::kQueued;
  WatchDisconnect();
}

// Draining: a queued request will not run.
void Connection::RejectQueued() {
  FinishError({model::ErrorKind::kUnavailable, "the server is shutting down; retry on another instance", ""}, {});
}

void Connection::ReadHeader(double timeout_s) {
  state_ = State::kReading;
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  // The larger of the two caps while the header is read (Beast checks a
  // Content-Length against it then); OnHeader sets the route's own.
  parser_->body_limit(std::max<uint64_t>(s_.opt.max_body_bytes, static_cast<uint64_t>(s_.opt.max_file_bytes)));
  stream_.expires_after(Ms(timeout_s));
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](const error_code& ec, size_t) { self->OnHeader(ec); });
}

void Connection::OnHeader(const error_code& ec) {
  if (ec) return OnReadError(ec);
  BeginRequest();
  // Everything that can refuse a request on its headers alone does so here:
  // before the body is read and before "100 Continue" invites it.
  if (!ScreenHeaders()) return;
  // A session file upload is a raw body of its own cap (--max-file); every
  // other body, --max-body.
  body_limit_ = s_.opt.max_body_bytes;
  if (req_.session_route && SessionRoutes::IsUpload(ToString(parser_->get().method_string()), path_)) {
    body_limit_ = static_cast<uint64_t>(s_.opt.max_file_bytes);
  }
  // An E2B upload is multipart: the file plus its part headers.
  if (req_.e2b && E2bRoutes::IsUpload(ToString(parser_->get().method_string()), path_)) {
    body_limit_ = static_cast<uint64_t>(s_.opt.max_file_bytes) + 64 * 1024;
  }
  parser_->body_limit(body_limit_);
  if (auto length = parser_->content_length(); length && *length > body_limit_) {
    return OnReadError(http::error::body_limit);
  }
  auto expect = parser_->get()[http::field::expect];
  if (beast::iequals(expect, "100-continue") && !parser_->is_done()) {
    static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    stream_.expires_after(Ms(s_.opt.write_timeout_s));
    net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1),
                     [self = shared_from_this()](const error_code& e, size_t) {
                       if (e) return self->Close();
                       self->ReadBody();
                     });
    return;
  }
  ReadBody();
}

void Connection::ReadBody() {
  stream_.expires_after(Ms(s_.opt.body_timeout_s));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](const error_code& ec, size_t) { self->OnRead(ec); });
}

void Connection::OnReadError(const error_code& ec) {
  if (ec == http::error::body_limit) {
    if (state_ == State::kReading) BeginRequest();
    req_.keep_alive = false;
    FinishError({model::ErrorKind::kPayloadTooLarge,
                 "request body is larger than " + std::to_string(body_limit_) + " bytes" +
                     (body_limit_ == s_.opt.max_body_bytes ? "" : " (--max-file)"),
                 ""},
                {});
    return;
  }
  // A client that closed, a timeout, or an abort (drain): nothing to answer.
  if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset || !parser_->got_some()) {
    return Close();
  }
  if (state_ == State::kReading) BeginRequest();
  req_.keep_alive = false;
  Send(400, model::ErrorToJson({model::ErrorKind::kBadRequest, "malformed HTTP request: " + ec.message(), ""}, ""),
       "application/json", {});
}

void Connection::OnRead(const error_code& ec) {
  if (ec) return OnReadError(ec);
  stream_.expires_never();
  Handle();
}

// The per-request context; the route is known when the header is.
void Connection::BeginRequest() {
  state_ = State::kHandling;
  req_ = Request();
  req_.id = s_.NewRequestId();
  req_.start = Clock::now();
  const auto& h = parser_->get();
  std::string target = ToString(h.target());
  if (size_t q = target.find('?'); q != std::string::npos) target.resize(q);
  path_ = target;
  req_.keep_alive = h.keep_alive() && !s_.draining;
  if (door_ != Door::kApi) {
    req_.e2b = true;
    req_.route = E2bRoutes::RouteName(path_);
  } else if (path_ == "/execute" || path_ == "/v1/execute") {
    req_.execute = true;
    req_.compat = path_ == "/execute";
    req_.route = path_;
    if (!req_.compat) req_.stream = model::NegotiateStreamFormat(ToString(h[http::field::accept]));
  } else if (path_ == "/healthz" || path_ == "/readyz" || path_ == "/profile" || path_ == "/v1/profiles" ||
             path_ == "/metrics") {
    req_.route = path_;
  } else if (path_.rfind("/v1/profiles/", 0) == 0) {
    req_.route = "/v1/profiles/{name}";
  } else if (McpRoutes::Matches(path_) || McpRoutes::IsTools(path_)) {
    req_.route = path_;
  } else if (Approvals::Matches(path_)) {
    req_.approval_route = true;
    req_.route = path_ == "/v1/approvals" ? "/v1/approvals" : "/v1/approvals/{id}";
  } else if (path_ == "/v1/runs") {
    req_.route = path_;
  } else if (ConsoleRoutes::Matches(path_)) {
    req_.console = true;
    req_.route = "/console";
  } else if (SessionRoutes::Matches(path_)) {
    req_.session_route = true;
    req_.route = SessionRoutes::RouteName(ToString(h.method_string()), path_);
    if (SessionRoutes::IsCall(ToString(h.method_string()), path_)) {
      req_.stream = model::NegotiateStreamFormat(ToString(h[http::field::accept]));
    }
  } else {
    req_.route = "other";
  }
  req_.origin = ToString(h[http::field::origin]).substr(0, 512);
  model::AuditRecord& a = req_.audit;
  a.request_id = req_.id;
  a.route = path_.size() > 256 ? path_.substr(0, 256) : path_;
  a.client_address = remote_;
}

// Metrics and the audit record of a session-call reply (the session routes'
// and E2B's): its refusal, and the call that ran or was refused. False when
// the reply carries no call.
template <class Reply>
bool Connection::AccountCall(const Reply& reply) {
  if (reply.error) {
    s_.metrics.CountRejected(RejectReason(reply.error->kind));
    req_.audit.error = reply.error->message;
    for (const auto& v : reply.violations) s_.metrics.CountPolicyRule(v.rule);
    req_.audit.violations = reply.violations;
  }
  if (!reply.call) return false;
  const session::CallReply& c = *reply.call;
  req_.audit.profile = c.profile;
  req_.audit.code_sha256 = c.code_sha256;
  req_.audit.code_bytes = c.code_bytes;
  if (c.kind == session::CallReply::Kind::kRan) {
    RecordRun(c.response.run);
    Audit(req_.client_gone ? "client_gone" : "ran", req_.client_gone ? 499 : 200);
  } else {
    Audit(Verdict(c.error.kind), reply.status);
  }
  return true;
}

// A run that ended (one-shot or a session's call): counted, and its outcome
// put in the audit record.
void Connection::RecordRun(const model::RunReport& run) {
  s_.metrics.CountExecution(Outcome(run), run.duration_ms / 1000.0);
  model::AuditRecord& a = req_.audit;
  a.exit_code = run.exit_code;
  if (run.signal) a.signal = run.signal;
  a.kill_reason = run.kill_reason;
  a.run_ms = run.duration_ms;
  a.cpu_ms = run.cpu_ms;
  a.max_rss_kb = run.max_rss_kb;
}

void Connection::Audit(const std::string& verdict, int status) {
  model::AuditRecord& a = req_.audit;
  a.time = NowRfc3339();
  a.verdict = verdict;
  a.http_status = status;
  a.client_gone = req_.client_gone;
  a.duration_ms = MillisSince(req_.start);
  s_.WriteAudit(a);
}

void Connection::Send(int status, std::string body, const char* content_type,
          const std::vector<std::pair<std::string, std::string>>& headers) {
  s_.metrics.CountHttp(req_.route, status);
  if (req_.client_gone || state_ == State::kClosed) return Close();
  state_ = State::kWriting;
  ++watch_gen_;
  error_code ignored;
  stream_.socket().cancel(ignored);  // the disconnect watch
  auto res = std::make_shared<http::response<http::string_body>>();
  res->version(11);
  res->result(static_cast<unsigned>(status));
  res->set(http::field::server, "airlock");
  res->set(http::field::content_type, content_type);
  res->set(http::field::cache_control, "no-store");
  res->set("X-Request-Id", req_.id);
  for (const auto& [k, v] : s_.gate.CorsHeaders(req_.origin)) res->set(k, v);
  for (const auto& [k, v] : headers) res->set(k, v);
  if (s_.draining) req_.keep_alive = false;
  res->keep_alive(req_.keep_alive);
  res->body() = std::move(body);
  res->prepare_payload();
  stream_.expires_after(Ms(s_.opt.write_timeout_s));
  http::async_write(stream_, *res, [self = shared_from_this(), res](const error_code& ec, size_t) {
    self->OnWritten(ec);
  });
}

void Connection::OnWritten(const error_code& ec) {
  if (ec) return Close();
  if (!req_.keep_alive) {
    // Half-close and read what the client may still send (the rest of an
    // oversized body), so that it sees our answer rather than a reset.
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    // One absolute deadline for the whole discard: a client trickling a byte
    // at a time must not hold the connection open.
    stream_.expires_after(std::chrono::seconds(2));
    Discard(0);
    return;
  }
  req_ = Request();
  ReadHeader(s_.opt.idle_timeout_s);
}

void Connection::Discard(size_t total) {
  state_ = State::kClosed;
  if (total > (size_t{64} << 20)) return Close();
  if (!discard_) discard_ = std::make_unique<char[]>(65536);
  stream_.async_read_some(net::buffer(discard_.get(), 65536),
                          [self = shared_from_this(), total](const error_code& ec, size_t n) {
                            if (ec) return self->Close();
                            self->Discard(total + n);
                          });
}

void Connection::Close() {
  state_ = State::kClosed;
  error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

// The probes stay open to anyone (a kubelet sends its own Host); every other
// route passes the browser rules and, when tokens are configured, auth, on
// the headers alone. A refusal is answered at once and the connection closed
// after it, so a refused body is never read (only discarded, bounded).
bool Connection::ScreenHeaders() {
  const auto& h = parser_->get();
  if (!req_.e2b && (path_ == "/healthz" || path_ == "/readyz")) return true;
  const bool has_body = !parser_->is_done();
  auto refuse = [&](const model::ApiError& e, const char* verdict) {
    s_.metrics.CountRejected(RejectReason(e.kind));
    req_.audit.error = e.message;
    if (has_body) req_.keep_alive = false;
    ErrorReply r = MakeErrorReply(e, {}, req_.compat, req_.id);
    if (req_.execute || e.kind == model::ErrorKind::kUnauthorized) Audit(verdict, r.status);
    Send(r.status, r.body, "application/json", r.headers);
    return false;
  };
  const http::verb method = h.method();
  if (auto refusal = s_.gate.Check(ToString(h.method_string()), ToString(h[http::field::host]), req_.origin,
                                   ToString(h[http::field::content_type]),
                                   /*json_body=*/method == http::verb::post && has_body &&
                                       !(req_.e2b && E2bRoutes::IsUpload("POST", path_)))) {
    model::ErrorKind kind = refusal->status == 421   ? model::ErrorKind::kMisdirected
                            : refusal->status == 415 ? model::ErrorKind::kUnsupportedMediaType
                                                     : model::ErrorKind::kForbidden;
    return refuse({kind, refusal->message, ""}, Verdict(kind));
  }
  // A CORS preflight carries no credentials: answer it before auth, from its
  // headers alone (a body it may carry is never read).
  if (method == http::verb::options) {
    if (has_body) req_.keep_alive = false;
    Handle();
    return false;
  }
  // The console's static page carries no data: a browser loads it without a
  // token, then sends one (Authorization header, never a cookie) on its calls.
  if (req_.console) return true;
  if (s_.auth.enabled()) {
    // E2B's clients send their token as X-Access-Token.
    std::string key = ToString(h["X-API-Key"]);
    if (req_.e2b && key.empty()) key = ToString(h["X-Access-Token"]);
    auto id = s_.auth.Identify(ToString(h[http::field::authorization]), key);
    if (!id) {
      return refuse({model::ErrorKind::kUnauthorized,
                     "missing or wrong token: send 'Authorization: Bearer <token>' or 'X-API-Key: <token>'", ""},
                    "unauthorized");
    }
    req_.audit.token_name = id->name;
    req_.may_run = id->run;
    req_.may_approve = id->approve;
  }
  return true;
}

void Connection::Handle() {
  const auto& h = parser_->get();
  const http::verb method = h.method();
  if (method == http::verb::options) {
    // A preflight from an allowed origin gets the CORS answer; anything else
    // (no Origin: a plain OPTIONS) only what the server allows.
    auto headers = s_.gate.PreflightHeaders(req_.origin);
    headers.emplace_back("Allow", "GET, POST, PUT, DELETE, OPTIONS");
    return Send(204, "", "text/plain", headers);
  }
  auto method_not_allowed = [&](const char* allow) {
    ErrorReply r = MakeErrorReply({model::ErrorKind::kMethodNotAllowed,
                                   std::string("method not allowed; use ") + allow, ""},
                                  {}, false, req_.id);
    r.headers.emplace_back("Allow", allow);
    Send(r.status, r.body, "application/json", r.headers);
  };

  if (req_.console) {
    if (method != http::verb::get) return method_not_allowed("GET");
    ConsoleAsset a = ConsoleRoutes::Get(path_);
    return Send(a.status, std::move(a.body), a.content_type, a.headers);
  }
  if ((req_.execute || req_.session_route || req_.e2b || McpRoutes::Matches(path_)) && !req_.may_run) {
    return FinishError({model::ErrorKind::kForbidden, "token '" + req_.audit.token_name +
                                                          "' may approve, not run code (its role in the tokens file)",
                        ""},
                       {});
  }
  if (req_.e2b) return HandleE2b();
  if (req_.approval_route) {
    Caller caller{req_.audit.token_name, req_.may_run, req_.may_approve};
    RouteAnswer a = s_.approvals->Handle(ToString(h.method_string()), path_, parser_->release().body(), caller);
    return SendJson(a.status, std::move(a.body));
  }
  if (path_ == "/v1/runs") {
    if (method != http::verb::get) return method_not_allowed("GET");
    // Approvers see every run; a run-only token its own.
    const bool all = !s_.auth.enabled() || req_.may_approve;
    return SendJson(200, s_.recent.ToJson(all ? nullptr : &req_.audit.token_name));
  }
  if (req_.execute) {
    if (method != http::verb::post) return method_not_allowed("POST");
    return HandleExecute();
  }
  if (req_.session_route) return HandleSessionRoute();
  if (McpRoutes::Matches(path_)) return HandleMcp();
  if (req_.route == "other") {
    return SendJson(404, model::ErrorToJson({model::ErrorKind::kNotFound, "no such endpoint: " + path_.substr(0, 256) +
                                                                              " (see docs/api.md)", ""}, req_.id));
  }
  if (method != http::verb::get) return method_not_allowed("GET");

  if (path_ == "/healthz") return SendJson(200, model::StatusToJson("ok", ""));
  if (path_ == "/readyz") {
    if (s_.ready && !s_.draining) return SendJson(200, model::ReadyToJson("ready", "", s_.svc.Pools()));
    ErrorReply r = MakeErrorReply({model::ErrorKind::kUnavailable, "", ""}, {}, false, req_.id);
    return Send(503, model::StatusToJson("not ready", s_.draining ? "the server is shutting down" : s_.not_ready_detail),
                "application/json", r.headers);
  }
  if (path_ == "/metrics") {
    return Send(200,
                s_.metrics.Render() + RenderPoolMetrics(s_.svc.Pools()) +
                    RenderSessionMetrics(s_.session_mgr->Stats()),
                "text/plain; version=0.0.4; charset=utf-8", {});
  }
  if (path_ == "/profile") {
    const profile::Profile& p = s_.svc.profiles().Default();
    return SendJson(200, model::ProfileToJson(s_.svc.View(p), s_.layers));
  }
  if (McpRoutes::IsTools(path_)) {
    std::string target = ToString(h.target());
    size_t q = target.find('?');
    McpHttpReply r = s_.mcp_routes->Tools(q == std::string::npos ? "" : std::string_view(target).substr(q + 1));
    return Send(r.status, std::move(r.body), r.content_type.c_str(), r.headers);
  }
  if (path_ == "/v1/profiles") {
    std::vector<model::ProfileView> views;
    for (const profile::Profile& p : s_.svc.profiles().profiles()) views.push_back(s_.svc.View(p));
    return SendJson(200, model::ProfileListToJson(views, s_.svc.profiles().default_name()));
  }
  // /v1/profiles/{name}
  std::string name = path_.substr(std::string("/v1/profiles/").size());
  const profile::Profile* p = s_.svc.profiles().Find(name);
  if (p == nullptr) {
    return SendJson(404, model::ErrorToJson({model::ErrorKind::kNotFound,
                                             "no profile named '" + name.substr(0, 64) + "' (GET /v1/profiles lists them)",
                                             ""},
                                            req_.id));
  }
  return SendJson(200, model::ProfileToJson(s_.svc.View(*p), s_.layers));
}

void Connection::HandleExecute() {
  if (s_.draining) {
    return FinishError({model::ErrorKind::kUnavailable, "the server is shutting down; retry on another instance", ""},
                       {});
  }
  model::RequestCaps caps;
  caps.max_depth = s_.opt.max_json_depth;
  caps.max_code_bytes = s_.opt.max_code_bytes;
  model::ExecuteRequest request;
  model::ApiError error;
  std::string body = parser_->release().body();
  if (!model::ParseExecuteRequest(body, caps, &request, &error)) return FinishError(error, {});
  req_.audit.code_bytes = static_cast<int64_t>(request.code.size());
  request.stream_output = req_.stream != model::StreamFormat::kNone;
  req_.wait_s = request.wait_s;

  if (request.code.size() <= kInlinePrepareBytes) {
    return OnPrepared(s_.svc.Prepare(request, req_.id));
  }
  net::post(s_.workers, [self = shared_from_this(), request = std::move(request), id = req_.id]() {
    service::Prepared p = self->s_.svc.Prepare(request, id);
    net::post(*self->s_.io, [self, p = std::move(p)]() mutable { self->OnPrepared(std::move(p)); });
  });
}

void Connection::OnPrepared(service::Prepared p) {
  if (state_ == State::kClosed) return;
  req_.audit.profile = p.profile_name;
  req_.audit.code_sha256 = p.code_sha256;
  req_.audit.code_bytes = p.code_bytes;
  if (p.verdict == service::Verdict::kInvalid) return FinishError(p.error, {});
  if (p.verdict == service::Verdict::kRejected) {
    for (const auto& v : p.violations) s_.metrics.CountPolicyRule(v.rule);
    req_.audit.violations = p.violations;
    return FinishError(p.error, p.violations);
  }
  if (p.verdict == service::Verdict::kNeedsApproval) return HoldForApproval(std::move(p));
  req_.audit.violations = p.plan->warnings;
  req_.plan = std::move(p.plan);
  s_.Admit(shared_from_this());
}

// The profile holds this request for a person: 202 at once, or after the
// decision and the run when the client asked to wait (the connection is held
// by a timer, never by a thread).
void Connection::HoldForApproval(service::Prepared p) {
  const profile::Profile* prof = s_.svc.profiles().Find(p.profile_name);
  req_.audit.violations = p.violations;
  auto id = s_.approvals->Hold(std::move(p), req_.audit.token_name, prof->approval, req_.id);
  if (!id.ok()) return FinishError({model::ErrorKind::kTooManyRequests, id.status().message(), ""}, {});
  req_.audit.approval_id = *id;
  req_.audit.verdict = "pending_approval";
  Audit("pending_approval", 202);
  if (!req_.wait_s) return Send(202, s_.approvals->PendingJson(*id), "application/json", {{"X-Approval-Id", *id}});
  state_ = State::kRunning;  // a disconnect only marks the request (the approval stays)
  WatchDisconnect();
  s_.approvals->Wait(*id, *req_.wait_s, [self = shared_from_this(), id = *id] {
    if (self->state_ == State::kClosed) return;
    self->state_ = State::kHandling;
    RouteAnswer a = self->s_.approvals->Outcome(id, self->req_.compat);
    self->Send(a.status, std::move(a.body), "application/json", {{"X-Approval-Id", id}});
  });
}

void Connection::FinishError(const model::ApiError& error, const std::vector<model::Violation>& violations) {
  s_.metrics.CountRejected(RejectReason(error.kind));
  req_.audit.error = error.message;
  ErrorReply r = MakeErrorReply(error, violations, req_.compat, req_.id);
  if (req_.execute) Audit(Verdict(error.kind), r.status);
  if (state_ == State::kQueued || state_ == State::kRunning) state_ = State::kHandling;
  Send(r.status, r.body, "application/json", r.headers);
}

void Connection::StartRun() {
  state_ = State::kRunning;
  auto self = shared_from_this();
  req_.driver = std::make_shared<RunDriver>(s_, std::move(req_.plan), [self](RunOutcome o) {
    self->OnRunDone(std::move(o));
  });
  s_.drivers.insert(req_.driver);
  if (req_.stream != model::StreamFormat::kNone) PrepareStream();
  req_.driver->Start();
  if (req_.client_gone) req_.driver->Cancel("the client disconnected");
  else WatchDisconnect();
}

void Connection::WatchDisconnect() {
  uint64_t gen = ++watch_gen_;
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), gen](const error_code& ec) {
    if (ec || gen != self->watch_gen_) return;
    if (self->state_ != State::kQueued && self->state_ != State::kRunning) return;
    char c;
    ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return self->OnClientGone();
    }
    if (n > 0) return;  // the client sent its next request already: cannot tell more
    self->WatchDisconnect();
  });
}

void Connection::OnClientGone() {
  req_.client_gone = true;
  if (state_ == State::kQueued) {
    s_.Dequeue(this);
    s_.metrics.CountExecution("cancelled", 0);
    req_.audit.error = "the client disconnected while the request was queued";
    Audit("client_gone", 499);
    return Close();
  }
  if (state_ == State::kRunning && req_.driver) req_.driver->Cancel("the client disconnected");
  if (state_ == State::kRunning && !req_.session_id.empty()) {
    s_.session_mgr->Cancel(req_.session_id, "the client disconnected");
  }
}

void Connection::HandleSessionRoute() {
  const auto& h = parser_->get();
  RouteRequest rq;
  rq.method = ToString(h.method_string());
  if (s_.draining && rq.method == "POST" && path_ == "/v1/sessions") {
    return FinishError({model::ErrorKind::kUnavailable, "the server is shutting down; create the session elsewhere", ""},
                       {});
  }
  std::string target = ToString(h.target());
  rq.path = path_;
  if (size_t q = target.find('?'); q != std::string::npos) rq.query = target.substr(q + 1);
  rq.owner = req_.audit.token_name;
  rq.route_key = ToString(h["X-Airlock-Route"]).substr(0, 64);
  rq.range = ToString(h[http::field::range]).substr(0, 128);
  rq.request_id = req_.id;
  rq.body = parser_->release().body();
  const bool call = SessionRoutes::IsCall(rq.method, rq.path);
  if (call) {
    req_.execute = true;  // audited as a run
    req_.session_id = SessionRoutes::SessionId(rq.path);
    req_.audit.code_bytes = static_cast<int64_t>(rq.body.size());
  }
  state_ = State::kRunning;
  if (call) WatchDisconnect();
  // A streamed call: its output goes to the writer as it is read, and the
  // response begins when the call starts running (refusals before that are
  // plain JSON answers, as for /v1/execute).
  session::CallHooks hooks;
  rq.stream_output = call && req_.stream != model::StreamFormat::kNone;
  if (rq.stream_output) {
    MakeEventStream();
    std::weak_ptr<Connection> weak = weak_from_this();
    std::weak_ptr<EventStream> events = req_.events;
    net::io_context& io = *s_.io;
    hooks.on_output = [events, &io](exec::Stream which, std::string_view bytes) {
      net::post(io, [events, which, data = std::string(bytes)] {
        if (auto es = events.lock()) es->Output(which == exec::Stream::kStdout ? "stdout" : "stderr", data);
      });
    };
    hooks.on_started = [weak, &io] {
      net::post(io, [weak] {
        if (auto self = weak.lock()) self->BeginStream();
      });
    };
  }
  if (call && rq.body.size() <= kInlinePrepareBytes) {
    // Checked and begun right here (as /v1/execute's small requests are
    // prepared on the loop), then fed from the loop.
    RouteReply refused;
    std::unique_ptr<session::PendingCall> pending = s_.session_routes->BeginCall(rq, hooks, &refused);
    if (!pending) return OnSessionReply(std::move(refused));
    return DriveSessionCall(std::move(pending));
  }
  net::post(*s_.session_pool, [self = shared_from_this(), rq = std::move(rq), hooks = std::move(hooks), call]() {
    if (call) {
      // A large call is analyzed off the loop, then fed from it.
      RouteReply refused;
      std::unique_ptr<session::PendingCall> pending = self->s_.session_routes->BeginCall(rq, hooks, &refused);
      net::post(*self->s_.io, [self, pending = std::move(pending), refused = std::move(refused)]() mutable {
        if (!pending) return self->OnSessionReply(std::move(refused));
        self->DriveSessionCall(std::move(pending));
      });
      return;
    }
    RouteReply reply = self->s_.session_routes->Handle(rq, hooks);
    net::post(*self->s_.io, [self, reply = std::move(reply)]() mutable { self->OnSessionReply(std::move(reply)); });
  });
}

void Connection::DriveSessionCall(std::unique_ptr<session::PendingCall> pending) {
  std::weak_ptr<Connection> weak = weak_from_this();
  auto driver = std::make_shared<SessionCallDriver>(s_, std::move(pending), [weak](RouteReply reply) {
    if (auto self = weak.lock()) self->OnSessionReply(std::move(reply));
  });
  s_.call_drivers.insert(driver);
  driver->Start();
  // The connection went while a large call was being prepared: the call was
  // already handed to the interpreter, so it is driven to its end (never
  // dropped half-way, which would leave its output to the next call),
  // interrupted as for any client that leaves.
  if (state_ == State::kClosed || req_.client_gone) {
    s_.session_mgr->Cancel(req_.session_id, "the client disconnected");
  }
}

// /mcp: the JSON-RPC message is handled on a session_pool thread (a tools/call
// blocks for the run), never on the event loop.
void Connection::HandleMcp() {
  const auto& h = parser_->get();
  McpHttpRequest rq;
  rq.method = ToString(h.method_string());
  rq.owner = req_.audit.token_name;
  rq.session_id = ToString(h["Mcp-Connection-Id"]).substr(0, 128);
  rq.protocol_version = ToString(h["MCP-Protocol-Version"]).substr(0, 64);
  rq.accept = ToString(h[http::field::accept]).substr(0, 512);
  rq.client_address = remote_;
  rq.body = parser_->release().body();
  state_ = State::kRunning;
  net::post(*s_.session_pool, [self = shared_from_this(), rq = std::move(rq)]() {
    McpHttpReply reply = self->s_.mcp_routes->Handle(rq);
    net::post(*self->s_.io, [self, reply = std::move(reply)]() mutable {
      if (self->state_ == State::kClosed) return;
      self->state_ = State::kHandling;
      self->Send(reply.status, std::move(reply.body), reply.content_type.c_str(), reply.headers);
    });
  });
}

void Connection::OnSessionReply(RouteReply reply) {
  if (state_ == State::kClosed) return;
  state_ = State::kHandling;
  const bool streaming = req_.events && req_.events->started();
  if (req_.events && (!streaming || req_.client_gone)) {
    req_.events->Abort();  // never begun (refused before the call ran), or nobody to write to
    req_.events.reset();
  }
  AccountCall(reply);
  if (req_.client_gone) return Close();
  if (req_.events && reply.call && reply.call->kind == session::CallReply::Kind::kRan) {
    return EndStream(reply.call->response, reply.body);
  }
  if (req_.events) {  // begun, but no call result (cannot happen: a call that began ran)
    req_.events->Abort();
    req_.events.reset();
    return Close();
  }
  Send(reply.status, std::move(reply.body), reply.content_type.c_str(), reply.headers);
}

// An E2B request (api/e2b_routes.h), on a session-pool thread as session
// routes are. POST /execute always streams (E2B's NDJSON lines): the response
// begins when the call starts running; a refusal
// before that is a plain answer (an error body, or for code the analyzer
// rejected, the whole NDJSON answer with its error line).
void Connection::HandleE2b() {
  const auto& h = parser_->get();
  E2bRequest rq;
  rq.port = door_ == Door::kE2bEnvd ? E2bPort::kEnvd : E2bPort::kInterpreter;
  rq.method = ToString(h.method_string());
  rq.path = path_;
  std::string target = ToString(h.target());
  if (size_t q = target.find('?'); q != std::string::npos) rq.query = target.substr(q + 1);
  rq.content_type = ToString(h[http::field::content_type]).substr(0, 1024);
  rq.owner = req_.audit.token_name;
  rq.request_id = req_.id;
  rq.body = parser_->release().body();
  const bool call = E2bRoutes::IsExecute(rq.method, rq.path);
  if (call && s_.draining) {
    return FinishError({model::ErrorKind::kUnavailable, "the server is shutting down; retry on another instance", ""},
                       {});
  }
  E2bHooks hooks;
  if (call) {
    req_.execute = true;  // audited as a run
    req_.audit.code_bytes = static_cast<int64_t>(rq.body.size());
    req_.stream = model::StreamFormat::kNdjson;
    MakeEventStream();
    std::weak_ptr<Connection> weak = weak_from_this();
    std::weak_ptr<EventStream> events = req_.events;
    net::io_context& io = *s_.io;
    hooks.on_output = [events, &io](exec::Stream which, std::string_view bytes) {
      net::post(io, [events, which, data = std::string(bytes)] {
        if (auto es = events.lock()) es->Output(which == exec::Stream::kStdout ? "stdout" : "stderr", data);
      });
    };
    hooks.on_started = [weak, &io](const std::string& session_id) {
      net::post(io, [weak, session_id] {
        auto self = weak.lock();
        if (!self) return;
        self->req_.session_id = session_id;  // a client gone interrupts the call
        self->BeginStream();
      });
    };
  }
  state_ = State::kRunning;
  if (call) WatchDisconnect();
  net::post(*s_.session_pool, [self = shared_from_this(), rq = std::move(rq), hooks = std::move(hooks)]() {
    E2bReply reply = self->s_.e2b_routes->Handle(rq, hooks);
    net::post(*self->s_.io, [self, reply = std::move(reply)]() mutable { self->OnE2bReply(std::move(reply)); });
  });
}

void Connection::OnE2bReply(E2bReply reply) {
  if (state_ == State::kClosed) return;
  state_ = State::kHandling;
  const bool streaming = req_.events && req_.events->started();
  if (req_.events && (!streaming || req_.client_gone)) {
    req_.events->Abort();
    req_.events.reset();
  }
  if (!AccountCall(reply) && reply.execute && reply.error) {
    Audit(Verdict(reply.error->kind), reply.status);
  }
  if (req_.client_gone) return Close();
  if (req_.events) {
    // Begun, then refused (cannot happen today: a call that began ran): say why on the stream.
    if (reply.final_events.empty() && reply.error) {
      reply.final_events.push_back({"error", model::E2bErrorEvent("SandboxError", reply.error->message, "")});
    }
    return EndStreamWith(reply.final_events, "end_of_execution", model::E2bEndOfExecution());
  }
  Send(reply.status, std::move(reply.body), reply.content_type.c_str(), reply.headers);
}

// A streamed response: the run's output goes to the writer as it is read
// (Execution::on_output is called on this loop, or on a worker while the run
// is finished; either way in order, before OnRunDone), and the response
// begins once the run is launched. Until then every refusal (policy, limits,
// overload, a failed launch) is the usual status code and JSON body.
void Connection::MakeEventStream() {
  std::weak_ptr<Connection> weak = weak_from_this();
  EventStream::Options o;
  o.format = req_.stream;
  o.keepalive_s = s_.opt.stream_keepalive_s;
  o.max_queued_bytes = s_.opt.stream_queue_bytes;
  o.write_timeout_s = s_.opt.write_timeout_s;
  req_.events = EventStream::Create(stream_, weak, o, [weak] {
    if (auto self = weak.lock()) self->OnClientGone();
  });
}

void Connection::BeginStream() {
  if (!req_.events || req_.client_gone || req_.events->started()) return;
  std::vector<std::pair<std::string, std::string>> headers = {{"X-Request-Id", req_.id}};
  for (const auto& [k, v] : s_.gate.CorsHeaders(req_.origin)) headers.emplace_back(k, v);
  if (s_.draining) req_.keep_alive = false;
  req_.events->Begin(200, headers, req_.keep_alive);
}

void Connection::PrepareStream() {
  std::weak_ptr<Connection> weak = weak_from_this();
  MakeEventStream();
  std::weak_ptr<EventStream> events = req_.events;
  net::io_context& io = *s_.io;
  req_.driver->plan_options().on_output = [events, &io](exec::Stream which, std::string_view bytes) {
    net::dispatch(io, [events, which, data = std::string(bytes)] {
      if (auto es = events.lock()) es->Output(which == exec::Stream::kStdout ? "stdout" : "stderr", data);
    });
  };
  req_.driver->OnStarted([weak] {
    if (auto self = weak.lock()) self->BeginStream();
  });
}

// The end of a streamed response: held-back output, the results, the error,
// then end_of_execution (the non-streaming response object), and the
// connection goes on (keep-alive) or closes as a plain response would.
void Connection::EndStream(const model::ExecuteResponse& resp, const std::string& end_json) {
  EndStreamWith(model::FinalEvents(resp), "end_of_execution",
                model::EndOfExecutionEvent(end_json, req_.events->StatsJson()));
}

void Connection::EndStreamWith(const std::vector<model::StreamEvent>& final_events, const std::string& end_type,
                            const std::string& end) {
  std::shared_ptr<EventStream> events = std::move(req_.events);
  s_.metrics.CountHttp(req_.route, 200);
  state_ = State::kWriting;
  events->FlushOutput();
  for (const model::StreamEvent& e : final_events) events->Event(e.type, e.json);
  events->End(end_type, end, [self = shared_from_this()](bool ok) {
    // The disconnect watch (a read wait on the socket) ends here, as in Send().
    ++self->watch_gen_;
    error_code ignored;
    self->stream_.socket().cancel(ignored);
    if (!ok) return self->Close();
    if (self->s_.draining) self->req_.keep_alive = false;  // as Send() does
    self->OnWritten(error_code());
  });
}

void Connection::OnRunDone(RunOutcome o) {
  s_.drivers.erase(req_.driver);
  req_.driver.reset();  // the driver releases the run's slot once the run is torn down
  state_ = State::kHandling;
  const bool streaming = req_.events && req_.events->started();
  if (req_.events && (!streaming || req_.client_gone)) {
    req_.events->Abort();  // never begun (the launch failed), or nobody to write to
    req_.events.reset();
  }
  if (!o.status.ok()) {
    log::Error("request " + req_.id + ": the run could not be started: " + o.status.ToString());
    s_.metrics.CountExecution("failed", 0);
    model::ApiError e{model::ErrorKind::kInternal, "the run could not be started: " + o.status.ToString(), ""};
    req_.audit.error = e.message;
    ErrorReply r = MakeErrorReply(e, {}, req_.compat, req_.id);
    Audit("error", r.status);
    return Send(r.status, r.body, "application/json", r.headers);
  }
  const model::ExecuteResponse& resp = o.response;
  const model::RunReport& run = resp.run;
  RecordRun(run);
  if (run.kill_reason && *run.kill_reason == "lost" && !req_.client_gone && !streaming) {
    // Not the code's doing: the warm pool's zygote died under it. Say so, and
    // that the same request can simply be sent again.
    model::ApiError e{model::ErrorKind::kUnavailable, run.kill_detail, ""};
    req_.audit.error = e.message;
    ErrorReply r = MakeErrorReply(e, {}, req_.compat, req_.id);
    Audit("error", r.status);
    return Send(r.status, r.body, "application/json", r.headers);
  }
  Audit(req_.client_gone ? "client_gone" : "ran", req_.client_gone ? 499 : 200);
  if (req_.client_gone) return Close();
  // A stream already begun ends with the response as its last event (a run
  // lost with its zygote says so there: kill_reason "lost").
  if (req_.events) return EndStream(resp, model::V1ExecuteToJson(resp));
  SendJson(200, req_.compat ? model::CompatExecuteToJson(resp) : model::V1ExecuteToJson(resp));
}

}  // namespace airlock::api
