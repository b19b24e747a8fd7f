#include "api/query.h"

#include <algorithm>
#include <cstdlib>

namespace airlock::api {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool PercentDecode(std::string_view in, std::string* out, bool plus_is_space) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

std::optional<std::string> QueryParam(std::string_view query, std::string_view key, bool* malformed) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) {
      std::string v;
      std::string_view raw = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
      if (PercentDecode(raw, &v, true)) return v;
      if (malformed) *malformed = true;
      return std::nullopt;
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

std::optional<model::ApiError> ParsePage(std::string_view query, size_t default_limit, size_t max_limit,
                                         PageRequest* out) {
  bool malformed = false;
  out->limit = default_limit;
  out->cursor.clear();
  if (auto limit = QueryParam(query, "limit", &malformed)) {
    char* end = nullptr;
    long v = limit->empty() || limit->size() > 9 ? -1 : std::strtol(limit->c_str(), &end, 10);
    if (v < 1 || (end && *end != '\0') || static_cast<size_t>(v) > max_limit) {
      model::ApiError e{model::ErrorKind::kBadRequest,
                        "limit: must be a whole number from 1 to " + std::to_string(max_limit), "limit"};
      return e;
    }
    out->limit = static_cast<size_t>(v);
  }
  if (auto cursor = QueryParam(query, "cursor", &malformed)) out->cursor = cursor->substr(0, 256);
  if (malformed) return model::ApiError{model::ErrorKind::kBadRequest, "the query has a malformed %-escape", ""};
  return std::nullopt;
}

std::string CursorJson(const std::optional<std::string>& next) {
  if (!next) return "null";
  // Cursors are ours (ids and sequence numbers: no character to escape).
  return "\"" + *next + "\"";
}

}  // namespace airlock::api
