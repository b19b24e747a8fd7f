#include "api/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <limits>
#include <set>

#include "api/server_state.h"
#include "base/log.h"

namespace airlock::api {

namespace {

constexpr size_t kHeaderLimit = 16 * 1024;
// The piece a file is sent in, an upload read in, a refused body dropped in:
// what one connection holds of a large transfer.
constexpr size_t kPiece = kUploadBuffer;

// E2B's X-Metadata-<key> headers (RequestHeaders::metadata): the key
// lowercased, a repeated key's first value only.
template <class Fields>
std::vector<std::pair<std::string, std::string>> MetadataHeaders(const Fields& fields) {
  constexpr std::string_view kPrefix = "x-metadata-";
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  for (const auto& f : fields) {
    std::string name = ToString(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name.size() < kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    std::string key = name.substr(kPrefix.size());
    if (seen.insert(key).second) out.emplace_back(std::move(key), ToString(f.value()));
  }
  return out;
}

}  // namespace

Connection::Connection(ServerState& s, tcp::socket socket, Door door) : s_(s), stream_(std::move(socket)), door_(door) {
  error_code ec;
  auto ep = stream_.socket().remote_endpoint(ec);
  if (!ec) {
    address_ = ep.address().to_string();
    remote_ = address_ + ":" + std::to_string(ep.port());
  }
  s_.open.insert(this);
  s_.connections.Open(this, address_);
}

Connection::~Connection() {
  if (s_.destroying) return;
  s_.connections.Close(this);
  s_.open.erase(this);
  s_.MaybeStop();
}

void Connection::Begin() { ReadHeader(s_.opt.header_timeout_s); }

void Connection::CloseIfIdle() {
  if (state_ == State::kHeader) Close();
}

void Connection::Evict() { Close(); }

bool Connection::Current(const Exchange* ex) const { return ex != nullptr && ex_.get() == ex && state_ != State::kClosed; }

// ---------------------------------------------------------------------------
// Phase 1: the header.

void Connection::ReadHeader(double timeout_s) {
  state_ = State::kHeader;
  ex_.reset();
  json_.reset();
  upload_.reset();
  match_ = RouteMatch();
  head_.emplace();
  head_->header_limit(kHeaderLimit);
  // No cap while the header is read (the route's is set once it is known:
  // CheckBodySize refuses a declared length over it).
  head_->body_limit(std::numeric_limits<std::uint64_t>::max());
  s_.connections.Waiting(this);
  stream_.expires_after(Ms(timeout_s));
  http::async_read_header(stream_, buffer_, *head_,
                          [self = shared_from_this()](const error_code& ec, size_t) { self->OnHeader(ec); });
}

RequestHead Connection::Head() const {
  const auto& m = head_->get();
  RequestHead h;
  h.door = door_;
  h.method = ToString(m.method_string());
  std::string target = ToString(m.target());
  size_t q = target.find('?');
  h.path = target.substr(0, q);
  if (q != std::string::npos) h.query = target.substr(q + 1);
  auto field = [&](auto name, size_t cap) { return ToString(m[name]).substr(0, cap); };
  h.host = ToString(m[http::field::host]);
  h.origin = field(http::field::origin, 512);
  h.content_type = field(http::field::content_type, 1024);
  h.expect = field(http::field::expect, 64);
  h.authorization = ToString(m[http::field::authorization]);
  h.api_key = ToString(m["X-API-Key"]);
  h.access_token = ToString(m["X-Access-Token"]);
  if (auto n = head_->content_length()) h.content_length = *n;
  h.has_body = !head_->is_done();
  h.client = remote_;
  h.headers.accept = field(http::field::accept, 512);
  h.headers.range = field(http::field::range, 128);
  h.headers.route_key = field("X-Airlock-Route", 64);
  h.headers.content_type = h.content_type;
  h.headers.mcp_session = field("Mcp-Session-Id", 128);
  h.headers.mcp_version = field("MCP-Protocol-Version", 64);
  h.headers.connect_timeout_ms = field("Connect-Timeout-Ms", 16);
  h.headers.origin = h.origin;
  h.headers.content_encoding = field(http::field::content_encoding, 64);
  h.headers.metadata = MetadataHeaders(m);
  return h;
}

// Phases 2-6 on the header alone, then 7: the body the route's policy allows.
void Connection::OnHeader(const error_code& ec) {
  if (state_ == State::kClosed) return;
  s_.connections.Busy(this);
  if (ec) return OnReadError(ec, 0);
  state_ = State::kHandling;
  const RequestHead h = Head();
  keep_alive_ = head_->get().keep_alive() && !s_.draining;
  match_ = Lookup(s_.Table(door_), h);

  Request rq;
  rq.door = door_;
  rq.id = s_.NewRequestId();
  rq.method = h.method;
  rq.path = h.path;
  rq.query = h.query;
  rq.param = match_.param;
  rq.tail = match_.tail;
  rq.auth_enabled = s_.auth.enabled();
  rq.client = remote_;
  rq.headers = h.headers;
  ex_ = std::make_shared<Exchange>(s_, shared_from_this(), std::move(rq), match_.label);
  ex_->shape = match_.path_route;

  if (auto r = Gate(s_.gate, h, match_)) return RefuseEarly(*r);
  if (IsPreflight(h)) {
    if (h.has_body) keep_alive_ = false;  // a body it may carry is never read
    return ex_->Respond(PreflightReply(s_.gate, h));
  }
  Identity who;
  if (auto r = Authenticate(s_.auth, h, match_, &who)) return RefuseEarly(*r);
  ex_->rq.caller = who;
  ex_->audit.token_name = who.name;
  if (auto r = Match(match_, h)) return RefuseEarly(*r);
  const Route& route = *match_.route;
  ex_->rq.route = &route;
  if (auto r = Authorize(match_, h, who, s_.auth.enabled(), s_.owners)) return RefuseEarly(*r);
  if (auto r = CheckBodySize(route, h, s_.body_caps)) return RefuseEarly(*r);
  if (auto r = Admit(s_.admission, route, h, who, s_.body_caps, &ex_->ticket)) return RefuseEarly(*r);

  // An upload is read by its handler, once it has opened the destination.
  if (route.body == BodyPolicy::kUpload || !h.has_body) return Dispatch();
  ReadJsonBody(BodyCap(route, s_.body_caps), /*drop=*/route.body == BodyPolicy::kNone);
}

// A refusal before the body: answered at once; a body the client announced is
// never read (the connection closes after the answer, discarding, bounded).
void Connection::RefuseEarly(const Refusal& r) {
  if (!head_->is_done()) keep_alive_ = false;
  Reply reply = RefusalReply(door_, ex_->shape, r.error, {}, false, ex_->rq.id);
  for (const auto& kv : r.headers) reply.headers.push_back(kv);
  ex_->Respond(std::move(reply));
}

void Connection::SendContinue(std::function<void()> then) {
  if (!beast::iequals(head_ ? head_->get()[http::field::expect] : beast::string_view(), "100-continue")) {
    return then();
  }
  static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
  stream_.expires_after(Ms(s_.opt.write_timeout_s));
  net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1),
                   [self = shared_from_this(), then = std::move(then)](const error_code& e, size_t) {
                     if (e) return self->Close();
                     then();
                   });
}

