#include "base/random.h"

#include <sys/random.h>

#include <algorithm>

namespace airlock::base {

std::string RandomHex(size_t bytes) {
  unsigned char buf[64];
  bytes = std::min(bytes, sizeof buf);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf + got, bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (size_t i = 0; i < bytes; ++i) {
    out += kHex[buf[i] >> 4];
    out += kHex[buf[i] & 15];
  }
  return out;
}

}  // namespace airlock::base
