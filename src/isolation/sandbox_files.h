// Host-side access to files beneath a sandbox's directory (a session's working
// directory), as if from inside the sandbox, never as root on the host.
//
// The sandboxed code controls that directory: it can plant symlinks (to
// /etc/shadow, to /proc/1/root/...), hard links, FIFOs, sockets, sparse files
// claiming terabytes, names with newlines or invalid UTF-8, and can change it
// while we work. So every path is resolved from a directory fd with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
// RESOLVE_NO_XDEV): no symlink is followed anywhere in the path, nothing above
// the root or on another mount is reached. Files are opened O_NONBLOCK (a FIFO
// never blocks) and checked with fstat after opening; reads are capped. Without
// openat2 (Linux < 5.6) every call fails with Unavailable: there is no fallback.
//
//   ASSIGN_OR_RETURN(UniqueFd root, OpenRunDir(pid, pidfd, "/tmp"));
//   RETURN_IF_ERROR(WriteSandboxFile(root.get(), "data/in.csv", body, /*make_parents=*/true));
//   int64_t total = 0;
//   ASSIGN_OR_RETURN(std::string bytes, ReadSandboxFile(root.get(), "out.png", 10 << 20, 0, -1, &total));
//
// Errors (each message names the path, escaped with EscapeSandboxPath):
//   InvalidArgument    the path breaks CheckSandboxPath, or a bad offset/length
//   NotFound           no such entry (or the run is gone: OpenRunDir)
//   FailedPrecondition a symlink, FIFO, socket or device, a directory where a file is
//                      wanted (or a file where a directory is), a mount crossing, a
//                      directory that is not empty
//   ResourceExhausted  more bytes than allowed to read; no space (ENOSPC/EDQUOT/EFBIG)
//   Unavailable        the kernel has no openat2
//   Internal           anything else
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/sandbox_path.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "isolation/sandbox_xattrs.h"

namespace airlock::isolation {

// The path rule (base/sandbox_path.h): relative, '/'-separated, no empty, "."
// or ".." component, no NUL, at most 4095 bytes, components at most 255 bytes.
using ::airlock::CheckSandboxPath;
using ::airlock::EscapeSandboxPath;

// Opens directory `dir` (absolute, as seen inside the run, e.g. "/tmp") of the
// run whose init is host pid `pid` with pidfd `pidfd`, through /proc/<pid>/root,
// as an O_PATH | O_DIRECTORY | O_CLOEXEC fd. `dir` is resolved inside the run's
// root (mounts may be crossed: /tmp is the run's own tmpfs; symlinks may not).
// NotFound when the process is gone (checked after opening, so a recycled pid is
// never used) or the directory does not exist.
StatusOr<UniqueFd> OpenRunDir(pid_t pid, int pidfd, std::string_view dir);

struct SandboxFileInfo {
  std::string path;          // relative to the root, '/'-separated; raw bytes (may be invalid UTF-8)
  int64_t size = 0;          // st_size (0 for a directory)
  int64_t modified_ms = 0;   // st_mtime, unix milliseconds
  std::string type;          // "file" or "directory"
};

// Reads regular file `path` beneath `root`: `length` bytes from `offset`
// (length -1: to the end). *total (when not null) gets the file's size.
// ResourceExhausted when more than max_bytes would be read (the caller answers
// 413 or asks for a range); InvalidArgument when offset is negative or past the
// end, or length < -1. Never allocates more than max_bytes (a sparse file's
// claimed size is not trusted), never blocks on a FIFO.
StatusOr<std::string> ReadSandboxFile(int root, std::string_view path, int64_t max_bytes, int64_t offset,
                                      int64_t length, int64_t* total);

// Regular file `path` beneath `root`, opened read-only (O_NONBLOCK: a FIFO
// swapped in never blocks) after the same checks as ReadSandboxFile: no
// symlink, only a regular file. For a caller that reads it in pieces (a
// download streamed to a slow client holds one piece, not the file). `size`
// is what fstat said when it was opened: the sandbox may change the file
// meanwhile, so a reader must stop at end of file, whatever the size said.
struct SandboxFile {
  UniqueFd fd;
  int64_t size = 0;
  int64_t modified_ms = 0;
};
StatusOr<SandboxFile> OpenSandboxFile(int root, std::string_view path);

// A file written beneath `root` piece by piece (an upload streamed as it
// arrives), with WriteSandboxFile's rules: Open checks the path and what is
// there (only a regular file may be replaced), creates missing parents when
// asked, and creates a new temporary file in the destination's directory;
// Write appends; Commit renames it over `path`. A writer destroyed (or
// Aborted) before Commit removes its temporary file: nothing half-written is
// ever seen under `path`. Open and Commit act as the sandbox's user (per
// thread: setfsuid); Write only writes to the open file.
class SandboxFileWriter {
 public:
  static StatusOr<std::unique_ptr<SandboxFileWriter>> Open(int root, std::string_view path, bool make_parents);
  ~SandboxFileWriter();
  SandboxFileWriter(const SandboxFileWriter&) = delete;
  SandboxFileWriter& operator=(const SandboxFileWriter&) = delete;

