// Small file helpers for the parent side (they allocate; never call them
// between clone() and execve()).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"

namespace airlock {

// Reads a whole file, at most max_bytes (an error beyond).
StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes = 16 << 20);
// Writes data to an existing file (as for /proc and cgroup control files): open, one write, close.
Status WriteFile(const std::string& path, std::string_view data);
// Writes all of data to fd (retrying short writes and EINTR); `what` names
// the file in the error.
Status WriteAll(int fd, std::string_view data, const std::string& what);
// Creates a directory; an existing one is not an error.
Status MakeDir(const std::string& path, unsigned mode = 0755);
bool PathExists(const std::string& path);

// A memfd for a program to execveat() once it is written and sealed
// (SealMemfd): MFD_CLOEXEC | MFD_ALLOW_SEALING, and MFD_EXEC where the kernel
// knows it (6.3+; under vm.memfd_noexec = 1 a memfd made without it cannot be
// executed). `what` names it in errors.
StatusOr<UniqueFd> CreateExecMemfd(const char* name, const std::string& what);
// Seals a written memfd against any change (shrink, grow, write, more seals).
Status SealMemfd(int fd, const std::string& what);

}  // namespace airlock
