// The E2B-compatible listener's routes (docs/api.md, "E2B-compatible
// endpoint"): what the official E2B SDKs call in debug mode (E2B_DEBUG=true)
// on localhost:49999 (the code interpreter) and localhost:49983 (envd), mapped
// onto sessions. Like SessionRoutes: a request in, a reply out, blocking (an
// execution lasts as long as its code runs), so the server calls Handle() on
// a session-pool thread, never on the event loop.
//
//   E2bRoutes routes(manager, options);
//   E2bReply r = routes.Handle(request, hooks);   // on a worker thread
//
// Both ports serve every route (their paths do not collide), except
// GET /health: "OK" (200) on the interpreter port, 204 on envd's, as E2B.
//
//   POST   /execute                  {code, context_id?, language?, env_vars?} -> NDJSON lines
//   POST   /contexts                 {language?, cwd?} -> {id, language, cwd}
//   GET    /contexts                 [{id, language, cwd}]
//   POST   /contexts/{id}/restart    a fresh interpreter (its files are dropped)
//   DELETE /contexts/{id}
//   GET    /files?path=P             the file's bytes
//   POST   /files?path=P             multipart/form-data field "file" (or a raw
//                                    application/octet-stream body) -> [{path, name, type}]
//
// A context is a session of --e2b-profile; its id is the session's id. Each
// owner (token name, "" without tokens) gets a default context, made on first
// use; /files reads and writes the default context's working directory
// (/tmp in the sandbox), which E2B calls /home/user.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/e2b.h"
#include "model/execute.h"
#include "session/session_manager.h"

namespace airlock::api {

enum class E2bPort { kInterpreter, kEnvd };

struct E2bRequest {
  E2bPort port = E2bPort::kInterpreter;
  std::string method;
  std::string path;   // without the query
  std::string query;  // after '?'
  std::string content_type;
  std::string body;
  std::string owner;  // the token's name ("" without tokens)
  std::string request_id;
};

struct E2bReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  // POST /execute: the lines after the streamed output (results, error);
  // `body` holds the whole NDJSON answer for a stream that never began.
  bool execute = false;
  std::vector<model::StreamEvent> final_events;
  // For metrics and audit.
  std::optional<model::ApiError> error;
  std::vector<model::Violation> violations;
  std::optional<session::CallReply> call;
};

struct E2bHooks {
  std::function<void(exec::Stream, std::string_view)> on_output;
  // The execution is about to run in `session_id` (the stream may begin).
  std::function<void(const std::string& session_id)> on_started;
};

struct E2bRouteOptions {
  model::RequestCaps caps;
  std::string profile;  // contexts' profile ("" = the server's default)
  int64_t max_file_bytes = int64_t{32} << 20;
  size_t max_upload_parts = 64;
  // A context needs a warm run: while none is ready (503), retry every 100 ms
  // this many times before answering 503.
  int create_retries = 150;
};

class E2bRoutes {
 public:
  E2bRoutes(session::SessionManager& manager, E2bRouteOptions options)
      : mgr_(manager), opt_(std::move(options)) {}

  // The metrics label of an E2B route (a fixed set).
  static std::string RouteName(std::string_view path);
  static bool IsExecute(std::string_view method, std::string_view path);
  // POST /files: a file body (its own cap, --max-file, and no JSON rule).
  static bool IsUpload(std::string_view method, std::string_view path);

  E2bReply Handle(const E2bRequest& request, const E2bHooks& hooks);

 private:
  struct Context {
    std::string owner;
    std::string language = "python";
    std::string cwd = "/home/user";
  };

  E2bReply Execute(const E2bRequest& rq, const E2bHooks& hooks);
  E2bReply Contexts(const E2bRequest& rq);
  E2bReply Files(const E2bRequest& rq);
  // The owner's default context, made when it has none (or it died).
  std::optional<std::string> DefaultContext(const std::string& owner, model::ApiError* error);
  std::optional<std::string> NewContext(const std::string& owner, const model::E2bContextRequest& request,
                                        model::ApiError* error);

  session::SessionManager& mgr_;
  E2bRouteOptions opt_;
  std::mutex mu_;
  std::map<std::string, Context> contexts_;           // by id (= session id)
  std::map<std::string, std::string> defaults_;        // owner -> context id
  std::mutex create_mu_;  // one default context is made per owner at a time
};

}  // namespace airlock::api
