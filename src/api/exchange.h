// api::Exchange: one request as its handler sees it, from the end of its
// body phase to its answer (phases 8-10 of api/pipeline.h). The connection
// makes one per request; a handler reads `rq`, does its work (on the loop, or
// through OnWorker / a driver) and ends the exchange exactly once: Respond(),
// Refuse(), EndEvents() after MakeEvents()/BeginEvents(), or Abandon() (the
// client left). The end writes the answer under the route's reply policy and
// accounts the request (metrics, one audit record) from one place.
//
//   void GetThing(const std::shared_ptr<Exchange>& ex) {          // a LoopHandler
//     if (bad) return ex->Refuse({model::ErrorKind::kNotFound, "no thing", ""});
//     ex->OnWorker([rq = ex->rq] { return Load(rq); },            // blocks: a worker
//                  [ex](Reply r) { ex->Respond(std::move(r)); });  // back on the loop
//   }
//
// Every method is called on the event-loop thread (OnWorker's work aside).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/admission.h"
#include "api/event_stream.h"
#include "api/route.h"
#include "base/clock.h"
#include "base/status.h"
#include "model/execute.h"
#include "model/stream_events.h"

namespace airlock::api {

class Exchange;
class ServerState;

// Where an upload's bytes go as they arrive (api/upload.h). Called on a
// worker thread, one call at a time, in order.
class BodySink {
 public:
  virtual ~BodySink() = default;
  virtual Status Write(std::string_view bytes) = 0;  // the next piece
  virtual Status Finish() = 0;                       // the body is complete
};

// What an exchange needs of the connection it came in on (api/connection.h
// implements it): each call names the exchange, and does nothing unless the
// connection is still handling that one.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual bool Current(const Exchange* ex) const = 0;
  virtual void Write(const Exchange* ex, Reply reply) = 0;
  virtual void WatchDisconnect(const Exchange* ex) = 0;
  virtual void ReadBodyInto(const Exchange* ex, std::shared_ptr<BodySink> sink, std::function<void(Status)> done) = 0;
  virtual std::shared_ptr<EventStream> MakeEvents(const Exchange* ex, const EventStream::Options& options) = 0;
  virtual void EventsEnded(const Exchange* ex, bool ok) = 0;
  virtual bool keep_alive() const = 0;
  virtual void Close() = 0;
};

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  // The exchange holds its connection (the connection drops the exchange once
  // the answer is written, or it closed).
  Exchange(ServerState& s, std::shared_ptr<Transport> conn, Request rq, std::string label);

  ServerState& s;
  Request rq;
  std::string label;          // the metrics label (the route's pattern)
  const Route* shape = nullptr;  // a route of the request's path: the shape of its refusals
  model::AuditRecord audit;   // its record: handlers fill a run's fields
  Clock::time_point start;
  AdmissionTicket ticket;     // the body bytes and upload slot it holds (phase 6) until it ends
  bool compat = false;        // POST /execute: the sidecar's shapes
  bool execution = false;     // the record is an execution record (code ran or was refused)

  // The answer, under the route's reply policy (once).
  void Respond(Reply reply);
  // A refusal in the door's error shape, counted (once).
  void Refuse(const model::ApiError& error, const std::vector<model::Violation>& violations = {});
  // The client left before the answer: the request is accounted (499) and
  // the connection closed.
  void Abandon();
  bool answered() const { return answered_; }

  // While the handler works, a client that disconnects calls `on_gone`
  // (once): a run is killed, a queued request leaves its queue.
  void WatchDisconnect(std::function<void()> on_gone);
  bool gone() const { return gone_; }
  void ClientGone();  // the connection's disconnect watch, or a failed event write

  // A streamed answer (NDJSON or SSE, api/event_stream.h): the writer, made
  // before the run starts; its 200 header goes when BeginEvents() is called;
  // EndEvents() writes what is held back, the final events and the last one,
  // and ends the exchange. An exchange whose writer never began answers with
  // Respond()/Refuse() as usual (DropEvents() first).
  // `keepalive_json`: the keepalive event ("": the format's own).
  std::shared_ptr<EventStream> MakeEvents(model::StreamFormat format, std::string keepalive_json = "");
  std::shared_ptr<EventStream> events() const { return events_; }
  void BeginEvents();
  void DropEvents();
  void EndEvents(const std::vector<model::StreamEvent>& final_events, std::string_view end_type,
                 std::string_view end_line);

  // An upload (BodyPolicy::kUpload): reads the body into `sink` as it
  // arrives, one bounded piece at a time (the sink writes on a worker); `done`
  // gets the first failure (the sink's, or the body's: 413 over the cap) or Ok.
  void ReadBodyInto(std::shared_ptr<BodySink> sink, std::function<void(Status)> done);

  // Runs `work` on a worker (the session pool) and `then(result)` back on the
  // loop; the exchange lives until then. `work` must not hold the exchange
  // (copy what it needs from `rq`).
  template <class Work, class Then>
  void OnWorker(Work work, Then then);
  // The same when `large` (work linear in a body or code over kInlineBytes:
  // a parse, an analysis), else right here on the loop.
  template <class Work, class Then>
  void OnWorkerIf(bool large, Work work, Then then) {
    if (!large) return then(work());
    OnWorker(std::move(work), std::move(then));
  }
  // The JSON body parsed into a T by `parse(body, &t, &error)` (on a worker
  // past kInlineBytes), then `then(t)` on the loop; a parse error is refused.
  // The body is moved out of rq.
  template <class T, class Parse, class Then>
  void ParseBody(Parse parse, Then then);

  // Phase 10, by the connection once the answer is written (or the client
  // gone): metrics and the audit record.
  void Account(int status);

  // For a run's record: the prepared request (profile, code), and the run
  // that ended (its outcome, counted in the metrics).
  void RecordCode(const std::string& profile, const std::string& sha256, int64_t bytes);
  void RecordRun(const model::RunReport& run);

 private:
  void PostToWorker(std::function<void()> fn);
  void PostToLoop(std::function<void()> fn);

  std::shared_ptr<Transport> conn_;
  std::function<void()> on_gone_;
  std::shared_ptr<EventStream> events_;
  bool gone_ = false;
  bool answered_ = false;
  bool accounted_ = false;
};

