#include <array>
#include <string>

#include "model/connect.h"
#include "model/json_util.h"

namespace airlock::model {
namespace {

using internal::Dump;
using internal::json;

struct CodeStatus {
  std::string_view code;
  int status;
};
// Connect's table of codes and the HTTP status of a unary error.
constexpr std::array<CodeStatus, 16> kCodes = {{
    {"canceled", 499},
    {"unknown", 500},
    {"invalid_argument", 400},
    {"deadline_exceeded", 504},
    {"not_found", 404},
    {"already_exists", 409},
    {"permission_denied", 403},
    {"resource_exhausted", 429},
    {"failed_precondition", 400},
    {"aborted", 409},
    {"out_of_range", 400},
    {"unimplemented", 501},
    {"internal", 500},
    {"unavailable", 503},
    {"data_loss", 500},
    {"unauthenticated", 401},
}};

json ErrorJson(const ApiError& error) { return {{"code", ConnectCode(error)}, {"message", error.message}}; }

}  // namespace

bool IsConnectCode(std::string_view code) {
  for (const auto& c : kCodes) {
    if (c.code == code) return true;
  }
  return false;
}

int ConnectHttpStatus(std::string_view code) {
  for (const auto& c : kCodes) {
    if (c.code == code) return c.status;
  }
  return 500;
}

std::string ConnectCode(const ApiError& error) {
  if (IsConnectCode(error.code)) return error.code;
  switch (error.kind) {
    case ErrorKind::kBadRequest:
    case ErrorKind::kPolicy:
    case ErrorKind::kUnprocessable:
    case ErrorKind::kUnsupportedMediaType:
    case ErrorKind::kMethodNotAllowed: return "invalid_argument";
    case ErrorKind::kUnauthorized: return "unauthenticated";
    case ErrorKind::kForbidden:
    case ErrorKind::kMisdirected: return "permission_denied";
    case ErrorKind::kNotFound:
    case ErrorKind::kGone: return "not_found";
    case ErrorKind::kConflict: return "failed_precondition";
    case ErrorKind::kPayloadTooLarge:
    case ErrorKind::kTooManyRequests: return "resource_exhausted";
    case ErrorKind::kUnavailable: return "unavailable";
    case ErrorKind::kInternal: break;
  }
  return "internal";
}

std::string ConnectErrorBody(const ApiError& error) { return Dump(ErrorJson(error)); }

std::string ConnectEndStream(const ApiError* error) {
  if (error == nullptr) return "{}";
  return Dump(json{{"error", ErrorJson(*error)}});
}

std::string ConnectFrame(std::string_view message, bool end_stream) {
  std::string out;
  out.reserve(5 + message.size());
  out += static_cast<char>(end_stream ? 0x02 : 0x00);
  const uint32_t n = static_cast<uint32_t>(message.size());
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
  out.append(message);
  return out;
}

bool ConnectUnwrap(std::string_view body, size_t max_bytes, std::string* message, std::string* why) {
  if (body.size() < 5) {
    *why = "the request is not one enveloped Connect message (flags, a 4-byte length, the JSON): it has " +
           std::to_string(body.size()) + " bytes";
    return false;
  }
  const auto flags = static_cast<unsigned char>(body[0]);
  if (flags != 0) {
    *why = (flags & 0x01) != 0 ? "a compressed Connect message is not accepted (send it uncompressed)"
                               : "the request's envelope has flags " + std::to_string(flags) + " (0 expected)";
    return false;
  }
  uint64_t n = 0;
  for (int i = 1; i <= 4; ++i) n = (n << 8) | static_cast<unsigned char>(body[i]);
  if (n > max_bytes) {
    *why = "the request's message has " + std::to_string(n) + " bytes, more than the " + std::to_string(max_bytes) +
           " allowed";
    return false;
  }
  if (n != body.size() - 5) {
    *why = "the request's envelope says " + std::to_string(n) + " bytes but " + std::to_string(body.size() - 5) +
           " follow (one message per request)";
    return false;
  }
  message->assign(body.substr(5));
  return true;
}

}  // namespace airlock::model