// ---------------------------------------------------------------------------
// Phase 7: a JSON body, buffered under the route's cap (or a body a route
// without one got, read and dropped).

void Connection::ReadJsonBody(uint64_t cap, bool drop) {
  state_ = State::kBody;
  SendContinue([self = shared_from_this(), cap, drop] {
    if (self->state_ == State::kClosed) return;
    self->json_.emplace(std::move(*self->head_));
    self->json_->body_limit(cap);
    self->stream_.expires_after(Ms(self->s_.opt.body_timeout_s));
    http::async_read(self->stream_, self->buffer_, *self->json_,
                     [self, cap, drop](const error_code& ec, size_t) {
                       if (self->state_ == State::kClosed) return;
                       if (ec) return self->OnReadError(ec, cap);
                       self->stream_.expires_never();
                       if (!drop) self->ex_->rq.body = self->json_->release().body();
                       self->Dispatch();
                     });
  });
}

void Connection::OnReadError(const error_code& ec, uint64_t cap) {
  if (ec == http::error::body_limit && ex_) {
    keep_alive_ = false;
    const Route* r = ex_->rq.route;
    std::string why = "request body is larger than " + std::to_string(cap) + " bytes";
    if (r && r->body == BodyPolicy::kUpload) why += " (--max-file)";
    ex_->Refuse({model::ErrorKind::kPayloadTooLarge, why, ""});
    return;
  }
  // A client that closed, a timeout, or an abort (drain): nothing to answer.
  const bool quiet = ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
                     ec == net::error::operation_aborted || ec == net::error::connection_reset;
  if (quiet || (state_ == State::kHeader && !head_->got_some())) {
    if (ex_ && !ex_->answered()) ex_->Abandon();
    return Close();
  }
  keep_alive_ = false;
  if (!ex_) {
    // A header that is not HTTP: an exchange of no route, to answer and account it.
    Request rq;
    rq.door = door_;
    rq.id = s_.NewRequestId();
    rq.client = remote_;
    ex_ = std::make_shared<Exchange>(s_, shared_from_this(), std::move(rq),
                                     std::string(s_.Table(door_).label_prefix) + "other");
  }
  state_ = State::kHandling;
  ex_->Refuse({model::ErrorKind::kBadRequest, "malformed HTTP request: " + ec.message(), ""});
}

