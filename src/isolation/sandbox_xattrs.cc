#include "isolation/sandbox_xattrs.h"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

namespace airlock::isolation {
namespace {

constexpr size_t kPrefixBytes = sizeof(kMetadataXattrPrefix) - 1;
// The kernel's own bound on a list of attribute names (XATTR_LIST_MAX).
constexpr size_t kListMax = 64 * 1024;

bool TokenChar(unsigned char c) {
  // (c != 0: strchr finds the terminating NUL.)
  return std::isalnum(c) != 0 || (c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

// "key" for messages: at most 64 bytes, control and non-ASCII bytes as \xNN.
std::string Shown(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s.substr(0, 64)) {
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + (s.size() > 64 ? "...'" : "'");
}

// An O_PATH fd has no f*xattr calls before Linux 6.x: through its
// /proc/self/fd link instead (which reaches the inode it holds, never a name).
std::string FdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

ssize_t List(int fd, char* buf, size_t size) {
  ssize_t n = ::flistxattr(fd, buf, size);
  if (n < 0 && errno == EBADF) n = ::listxattr(FdPath(fd).c_str(), buf, size);
  return n;
}

ssize_t Get(int fd, const char* name, char* buf, size_t size) {
  ssize_t n = ::fgetxattr(fd, name, buf, size);
  if (n < 0 && errno == EBADF) n = ::getxattr(FdPath(fd).c_str(), name, buf, size);
  return n;
}

}  // namespace

Status CheckSandboxMetadata(const SandboxMetadata& metadata) {
  auto bad = [](std::string why) {
    return Status(ErrorCode::kInvalidArgument, "metadata: " + why + " (X-Metadata-<key>: <value> headers)");
  };
  if (metadata.size() > kMaxMetadataKeys) {
    return bad(std::to_string(metadata.size()) + " keys, more than the " + std::to_string(kMaxMetadataKeys) +
               " allowed");
  }
  size_t total = 0;
  for (const auto& [key, value] : metadata) {
    if (key.empty()) return bad("a key is empty");
    if (key.size() > kMaxMetadataKeyBytes) {
      return bad("key " + Shown(key) + " has " + std::to_string(key.size()) + " bytes, more than " +
                 std::to_string(kMaxMetadataKeyBytes));
    }
    for (unsigned char c : key) {
      if (!TokenChar(c)) {
        return bad("key " + Shown(key) +
                   " may hold only letters, digits and !#$%&'*+-.^_`|~ (an HTTP header name's characters)");
      }
    }
    for (unsigned char c : value) {
      if (c < 0x20 || c > 0x7e) return bad("the value of key " + Shown(key) + " is not printable US-ASCII");
    }
    total += kPrefixBytes + key.size() + value.size();
  }
  if (total > kMaxMetadataBytes) {
    return bad(std::to_string(total) + " bytes in all (keys, values and a '" + std::string(kMetadataXattrPrefix) +
               "' per key), more than the " + std::to_string(kMaxMetadataBytes) + " allowed");
  }
  return Status::Ok();
}

Status WriteSandboxMetadata(int fd, const SandboxMetadata& metadata) {
  for (const auto& [key, value] : metadata) {
    const std::string name = kMetadataXattrPrefix + key;
    if (::fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) == 0) continue;
    const int err = errno;
    if (err == EOPNOTSUPP) {
      return Status(ErrorCode::kUnavailable,
                    "this kernel's tmpfs keeps no user.* extended attributes (Linux 6.6+), so file metadata "
                    "cannot be stored; write the file without metadata",
                    err);
    }
    if (err == ENOSPC || err == E2BIG || err == EDQUOT) {
      return Status(ErrorCode::kResourceExhausted,
                    "no room for the metadata on the file (setxattr " + name + ": " + std::strerror(err) + ")", err);
    }
    return Status(ErrorCode::kInternal, "setxattr " + name + " failed: " + std::strerror(err), err);
  }
  return Status::Ok();
}

StatusOr<SandboxMetadata> ReadSandboxMetadata(int fd, bool* truncated) {
  if (truncated != nullptr) *truncated = false;
  SandboxMetadata out;
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status(ErrorCode::kInternal, "fstat for metadata failed", errno);
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return out;
  std::vector<char> names(kListMax);
  ssize_t n = List(fd, names.data(), names.size());
  if (n < 0) {
    if (errno == EOPNOTSUPP || errno == ENOTSUP) return out;
    return Status(ErrorCode::kInternal, std::string("listxattr failed: ") + std::strerror(errno), errno);
  }
  size_t total = 0;
  std::string value(kMaxMetadataBytes, '\0');
  for (size_t at = 0; at < static_cast<size_t>(n);) {
    const std::string_view name(names.data() + at, ::strnlen(names.data() + at, static_cast<size_t>(n) - at));
    at += name.size() + 1;
    if (name.size() <= kPrefixBytes || name.substr(0, kPrefixBytes) != kMetadataXattrPrefix) continue;
    const std::string_view key = name.substr(kPrefixBytes);
    const size_t room = kMaxMetadataBytes - total;
    if (out.size() == kMaxMetadataKeys || name.size() > room) {
      if (truncated != nullptr) *truncated = true;
      continue;
    }
    // At most what is left of the budget: a larger value (the sandbox may set
    // 64 KiB) fails with ERANGE and is left out.
    const size_t cap = room - name.size();
    ssize_t got = Get(fd, std::string(name).c_str(), value.data(), cap);
    if (cap == 0 && got > 0) {  // a size of 0 asks for the length: it does not fit
      if (truncated != nullptr) *truncated = true;
      continue;
    }
    if (got < 0) {
      if (errno == ERANGE && truncated != nullptr) *truncated = true;
      continue;  // ERANGE, or removed meanwhile (ENODATA)
    }
    total += name.size() + static_cast<size_t>(got);
    out.emplace(std::string(key), value.substr(0, static_cast<size_t>(got)));
  }
  return out;
}

}  // namespace airlock::isolation
