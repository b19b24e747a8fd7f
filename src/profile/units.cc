#include "profile/units.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace airlock::profile {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

struct Suffix {
  std::string_view text;
  uint64_t multiplier;
};

// Kubernetes quantity suffixes (plus "K", which people write for "k"); the
// whole suffix must match one of them.
constexpr Suffix kSizeSuffixes[] = {
    {"Ki", 1ull << 10}, {"Mi", 1ull << 20},   {"Gi", 1ull << 30},
    {"Ti", 1ull << 40}, {"k", 1000ull},       {"K", 1000ull},
    {"M", 1000000ull},  {"G", 1000000000ull}, {"T", 1000000000000ull},
};

// Splits "12.5Mi" into digits "12", fraction "5" and suffix "Mi" (whatever
// follows the number; the caller checks it). False when the text does not
// start with digits[.digits].
bool SplitNumber(std::string_view text, std::string_view* whole, std::string_view* frac,
                 std::string_view* suffix) {
  size_t i = 0;
  while (i < text.size() && IsDigit(text[i])) ++i;
  if (i == 0) return false;
  *whole = text.substr(0, i);
  *frac = {};
  if (i < text.size() && text[i] == '.') {
    size_t start = ++i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    if (i == start) return false;
    *frac = text.substr(start, i - start);
  }
  *suffix = text.substr(i);
  return true;
}

}  // namespace

StatusOr<int64_t> ParseSize(std::string_view text) {
  const Status not_a_size =
      InvalidArgument(QuoteForMessage(text) + " is not a size (use 256Mi, 1Gi, or bytes)");
  std::string_view whole, frac, suffix;
  if (!SplitNumber(text, &whole, &frac, &suffix)) return not_a_size;
  uint64_t multiplier = 1;
  if (!suffix.empty()) {
    multiplier = 0;
    for (const Suffix& s : kSizeSuffixes) {
      if (suffix == s.text) multiplier = s.multiplier;
    }
    if (multiplier == 0) return not_a_size;
  }
  if (frac.size() > 9) return not_a_size;
  const Status too_large =
      InvalidArgument(QuoteForMessage(text) + " is too large (at most " +
                      std::to_string(std::numeric_limits<int64_t>::max()) + " bytes)");
  // 128-bit arithmetic: whole (< 2^64 checked below) times a multiplier
  // (< 2^41) cannot overflow it.
  unsigned __int128 value = 0;
  for (char c : whole) {
    value = value * 10 + static_cast<unsigned>(c - '0');
    if (value > std::numeric_limits<uint64_t>::max()) return too_large;
  }
  value *= multiplier;
  if (!frac.empty()) {
    unsigned __int128 f = 0, scale = 1;
    for (char c : frac) {
      f = f * 10 + static_cast<unsigned>(c - '0');
      scale *= 10;
    }
    value += f * multiplier / scale;
  }
  if (value > static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max())) {
    return too_large;
  }
  return static_cast<int64_t>(value);
}

StatusOr<double> ParseCpu(std::string_view text) {
  const Status not_cpu = InvalidArgument(
      QuoteForMessage(text) + " is not a CPU amount (use 500m for half a core, or 1.5, or 2)");
  const Status out_of_range =
      InvalidArgument(QuoteForMessage(text) + " is out of range (1m to 1024 cores)");
  std::string_view whole, frac, suffix;
  if (!SplitNumber(text, &whole, &frac, &suffix)) return not_cpu;
  double cores = 0;
  if (suffix == "m") {
    if (!frac.empty()) return not_cpu;  // a millicore is the finest unit
    uint64_t millis = 0;
    auto [p, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), millis);
    if (ec == std::errc::result_out_of_range) return out_of_range;
    if (ec != std::errc() || p != whole.data() + whole.size()) return not_cpu;
    if (millis > 1024 * 1000) return out_of_range;
    cores = static_cast<double>(millis) / 1000.0;
  } else if (suffix.empty()) {
    auto [p, ec] =
        std::from_chars(text.data(), text.data() + text.size(), cores, std::chars_format::fixed);
    if (ec == std::errc::result_out_of_range) return out_of_range;
    if (ec != std::errc() || p != text.data() + text.size()) return not_cpu;
  } else {
    return not_cpu;
  }
  if (!(cores >= 0.001 && cores <= 1024.0)) return out_of_range;
  return cores;
}

StatusOr<double> ParseSeconds(std::string_view text) {
  const Status not_seconds =
      InvalidArgument(QuoteForMessage(text) + " is not a number of seconds (e.g. 30 or 2.5)");
  double seconds = 0;
  auto [p, ec] =
      std::from_chars(text.data(), text.data() + text.size(), seconds, std::chars_format::fixed);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty()) return not_seconds;
  if (!std::isfinite(seconds) || seconds < 0) return not_seconds;
  return seconds;
}

std::string FormatSize(int64_t bytes) {
  if (bytes > 0) {
    static constexpr std::pair<int, const char*> kUnits[] = {
        {40, "Ti"}, {30, "Gi"}, {20, "Mi"}, {10, "Ki"}};
    for (const auto& [shift, unit] : kUnits) {
      int64_t unit_bytes = int64_t{1} << shift;
      if (bytes % unit_bytes == 0) return std::to_string(bytes / unit_bytes) + unit;
    }
  }
  return std::to_string(bytes);
}

std::string FormatNumber(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", value);
  return buf;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

std::string QuoteForMessage(std::string_view text) {
  constexpr size_t kMaxBytes = 60;
  const bool utf8 = IsValidUtf8(text);
  std::string out = "'";
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char u = static_cast<unsigned char>(text[i]);
    // Cut before the character that would pass the limit, never inside one.
    if (i >= kMaxBytes && (!utf8 || (u & 0xc0) != 0x80)) {
      out += "...";
      break;
    }
    if (u < 0x20 || u == 0x7f || (!utf8 && u >= 0x80)) {
      out += '?';
    } else {
      out += static_cast<char>(u);
    }
  }
  return out + "'";
}

}  // namespace airlock::profile
