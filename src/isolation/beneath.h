// The primitives under isolation/sandbox_files.h and isolation/sandbox_fs.h:
// a path opened beneath a directory fd that the sandbox controls, with no
// symlink of any kind followed, nothing above the root and no other mount
// reached (openat2 RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV),
// and errno mapped to the status codes those headers document. Internal to
// isolation/: other modules use the two headers above.
//
//   ASSIGN_OR_RETURN(UniqueFd dir, beneath::OpenBeneath(root, "a/b", O_PATH | O_DIRECTORY, "a/b"));
#pragma once

#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "base/unique_fd.h"

namespace airlock::isolation::beneath {

// Beneath the root, no symlink of any kind anywhere in the path, no other mount.
inline constexpr uint64_t kResolveBeneath =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

// The name prefix of an upload's temporary file (sandbox_files.cc): a
// watch does not report those, only the rename that completes the upload.
inline constexpr std::string_view kUploadTempPrefix = ".airlock-upload-";

// A path's name in messages: quoted, escaped (EscapeSandboxPath).
std::string Shown(std::string_view path);

// A failed system call on `path` mapped to the status codes (ENOENT NotFound,
// ELOOP/EXDEV/ENOTDIR/EBUSY FailedPrecondition, ENOSPC ResourceExhausted, ...).
Status PathError(std::string_view op, std::string_view path, int err);

// openat2(dirfd, path) with the beneath-only rules and O_CLOEXEC (and
// O_NOCTTY) added, retried on EAGAIN; `shown` names the path in errors.
StatusOr<UniqueFd> OpenBeneath(int dirfd, const std::string& path, uint64_t flags, std::string_view shown,
                               uint64_t resolve = kResolveBeneath);

// "a/b/c" -> ("a/b", "c"); "c" -> ("", "c").
std::pair<std::string, std::string> SplitParent(std::string_view path);

// An O_PATH fd of the parent directory of `path`, creating missing ones
// (mode 0755, owned by uid:gid) when make_parents, each component resolved
// from the one before with the beneath-only rules.
StatusOr<UniqueFd> OpenParent(int root, std::string_view path, bool make_parents, uid_t uid, gid_t gid);

// The calling thread's file-system identity (setfsuid/setfsgid are per
// thread) set to the sandbox user's for a scope: what is created is made by
// that user, with that user's permissions and none of ours. Needed, not only
// polite: a sandbox's tmpfs belongs to its user namespace, where the server's
// own uid is not mapped, so an inode the server made as itself could not be
// given an owner there (EOVERFLOW).
class AsSandboxUser {
 public:
  AsSandboxUser(uid_t uid, gid_t gid) {
    old_gid_ = static_cast<gid_t>(::setfsgid(gid));
    old_uid_ = static_cast<uid_t>(::setfsuid(uid));
  }
  ~AsSandboxUser() {
    ::setfsuid(old_uid_);
    ::setfsgid(old_gid_);
  }
  AsSandboxUser(const AsSandboxUser&) = delete;
  AsSandboxUser& operator=(const AsSandboxUser&) = delete;

 private:
  uid_t old_uid_;
  gid_t old_gid_;
};

}  // namespace airlock::isolation::beneath
