#include <cctype>
#include <cstdlib>

#include "cli/commands.h"
#include "isolation/spec.h"

namespace airlock::cli {

int64_t ParseSize(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return -1;
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || value < 0) return -1;
  std::string unit(end);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && unit[1] == 'i') unit.pop_back();  // "Mi" == "M": binary units throughout
  double mult = 1;
  if (unit.empty()) mult = 1;
  else if (unit == "K" || unit == "k") mult = 1024.0;
  else if (unit == "M" || unit == "m") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") mult = 1024.0 * 1024 * 1024;
  else return -1;
  double bytes = value * mult;
  if (bytes > 9.0e18) return -1;
  return static_cast<int64_t>(bytes);
}

bool ParseDegradable(const std::vector<std::string>& names, uint32_t* bits, std::string* error) {
  *bits = 0;
  for (const std::string& n : names) {
    if (n == "cgroup") *bits |= static_cast<uint32_t>(isolation::Degradable::kCgroup);
    else if (n == "landlock") *bits |= static_cast<uint32_t>(isolation::Degradable::kLandlock);
    else {
      *error = "--allow-degraded: unknown layer '" + n + "' (known: cgroup, landlock)";
      return false;
    }
  }
  return true;
}

bool ParseUidRange(const std::string& text, std::optional<isolation::HostIdRange>* range, std::string* error) {
  range->reset();
  if (text.empty()) return true;
  auto r = isolation::ParseHostIdRange(text);
  if (!r.ok()) {
    *error = r.status().message();
    return false;
  }
  *range = *r;
  return true;
}

}  // namespace airlock::cli
