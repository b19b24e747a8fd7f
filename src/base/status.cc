#include "base/status.h"

#include <cstring>

namespace airlock {

std::string Status::ToString() const {
  if (ok()) return "ok";
  if (errno_ == 0) return message_;
  return message_ + ": " + std::strerror(errno_);
}

Status ErrnoError(std::string what, int err) {
  return Status(ErrorCode::kInternal, std::move(what), err);
}

}  // namespace airlock
