// E2B's file metadata: user-defined key/value pairs kept on a file as the
// extended attributes `user.e2b.<key>` (envd's own scheme, so that code in
// the sandbox sees them as E2B's does: `os.getxattr(path, "user.e2b.author")`).
// POST /files writes them (SandboxFileWriter::SetMetadata, on the temporary
// file before its rename, so the file is never seen without them); Connect's
// Stat/ListDir read them into EntryInfo.metadata (ReadSandboxMetadata).
//
// Writing (the request's metadata, checked first: a 400 before any byte is
// written):
//   RETURN_IF_ERROR(CheckSandboxMetadata(metadata));        // InvalidArgument: what is wrong
//   writer->SetMetadata(metadata);                          // applied by Commit()
//
// Reading (any fd of the entry: an O_PATH fd from an openat2 walk will do):
//   bool truncated = false;
//   ASSIGN_OR_RETURN(SandboxMetadata m, ReadSandboxMetadata(fd, &truncated));
//   for (auto& [key, value] : m) entry.metadata[key] = value;   // key without "user.e2b."
//
// The sandbox can set any `user.e2b.*` attribute itself (setxattr is allowed
// in it), so what is read is untrusted: bounded (kMaxMetadataKeys keys,
// kMaxMetadataBytes in all, counted as writes count them; what is over is
// left out and *truncated set), raw bytes (a value may be invalid UTF-8: the
// JSON writer must tolerate it). Symlinks and other special files have none
// (Linux keeps user.* attributes on regular files and directories only).
// On a kernel whose tmpfs keeps no user.* attributes (before Linux 6.6), a
// write fails with Unavailable (saying so) and a read finds none.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "base/status.h"

namespace airlock::isolation {

// key (without the namespace) -> value.
using SandboxMetadata = std::map<std::string, std::string>;

inline constexpr const char kMetadataXattrPrefix[] = "user.e2b.";
// E2B's bounds (envd's POST /files): a key at most 246 bytes (255, the VFS's
// longest attribute name, less the prefix), keys plus values plus one prefix
// per key at most 4096 bytes (a tmpfs or ext4 inode's attribute budget).
// airlock adds a count: at most 64 keys.
inline constexpr size_t kMaxMetadataKeyBytes = 246;
inline constexpr size_t kMaxMetadataBytes = 4096;
inline constexpr size_t kMaxMetadataKeys = 64;

// InvalidArgument, naming the key, unless every key is 1..246 bytes of HTTP
// token characters (RFC 9110: letters, digits, !#$%&'*+-.^_`|~; so a key can
// never hold '/', '\0' or a space, and "user.e2b." + key stays in the
// user.e2b. namespace whatever it is), every value printable US-ASCII
// (0x20-0x7E), at most kMaxMetadataKeys keys and kMaxMetadataBytes in all.
Status CheckSandboxMetadata(const SandboxMetadata& metadata);

// Sets `user.e2b.<key>` on open file `fd` for each pair (the caller checked
// them). Unavailable when the file system keeps no user.* attributes;
// ResourceExhausted when it has no room for them.
Status WriteSandboxMetadata(int fd, const SandboxMetadata& metadata);

// The `user.e2b.*` attributes of the entry open as `fd` (any fd, O_PATH
// included), prefix stripped, bounded as above (*truncated, when not null,
// set when some were left out). Empty for a symlink or special file, or a file
// system without user.* attributes.
StatusOr<SandboxMetadata> ReadSandboxMetadata(int fd, bool* truncated = nullptr);

}  // namespace airlock::isolation
