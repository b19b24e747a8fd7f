#include "isolation/sandbox_watch.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/sandbox_path.h"
#include "isolation/beneath.h"
#include "isolation/sandbox_fs.h"

namespace airlock::isolation {
namespace {

constexpr uint32_t kMask = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |
                           IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;
constexpr int kMaxDepth = 64;

}  // namespace

StatusOr<std::unique_ptr<DirWatch>> DirWatch::Open(int root, std::string_view dir, bool recursive,
                                                   size_t max_watches) {
  std::unique_ptr<DirWatch> w(new DirWatch());
  // The root is held, not the watched directory: a reference to its dentry
  // would keep the kernel from reporting its removal (IN_DELETE_SELF).
  ASSIGN_OR_RETURN(w->root_, beneath::OpenBeneath(root, ".", O_PATH | O_DIRECTORY, "."));
  w->dir_ = std::string(dir);
  w->inotify_ = UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!w->inotify_) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
      return Status(ErrorCode::kResourceExhausted, "no inotify instance is left (fs.inotify.max_user_instances)");
    }
    return ErrnoError("inotify_init1");
  }
  w->recursive_ = recursive;
  w->max_watches_ = std::max<size_t>(1, max_watches);
  RETURN_IF_ERROR(w->Add("", 0, nullptr));
  return w;
}

// Watches directory `rel` (relative to the watched one) and, when recursive,
// the directories in it. `found` (a directory that appeared after the
// start) gets a CREATE for each entry already in it: what was made in it
// before its watch was added would otherwise never be reported.
Status DirWatch::Add(const std::string& rel, int depth, std::vector<WatchEvent>* found) {
  if (prefix_.size() >= max_watches_) {
    return Status(ErrorCode::kResourceExhausted, "the watch would need more than " +
                                                     std::to_string(max_watches_) +
                                                     " directories; watch a smaller tree or not recursively");
  }
  const std::string path = dir_.empty() ? rel : rel.empty() ? dir_ : dir_ + "/" + rel;
  ASSIGN_OR_RETURN(UniqueFd own, OpenSandboxDir(root_.get(), path));
  const int fd = own.get();
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  int wd = ::inotify_add_watch(inotify_.get(), proc.c_str(), kMask);
  if (wd < 0) {
    if (errno == ENOSPC) {
      return Status(ErrorCode::kResourceExhausted, "no inotify watch is left (fs.inotify.max_user_watches)");
    }
    return ErrnoError("inotify_add_watch");
  }
  if (rel.empty()) top_wd_ = wd;
  prefix_[wd] = rel;
  if (!recursive_ || depth >= kMaxDepth) return Status::Ok();
  // The subdirectories: ListSandboxEntries' bounds, then each one watched.
  const size_t room = max_watches_ - prefix_.size();
  size_t most = room * 4 + 64;
  if (found != nullptr) {
    // A directory that appeared while watching is listed on the reader's
    // thread (the server's loop): bounded per Read, whatever the sandbox
    // moves in at once; past it, its subdirectories go unwatched (said as lost).
    if (list_budget_ == 0) return Status(ErrorCode::kResourceExhausted, "too many new entries at once");
    most = std::min(most, list_budget_);
  }
  auto entries = ListSandboxEntries(fd, "", 1, most);
  if (found != nullptr && entries.ok()) list_budget_ -= std::min(list_budget_, entries->size());
  if (!entries.ok()) {
    return entries.status().code() == ErrorCode::kResourceExhausted
               ? Status(ErrorCode::kResourceExhausted, "the watched tree is too large to watch recursively")
               : entries.status();
  }
  for (const FsEntry& e : *entries) {
    const std::string name = rel.empty() ? e.path : rel + "/" + e.path;
    if (found != nullptr) found->push_back({name, WatchEventType::kCreate, e.type == FsType::kDirectory});
    if (e.type != FsType::kDirectory) continue;
    Status st = Add(name, depth + 1, found);
    if (st.code() == ErrorCode::kResourceExhausted) return st;  // other failures: gone meanwhile
  }
  return Status::Ok();
}

std::vector<WatchEvent> DirWatch::Read(bool* lost) {
  std::vector<WatchEvent> out;
  list_budget_ = kMaxListedPerRead;
  alignas(struct inotify_event) char buf[64 * 1024];
  ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
  if (n <= 0) return out;
  for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(struct inotify_event)) <= n;) {
    struct inotify_event ev;
    std::memcpy(&ev, buf + off, sizeof ev);
    const char* name = buf + off + sizeof ev;
    off += static_cast<ssize_t>(sizeof ev + ev.len);
    if (ev.mask & IN_Q_OVERFLOW) {
      *lost = true;
      continue;
    }
    auto it = prefix_.find(ev.wd);
    if (it == prefix_.end()) continue;
    if (ev.mask & IN_IGNORED) {
      prefix_.erase(it);
      if (ev.wd == top_wd_) ended_ = true;
      continue;
    }
    if (ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
      if (ev.wd == top_wd_) ended_ = true;
      continue;  // a subdirectory's own removal is reported by its parent
    }
    if (ev.len == 0) continue;
    const std::string leaf(name, ::strnlen(name, ev.len));
    if (leaf.rfind(beneath::kUploadTempPrefix, 0) == 0) continue;  // an upload under way: its rename is reported
    const std::string rel = it->second.empty() ? leaf : it->second + "/" + leaf;
    const bool dir = (ev.mask & IN_ISDIR) != 0;
    auto put = [&](WatchEventType t) { out.push_back({rel, t, dir}); };
    if (ev.mask & IN_CREATE) put(WatchEventType::kCreate);
    if (ev.mask & IN_MODIFY) put(WatchEventType::kWrite);
    if (ev.mask & IN_DELETE) put(WatchEventType::kRemove);
    if (ev.mask & IN_MOVED_FROM) put(WatchEventType::kRename);
    if (ev.mask & IN_ATTRIB) put(WatchEventType::kChmod);
    if (ev.mask & IN_MOVED_TO) {
      put(WatchEventType::kCreate);
      // A file renamed over this name (an upload is written beside and
      // renamed in, so a reader never sees half of it): the name's contents
      // changed, which a client watching for writes must hear.
      if (!dir) put(WatchEventType::kWrite);
    }
    if (dir && recursive_ && (ev.mask & (IN_CREATE | IN_MOVED_TO))) {
      Status st = Add(rel, 1, &out);
      if (st.code() == ErrorCode::kResourceExhausted) ++unwatched_;
    }
  }
  return out;
}

}  // namespace airlock::isolation
