// The session routes (docs/api.md, "Sessions"), apart from the connection
// handling in server.cc: a request in, a reply out, blocking (a session call
// lasts as long as its code runs), so the server calls Handle() on a worker
// thread of its own.
//
//   SessionRoutes routes(manager, service, caps);
//   if (SessionRoutes::Matches(path)) {
//     RouteRequest rq{...};                       // method, path, query, body, owner
//     RouteReply reply = routes.Handle(rq);        // on a worker thread
//     send(reply.status, reply.body, reply.content_type, reply.headers);
//   }
//
//   POST   /v1/sessions                       create            201
//   GET    /v1/sessions                       the caller's      200
//   GET    /v1/sessions/{id}                  one               200
//   DELETE /v1/sessions/{id}                  kill it now       204
//   POST   /v1/sessions/{id}/execute          one call          200
//   POST   /v1/sessions/{id}/restart          fresh interpreter 200
//   GET    /v1/sessions/{id}/files[?path=d]   list              200
//   PUT    /v1/sessions/{id}/files/{path}     write (raw body)  201
//   GET    /v1/sessions/{id}/files/{path}     read (Range)      200/206
//   DELETE /v1/sessions/{id}/files/{path}     remove            204
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/execute.h"
#include "service/service.h"
#include "session/session_manager.h"

namespace airlock::api {

struct RouteRequest {
  std::string method;        // "GET", "POST", ...
  std::string path;          // without the query
  std::string query;         // after '?', "" when none
  std::string body;
  std::string owner;         // the token's name ("" without tokens)
  std::string route_key;     // X-Airlock-Route
  std::string range;         // the Range header
  std::string request_id;
  bool stream_output = false;  // a streamed call: the runner flushes stdout at each line
};

struct RouteReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  // For metrics and audit: the error when the reply is one, and for a call
  // that ran, what it was.
  std::optional<model::ApiError> error;
  std::vector<model::Violation> violations;
  std::optional<session::CallReply> call;
};

struct SessionRouteOptions {
  model::RequestCaps caps;
  int64_t max_file_bytes = int64_t{32} << 20;  // one upload or download
  size_t max_list_entries = 1000;
};

class SessionRoutes {
 public:
  SessionRoutes(session::SessionManager& manager, SessionRouteOptions options)
      : mgr_(manager), opt_(std::move(options)) {}

  // Whether `path` is a session route (/v1/sessions and below).
  static bool Matches(std::string_view path);
  // The metrics label of a session route (a fixed set of names).
  static std::string RouteName(std::string_view method, std::string_view path);
  // The session id a path names ("" for /v1/sessions).
  static std::string SessionId(std::string_view path);
  // Whether the route is a session call (POST .../execute).
  static bool IsCall(std::string_view method, std::string_view path);
  // A session call (IsCall) in two halves, for a server that feeds the call
  // from its event loop (session::LiveCall): nullptr with *refused set when
  // the call does not run. Neither blocks but FinishCall when
  // pending->ended() (the session's remains are killed).
  std::unique_ptr<session::PendingCall> BeginCall(const RouteRequest& rq, const session::CallHooks& hooks,
                                                  RouteReply* refused);
  RouteReply FinishCall(std::unique_ptr<session::PendingCall> pending);
  // Whether the route takes a raw (non-JSON) body: PUT .../files/{path}.
  static bool IsUpload(std::string_view method, std::string_view path);

  RouteReply Handle(const RouteRequest& request, const session::CallHooks& hooks = {});

 private:
  RouteReply Files(const RouteRequest& request, const std::string& id, std::string_view rest);

  session::SessionManager& mgr_;
  SessionRouteOptions opt_;
};

// The session gauges and counters for /metrics (Prometheus text).
std::string RenderSessionMetrics(const session::SessionStats& stats);

}  // namespace airlock::api
