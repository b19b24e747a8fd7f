// envd's directory watches (filesystem.Filesystem WatchDir, and the polling
// CreateWatcher / GetWatcherEvents / RemoveWatcher), driven from the event
// loop: an isolation::DirWatch's inotify fd waited on with an asio
// descriptor, read when readable (no thread is held), its events turned into
// envd's FilesystemEvent.
//
//   auto pump = WatchPump::Start(s, std::move(opened), [](std::vector<model::EnvdFsEvent> ev, bool ended) {...});
//   pump->Stop();                       // the client left, or the watcher was removed
//
// Everything is bounded: the watch's directories (isolation/sandbox_watch.h),
// a polling watcher's queue (kMaxQueuedEvents: the oldest are dropped and
// counted), the watches of one caller (kMaxWatchersPerOwner) and of the server
// (kMaxWatches: each is an inotify instance, of which a host user has 128). A watch ends
// with its sandbox: each pump looks every kLivenessSeconds whether the
// session still lives, and stops when it does not.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/net.h"
#include "base/unique_fd.h"
#include "isolation/sandbox_fs.h"
#include "isolation/sandbox_watch.h"
#include "model/envd_fs.h"

namespace airlock::api {

class ServerState;

inline constexpr size_t kMaxWatchDirs = 256;  // directories in one recursive watch
inline constexpr size_t kMaxQueuedEvents = 4096;
inline constexpr size_t kMaxWatchersPerOwner = 16;  // streams and watchers together
inline constexpr size_t kMaxWatches = 64;           // on the server
inline constexpr double kLivenessSeconds = 2;
inline constexpr size_t kMaxEntriesPerRead = 256;   // includeEntry's stats per wake-up

// A watch opened on a worker: what a pump needs.
struct OpenedWatch {
  std::unique_ptr<isolation::DirWatch> watch;
  UniqueFd root;            // the sandbox's /home/user or /tmp (for include_entry's stat)
  std::string base;         // its name in the sandbox: "/home/user" or "/tmp"
  std::string dir;          // the watched directory, relative to root ("" = root)
  bool include_entry = false;
  std::string session, owner;  // whose sandbox: its end ends the watch
  std::shared_ptr<void> slot;  // the caller's slot (EnvdWatchers::TakeSlot), freed when the watch stops
};

class WatchPump : public std::enable_shared_from_this<WatchPump> {
 public:
  // `on_events(events, ended)`: called on the loop with what arrived; ended:
  // the directory went away or the sandbox ended (no call follows).
  using OnEvents = std::function<void(std::vector<model::EnvdFsEvent>, bool ended, std::string why)>;
  static std::shared_ptr<WatchPump> Start(ServerState& s, OpenedWatch opened, OnEvents on_events);
  ~WatchPump();
  void Stop();
  // Events the kernel dropped (its queue overflowed) and directories left unwatched.
  bool lost() const { return lost_; }

 private:
  WatchPump(ServerState& s, OpenedWatch opened, OnEvents on_events);
  void Arm();
  void Tick();
  void OnReadable();
  void Finish(std::string why);

  ServerState& s_;
  OpenedWatch w_;
  OnEvents on_events_;
  net::posix::stream_descriptor desc_;
  net::steady_timer timer_;
  bool stopped_ = false;
  bool lost_ = false;
};

// The polling watchers of every caller, by id.
class EnvdWatchers : public std::enable_shared_from_this<EnvdWatchers> {
 public:
  struct Watcher {
    std::string owner;
    std::shared_ptr<WatchPump> pump;
    std::deque<model::EnvdFsEvent> queue;
    size_t dropped = 0;
    std::string ended;  // why the watch ended ("" while it runs)
    // The caller's slot, held while the watcher is listed (ended or not): an
    // ended watcher nobody reads still counts, so a client cannot pile them up.
    std::shared_ptr<void> slot;
  };
  // One of the caller's watches (a WatchDir stream or a watcher): nullptr
  // with *error (resource_exhausted) past kMaxWatchersPerOwner, or
  // kMaxWatches on the server (each is an inotify instance, a host-wide
  // resource); freed when the last copy goes.
  std::shared_ptr<void> TakeSlot(const std::string& owner, model::ApiError* error);
  // A new watcher of `opened` (its slot taken): its id.
  std::string Add(ServerState& s, OpenedWatch opened);
  // The caller's watcher, or nullptr (another caller's is not found either).
  Watcher* Find(const std::string& id, const std::string& owner);
  void Remove(const std::string& id);
  ~EnvdWatchers();

 private:
  std::map<std::string, Watcher> watchers_;
  std::map<std::string, size_t> slots_;  // watches per owner
  size_t total_ = 0;
};

// An entry beneath `base` ("/home/user" or "/tmp") as envd describes it (its
// absolute path, a symlink's target made absolute by name, as envd reports it).
model::EnvdEntry EnvdEntryOf(const isolation::FsEntry& e, const std::string& base);

// The event of the sandbox's `dir`/`name` as envd sends it (with the entry
// stat'ed beneath `root`, named `base`, when asked and still there).
model::EnvdFsEvent ToEnvdEvent(int root, const std::string& base, const std::string& dir, const isolation::WatchEvent& e,
                               bool include_entry);

}  // namespace airlock::api
