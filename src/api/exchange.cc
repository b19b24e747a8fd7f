#include "api/exchange.h"

#include "api/error_mapping.h"
#include "api/pipeline.h"
#include "api/server_state.h"

namespace airlock::api {

Exchange::Exchange(ServerState& state, std::shared_ptr<Transport> conn, Request request, std::string metrics_label)
    : s(state), rq(std::move(request)), label(std::move(metrics_label)), start(Clock::now()), conn_(std::move(conn)) {
  audit.request_id = rq.id;
  audit.route = rq.path.size() > 256 ? rq.path.substr(0, 256) : rq.path;
  audit.method = rq.method.substr(0, 16);
  audit.client_address = rq.client;
}

void Exchange::Respond(Reply reply) {
  if (answered_) return;
  answered_ = true;
  if (reply.error) {
    s.metrics.CountRejected(RejectReason(reply.error->kind));
    if (audit.verdict.empty()) audit.verdict = Verdict(reply.error->kind);
    audit.error = reply.error->message;
    for (const auto& v : reply.violations) s.metrics.CountPolicyRule(v.rule);
    if (!reply.violations.empty()) audit.violations = reply.violations;
  }
  DropEvents();  // a stream that never began: the answer is a plain one
  if (!conn_->Current(this)) return Account(499);  // nobody to write to
  conn_->Write(this, std::move(reply));
}

void Exchange::Refuse(const model::ApiError& error, const std::vector<model::Violation>& violations) {
  Respond(RefusalReply(rq.door, rq.route ? rq.route : shape, error, violations, compat, rq.id));
}

void Exchange::Abandon() {
  if (answered_) return;
  answered_ = true;
  gone_ = true;
  audit.client_gone = true;
  DropEvents();
  Account(499);
  if (conn_->Current(this)) conn_->Close();
}

void Exchange::WatchDisconnect(std::function<void()> on_gone) {
  on_gone_ = std::move(on_gone);
  conn_->WatchDisconnect(this);
}

void Exchange::ClientGone() {
  if (gone_) return;
  gone_ = true;
  audit.client_gone = true;
  if (auto fn = std::move(on_gone_)) fn();
}

std::shared_ptr<EventStream> Exchange::MakeEvents(model::StreamFormat format, std::string keepalive_json) {
  EventStream::Options o;
  o.format = format;
  o.keepalive_json = std::move(keepalive_json);
  o.keepalive_s = s.opt.stream_keepalive_s;
  o.max_queued_bytes = s.opt.stream_queue_bytes;
  o.write_timeout_s = s.opt.write_timeout_s;
  events_ = conn_->MakeEvents(this, o);
  return events_;
}

void Exchange::BeginEvents() {
  if (!events_ || gone_ || events_->started()) return;
  if (!conn_->Current(this)) return;
  HeaderList headers = {{"X-Request-Id", rq.id}, {"X-Content-Type-Options", "nosniff"}};
  for (const auto& kv : s.gate.CorsHeaders(rq.headers.origin)) headers.push_back(kv);
  events_->Begin(200, headers, conn_->keep_alive() && !s.draining);
}

void Exchange::DropEvents() {
  if (!events_) return;
  events_->Abort();
  events_.reset();
}

void Exchange::EndEvents(const std::vector<model::StreamEvent>& final_events, std::string_view end_type,
                         std::string_view end_line) {
  if (answered_ || !events_) return;
  answered_ = true;
  std::shared_ptr<EventStream> events = std::move(events_);
  events->FlushOutput();
  for (const model::StreamEvent& e : final_events) events->Event(e.type, e.json);
  events->End(end_type, end_line, [self = shared_from_this()](bool ok) {
    if (self->conn_->Current(self.get())) return self->conn_->EventsEnded(self.get(), ok);
    self->Account(200);
  });
}

void Exchange::ReadBodyInto(std::shared_ptr<BodySink> sink, std::function<void(Status)> done) {
  if (!conn_->Current(this)) return done(Status(ErrorCode::kCancelled, "the client left"));
  conn_->ReadBodyInto(this, std::move(sink), std::move(done));
}

void Exchange::Account(int status) {
  if (accounted_) return;
  accounted_ = true;
  // What a handler left here may hold this exchange (a disconnect watch's
  // function that cancels its run): let go of it, the request is over.
  on_gone_ = nullptr;
  events_.reset();
  ticket.Release();
  audit.duration_ms = MillisSince(start);
  Accounted a;
  a.label = label;
  a.route = rq.route;
  a.status = status;
  a.client_gone = gone_;
  a.execution = execution;
  api::Account(s.metrics, [this](const model::AuditRecord& r) { s.WriteAudit(r); }, a, audit);
}

void Exchange::RecordCode(const std::string& profile, const std::string& sha256, int64_t bytes) {
  execution = true;
  audit.profile = profile;
  audit.code_sha256 = sha256;
  audit.code_bytes = bytes;
}

void Exchange::RecordRun(const model::RunReport& run) {
  execution = true;
  s.metrics.CountExecution(Outcome(run), run.duration_ms / 1000.0);
  model::RecordRunIn(&audit, run);
}

Reply JsonReply(int status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Reply RefusalFor(const Request& rq, const model::ApiError& error, const std::vector<model::Violation>& violations) {
  return RefusalReply(rq.door, rq.route, error, violations, false, rq.id);
}

void Exchange::PostToWorker(std::function<void()> fn) { net::post(*s.session_pool, std::move(fn)); }
void Exchange::PostToLoop(std::function<void()> fn) { net::post(*s.io, std::move(fn)); }

}  // namespace airlock::api