// ---------------------------------------------------------------------------
// Phase 8: the handler, where its route says.

void Connection::Dispatch() {
  state_ = State::kHandling;
  std::shared_ptr<Exchange> ex = ex_;
  const Route& r = *ex->rq.route;
  if (r.runs_on == RunsOn::kWorker) {
    ex->OnWorker([&s = s_, rq = ex->rq, handler = r.on_worker]() { return handler(s, rq); },
                 [ex](Reply reply) { ex->Respond(std::move(reply)); });
  } else {
    r.on_loop(ex);
  }
  // The ticket (the body's bytes, an upload's slot) is held until the request
  // ends (Exchange::Account): what a request carries in (its code, parsed,
  // analyzed, queued for a run slot) is held as long.
}

// ---------------------------------------------------------------------------
// An upload's body, a piece at a time (Exchange::ReadBodyInto).

void Connection::ReadBodyInto(const Exchange* ex, std::shared_ptr<BodySink> sink, std::function<void(Status)> done) {
  if (!Current(ex) || !head_) return done(Status(ErrorCode::kCancelled, "the client left"));
  state_ = State::kBody;
  // std::function needs a copyable callable: the sink and `done` are shared.
  SendContinue([self = shared_from_this(), sink, done]() mutable {
    if (self->state_ == State::kClosed) return done(Status(ErrorCode::kCancelled, "the client left"));
    self->upload_.emplace(std::move(*self->head_));
    self->upload_->body_limit(BodyCap(*self->ex_->rq.route, self->s_.body_caps));
    if (!self->piece_) self->piece_ = std::make_unique<char[]>(kPiece);
    self->stream_.expires_after(Ms(self->s_.opt.body_timeout_s));
    self->ReadUploadPiece(std::move(sink), std::move(done));
  });
}

