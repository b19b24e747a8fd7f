// Status and StatusOr: the error type of every fallible function outside the
// post-clone child. A Status carries a message that says what failed and, where
// it came from a system call, the errno.
//
//   StatusOr<UniqueFd> OpenDir(const std::string& p) {
//     int fd = open(p.c_str(), O_DIRECTORY | O_CLOEXEC);
//     if (fd < 0) return ErrnoError("open(" + p + ")");
//     return UniqueFd(fd);
//   }
//   RETURN_IF_ERROR(DoThing());
//   ASSIGN_OR_RETURN(UniqueFd fd, OpenDir("/tmp"));
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace airlock {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (bad flag, bad profile, bad request)
  kNotFound,
  kUnavailable,      // the host cannot do it (missing kernel feature, no cgroup access)
  kInternal,         // a system call failed unexpectedly
  kResourceExhausted,
  kFailedPrecondition,
  kCancelled,        // the work was given up (a client that left before it was done)
};

class Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message, int err = 0)
      : code_(code), errno_(err), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  int sys_errno() const { return errno_; }
  const std::string& message() const { return message_; }
  // "message: strerror(errno)" when errno is set.
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  int errno_ = 0;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(ErrorCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(ErrorCode::kNotFound, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(ErrorCode::kUnavailable, std::move(m)); }
inline Status Internal(std::string m) { return Status(ErrorCode::kInternal, std::move(m)); }
// Captures the current errno; call it right after the failing system call.
Status ErrnoError(std::string what, int err = errno);

template <typename T>
class StatusOr {
 public:
  StatusOr(Status s) : v_(std::move(s)) {}  // NOLINT: implicit by design
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace airlock

#define AIRLOCK_CONCAT_INNER(a, b) a##b
#define AIRLOCK_CONCAT(a, b) AIRLOCK_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::airlock::Status _st = (expr);            \
    if (!_st.ok()) return _st;                 \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(AIRLOCK_CONCAT(_status_or_, __LINE__), lhs, expr)
