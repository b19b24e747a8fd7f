// The session routes' JSON (docs/api.md, "Sessions"): what POST /v1/sessions
// and POST /v1/sessions/{id}/execute take, and what the session routes answer.
//
//   model::SessionCreateRequest req;
//   if (!model::ParseSessionCreateRequest(body, caps, &req, &error)) reply(error);
//   ...
//   reply(201, model::SessionToJson(view));
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/execute.h"
#include "model/run_report.h"

namespace airlock::model {

struct SessionCreateRequest {
  // profile, language, limits and env as /v1/execute takes them (code unused;
  // env holds for the session's life); limits.cpu_time is refused (a
  // session's CPU is bounded per call by its timeout).
  ExecuteRequest base;
  std::optional<double> idle_timeout_s;
  std::optional<double> ttl_s;
};

// An empty body is a session of the default profile. Errors as ParseExecuteRequest's.
bool ParseSessionCreateRequest(std::string_view body, const RequestCaps& caps, SessionCreateRequest* request,
                               ApiError* error);

// {"code", "timeout"?, "env"?, "files"?, "language"?}: a session's profile
// and limits are fixed at creation, so "profile" and "limits" are refused
// (422) rather than ignored; "env" holds for this call only; "language"
// (normalized; absent: the session's own) picks the context it runs in.
bool ParseSessionExecuteRequest(std::string_view body, const RequestCaps& caps, ExecuteRequest* request,
                                ApiError* error);

struct SessionView {
  std::string id;
  std::string profile;
  // Its language (POST /v1/sessions's "language"; default python): what a
  // call that names none runs in. Python is the session's own interpreter;
  // any other is its default context of that language (a kernel in its
  // sandbox: session/live_session.h, "Contexts").
  std::string language = "python";
  std::string state;          // "idle", "busy", "dead"
  std::string end_reason;     // why it died (state "dead")
  int64_t created_at_ms = 0;  // Unix time
  int64_t expires_at_ms = 0;  // the hard TTL's end
  int64_t last_used_ms = 0;
  double idle_timeout_s = 0;
  double ttl_s = 0;
  int64_t execution_count = 0;
  EffectiveLimitsView limits;
  RunReport isolation;        // only the isolation fields are used (layers, mode, ...)
};

std::string SessionToJson(const SessionView& session);
// {"sessions": [...]}.
std::string SessionListToJson(const std::vector<SessionView>& sessions);

// A call's answer: V1ExecuteToJson's object plus "execution_count" and
// "session": {"id", "alive", "interrupted", "end_reason"?}.
struct SessionCallView {
  std::string session_id;
  int64_t execution_count = 0;
  bool alive = true;         // the session lives on after this call
  bool interrupted = false;  // the call's timeout (or a cancel) interrupted it: KeyboardInterrupt
  std::string end_reason;    // when !alive
  // A call into a context of the session other than its Python interpreter
  // (a session of another language, or a call naming another "language"):
  // "context": {"id", "language", "restarted", "end_reason"?}. restarted:
  // the context's interpreter ended, its state gone: under this call (it
  // exited, was killed, or ran past its timeout and did not stop at the
  // interrupt; the next call starts a fresh one), or since the last call
  // (this call ran in a fresh one). end_reason says which and why.
  std::string context_id;
  std::string context_language;
  bool context_restarted = false;
  std::string context_end_reason;
};
std::string SessionExecuteToJson(const ExecuteResponse& response, const SessionCallView& call);

// POST /v1/sessions/{id}/contexts: {"language"?, "cwd"?, "env"?}. language:
// any NormalizeLanguage name (default python); cwd: an absolute path (default
// /home/user); env: as /v1/execute's, for the context's whole life.
// A context call (POST /v1/sessions/{id}/contexts/{ctx}/execute): {"code",
// "timeout"?, "env"?, "files"?}; "language", "profile" and "limits" are refused.
bool ParseContextExecuteRequest(std::string_view body, const RequestCaps& caps, ExecuteRequest* request,
                                ApiError* error);

struct ContextCreateRequest {
  std::string language = "python";
  std::string cwd = "/home/user";
  std::map<std::string, std::string> env;
};
bool ParseContextCreateRequest(std::string_view body, const RequestCaps& caps, ContextCreateRequest* request,
                               ApiError* error);

// A context: one interpreter of a session's sandbox.
struct ContextView {
  std::string id;
  std::string language;
  std::string cwd;
  bool is_default = false;     // the session's own interpreter (POST /v1/sessions/{id}/execute)
  std::string state;           // "idle", "busy", "not started" (started by its first call), "ended"
  std::string end_reason;      // when its last interpreter ended ("" otherwise)
  int64_t execution_count = 0;
  int64_t created_at_ms = 0;
  std::vector<std::string> env;  // the names of its own variables (values are not echoed)
};
std::string ContextToJson(const ContextView& context);
// {"contexts": [...]}.
std::string ContextListToJson(const std::vector<ContextView>& contexts);

// One entry of GET /v1/sessions/{id}/files: {"path","size","modified","type"}.
struct SessionFileView {
  std::string path;
  int64_t size = 0;
  int64_t modified_ms = 0;  // 0: not known (rendered null)
  std::string type;         // "file" or "directory"
};
std::string SessionFileToJson(const SessionFileView& file);

// RFC 3339 UTC with milliseconds ("2026-11-23T16:20:01.123Z").
std::string Rfc3339Ms(int64_t unix_ms);

}  // namespace airlock::model
