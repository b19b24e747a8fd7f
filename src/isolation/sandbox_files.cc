#include "isolation/sandbox_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "isolation/beneath.h"
#include "isolation/sandbox.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

namespace airlock::isolation {
// The beneath-only primitives (isolation/beneath.h), shared with sandbox_fs.cc.
namespace beneath {

// openat2 fails with EAGAIN when a concurrent rename or mount elsewhere on the
// system might have let the walk escape; the kernel asks us to retry.
constexpr int kEagainRetries = 16;

// A path's name in messages.
std::string Shown(std::string_view path) { return "\"" + EscapeSandboxPath(path) + "\""; }

// A failed system call on `path` mapped to the codes of the header.
Status PathError(std::string_view op, std::string_view path, int err) {
  std::string p = Shown(path);
  switch (err) {
    case ENOENT:
      return Status(ErrorCode::kNotFound, p + " does not exist (" + std::string(op) + ")", err);
    case ELOOP:
      return Status(ErrorCode::kFailedPrecondition,
                    p + " is or passes through a symbolic link, which is never followed", err);
    case EXDEV:
      return Status(ErrorCode::kFailedPrecondition, p + " crosses a mount or leaves the directory", err);
    case ENOTDIR:
      return Status(ErrorCode::kFailedPrecondition, p + ": a component of the path is not a directory", err);
    case EISDIR:
      return Status(ErrorCode::kFailedPrecondition, p + " is a directory", err);
    case ENOTEMPTY:
    case EEXIST:
      return Status(ErrorCode::kFailedPrecondition, p + " is a directory that is not empty", err);
    case EBUSY:
      return Status(ErrorCode::kFailedPrecondition, p + " is in use (a mount point)", err);
    case ENXIO:
    case EACCES:
    case EPERM:
    case ETXTBSY:
      return Status(ErrorCode::kFailedPrecondition,
                    p + " cannot be used (" + std::string(op) + ": " + std::strerror(err) + ")", err);
    case ENAMETOOLONG:
      return Status(ErrorCode::kInvalidArgument, p + " is too long", err);
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return Status(ErrorCode::kResourceExhausted,
                    p + ": no space left in the sandbox's directory (" + std::strerror(err) + ")", err);
    case ENOSYS:
      return Status(ErrorCode::kUnavailable,
                    "this kernel has no openat2 (Linux 5.6+): files in a sandbox cannot be reached safely, "
                    "so file access is refused",
                    err);
    default:
      return Status(ErrorCode::kInternal, std::string(op) + " " + p + " failed", err);
  }
}

// openat2(dirfd, path) with the beneath-only rules and O_CLOEXEC (and
// O_NOCTTY) added; `shown` names the path in errors.
StatusOr<UniqueFd> OpenBeneath(int dirfd, const std::string& path, uint64_t flags, std::string_view shown,
                               uint64_t resolve) {
  struct open_how how;
  std::memset(&how, 0, sizeof how);
  // openat2 refuses (EINVAL) flags that mean nothing with O_PATH, like O_NOCTTY.
  how.flags = flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY);
  how.resolve = resolve;
  for (int i = 0;; ++i) {
    long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    int err = errno;
    if (err == EINTR || (err == EAGAIN && i < kEagainRetries)) continue;
    if (err == EAGAIN) return Status(ErrorCode::kInternal, "openat2 " + Shown(shown) + " kept racing a rename", err);
    return PathError("openat2", shown, err);
  }
}

const char* KindOf(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "of an unknown type";
}

Status WrongKind(std::string_view path, mode_t m, const char* wanted) {
  return Status(ErrorCode::kFailedPrecondition,
                Shown(path) + " is " + KindOf(m) + ", not " + wanted + ": only regular files and directories are served");
}

Status Fstat(int fd, std::string_view path, struct stat* st) {
  if (::fstat(fd, st) != 0) return PathError("fstat", path, errno);
  return Status::Ok();
}

// "a/b/c" -> ("a/b", "c"); "c" -> ("", "c").
std::pair<std::string, std::string> SplitParent(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return {"", std::string(path)};
  return {std::string(path.substr(0, slash)), std::string(path.substr(slash + 1))};
}

// An O_PATH fd of the parent directory of `path`, creating missing ones (owned
// by uid:gid) when make_parents. Each component is resolved on its own from the
// one before, with the beneath-only rules, so nothing created or followed can
// be outside the root.
StatusOr<UniqueFd> OpenParent(int root, std::string_view path, bool make_parents, uid_t uid, gid_t gid) {
  auto [parent, leaf] = SplitParent(path);
  if (parent.empty()) return OpenBeneath(root, ".", O_PATH | O_DIRECTORY, ".");
  if (!make_parents) return OpenBeneath(root, parent, O_PATH | O_DIRECTORY, parent);
  ASSIGN_OR_RETURN(UniqueFd cur, OpenBeneath(root, ".", O_PATH | O_DIRECTORY, "."));
  size_t start = 0;
  while (start < parent.size()) {
    size_t end = parent.find('/', start);
    if (end == std::string::npos) end = parent.size();
    std::string comp = parent.substr(start, end - start);
    std::string so_far = parent.substr(0, end);
    auto next = OpenBeneath(cur.get(), comp, O_PATH | O_DIRECTORY, so_far);
    if (!next.ok() && next.status().code() == ErrorCode::kNotFound) {
      bool made = ::mkdirat(cur.get(), comp.c_str(), 0755) == 0;
      if (!made && errno != EEXIST) return PathError("mkdirat", so_far, errno);
      next = OpenBeneath(cur.get(), comp, O_PATH | O_DIRECTORY, so_far);
      if (next.ok() && made) {
        // The sandbox's own, as if it had made it. On an O_PATH fd: AT_EMPTY_PATH.
        if (::fchownat(next->get(), "", uid, gid, AT_EMPTY_PATH) != 0) return PathError("fchownat", so_far, errno);
        // Through the fd's own /proc link, never by name: the sandbox could swap a
        // symlink in for the directory just made, and chmod would follow it.
        if (::chmod(("/proc/self/fd/" + std::to_string(next->get())).c_str(), 0755) != 0) {
          return PathError("chmod", so_far, errno);
        }
      }
    }
    if (!next.ok()) return next.status();
    cur = std::move(next).value();
    start = end + 1;
  }
  return cur;
}

}  // namespace beneath

