#include "api/envd_watch.h"

#include <sys/random.h>

#include "api/server_state.h"
#include "base/log.h"

namespace airlock::api {
namespace {

std::string Absolute(const std::string& base, const std::string& rel) { return rel.empty() ? base : base + "/" + rel; }

std::string NewWatcherId() {
  unsigned char r[12] = {};
  if (::getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
    static uint64_t n = 0;
    uint64_t v = ++n;
    std::memcpy(r, &v, sizeof v);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "w";
  for (unsigned char c : r) {
    id += kHex[c >> 4];
    id += kHex[c & 15];
  }
  return id;
}

model::EnvdEventType TypeOf(isolation::WatchEventType t) {
  switch (t) {
    case isolation::WatchEventType::kCreate: return model::EnvdEventType::kCreate;
    case isolation::WatchEventType::kWrite: return model::EnvdEventType::kWrite;
    case isolation::WatchEventType::kRemove: return model::EnvdEventType::kRemove;
    case isolation::WatchEventType::kRename: return model::EnvdEventType::kRename;
    case isolation::WatchEventType::kChmod: return model::EnvdEventType::kChmod;
  }
  return model::EnvdEventType::kCreate;
}

}  // namespace

model::EnvdEntry EnvdEntryOf(const isolation::FsEntry& e, const std::string& base) {
  model::EnvdEntry out;
  out.name = e.path.empty() ? base.substr(base.rfind('/') + 1) : e.name;
  out.path = Absolute(base, e.path);
  out.type = e.type == isolation::FsType::kDirectory ? model::EnvdFileType::kDirectory
             : e.type == isolation::FsType::kSymlink ? model::EnvdFileType::kSymlink
                                                     : model::EnvdFileType::kFile;
  out.size = e.size;
  out.mode = e.st_mode & 07777;
  out.permissions = isolation::PermissionString(e.st_mode);
  out.owner = e.owner;
  out.group = e.group;
  out.mtime_s = e.mtime_s;
  out.mtime_ns = e.mtime_ns;
  if (e.symlink_target) {
    const std::string parent =
        Absolute(base, e.path.find('/') == std::string::npos ? "" : e.path.substr(0, e.path.rfind('/')));
    out.symlink_target = isolation::JoinSymlinkTarget(parent, *e.symlink_target);
  }
  out.metadata = e.metadata;
  return out;
}

model::EnvdFsEvent ToEnvdEvent(int root, const std::string& base, const std::string& dir, const isolation::WatchEvent& e,
                               bool include_entry) {
  model::EnvdFsEvent out{e.name, TypeOf(e.type), std::nullopt};
  if (include_entry && e.type != isolation::WatchEventType::kRemove && e.type != isolation::WatchEventType::kRename) {
    auto st = isolation::StatSandboxEntry(root, dir.empty() ? e.name : dir + "/" + e.name);
    if (st.ok()) out.entry = EnvdEntryOf(*st, base);
  }
  return out;
}

// ---------------------------------------------------------------------------

WatchPump::WatchPump(ServerState& s, OpenedWatch opened, OnEvents on_events)
    : s_(s), w_(std::move(opened)), on_events_(std::move(on_events)), desc_(*s.io), timer_(*s.io) {}

WatchPump::~WatchPump() {
  // The descriptor's fd is the DirWatch's: it closes it.
  if (desc_.is_open()) desc_.release();
}

std::shared_ptr<WatchPump> WatchPump::Start(ServerState& s, OpenedWatch opened, OnEvents on_events) {
  std::shared_ptr<WatchPump> p(new WatchPump(s, std::move(opened), std::move(on_events)));
  error_code ec;
  p->desc_.assign(p->w_.watch->fd(), ec);
  if (ec) {
    p->Finish("the watch could not be waited on: " + ec.message());
    return p;
  }
  p->Arm();
  p->Tick();
  return p;
}

void WatchPump::Stop() {
  if (stopped_) return;
  stopped_ = true;
  error_code ignored;
  timer_.cancel();
  if (desc_.is_open()) {
    desc_.cancel(ignored);
    desc_.release();  // the fd is the watch's, closed with it just below
  }
  on_events_ = nullptr;  // what it holds (an exchange) goes now
  // And what it holds in the sandbox (an ended watcher may stay listed until
  // its client asks once more): the inotify fd, the root, the caller's slot.
  w_.watch.reset();
  w_.root.reset();
  w_.slot.reset();
}

void WatchPump::Finish(std::string why) {
  if (stopped_) return;
  OnEvents done = std::move(on_events_);
  Stop();
  if (done) done({}, true, std::move(why));
}

void WatchPump::Arm() {
  desc_.async_wait(net::posix::descriptor_base::wait_read,
                   [weak = std::weak_ptr<WatchPump>(shared_from_this())](const error_code& ec) {
                     auto self = weak.lock();
                     if (!self || ec || self->stopped_) return;
                     self->OnReadable();
                   });
}

void WatchPump::OnReadable() {
  bool lost = false;
  std::vector<isolation::WatchEvent> raw = w_.watch->Read(&lost);
  if (lost && !lost_) log::Warn("a directory watch lost events: the kernel's inotify queue overflowed");
  lost_ = lost_ || lost || w_.watch->unwatched() > 0;
  std::vector<model::EnvdFsEvent> events;
  events.reserve(raw.size());
  // includeEntry stats each entry here on the loop (a few system calls on
  // the sandbox's tmpfs): for the first kMaxEntriesPerRead events of a read
  // only, so that a flood does not hold the loop ("when available", says envd).
  for (size_t i = 0; i < raw.size(); ++i) {
    events.push_back(
        ToEnvdEvent(w_.root.get(), w_.base, w_.dir, raw[i], w_.include_entry && i < kMaxEntriesPerRead));
  }
  if (!events.empty() && on_events_) on_events_(std::move(events), false, "");
  if (stopped_) return;
  if (w_.watch->ended()) return Finish("the watched directory was removed or moved away");
  Arm();
}

// The sandbox's end ends the watch (its tmpfs stays alive while we hold an
// fd in it, so no inotify event would say so).
void WatchPump::Tick() {
  timer_.expires_after(Ms(kLivenessSeconds));
  timer_.async_wait([weak = std::weak_ptr<WatchPump>(shared_from_this())](const error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->stopped_) return;
    // Get, not Live: looking does not count as use, so a forgotten watcher
    // never keeps an idle sandbox from expiring.
    model::ApiError ignored;
    auto view = self->s_.session_mgr ? self->s_.session_mgr->Get(self->w_.session, self->w_.owner, &ignored)
                                     : std::nullopt;
    if (!view || view->state == "dead") return self->Finish("the sandbox ended");
    self->Tick();
  });
}

// ---------------------------------------------------------------------------

std::shared_ptr<void> EnvdWatchers::TakeSlot(const std::string& owner, model::ApiError* error) {
  size_t& mine = slots_[owner];
  if (mine >= kMaxWatchersPerOwner || total_ >= kMaxWatches) {
    *error = {model::ErrorKind::kTooManyRequests,
              mine >= kMaxWatchersPerOwner
                  ? "you have " + std::to_string(mine) +
                        " watches (WatchDir streams and watchers), the most one caller may have; stop or remove one"
                  : "the server has " + std::to_string(total_) + " directory watches, the most it keeps; retry later",
              ""};
    error->code = "resource_exhausted";
    return nullptr;
  }
  ++mine;
  ++total_;
  // Freed by its destructor where the last copy goes: on the loop (a slot
  // is never handed to a worker).
  struct Slot {
    std::weak_ptr<EnvdWatchers> book;
    std::string owner;
    ~Slot() {
      if (auto self = book.lock()) {
        --self->total_;
        if (--self->slots_[owner] == 0) self->slots_.erase(owner);
      }
    }
  };
  auto slot = std::make_shared<Slot>();
  slot->book = weak_from_this();
  slot->owner = owner;
  return slot;
}

std::string EnvdWatchers::Add(ServerState& s, OpenedWatch opened) {
  const std::string owner = opened.owner;
  std::string id = NewWatcherId();
  Watcher& w = watchers_[id];
  w.owner = owner;
  w.slot = opened.slot;  // a second copy: freed when the entry goes, not when the watch stops
  w.pump = WatchPump::Start(s, std::move(opened), [this, id](std::vector<model::EnvdFsEvent> events, bool ended,
                                                           std::string why) {
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return;
    Watcher& me = it->second;
    for (auto& e : events) {
      if (me.queue.size() >= kMaxQueuedEvents) {
        me.queue.pop_front();  // the oldest go: a reader most wants what is current
        ++me.dropped;
      }
      me.queue.push_back(std::move(e));
    }
    if (ended) me.ended = why;
  });
  return id;
}

EnvdWatchers::Watcher* EnvdWatchers::Find(const std::string& id, const std::string& owner) {
  auto it = watchers_.find(id);
  if (it == watchers_.end() || it->second.owner != owner) return nullptr;
  return &it->second;
}

void EnvdWatchers::Remove(const std::string& id) {
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  if (it->second.pump) it->second.pump->Stop();
  watchers_.erase(it);
}

EnvdWatchers::~EnvdWatchers() {
  for (auto& [id, w] : watchers_) {
    if (w.pump) w.pump->Stop();
  }
}

}  // namespace airlock::api