// What is done on the loop for a body or code up to this size (parsing it,
// analyzing it): constant time in practice. Larger, on a worker.
inline constexpr size_t kInlineBytes = 64 * 1024;

template <class T, class Parse, class Then>
void Exchange::ParseBody(Parse parse, Then then) {
  struct Parsed {
    T value;
    model::ApiError error;
    bool ok = false;
  };
  const bool large = rq.body.size() > kInlineBytes;
  OnWorkerIf(
      large,
      [parse = std::move(parse), body = std::move(rq.body)] {
        Parsed p;
        p.ok = parse(body, &p.value, &p.error);
        return p;
      },
      [self = shared_from_this(), then = std::move(then)](Parsed p) {
        if (!p.ok) return self->Refuse(p.error);
        then(std::move(p.value));
      });
}

// Answers for handlers: a JSON body, and a refusal in the request's door's
// shape (what Exchange::Refuse writes, for a kWorker handler's Reply).
Reply JsonReply(int status, std::string body);
Reply RefusalFor(const Request& rq, const model::ApiError& error, const std::vector<model::Violation>& violations = {});

template <class Work, class Then>
void Exchange::OnWorker(Work work, Then then) {
  // The exchange is moved from the worker's function into the loop's, so that
  // it is never released (destroyed) on the worker: it belongs to the loop.
  // (std::function wants copyable functions: the result, which may be
  // move-only, goes across in a shared_ptr.)
  PostToWorker([self = shared_from_this(), work = std::move(work), then = std::move(then)]() mutable {
    auto result = std::make_shared<decltype(work())>(work());
    Exchange* ex = self.get();
    ex->PostToLoop([self = std::move(self), then = std::move(then), result]() mutable { then(std::move(*result)); });
  });
}

}  // namespace airlock::api
