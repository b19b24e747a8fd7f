#include "base/sandbox_path.h"

#include <algorithm>

namespace airlock {

std::string EscapeSandboxPath(std::string_view path) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr size_t kMaxShown = 300;
  std::string out;
  out.reserve(std::min(path.size(), kMaxShown) + 8);
  for (size_t i = 0; i < path.size(); ++i) {
    if (out.size() >= kMaxShown) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(path[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Status CheckSandboxPath(std::string_view path) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("path \"" + EscapeSandboxPath(path) + "\" " + why +
                           ": name a file relative to the working directory, like \"data/in.csv\"");
  };
  if (path.empty()) return bad("is empty");
  if (path.size() > kMaxSandboxPathBytes) {
    return bad("is longer than " + std::to_string(kMaxSandboxPathBytes) + " bytes");
  }
  if (path.find('\0') != std::string_view::npos) return bad("contains a NUL byte");
  if (path.front() == '/') return bad("is absolute");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view comp = path.substr(start, end - start);
    if (comp.empty()) return bad("has an empty component (a doubled or trailing '/')");
    if (comp == ".") return bad("has a \".\" component");
    if (comp == "..") return bad("has a \"..\" component");
    if (comp.size() > kMaxSandboxNameBytes) {
      return bad("has a component longer than " + std::to_string(kMaxSandboxNameBytes) + " bytes");
    }
    start = end + 1;
  }
  return Status::Ok();
}

}  // namespace airlock
