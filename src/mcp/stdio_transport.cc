#include "mcp/stdio_transport.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace airlock::mcp {
namespace {

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status ServeStdio(McpServer& server, int in_fd, int out_fd, int cancel_fd) {
  // Bounded: a line is kept up to the cap (plus a byte to know it is over),
  // the rest of an oversized line is read and dropped up to its newline.
  const size_t cap = model::McpCaps().max_bytes;
  std::string line;
  bool oversized = false;
  char buf[65536];
  for (;;) {
    struct pollfd fds[2] = {{in_fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    int r = ::poll(fds, cancel_fd >= 0 ? 2 : 1, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("poll (stdin)");
    }
    if (cancel_fd >= 0 && fds[1].revents) return Status::Ok();
    ssize_t n = ::read(in_fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoError("read (stdin)");
    }
    if (n == 0) return Status::Ok();  // the client closed stdin: we are done
    for (ssize_t i = 0; i < n; ++i) {
      char c = buf[i];
      if (c != '\n') {
        if (line.size() <= cap) line.push_back(c);
        else oversized = true;
        continue;
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::optional<std::string> reply;
      if (oversized || line.size() > cap) {
        reply = model::McpErrorLine("null", model::kJsonRpcInvalidRequest,
                                    "message larger than " + std::to_string(cap) + " bytes");
      } else if (line.find_first_not_of(" \t") != std::string::npos) {
        reply = server.Handle(line);
      }
      line.clear();
      oversized = false;
      if (reply && !WriteAll(out_fd, *reply + "\n")) return ErrnoError("write (stdout)");
    }
  }
}

}  // namespace airlock::mcp