void Connection::ReadUploadPiece(std::shared_ptr<BodySink> sink, std::function<void(Status)> done) {
  auto after_read = [self = shared_from_this(), sink, done](error_code ec, size_t) mutable {
    if (self->state_ == State::kClosed) return done(Status(ErrorCode::kCancelled, "the client left"));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      self->keep_alive_ = false;
      if (ec == http::error::body_limit) {
        return done(Status(ErrorCode::kResourceExhausted,
                           "request body is larger than " +
                               std::to_string(BodyCap(*self->ex_->rq.route, self->s_.body_caps)) +
                               " bytes (--max-file)"));
      }
      self->Close();
      return done(Status(ErrorCode::kCancelled, "the body did not arrive: " + ec.message()));
    }
    const size_t n = kPiece - self->upload_->get().body().size;
    const bool last = self->upload_->is_done();
    if (n == 0 && !last) return self->ReadUploadPiece(std::move(sink), std::move(done));
    // The piece goes to its file on a worker; nothing more is read meanwhile
    // (one buffer per upload). The connection is moved to the loop's function,
    // so that it is never released on the worker.
    Connection* raw = self.get();
    net::post(*raw->s_.session_pool, [self = std::move(self), sink, done = std::move(done), n, last]() mutable {
      Status st = n > 0 ? sink->Write(std::string_view(self->piece_.get(), n)) : Status::Ok();
      if (st.ok() && last) st = sink->Finish();
      Connection* c = self.get();
      net::post(*c->s_.io, [self = std::move(self), sink = std::move(sink), done = std::move(done), st, last]() mutable {
        if (self->state_ == State::kClosed) return done(Status(ErrorCode::kCancelled, "the client left"));
        if (!st.ok() || last) {
          self->stream_.expires_never();
          self->state_ = State::kHandling;
          if (!last) self->keep_alive_ = false;  // the rest of the body is not read
          return done(st);
        }
        self->ReadUploadPiece(std::move(sink), std::move(done));
      });
    });
  };
  auto& body = upload_->get().body();
  body.data = piece_.get();
  body.size = kPiece;
  body.more = true;
  if (upload_->is_done()) return after_read({}, 0);  // no body at all: an empty file
  http::async_read_some(stream_, buffer_, *upload_, std::move(after_read));
}

// ---------------------------------------------------------------------------
// Phase 9: the answer.

void Connection::WatchDisconnect(const Exchange* ex) {
  if (!Current(ex)) return;
  uint64_t gen = ++watch_gen_;
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), gen](const error_code& ec) {
    if (ec || gen != self->watch_gen_ || self->state_ != State::kHandling || !self->ex_) return;
    char c;
    ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return self->ex_->ClientGone();
    }
    if (n > 0) return;  // the client sent its next request already: cannot tell more
    self->WatchDisconnect(self->ex_.get());
  });
}

std::shared_ptr<EventStream> Connection::MakeEvents(const Exchange* ex, const EventStream::Options& options) {
  if (!Current(ex)) return nullptr;
  std::weak_ptr<Exchange> weak = ex_;
  return EventStream::Create(stream_, weak_from_this(), options, [weak] {
    if (auto e = weak.lock()) e->ClientGone();
  });
}

void Connection::EventsEnded(const Exchange* ex, bool ok) {
  if (!Current(ex)) return;
  // The disconnect watch (a read wait on the socket) ends here, as in Write().
  ++watch_gen_;
  error_code ignored;
  stream_.socket().cancel(ignored);
  if (s_.draining) keep_alive_ = false;
  ex_->Account(200);
  Finish(ok);
}

