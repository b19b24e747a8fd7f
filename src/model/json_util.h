// Internal to src/model: helpers shared by the JSON codecs. Only src/model/*.cc
// include this header (nlohmann-json stays inside the model library).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/execute.h"
#include "model/run_report.h"

namespace airlock::model::internal {

using nlohmann::json;

// User output is arbitrary bytes: never let dump() throw (invalid UTF-8 becomes U+FFFD).
inline std::string Dump(const json& j, bool pretty = false) {
  return j.dump(pretty ? 2 : -1, ' ', false, json::error_handler_t::replace);
}

// The maximum nesting of arrays and objects in a JSON text, computed without
// recursion (strings are skipped, escapes honoured). Call before json::parse so
// that hostile input cannot make the parser or the destructor recurse deeply.
size_t JsonDepth(std::string_view text);

// Parses JSON text from a client (a request body, an MCP message). JSON does
// not say which of two equal keys of an object counts (RFC 8259 §4: "the
// names within an object SHOULD be unique"); parsers differ (nlohmann keeps
// the last, others the first), so a proxy or an audit that reads one could
// see other code than what runs. Text with a duplicate key is refused:
// kDuplicateKey, *detail the key (at most 64 bytes, as given). kSyntax: not
// JSON, *detail the parser's message. The caller bounds size and nesting
// first (JsonDepth).
enum class ClientJson { kOk, kSyntax, kDuplicateKey };
ClientJson ParseClientJson(std::string_view text, json* doc, std::string* detail);
// A 422 naming the request field at fault.
inline ApiError UnprocessableField(std::string field, std::string message) {
  return ApiError{ErrorKind::kUnprocessable, std::move(message), std::move(field)};
}
// The ApiError (400, naming the key) of a duplicate key.
ApiError DuplicateKeyError(const std::string& key);

// Parses a request body that must be one JSON object: valid UTF-8, nested at
// most caps.max_depth levels (checked before parsing), an object, no key
// twice in an object. False with *error (422, no field; 400 for a duplicate
// key) otherwise.
bool ParseRequestObject(std::string_view body, const RequestCaps& caps, json* doc, ApiError* error);

// An "env" object (field: its name in the request, for errors): names
// [A-Za-z_][A-Za-z0-9_]* of at most kMaxEnvNameBytes, string values without
// NUL of at most kMaxEnvValueBytes, at most kMaxEnvVars of them and
// kMaxEnvBytes in all. null is no variables. False with *error (422 naming
// the field) otherwise.
bool ParseEnv(const json& value, const std::string& field, std::map<std::string, std::string>* out, ApiError* error);

// The common core of every run result: RunReportToJson's object.
json RunReportObject(const RunReport& report);

}  // namespace airlock::model::internal
