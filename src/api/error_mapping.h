// The one place where outcomes become HTTP status codes (docs/api.md lists them):
//   200 every run that started (runtime errors, timeouts, OOM kills included)
//   400 empty code; policy rejection {"error","violations"}
//   401 auth on and the token missing or wrong
//   403 a web origin that may not call; 415 a body not declared JSON;
//   421 a Host header that does not name this server (api/request_gate.h)
//   404 unknown route or profile name in the path; 405 wrong method
//   413 body or code over the cap
//   422 malformed request: bad JSON, wrong types, timeout out of range, unknown profile
//   429 concurrency limit and queue full (with Retry-After)
//   500 a run could not be started; 503 not ready or shutting down
#pragma once

#include <string>
#include <vector>

#include "model/execute.h"

namespace airlock::api {

int HttpStatus(model::ErrorKind kind);

// The audit verdict of an error ("invalid", "rejected", "unauthorized", ...).
const char* Verdict(model::ErrorKind kind);

struct ErrorReply {
  int status = 500;
  std::string body;  // JSON
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, WWW-Authenticate)
};

// `compat`: the route is the fips-compatible /execute (violations as strings).
ErrorReply MakeErrorReply(const model::ApiError& error, const std::vector<model::Violation>& violations, bool compat,
                          const std::string& request_id);

}  // namespace airlock::api
