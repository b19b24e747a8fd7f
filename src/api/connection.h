// api::Connection: one client connection of any door (the API, the E2B
// ports), one request at a time: it reads the header, screens it (the
// browser gate, auth), reads the body, dispatches to the routes, and writes
// the answer (a whole one, or a stream of events), then waits for the next
// request (keep-alive) or closes.
//
//   std::make_shared<Connection>(state, std::move(socket), Door::kApi)->Begin();
//
// Every method is called on the event-loop thread.
#pragma once

#include "api/net.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/event_stream.h"
#include "api/run_driver.h"
#include "api/server_state.h"
#include "base/clock.h"
#include "model/execute.h"
#include "model/stream_events.h"

namespace airlock::api {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerState& s, tcp::socket socket, Door door = Door::kApi);
  ~Connection();
  void Begin() { ReadHeader(s_.opt.header_timeout_s); }

  // Drain: a connection waiting for its next request is closed now.
  void CloseIfIdle();
  // Admission granted a run slot.
  void StartRun();
  // Admission put the request in the queue.
  void EnterQueue();
  // Draining: a queued request will not run.
  void RejectQueued();
  void FinishError(const model::ApiError& error, const std::vector<model::Violation>& violations);

 private:
  enum class State { kReading, kHandling, kQueued, kRunning, kWriting, kClosed };

  struct Request {
    std::string id;
    std::string route;  // for metrics: a fixed set of names
    bool execute = false;
    bool compat = false;
    bool session_route = false;  // /v1/sessions and below (api/session_routes.h)
    bool approval_route = false;  // /v1/approvals and below (api/approvals.h)
    bool console = false;         // /, /console and its assets (api/console_routes.h)
    // The token's roles (every role without tokens), and a held request's wait.
    bool may_run = true;
    bool may_approve = true;
    std::optional<double> wait_s;
    bool e2b = false;            // on an E2B port (api/e2b_routes.h)
    std::string session_id;      // a session call's, for cancelling it
    bool keep_alive = true;
    Clock::time_point start;
    model::AuditRecord audit;
    std::unique_ptr<service::Plan> plan;
    std::shared_ptr<RunDriver> driver;
    bool client_gone = false;
    std::string origin;  // the Origin header ("" when absent)
    // A streamed response (Accept on /v1/execute): its format, and the writer
    // once the run is admitted (it begins when the run is launched).
    model::StreamFormat stream = model::StreamFormat::kNone;
    std::shared_ptr<EventStream> events;
  };
  void ReadHeader(double timeout_s);
  void OnHeader(const error_code& ec);
  void ReadBody();
  void OnReadError(const error_code& ec);
  void OnRead(const error_code& ec);
  // The per-request context; the route is known when the header is.
  void BeginRequest();
  bool ScreenHeaders();
  void Handle();
  void HandleSessionRoute();
  // Metrics and the audit record of a session-call reply (the session routes'
  // and E2B's): its refusal, and the call that ran or was refused. False when
  // the reply carries no call.
  template <class Reply>
  bool AccountCall(const Reply& reply);
  void DriveSessionCall(std::unique_ptr<session::PendingCall> pending);
  void OnSessionReply(RouteReply reply);
  void HandleMcp();
  void HandleE2b();
  void OnE2bReply(E2bReply reply);
  void HandleExecute();
  void OnPrepared(service::Prepared p);
  void HoldForApproval(service::Prepared p);
  void OnRunDone(RunOutcome o);
  void OnClientGone();
  void WatchDisconnect();
  void PrepareStream();
  // A stream's writer on this connection (PrepareStream and session calls).
  void MakeEventStream();
  void BeginStream();
  // `end_json`: the final object (the non-streaming response).
  void EndStream(const model::ExecuteResponse& resp, const std::string& end_json);
  // The same with given final events and last line (E2B's shapes).
  void EndStreamWith(const std::vector<model::StreamEvent>& final_events, const std::string& end_type,
                     const std::string& end_line);
  // A run that ended (one-shot or a session's call): counted, and its outcome
  // put in the audit record.
  void RecordRun(const model::RunReport& run);
  void Audit(const std::string& verdict, int status);
  void Send(int status, std::string body, const char* content_type,
            const std::vector<std::pair<std::string, std::string>>& headers);
  void SendJson(int status, std::string body) { Send(status, std::move(body), "application/json", {}); }

  void OnWritten(const error_code& ec);
  void Discard(size_t total);
  void Close();

  ServerState& s_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::unique_ptr<char[]> discard_;
  std::string remote_;
  std::string path_;
  State state_ = State::kReading;
  Door door_ = Door::kApi;
  Request req_;
  uint64_t watch_gen_ = 0;
  uint64_t body_limit_ = 0;  // this request's cap on its body (OnHeader)
};

}  // namespace airlock::api
