// envd's file system calls (E2B's filesystem.Filesystem: Stat, MakeDir, Move,
// ListDir, Remove) on a sandbox's directory, from the host, with the rules of
// isolation/sandbox_files.h: every path is checked by CheckSandboxPath and
// resolved beneath `root` with openat2 (no symlink followed anywhere in it,
// nothing above the root, no other mount). A symlink the sandbox planted is
// only ever reported as itself (its type and target, read with readlinkat),
// never read, listed, entered, watched or written through. Directories are
// made as the sandbox's user (the owner of `root`). Walks are bounded (depth,
// entries), so a directory the sandbox filled fast cannot hold a worker long.
//
//   ASSIGN_OR_RETURN(FsEntry e, StatSandboxEntry(root.get(), "data/in.csv"));
//   bool created = false;
//   RETURN_IF_ERROR(MakeSandboxDir(root.get(), "out/plots", &created));
//
// Errors are sandbox_files.h's: InvalidArgument (a bad path), NotFound,
// FailedPrecondition (a symlink or mount in the way, a file where a directory
// is wanted), ResourceExhausted (more entries than the bound), Internal.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace airlock::isolation {

enum class FsType { kFile, kDirectory, kSymlink };

struct FsEntry {
  std::string path;  // relative to the root, '/'-separated ("" = the root); raw bytes
  std::string name;  // the last component
  FsType type = FsType::kFile;
  int64_t size = 0;
  uint32_t st_mode = 0;  // type and permission bits (st_mode)
  // "user" for the owner of the root (the sandbox's one user), "root" for 0,
  // else the number: the sandbox has no other names.
  std::string owner, group;
  int64_t mtime_s = 0;
  int32_t mtime_ns = 0;
  std::optional<std::string> symlink_target;  // readlinkat's bytes, as written (may be relative)
  // The entry's `user.e2b.*` extended attributes, the prefix stripped (files
  // and directories only; bounded as isolation/sandbox_xattrs.h reads them).
  std::vector<std::pair<std::string, std::string>> metadata;
};

// "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx": Go's FileMode.String(), which
// envd reports (setuid/setgid/sticky as u/g/t before the type).
std::string PermissionString(uint32_t st_mode);

// The entry at `path` itself (lstat: a symlink is reported as a symlink with
// its target, never followed). "" = the root. Only regular files,
// directories and symlinks are entries; anything else is FailedPrecondition.
StatusOr<FsEntry> StatSandboxEntry(int root, std::string_view path);

// Makes directory `path` and any missing parent (mode 0755, the root's
// owner). *created is false when a directory was already there (envd's
// already_exists); a file or symlink there is FailedPrecondition.
Status MakeSandboxDir(int root, std::string_view path, bool* created);

// Renames `from` to `to` (both beneath the root; `to`'s missing parents are
// made; an existing file at `to` is replaced, as rename(2)). The entry moved
// is `from` itself: a symlink is moved as a symlink. Returns `to`'s entry.
StatusOr<FsEntry> MoveSandboxEntry(int root, std::string_view from, std::string_view to);

// Removes `path`: a file or symlink (the link itself), or a directory with
// everything in it, depth first, never following a symlink, at most
// max_entries entries and 64 levels deep (ResourceExhausted beyond, with what
// was removed already gone); a mount point inside is FailedPrecondition and
// is not entered. The root itself cannot be removed (InvalidArgument).
Status RemoveSandboxTree(int root, std::string_view path, size_t max_entries);

// The entries of directory `dir` ("" = the root), and of its subdirectories
// down to `depth` levels (1 = its own entries), sorted by path. Symlinks are
// listed (with their target), never entered; FIFOs, sockets and devices are
// left out; mounts are not entered. InvalidArgument when depth is 0 or more
// than kMaxListDepth; ResourceExhausted when more than max_entries entries.
inline constexpr int kMaxListDepth = 64;
StatusOr<std::vector<FsEntry>> ListSandboxEntries(int root, std::string_view dir, int depth, size_t max_entries);

// Directory `dir` ("" = the root) opened O_PATH beneath the root, no symlink
// followed; a symlink or file there is FailedPrecondition saying which.
StatusOr<UniqueFd> OpenSandboxDir(int root, std::string_view dir);

// The lexical absolute form of a symlink's target as seen in the sandbox:
// `target` (absolute, or relative to `link_dir`, itself absolute) with "."
// and ".." resolved by name only (nothing on disk is followed), as envd
// reports it. Never above "/".
std::string JoinSymlinkTarget(std::string_view link_dir, std::string_view target);

}  // namespace airlock::isolation
