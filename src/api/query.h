// The query string of a request, and the pages of a list (docs/api.md,
// "Lists"): `limit` items from after `cursor`, and the cursor of the next
// page (null on the last). Lists are built a page at a time, their items
// without large fields (code, files: fetched by id), so that no list can hold
// the loop or a client's memory for long.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "model/execute.h"

namespace airlock::api {

// %XX-decodes a path or query value ('+' is a space in a query); false on a
// malformed escape.
bool PercentDecode(std::string_view in, std::string* out, bool plus_is_space);

// The %-decoded value of `key` in a query string; nullopt when absent, or
// when malformed (*malformed set then, when not null).
std::optional<std::string> QueryParam(std::string_view query, std::string_view key, bool* malformed = nullptr);

struct PageRequest {
  size_t limit = 0;
  std::string cursor;  // "" for the first page
};
// `limit` (1 to max_limit; default_limit when absent) and `cursor` of a
// list's query; a 400 naming the parameter otherwise.
std::optional<model::ApiError> ParsePage(std::string_view query, size_t default_limit, size_t max_limit,
                                         PageRequest* out);

// "next_cursor": the JSON value (a string, or null).
std::string CursorJson(const std::optional<std::string>& next);

}  // namespace airlock::api
