#include "isolation/sandbox_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "base/sandbox_path.h"
#include "isolation/beneath.h"
#include "isolation/sandbox_xattrs.h"

namespace airlock::isolation {
namespace {

using beneath::AsSandboxUser;
using beneath::OpenBeneath;
using beneath::PathError;
using beneath::Shown;
using beneath::SplitParent;

constexpr int kMaxRemoveDepth = 64;

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// The root's owner: the sandbox's one user.
struct Owners {
  uid_t uid = 0;
  gid_t gid = 0;
};

StatusOr<Owners> RootOwners(int root) {
  struct stat st;
  if (::fstat(root, &st) != 0) return PathError("fstat", ".", errno);
  return Owners{st.st_uid, st.st_gid};
}

std::string NameOf(unsigned id, unsigned user) {
  if (id == user) return "user";
  if (id == 0) return "root";
  return std::to_string(id);
}

// The user.e2b.* attributes of the entry (isolation/sandbox_xattrs.h: bounded,
// what is over the bounds left out).
std::vector<std::pair<std::string, std::string>> ReadMetadata(int fd) {
  bool truncated = false;
  auto m = ReadSandboxMetadata(fd, &truncated);
  if (!m.ok()) return {};
  return {m->begin(), m->end()};
}

// The entry `leaf` of directory `dir` (lstat), named `path`. NotFound when it
// vanished; FailedPrecondition for a FIFO, socket or device.
StatusOr<FsEntry> EntryAt(int dir, const std::string& leaf, const std::string& path, const Owners& owners) {
  struct stat st;
  if (::fstatat(dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return PathError("stat", path, errno);
  FsEntry e;
  e.path = path;
  e.name = leaf == "." ? "" : leaf;
  if (S_ISREG(st.st_mode)) {
    e.type = FsType::kFile;
  } else if (S_ISDIR(st.st_mode)) {
    e.type = FsType::kDirectory;
  } else if (S_ISLNK(st.st_mode)) {
    e.type = FsType::kSymlink;
  } else {
    return Status(ErrorCode::kFailedPrecondition,
                  Shown(path) + " is not a regular file, directory or symlink (a FIFO, socket or device)");
  }
  e.size = st.st_size;
  e.st_mode = st.st_mode;
  e.owner = NameOf(st.st_uid, owners.uid);
  e.group = NameOf(st.st_gid, owners.gid);
  e.mtime_s = st.st_mtim.tv_sec;
  e.mtime_ns = static_cast<int32_t>(st.st_mtim.tv_nsec);
  if (e.type == FsType::kSymlink) {
    char target[4096];
    ssize_t n = ::readlinkat(dir, leaf.c_str(), target, sizeof target);
    if (n >= 0) e.symlink_target = std::string(target, static_cast<size_t>(n));
    return e;  // user.* attributes cannot be set on a symlink
  }
  auto fd = OpenBeneath(dir, leaf, O_PATH | O_NOFOLLOW, path);
  if (fd.ok()) e.metadata = ReadMetadata(fd->get());
  return e;
}

// `path` split into an O_PATH fd of its parent and its leaf ("" = the root:
// the root itself and ".").
struct Located {
  UniqueFd parent;
  std::string leaf;
};

StatusOr<Located> Locate(int root, std::string_view path) {
  Located l;
  if (path.empty()) {
    ASSIGN_OR_RETURN(l.parent, OpenBeneath(root, ".", O_PATH | O_DIRECTORY, "."));
    l.leaf = ".";
    return l;
  }
  RETURN_IF_ERROR(CheckSandboxPath(path));
  auto [parent, leaf] = SplitParent(path);
  ASSIGN_OR_RETURN(l.parent, OpenBeneath(root, parent.empty() ? "." : parent, O_PATH | O_DIRECTORY,
                                         parent.empty() ? std::string_view(".") : std::string_view(parent)));
  l.leaf = std::move(leaf);
  return l;
}

// The names in directory fd `fd` (consumed), at most `budget` (ResourceExhausted beyond).
StatusOr<std::vector<std::string>> Names(UniqueFd fd, std::string_view shown, size_t budget) {
  std::unique_ptr<DIR, DirCloser> d(::fdopendir(fd.get()));
  if (!d) return PathError("opendir", shown, errno);
  fd.release();
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d.get())) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (names.size() >= budget) {
      return Status(ErrorCode::kResourceExhausted,
                    Shown(shown) + " holds more entries than one call handles; work on a subdirectory");
    }
    names.emplace_back(e->d_name);
  }
  return names;
}

struct Lister {
  int max_depth;
  size_t max_entries;
  dev_t dev;
  Owners owners;
  std::vector<FsEntry> out;

