#include "analyzer/unicode.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace airlock::analyzer {
namespace {
#include "analyzer/unicode_tables.inc"

static_assert(std::size(kNfkcAscii) > 0);
static_assert(std::size(kInvisibleChars) > 0);
}  // namespace

std::optional<Utf8Error> FindInvalidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    char32_t min;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, min = 0x10000;
    } else {
      return Utf8Error{i, c, "invalid start byte"};
    }
    char32_t cp = c & (0x3F >> (len - 1));
    for (size_t k = 1; k < len; ++k) {
      if (i + k >= n) return Utf8Error{i, c, "unexpected end of data"};
      unsigned char cc = p[i + k];
      if ((cc & 0xC0) != 0x80) return Utf8Error{i, c, "invalid continuation byte"};
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return Utf8Error{i, c, "invalid continuation byte"};
    }
    i += len;
  }
  return std::nullopt;
}

char32_t DecodeUtf8(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  unsigned char c = p[i];
  if (c < 0x80) {
    ++i;
    return c;
  }
  size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (len == 0 || i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  char32_t cp = c & (0x3F >> (len - 1));
  for (size_t k = 1; k < len; ++k) {
    unsigned char cc = p[i + k];
    if ((cc & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  i += len;
  return cp;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::optional<std::string> NormalizeIdentifierToAscii(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  size_t i = 0;
  while (i < raw.size()) {
    char32_t cp = DecodeUtf8(raw, i);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
      continue;
    }
    auto it = std::lower_bound(std::begin(kNfkcAscii), std::end(kNfkcAscii), cp,
                               [](const NfkcAsciiEntry& e, char32_t v) { return e.cp < v; });
    if (it == std::end(kNfkcAscii) || it->cp != cp) return std::nullopt;
    out += it->ascii;
  }
  return out;
}

std::optional<char> AsciiCharForName(std::string_view name) {
  if (name.empty() || name.size() > 64) return std::nullopt;
  std::string upper(name);
  for (char& c : upper) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  auto it = std::lower_bound(std::begin(kAsciiCharNames), std::end(kAsciiCharNames), upper,
                             [](const AsciiNameEntry& e, const std::string& v) {
                               return std::string_view(e.name) < v;
                             });
  if (it == std::end(kAsciiCharNames) || std::string_view(it->name) != upper) {
    return std::nullopt;
  }
  return it->ch;
}

const char* InvisibleCharacterName(char32_t cp) {
  auto it = std::lower_bound(std::begin(kInvisibleChars), std::end(kInvisibleChars), cp,
                             [](const InvisibleEntry& e, char32_t c) { return e.cp < c; });
  return it != std::end(kInvisibleChars) && it->cp == cp ? it->name : nullptr;
}

bool IsBidiControl(char32_t cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

std::string EscapeInvisibleInJson(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  auto hex4 = [&out](unsigned v) {
    static constexpr char kDigits[] = "0123456789abcdef";
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kDigits[(v >> shift) & 0xF];
  };
  for (size_t i = 0; i < json.size();) {
    if (static_cast<unsigned char>(json[i]) < 0x80) {
      out += json[i++];
      continue;
    }
    const size_t start = i;
    const char32_t cp = DecodeUtf8(json, i);
    if (cp == 0xFFFD || InvisibleCharacterName(cp) == nullptr) {
      out.append(json.substr(start, i - start));  // the bytes as they were
    } else if (cp < 0x10000) {
      hex4(static_cast<unsigned>(cp));
    } else {
      const unsigned v = static_cast<unsigned>(cp) - 0x10000;
      hex4(0xD800 + (v >> 10));
      hex4(0xDC00 + (v & 0x3FF));
    }
  }
  return out;
}

}  // namespace airlock::analyzer
