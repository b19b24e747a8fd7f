// A watch on a directory beneath a sandbox's root (envd's WatchDir and its
// polling watchers): inotify, with the directory (and, when recursive, each
// subdirectory) opened beneath the root with the rules of
// isolation/beneath.h and watched through its /proc/self/fd link, so that
// nothing the sandbox renames or plants redirects a watch outside. Reading is
// the caller's: fd() is non-blocking, to be waited on by an event loop (no
// thread is held), then Read() takes what is there.
//
//   ASSIGN_OR_RETURN(auto w, DirWatch::Open(root.get(), "data", /*recursive=*/true, 256));
//   // fd() readable:
//   bool lost = false;
//   for (const auto& e : w->Read(&lost)) Send(e.name, e.type);
//
// A directory made inside a recursive watch is watched from when its CREATE
// is read; what was made in it before then is reported as CREATE events
// (inotify cannot say more: a write before the watch is not seen).
//
// Bounded: at most max_watches directories are watched (Open fails past it;
// later ones are left unwatched and counted in unwatched()); the kernel's
// queue is bounded by fs.inotify.max_queued_events, its overflow reported by
// Read's *lost; one Read takes at most 64 KiB of events.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace airlock::isolation {

enum class WatchEventType { kCreate, kWrite, kRemove, kRename, kChmod };

struct WatchEvent {
  std::string name;  // relative to the watched directory ("sub/file.txt")
  WatchEventType type = WatchEventType::kCreate;
  bool is_dir = false;
};

class DirWatch {
 public:
  // NotFound when `dir` does not exist, FailedPrecondition when it is not a
  // directory or is (or passes through) a symlink, ResourceExhausted when a
  // recursive watch would need more than max_watches directories.
  static StatusOr<std::unique_ptr<DirWatch>> Open(int root, std::string_view dir, bool recursive,
                                                  size_t max_watches);
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  int fd() const { return inotify_.get(); }
  // The events waiting (none when nothing is: never blocks). *lost is set
  // when the kernel's queue overflowed (events were dropped there).
  std::vector<WatchEvent> Read(bool* lost);
  // The watched directory itself was removed or moved away: no further event.
  bool ended() const { return ended_; }
  // Subdirectories made after Open that were not watched (past max_watches).
  size_t unwatched() const { return unwatched_; }

 private:
  DirWatch() = default;
  Status Add(const std::string& rel, int depth, std::vector<WatchEvent>* found);

  UniqueFd inotify_, root_;
  std::string dir_;  // the watched directory, relative to root_
  bool recursive_ = false;
  bool ended_ = false;
  size_t max_watches_ = 0;
  size_t unwatched_ = 0;
  // Entries a Read may list in directories that appeared (their CREATEs and
  // subdirectories): the reader is the server's event loop.
  static constexpr size_t kMaxListedPerRead = 4096;
  size_t list_budget_ = kMaxListedPerRead;
  int top_wd_ = -1;
  std::unordered_map<int, std::string> prefix_;  // watch descriptor -> its directory, relative ("" = top)
};

}  // namespace airlock::isolation
