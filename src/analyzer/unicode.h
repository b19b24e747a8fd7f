// UTF-8 helpers for the tokenizer: validation, decoding, identifier normalization and
// the ASCII subset of \N{NAME} escapes. No allocation except in the returned strings.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace airlock::analyzer {

struct Utf8Error {
  size_t offset = 0;    // byte offset of the first bad byte
  unsigned char byte = 0;
  const char* reason = "";  // Python's wording: "invalid start byte", ...
};

// The first invalid UTF-8 sequence (overlong forms, surrogates and code points above
// U+10FFFF are invalid, as in Python's strict utf-8 codec), or nullopt.
std::optional<Utf8Error> FindInvalidUtf8(std::string_view s);

// Decodes one code point at s[i]; advances i. Invalid bytes decode to U+FFFD, one byte each.
char32_t DecodeUtf8(std::string_view s, size_t& i);

void AppendUtf8(std::string& out, char32_t cp);

// CPython NFKC-normalizes identifiers that contain non-ASCII characters. For the rules only
// the names that normalize to pure ASCII matter (every blocked name is ASCII): returns that
// ASCII name, or nullopt if some character does not normalize to ASCII.
std::optional<std::string> NormalizeIdentifierToAscii(std::string_view raw);

// The printable ASCII character named by a \N{...} escape (case-insensitive), or nullopt for
// every other name (which then decodes to a non-ASCII placeholder).
std::optional<char> AsciiCharForName(std::string_view name);

}  // namespace airlock::analyzer
