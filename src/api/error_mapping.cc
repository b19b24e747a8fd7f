#include "api/error_mapping.h"

namespace airlock::api {

int HttpStatus(model::ErrorKind kind) {
  switch (kind) {
    case model::ErrorKind::kBadRequest: return 400;
    case model::ErrorKind::kPolicy: return 400;
    case model::ErrorKind::kUnauthorized: return 401;
    case model::ErrorKind::kForbidden: return 403;
    case model::ErrorKind::kNotFound: return 404;
    case model::ErrorKind::kMethodNotAllowed: return 405;
    case model::ErrorKind::kConflict: return 409;
    case model::ErrorKind::kGone: return 410;
    case model::ErrorKind::kPayloadTooLarge: return 413;
    case model::ErrorKind::kUnsupportedMediaType: return 415;
    case model::ErrorKind::kMisdirected: return 421;
    case model::ErrorKind::kUnprocessable: return 422;
    case model::ErrorKind::kTooManyRequests: return 429;
    case model::ErrorKind::kInternal: return 500;
    case model::ErrorKind::kUnavailable: return 503;
  }
  return 500;
}

const char* Verdict(model::ErrorKind kind) {
  switch (kind) {
    case model::ErrorKind::kPolicy: return "rejected";
    case model::ErrorKind::kUnauthorized: return "unauthorized";
    case model::ErrorKind::kForbidden:
    case model::ErrorKind::kMisdirected: return "refused";
    case model::ErrorKind::kTooManyRequests: return "overloaded";
    case model::ErrorKind::kInternal: return "error";
    case model::ErrorKind::kUnavailable: return "unavailable";
    case model::ErrorKind::kBadRequest:
    case model::ErrorKind::kNotFound:
    case model::ErrorKind::kMethodNotAllowed:
    case model::ErrorKind::kConflict:
    case model::ErrorKind::kGone:
    case model::ErrorKind::kPayloadTooLarge:
    case model::ErrorKind::kUnsupportedMediaType:
    case model::ErrorKind::kUnprocessable: return "invalid";
  }
  return "error";
}

ErrorReply MakeErrorReply(const model::ApiError& error, const std::vector<model::Violation>& violations, bool compat,
                          const std::string& request_id) {
  ErrorReply r;
  r.status = HttpStatus(error.kind);
  if (error.kind == model::ErrorKind::kPolicy) {
    r.body = model::RejectionToJson(violations, compat, request_id);
  } else {
    r.body = model::ErrorToJson(error, request_id);
  }
  if (error.kind == model::ErrorKind::kTooManyRequests) {
    r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s > 0 ? error.retry_after_s : 1));
  }
  if (error.kind == model::ErrorKind::kUnavailable) {
    r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s > 0 ? error.retry_after_s : 5));
  }
  if (error.kind == model::ErrorKind::kUnauthorized) {
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"airlock\"");
  }
  return r;
}

}  // namespace airlock::api