  Status Walk(int dfd, const std::string& prefix, int depth) {
    ASSIGN_OR_RETURN(UniqueFd copy, OpenBeneath(dfd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK, prefix));
    ASSIGN_OR_RETURN(std::vector<std::string> names, Names(std::move(copy), prefix, max_entries + 1));
    for (const std::string& name : names) {
      const std::string rel = prefix.empty() ? name : prefix + "/" + name;
      auto e = EntryAt(dfd, name, rel, owners);
      if (!e.ok()) continue;  // a FIFO or device, or gone meanwhile
      if (out.size() >= max_entries) {
        return Status(ErrorCode::kResourceExhausted,
                      "the listing has more than " + std::to_string(max_entries) +
                          " entries; list a subdirectory or ask for a smaller depth");
      }
      const bool dir = e->type == FsType::kDirectory;
      out.push_back(std::move(*e));
      if (!dir || depth + 1 >= max_depth) continue;
      // NO_XDEV: a mount inside is listed, not entered.
      auto sub = OpenBeneath(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, rel);
      if (sub.ok()) RETURN_IF_ERROR(Walk(sub->get(), rel, depth + 1));
    }
    return Status::Ok();
  }
};

Status RemoveAt(int parent, const std::string& leaf, const std::string& path, dev_t dev, int depth,
                size_t* budget) {
  struct stat st;
  if (::fstatat(parent, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return PathError("stat", path, errno);
  if (*budget == 0) {
    return Status(ErrorCode::kResourceExhausted,
                  "more entries than one remove handles; " + Shown(path) + " and what follows are still there");
  }
  --*budget;
  if (!S_ISDIR(st.st_mode)) {
    // The entry itself (a symlink is unlinked, never followed).
    if (::unlinkat(parent, leaf.c_str(), 0) != 0) return PathError("unlink", path, errno);
    return Status::Ok();
  }
  if (st.st_dev != dev) return PathError("rmdir", path, EBUSY);  // a mount point
  if (depth >= kMaxRemoveDepth) {
    return Status(ErrorCode::kResourceExhausted, Shown(path) + " is nested more than " +
                                                     std::to_string(kMaxRemoveDepth) + " levels deep; remove it in parts");
  }
  ASSIGN_OR_RETURN(UniqueFd dir, OpenBeneath(parent, leaf, O_PATH | O_DIRECTORY | O_NOFOLLOW, path));
  ASSIGN_OR_RETURN(UniqueFd listing, OpenBeneath(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK, path));
  ASSIGN_OR_RETURN(std::vector<std::string> names, Names(std::move(listing), path, *budget));
  for (const std::string& name : names) {
    RETURN_IF_ERROR(RemoveAt(dir.get(), name, path + "/" + name, dev, depth + 1, budget));
  }
  if (::unlinkat(parent, leaf.c_str(), AT_REMOVEDIR) != 0) return PathError("rmdir", path, errno);
  return Status::Ok();
}

}  // namespace

std::string PermissionString(uint32_t m) {
  std::string s;
  if (S_ISDIR(m)) s += 'd';
  if (S_ISLNK(m)) s += 'L';
  if (S_ISFIFO(m)) s += 'p';
  if (S_ISSOCK(m)) s += 'S';
  if (S_ISCHR(m)) s += "Dc";
  if (S_ISBLK(m)) s += 'D';
  if (m & S_ISUID) s += 'u';
  if (m & S_ISGID) s += 'g';
  if (m & S_ISVTX) s += 't';
  if (s.empty()) s = "-";
  static constexpr char kRwx[] = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (m & (1u << (8 - i))) ? kRwx[i] : '-';
  return s;
}

StatusOr<FsEntry> StatSandboxEntry(int root, std::string_view path) {
  ASSIGN_OR_RETURN(Owners owners, RootOwners(root));
  ASSIGN_OR_RETURN(Located l, Locate(root, path));
  return EntryAt(l.parent.get(), l.leaf, std::string(path), owners);
}

Status MakeSandboxDir(int root, std::string_view path, bool* created) {
  *created = false;
  RETURN_IF_ERROR(CheckSandboxPath(path));
  ASSIGN_OR_RETURN(Owners owners, RootOwners(root));
  // As the sandbox's user: its permissions, and an owner its namespace maps.
  AsSandboxUser as_user(owners.uid, owners.gid);
  ASSIGN_OR_RETURN(UniqueFd parent, beneath::OpenParent(root, path, /*make_parents=*/true, owners.uid, owners.gid));
  const std::string leaf = SplitParent(path).second;
  if (::mkdirat(parent.get(), leaf.c_str(), 0755) != 0) {
    if (errno != EEXIST) return PathError("mkdir", path, errno);
    struct stat st;
    if (::fstatat(parent.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
      return Status::Ok();
    }
    return Status(ErrorCode::kFailedPrecondition, Shown(path) + " exists and is not a directory");
  }
  *created = true;
  // The sandbox's own, as if it had made it (mkdirat's mode is cut by our umask).
  ASSIGN_OR_RETURN(UniqueFd made, OpenBeneath(parent.get(), leaf, O_PATH | O_DIRECTORY | O_NOFOLLOW, path));
  if (::fchownat(made.get(), "", owners.uid, owners.gid, AT_EMPTY_PATH) != 0) return PathError("chown", path, errno);
  // Through the fd's own /proc link: the name could be a symlink planted meanwhile.
  if (::chmod(("/proc/self/fd/" + std::to_string(made.get())).c_str(), 0755) != 0) {
    return PathError("chmod", path, errno);
  }
  return Status::Ok();
}

StatusOr<FsEntry> MoveSandboxEntry(int root, std::string_view from, std::string_view to) {
  RETURN_IF_ERROR(CheckSandboxPath(from));
  RETURN_IF_ERROR(CheckSandboxPath(to));
  ASSIGN_OR_RETURN(Owners owners, RootOwners(root));
  AsSandboxUser as_user(owners.uid, owners.gid);
  ASSIGN_OR_RETURN(Located src, Locate(root, from));
  struct stat st;
  if (::fstatat(src.parent.get(), src.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return PathError("stat", from, errno);
  }
  ASSIGN_OR_RETURN(UniqueFd dst, beneath::OpenParent(root, to, /*make_parents=*/true, owners.uid, owners.gid));
  const std::string leaf = SplitParent(to).second;
  // Both names are single components in directories we hold: rename(2)
  // follows neither; EXDEV refuses another mount.
  if (::renameat(src.parent.get(), src.leaf.c_str(), dst.get(), leaf.c_str()) != 0) {
    if (errno == EINVAL) {
      return InvalidArgument(Shown(from) + " cannot be moved into itself (" + Shown(to) + ")");
    }
    return PathError("rename", std::string(from) + " -> " + std::string(to), errno);
  }
  return EntryAt(dst.get(), leaf, std::string(to), owners);
}

Status RemoveSandboxTree(int root, std::string_view path, size_t max_entries) {
  if (path.empty()) return InvalidArgument("the sandbox's working directory itself cannot be removed");
  ASSIGN_OR_RETURN(Located l, Locate(root, path));
  struct stat rst;
  if (::fstat(root, &rst) != 0) return PathError("fstat", ".", errno);
  AsSandboxUser as_user(rst.st_uid, rst.st_gid);
  size_t budget = max_entries;
  return RemoveAt(l.parent.get(), l.leaf, std::string(path), rst.st_dev, 0, &budget);
}

StatusOr<std::vector<FsEntry>> ListSandboxEntries(int root, std::string_view dir, int depth, size_t max_entries) {
  if (depth < 1 || depth > kMaxListDepth) {
    return InvalidArgument("depth " + std::to_string(depth) + " is not between 1 (the directory's own entries) and " +
                           std::to_string(kMaxListDepth));
  }
  ASSIGN_OR_RETURN(Owners owners, RootOwners(root));
  ASSIGN_OR_RETURN(UniqueFd fd, OpenSandboxDir(root, dir));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return PathError("fstat", dir, errno);
  Lister w{depth, max_entries, st.st_dev, owners, {}};
  RETURN_IF_ERROR(w.Walk(fd.get(), std::string(dir), 0));
  std::sort(w.out.begin(), w.out.end(), [](const FsEntry& a, const FsEntry& b) { return a.path < b.path; });
  return std::move(w.out);
}

StatusOr<UniqueFd> OpenSandboxDir(int root, std::string_view dir) {
  if (!dir.empty()) RETURN_IF_ERROR(CheckSandboxPath(dir));
  const std::string d = dir.empty() ? "." : std::string(dir);
  auto fd = OpenBeneath(root, d, O_PATH | O_DIRECTORY | O_NOFOLLOW, d);
  if (fd.ok() || fd.status().sys_errno() != ENOTDIR) return fd;
  // O_NOFOLLOW | O_DIRECTORY on a symlink says ENOTDIR: say what is there.
  auto e = StatSandboxEntry(root, dir);
  if (e.ok() && e->type == FsType::kSymlink) {
    return Status(ErrorCode::kFailedPrecondition, Shown(dir) + " is a symbolic link, which is never followed");
  }
  if (e.ok()) return Status(ErrorCode::kFailedPrecondition, Shown(dir) + " is a file, not a directory");
  return fd;
}

std::string JoinSymlinkTarget(std::string_view link_dir, std::string_view target) {
  std::vector<std::string_view> parts;
  auto add = [&parts](std::string_view p) {
    while (!p.empty()) {
      size_t slash = p.find('/');
      std::string_view c = p.substr(0, slash);
      p = slash == std::string_view::npos ? std::string_view() : p.substr(slash + 1);
      if (c.empty() || c == ".") continue;
      if (c == "..") {
        if (!parts.empty()) parts.pop_back();
        continue;
      }
      parts.push_back(c);
    }
  };
  if (target.empty() || target.front() != '/') add(link_dir);
  add(target);
  std::string out;
  for (std::string_view c : parts) {
    out += '/';
    out += c;
  }
  return out.empty() ? "/" : out;
}

}  // namespace airlock::isolation