using namespace beneath;  // NOLINT: this file is their home

namespace {

// A random temporary name for an upload (the sandbox may have planted any
// name; O_EXCL refuses what exists and a new random name is tried).
std::string TempName() {
  unsigned char r[8] = {};
  if (::getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
    uint64_t t = static_cast<uint64_t>(::getpid()) ^ reinterpret_cast<uintptr_t>(&r);
    std::memcpy(r, &t, sizeof r);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(kUploadTempPrefix);
  for (unsigned char c : r) {
    s += kHex[c >> 4];
    s += kHex[c & 15];
  }
  return s;
}

}  // namespace

StatusOr<UniqueFd> OpenRunDir(pid_t pid, int pidfd, std::string_view dir) {
  if (dir.empty() || dir.front() != '/') {
    return InvalidArgument("OpenRunDir: " + Shown(dir) + " must be an absolute path inside the run");
  }
  std::string rel(dir.substr(1));
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  if (rel.empty()) {
    rel = ".";
  } else {
    RETURN_IF_ERROR(CheckSandboxPath(rel));
  }
  auto gone = [&] { return NotFound("the run (pid " + std::to_string(pid) + ") is gone"); };
  auto alive = [&] {
    struct pollfd p = {pidfd, POLLIN, 0};
    if (::poll(&p, 1, 0) != 0) return false;  // readable (exited) or an error
    auto now = PidOfPidfd(pidfd);
    return now.ok() && *now == pid;
  };
  if (pid <= 0 || pidfd < 0 || !alive()) return gone();
  std::string proc_root = "/proc/" + std::to_string(pid) + "/root";
  UniqueFd run_root(::open(proc_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!run_root) {
    if (errno == ENOENT || errno == ESRCH) return gone();
    return ErrnoError("OpenRunDir: open " + proc_root);
  }
  // Inside the run's root: "/" is its root, mounts (its /tmp tmpfs) may be
  // crossed, no symlink (the run may have replaced a directory with one).
  auto d = OpenBeneath(run_root.get(), rel, O_PATH | O_DIRECTORY, dir,
                       RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  // Still the same live process: the pid was not recycled while we opened it.
  if (!alive()) return gone();
  return d;
}

StatusOr<SandboxFile> OpenSandboxFile(int root, std::string_view path) {
  RETURN_IF_ERROR(CheckSandboxPath(path));
  std::string p(path);
  // First an O_PATH fd (opening it has no effect on any device), checked;
  // then the real open, checked to be the same regular file.
  ASSIGN_OR_RETURN(UniqueFd probe, OpenBeneath(root, p, O_PATH | O_NOFOLLOW, path));
  struct stat st;
  RETURN_IF_ERROR(Fstat(probe.get(), path, &st));
  if (!S_ISREG(st.st_mode)) return WrongKind(path, st.st_mode, "a regular file");
  ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(root, p, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, path));
  struct stat st2;
  RETURN_IF_ERROR(Fstat(fd.get(), path, &st2));
  if (!S_ISREG(st2.st_mode)) return WrongKind(path, st2.st_mode, "a regular file");
  if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
    return Status(ErrorCode::kFailedPrecondition, Shown(path) + " changed while it was opened; try again");
  }
  SandboxFile f;
  f.fd = std::move(fd);
  f.size = st2.st_size;
  f.modified_ms = static_cast<int64_t>(st2.st_mtim.tv_sec) * 1000 + st2.st_mtim.tv_nsec / 1000000;
  return f;
}

StatusOr<std::string> ReadSandboxFile(int root, std::string_view path, int64_t max_bytes, int64_t offset,
                                      int64_t length, int64_t* total) {
  RETURN_IF_ERROR(CheckSandboxPath(path));
  if (offset < 0 || length < -1 || max_bytes < 0) {
    return InvalidArgument("read " + Shown(path) + ": offset must be >= 0 and length >= -1");
  }
  ASSIGN_OR_RETURN(SandboxFile f, OpenSandboxFile(root, path));
  const int64_t size = f.size;
  if (total != nullptr) *total = size;
  if (offset > size) {
    return InvalidArgument("read " + Shown(path) + ": offset " + std::to_string(offset) + " is past its end (" +
                           std::to_string(size) + " bytes)");
  }
  int64_t want = size - offset;
  if (length >= 0) want = std::min(want, length);
  if (want > max_bytes) {
    return Status(ErrorCode::kResourceExhausted, Shown(path) + " has " + std::to_string(want) +
                                                     " bytes to read, more than the " + std::to_string(max_bytes) +
                                                     " allowed: ask for a range");
  }
  // want <= max_bytes: the allocation is bounded by the caller's cap, not by
  // what the file claims. A file that shrinks meanwhile gives what it has.
  std::string out(static_cast<size_t>(want), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(f.fd.get(), out.data() + got, out.size() - got, offset + static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return PathError("read", path, errno);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

SandboxFileWriter::~SandboxFileWriter() { Abort(); }

void SandboxFileWriter::Abort() {
  if (!parent_ || committed_) return;
  fd_.reset();
  AsSandboxUser as_user(uid_, gid_);
  ::unlinkat(parent_.get(), tmp_.c_str(), 0);
  parent_.reset();
}

StatusOr<std::unique_ptr<SandboxFileWriter>> SandboxFileWriter::Open(int root, std::string_view path,
                                                                    bool make_parents) {
  RETURN_IF_ERROR(CheckSandboxPath(path));
  struct stat rst;
  if (::fstat(root, &rst) != 0) return ErrnoError("write " + Shown(path) + ": fstat of the sandbox root");
  AsSandboxUser as_user(rst.st_uid, rst.st_gid);
  ASSIGN_OR_RETURN(UniqueFd parent, OpenParent(root, path, make_parents, rst.st_uid, rst.st_gid));
  std::string leaf = SplitParent(path).second;
  // What is there now: only a regular file may be replaced. (The sandbox may
  // swap it after this check; the rename of Commit() replaces the entry itself
  // whatever it has become, never writing through it, so the race is harmless.)
  {
    auto existing = OpenBeneath(parent.get(), leaf, O_PATH | O_NOFOLLOW, path);
    if (existing.ok()) {
      struct stat st;
      RETURN_IF_ERROR(Fstat(existing->get(), path, &st));
      if (!S_ISREG(st.st_mode)) return WrongKind(path, st.st_mode, "a regular file");
    } else if (existing.status().code() != ErrorCode::kNotFound) {
      return existing.status();
    }
  }
  // Why a temporary file and a rename rather than O_TRUNC on the existing
  // file: the existing inode may be shared (a hard link the sandbox made), and
  // truncating it would write through to the other name; a reader would also
  // see a half-written file. O_CREAT | O_EXCL on a fresh random name in the
  // same directory never follows anything and never opens what exists.
  std::unique_ptr<SandboxFileWriter> w(new SandboxFileWriter());
  w->path_ = std::string(path);
  w->leaf_ = leaf;
  w->uid_ = rst.st_uid;
  w->gid_ = rst.st_gid;
  for (int i = 0; i < 8 && !w->fd_; ++i) {
    w->tmp_ = TempName();
    w->fd_.reset(::openat(parent.get(), w->tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!w->fd_ && errno != EEXIST) return PathError("create", path, errno);
  }
  if (!w->fd_) return Status(ErrorCode::kInternal, "write " + Shown(path) + ": no free temporary name");
  w->parent_ = std::move(parent);  // from here on, the destructor removes the temporary file
  if (::fchown(w->fd_.get(), rst.st_uid, rst.st_gid) != 0) return PathError("fchown", path, errno);
  if (::fchmod(w->fd_.get(), 0644) != 0) return PathError("fchmod", path, errno);
  return w;
}

Status SandboxFileWriter::Write(std::string_view data) {
  if (!fd_) return Status(ErrorCode::kFailedPrecondition, "write " + Shown(path_) + ": the file is closed");
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd_.get(), data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return PathError("write", path_, errno);
    }
    done += static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(data.size());
  return Status::Ok();
}

Status SandboxFileWriter::Commit(int64_t* modified_ms) {
  if (!fd_ || !parent_) return Status(ErrorCode::kFailedPrecondition, "write " + Shown(path_) + ": not open");
  AsSandboxUser as_user(uid_, gid_);
  if (modified_ms != nullptr) {
    struct stat st;
    if (::fstat(fd_.get(), &st) != 0) return PathError("fstat", path_, errno);
    *modified_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
  }
  if (Status st = WriteSandboxMetadata(fd_.get(), metadata_); !st.ok()) {
    return Status(st.code(), "write " + Shown(path_) + ": " + st.message(), st.sys_errno());
  }
  if (::close(fd_.release()) != 0 && errno != EINTR) return PathError("close", path_, errno);
  if (::renameat(parent_.get(), tmp_.c_str(), parent_.get(), leaf_.c_str()) != 0) {
    return PathError("rename", path_, errno);
  }
  committed_ = true;
  parent_.reset();
  return Status::Ok();
}

Status WriteSandboxFile(int root, std::string_view path, std::string_view data, bool make_parents,
                        int64_t* modified_ms, const SandboxMetadata& metadata) {
  ASSIGN_OR_RETURN(std::unique_ptr<SandboxFileWriter> w, SandboxFileWriter::Open(root, path, make_parents));
  RETURN_IF_ERROR(w->Write(data));
  w->SetMetadata(metadata);
  return w->Commit(modified_ms);
}

Status RemoveSandboxPath(int root, std::string_view path) {
  RETURN_IF_ERROR(CheckSandboxPath(path));
  auto [parent_path, leaf] = SplitParent(path);
  ASSIGN_OR_RETURN(UniqueFd parent,
                   parent_path.empty() ? OpenBeneath(root, ".", O_PATH | O_DIRECTORY, ".")
                                       : OpenBeneath(root, parent_path, O_PATH | O_DIRECTORY, parent_path));
  // The leaf is one name in a directory we hold: unlinkat never follows it.
  struct stat st;
  if (::fstatat(parent.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return PathError("stat", path, errno);
  if (S_ISDIR(st.st_mode)) {
    struct stat pst;
    if (::fstat(parent.get(), &pst) != 0) return PathError("stat", path, errno);
    if (pst.st_dev != st.st_dev) return PathError("rmdir", path, EBUSY);  // a mount point
    if (::unlinkat(parent.get(), leaf.c_str(), AT_REMOVEDIR) != 0) return PathError("rmdir", path, errno);
  } else {
    if (::unlinkat(parent.get(), leaf.c_str(), 0) != 0) return PathError("unlink", path, errno);
  }
  return Status::Ok();
}

namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

struct ListWalk {
  size_t max_entries;
  int max_depth;
  size_t max_scanned;
  dev_t dev;
  size_t scanned = 0;
  bool truncated = false;
  std::vector<SandboxFileInfo> out;

  // Lists the directory open as `fd` (consumed), named `prefix` ("" = root).
  void Walk(UniqueFd fd, const std::string& prefix, int depth) {
    std::unique_ptr<DIR, DirCloser> d(::fdopendir(fd.get()));
    if (!d) return;
    fd.release();
    int dfd = ::dirfd(d.get());
    while (!truncated) {
      errno = 0;
      struct dirent* e = ::readdir(d.get());
      if (e == nullptr) break;
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      if (++scanned > max_scanned) {
        truncated = true;
        break;
      }
      struct statx st;
      if (::statx(dfd, e->d_name, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_SIZE | STATX_MTIME, &st) != 0) continue;
      bool is_dir = S_ISDIR(st.stx_mode);
      if (!S_ISREG(st.stx_mode) && !is_dir) continue;  // symlinks, FIFOs, sockets, devices
      // Another mount (a bind of the same file system too: Linux 5.8+ says so).
      if (is_dir && ((st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0
                         ? (st.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0
                         : ::makedev(st.stx_dev_major, st.stx_dev_minor) != dev)) {
        continue;
      }
      if (out.size() >= max_entries) {
        truncated = true;
        break;
      }
      std::string rel = prefix.empty() ? std::string(e->d_name) : prefix + "/" + e->d_name;
      out.push_back({rel, is_dir ? 0 : static_cast<int64_t>(st.stx_size),
                     static_cast<int64_t>(st.stx_mtime.tv_sec) * 1000 + st.stx_mtime.tv_nsec / 1000000,
                     is_dir ? "directory" : "file"});
      if (is_dir && depth < max_depth) {
        auto sub = OpenBeneath(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_NOFOLLOW, rel);
        if (sub.ok()) Walk(std::move(sub).value(), rel, depth + 1);
      }
    }
  }
};

}  // namespace

StatusOr<std::vector<SandboxFileInfo>> ListSandboxDir(int root, std::string_view dir, size_t max_entries,
                                                      int max_depth, bool* truncated) {
  if (truncated != nullptr) *truncated = false;
  std::string d(dir);
  if (d.empty()) {
    d = ".";
  } else {
    RETURN_IF_ERROR(CheckSandboxPath(dir));
  }
  ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(root, d, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_NOFOLLOW,
                                            dir.empty() ? std::string_view(".") : dir));
  struct stat st;
  RETURN_IF_ERROR(Fstat(fd.get(), dir, &st));
  // Bounds: the depth (each level holds one open directory), and the entries
  // looked at, so a directory of a million skipped symlinks ends the walk too.
  constexpr int kDepthCeiling = 64;
  ListWalk w{max_entries, std::clamp(max_depth, 0, kDepthCeiling), max_entries * 4 + 1024, st.st_dev};
  w.Walk(std::move(fd), dir.empty() ? "" : std::string(dir), 0);
  std::sort(w.out.begin(), w.out.end(),
            [](const SandboxFileInfo& a, const SandboxFileInfo& b) { return a.path < b.path; });
  if (truncated != nullptr) *truncated = w.truncated;
  return std::move(w.out);
}

}  // namespace airlock::isolation