void Connection::Write(const Exchange* ex, Reply reply) {
  if (!Current(ex)) return;
  if (ex_->gone()) {
    ex_->Account(reply.status);
    return Close();
  }
  state_ = State::kWriting;
  ++watch_gen_;
  error_code ignored;
  stream_.socket().cancel(ignored);  // the disconnect watch
  if (s_.draining) keep_alive_ = false;
  // An upload refused by its handler before its body was read (a bad path,
  // an encoding or metadata refused): the body's bytes are still on the
  // wire, and read as the next request they would be garbage ("xPOST ...").
  if (!json_ && !upload_ && head_ && !head_->is_done()) keep_alive_ = false;
  const int status = reply.status;
  HeaderList headers = ReplyHeaders(ex_->rq.route, reply, ex_->rq.id, s_.gate.CorsHeaders(ex_->rq.headers.origin));
  auto set_common = [&](auto& res) {
    res.version(11);
    res.result(static_cast<unsigned>(status));
    res.set(http::field::server, "airlock");
    for (const auto& [k, v] : headers) res.set(k, v);
    res.keep_alive(keep_alive_);
  };
  stream_.expires_after(Ms(s_.opt.write_timeout_s));
  if (reply.file) {
    // Sandbox bytes: the header, then the file a piece at a time as the
    // client takes it (a client that does not read holds one piece).
    auto res = std::make_shared<http::response<http::empty_body>>();
    set_common(*res);
    res->content_length(static_cast<uint64_t>(reply.file->length));
    auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    write_hold_ = std::make_shared<std::pair<decltype(res), decltype(sr)>>(res, sr);
    if (!piece_) piece_ = std::make_unique<char[]>(kPiece);
    ex_->Account(status);
    http::async_write_header(stream_, *sr, [self = shared_from_this(), file = reply.file](const error_code& ec, size_t) {
      if (ec) return self->Finish(false);
      self->WriteFilePiece(file, 0);
    });
    return;
  }
  auto res = std::make_shared<http::response<http::string_body>>();
  set_common(*res);
  res->body() = std::move(reply.body);
  res->prepare_payload();
  ex_->Account(status);
  http::async_write(stream_, *res, [self = shared_from_this(), res](const error_code& ec, size_t) {
    self->Finish(!ec);
  });
}

void Connection::WriteFilePiece(std::shared_ptr<Reply::File> file, int64_t sent) {
  if (state_ == State::kClosed) return;
  if (sent >= file->length) return Finish(true);
  const size_t want = static_cast<size_t>(std::min<int64_t>(kPiece, file->length - sent));
  ssize_t n;
  do {
    n = ::pread(file->fd.get(), piece_.get(), want, static_cast<off_t>(file->offset + sent));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    // The sandbox shrank the file under us: the length we promised cannot be
    // kept, and the client must not take what it got for the whole file.
    log::Warn("request " + (ex_ ? ex_->rq.id : std::string()) + ": a sandbox file ended " +
              std::to_string(file->length - sent) + " bytes early while it was sent; connection closed");
    return Finish(false);
  }
  stream_.expires_after(Ms(s_.opt.write_timeout_s));
  net::async_write(stream_, net::buffer(piece_.get(), static_cast<size_t>(n)),
                   [self = shared_from_this(), file, sent, n](const error_code& ec, size_t) {
                     if (ec) return self->Finish(false);
                     self->WriteFilePiece(file, sent + n);
                   });
}

// The answer is written (or could not be): the next request, or the end.
void Connection::Finish(bool ok) {
  write_hold_.reset();
  ex_.reset();
  if (!ok || state_ == State::kClosed) return Close();
  stream_.expires_never();
  if (!keep_alive_) {
    // Half-close and read what the client may still send (the rest of an
    // oversized body), so that it sees our answer rather than a reset.
    state_ = State::kClosed;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    // One absolute deadline for the whole discard: a client trickling a byte
    // at a time must not hold the connection open.
    stream_.expires_after(std::chrono::seconds(2));
    Discard(0);
    return;
  }
  ReadHeader(s_.opt.idle_timeout_s);
}

void Connection::Discard(size_t total) {
  if (total > (size_t{64} << 20)) return Close();
  if (!piece_) piece_ = std::make_unique<char[]>(kPiece);
  stream_.async_read_some(net::buffer(piece_.get(), kPiece),
                          [self = shared_from_this(), total](const error_code& ec, size_t n) {
                            if (ec) return self->Close();
                            self->Discard(total + n);
                          });
}

void Connection::Close() {
  state_ = State::kClosed;
  // The exchange holds this connection: let it go (later, on the loop: Close
  // may be called from inside it), so that neither keeps the other.
  if (ex_) net::post(*s_.io, [ex = std::move(ex_)] {});
  s_.connections.Busy(this);
  error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace airlock::api
