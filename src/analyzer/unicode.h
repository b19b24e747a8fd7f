// UTF-8 helpers for the tokenizer: validation, decoding, identifier normalization and
// the ASCII subset of \N{NAME} escapes; and the characters that make text read
// differently from what it is (invisible ones). No allocation except in the returned
// strings.
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

// The Unicode name of `cp` when it is an invisible character: category Cf (the
// bidirectional controls, zero-width spaces and joiners, tags, soft hyphen, ...) or one
// of the four Hangul fillers (drawn as nothing, and valid in Python identifiers), as of
// the Unicode version of the Python runs use; nullptr for every other code point.
const char* InvisibleCharacterName(char32_t cp);

// The bidirectional controls: the embeddings, overrides and isolates (U+202A..U+202E,
// U+2066..U+2069) and the marks (U+200E, U+200F, U+061C). Shown text is reordered
// around them ("Trojan Source", CVE-2021-42574).
bool IsBidiControl(char32_t cp);

// `json` (any JSON text) with every invisible character written as a \uXXXX escape (a
// surrogate pair above U+FFFF) instead of its raw UTF-8 bytes. The values are the same
// once parsed; a person reading the text sees the escape, not a reordered or shortened
// line. Raw non-ASCII bytes occur only inside JSON strings, so the result is valid JSON.
std::string EscapeInvisibleInJson(std::string_view json);

}  // namespace airlock::analyzer
