#include "base/fs.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/unique_fd.h"

namespace airlock {

StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoError("open(" + path + ")");
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read(" + path + ")");
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return InvalidArgument(path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status WriteFile(const std::string& path, std::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return ErrnoError("open(" + path + ") for writing");
  ssize_t n = ::write(fd.get(), data.data(), data.size());
  if (n < 0) return ErrnoError("write(" + path + ", \"" + std::string(data) + "\")");
  if (static_cast<size_t>(n) != data.size()) return Internal("short write to " + path);
  return Status::Ok();
}

Status WriteAll(int fd, std::string_view data, const std::string& what) {
  for (size_t done = 0; done < data.size();) {
    ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return ErrnoError("write (" + what + ")");
    done += static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status MakeDir(const std::string& path, unsigned mode) {
  if (::mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return Status::Ok();
  return ErrnoError("mkdir(" + path + ")");
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

StatusOr<UniqueFd> CreateExecMemfd(const char* name, const std::string& what) {
  constexpr unsigned kMfdExec = 0x0010U;  // MFD_EXEC; older kernels refuse it (EINVAL) and need none
  UniqueFd fd(static_cast<int>(::syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING | kMfdExec)));
  if (!fd && errno == EINVAL) {
    fd.reset(static_cast<int>(::syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING)));
  }
  if (!fd) return ErrnoError("memfd_create for " + what);
  return fd;
}

Status SealMemfd(int fd, const std::string& what) {
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    return ErrnoError("fcntl(F_ADD_SEALS) on " + what);
  }
  return Status::Ok();
}

}  // namespace airlock
