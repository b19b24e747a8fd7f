// The Connect protocol (connectrpc.com/docs/protocol), as E2B's SDKs speak
// it to envd (issue 22: `filesystem.Filesystem/*`, `process.Process/*`):
// the JSON codec only, unary and server-streaming. Pure functions, no I/O.
//
// Unary: POST /pkg.Service/Method, Content-Type application/json, the
// request message as the body; the answer is 200 with the response message,
// or an error status with ConnectErrorBody.
// Server-streaming: Content-Type application/connect+json; the body is one
// enveloped message (ConnectUnwrap); the answer is 200 and a sequence of
// enveloped messages (ConnectFrame), the last one flagged end-of-stream and
// holding ConnectEndStream's JSON (an error, when the call failed, goes
// there, not in the status).
//
//   std::string json, why;
//   if (!ConnectUnwrap(body, max, &json, &why)) refuse(invalid_argument, why);
//   out += ConnectFrame(R"({"event":{"start":{"pid":7}}})", false);
//   out += ConnectFrame(ConnectEndStream(nullptr), true);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/execute.h"

namespace airlock::model {

inline constexpr const char* kConnectJson = "application/json";
inline constexpr const char* kConnectStreamJson = "application/connect+json";

// The Connect error code of an API error: its `code` when that is one of
// Connect's names ("not_found", "already_exists", "failed_precondition",
// "unimplemented", ...), else the kind's (400 invalid_argument, 401
// unauthenticated, 403 permission_denied, 404/410 not_found, 409
// failed_precondition, 413/429 resource_exhausted, 503 unavailable, 500
// internal, ...).
std::string ConnectCode(const ApiError& error);
// The HTTP status of a unary error with that code (Connect's table).
int ConnectHttpStatus(std::string_view code);
bool IsConnectCode(std::string_view code);

// {"code":...,"message":...}: a unary error's body, and the "error" member
// of a stream's end.
std::string ConnectErrorBody(const ApiError& error);
// The last message of a stream: {} or {"error":{...}}.
std::string ConnectEndStream(const ApiError* error);

// One enveloped message: flags (0x02 for the end of the stream), the length
// as 4 big-endian bytes, the JSON.
std::string ConnectFrame(std::string_view json, bool end_stream);

// The one message of a server-streaming request's body: exactly one
// uncompressed envelope, at most max_bytes of JSON, nothing after it. False
// with *why otherwise (a compressed or truncated envelope, trailing bytes).
bool ConnectUnwrap(std::string_view body, size_t max_bytes, std::string* json, std::string* why);

}  // namespace airlock::model