  Status Write(std::string_view data);  // ResourceExhausted: the sandbox's disk is full
  // E2B's file metadata (sandbox_xattrs.h; the caller checked it with
  // CheckSandboxMetadata): set as user.e2b.* attributes on the temporary file
  // by Commit(), before the rename, so the file never appears without it. A
  // file written without metadata has none (a new inode: nothing of the file
  // it replaces is kept).
  void SetMetadata(SandboxMetadata metadata) { metadata_ = std::move(metadata); }
  // `modified_ms`, when given, gets the new file's mtime (unix milliseconds,
  // as ListSandboxDir reports it).
  Status Commit(int64_t* modified_ms = nullptr);
  void Abort();
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  SandboxFileWriter() = default;
  UniqueFd parent_, fd_;
  std::string path_, leaf_, tmp_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  int64_t size_ = 0;
  bool committed_ = false;
  SandboxMetadata metadata_;
};

// Creates or replaces regular file `path` beneath `root` with `data`, mode 0644,
// owned by the owner (uid, gid) of `root` itself, so the sandbox can read,
// change and delete it. Missing parent directories are created (mode 0755, same
// owner) when make_parents, else NotFound. An existing symlink, FIFO, socket,
// device or directory at `path` is refused (FailedPrecondition), never written
// through. The data is written to a new temporary file in the same directory
// and renamed over `path`: the write never changes an existing inode (a hard
// link the sandbox made to another file is cut, not written through), and a
// reader never sees half a file. `modified_ms`, when given, gets the new
// file's mtime (unix milliseconds, as ListSandboxDir reports it); `metadata`
// (checked by the caller) is set on it as SandboxFileWriter::SetMetadata does.
Status WriteSandboxFile(int root, std::string_view path, std::string_view data, bool make_parents,
                        int64_t* modified_ms = nullptr, const SandboxMetadata& metadata = {});

// Removes the entry `path` beneath `root`: a regular file, symlink, FIFO,
// socket or device (the entry itself, never what it points to), or an empty
// directory (FailedPrecondition when not empty).
Status RemoveSandboxPath(int root, std::string_view path);

// Lists directory `dir` beneath `root` ("" = root itself): regular files and
// directories, entering subdirectories up to max_depth levels below `dir`
// (0 = only `dir`'s own entries), at most max_entries of them (symlinks and
// other types are skipped, as are mounts), sorted by path. *truncated (when not
// null) is set when more existed or the walk hit its bound on entries scanned.
StatusOr<std::vector<SandboxFileInfo>> ListSandboxDir(int root, std::string_view dir, size_t max_entries,
                                                      int max_depth, bool* truncated);

}  // namespace airlock::isolation
