#include "api/envd_filesystem_routes.h"

#include <functional>

#include "api/e2b_routes.h"
#include "api/envd_watch.h"
#include "api/exchange.h"
#include "api/server_state.h"
#include "base/sandbox_path.h"
#include "isolation/sandbox_files.h"
#include "isolation/sandbox_fs.h"
#include "isolation/sandbox_watch.h"
#include "model/connect.h"
#include "model/e2b.h"
#include "model/envd_fs.h"
#include "session/live_session.h"
#include "session/session_files.h"

namespace airlock::api {
namespace {

// A request's body (SmallJson), and a WatchDir envelope's message.
constexpr size_t kMaxBody = 16 * 1024;
// The most entries a listing returns, or a removal removes, in one call.
constexpr size_t kMaxListEntries = 10000;
constexpr size_t kMaxRemoveEntries = 100000;

model::ApiError Connect(model::ErrorKind kind, std::string message, const char* code) {
  model::ApiError e{kind, std::move(message), ""};
  e.code = code;
  return e;
}

// A file system failure (isolation's status codes) as Connect's error.
model::ApiError FsError(const Status& st) {
  model::ApiError e = session::SessionFileError(st);
  switch (st.code()) {
    case ErrorCode::kNotFound: e.code = "not_found"; break;
    case ErrorCode::kInvalidArgument: e.code = "invalid_argument"; break;
    case ErrorCode::kFailedPrecondition: e.code = "failed_precondition"; break;
    case ErrorCode::kResourceExhausted: e.code = "resource_exhausted"; break;
    case ErrorCode::kUnavailable: e.code = "unavailable"; break;
    default: e.code = "internal"; break;
  }
  return e;
}

constexpr const char* kHome = "/home/user";
constexpr const char* kTmp = "/tmp";

// Where an envd path is: beneath the sandbox's /home/user or its /tmp (two
// binds of its one workspace tmpfs), and the path relative to that.
struct Place {
  std::string base = kHome;
  std::string rel;  // "" = the base itself
};

// An envd path: absolute under /home/user or /tmp, or relative to /home/user.
std::optional<model::ApiError> Resolve(const std::string& path, const char* field, Place* place) {
  if (path.empty()) return Connect(model::ErrorKind::kBadRequest, std::string(field) + " is empty", "invalid_argument");
  *place = Place();
  for (const char* base : {kHome, kTmp}) {
    const std::string b = base;
    if (path == b || path == b + "/") {
      place->base = b;
      return std::nullopt;
    }
  }
  if (path.rfind(std::string(kTmp) + "/", 0) == 0) {
    place->base = kTmp;
    place->rel = path.substr(std::string(kTmp).size() + 1);
    if (Status st = CheckSandboxPath(place->rel); !st.ok()) {
      return Connect(model::ErrorKind::kBadRequest, std::string(field) + ": " + st.message(), "invalid_argument");
    }
    return std::nullopt;
  }
  std::string why;
  if (!model::E2bPathToSandbox(path, &place->rel, &why)) {
    return Connect(model::ErrorKind::kBadRequest,
                   std::string(field) + ": " + why + " (or /tmp, the sandbox's other writable directory)",
                   "invalid_argument");
  }
  return std::nullopt;
}

// The sandbox's directory `base`, opened through its init as the session
// file routes open it (session::OpenSessionRoot, isolation::OpenRunDir).
std::optional<UniqueFd> OpenBase(ServerState& s, const std::string& id, const std::string& owner,
                                 const std::string& base, model::ApiError* error) {
  return session::OpenSessionDir(*s.session_mgr, id, owner, base, error);
}

// The work of one call on a worker, given the sandbox's `base` directory.
using Work = std::function<Reply(int root, const Request& rq)>;

// The caller's default sandbox (made on first use, as /files), then `work`
// on a worker with its `base` open.
void OnSandbox(const std::shared_ptr<Exchange>& ex, const std::string& base, Work work) {
  ex->s.e2b->Default(ex->rq.caller.name, [ex, base, work = std::move(work)](std::optional<std::string> id,
                                                                             model::ApiError error) {
    if (!id) return ex->Refuse(error);
    ex->OnWorker(
        [&s = ex->s, id = *id, rq = ex->rq, base, work] {
          model::ApiError e;
          std::optional<UniqueFd> root = OpenBase(s, id, rq.caller.name, base, &e);
          if (!root) return RefusalFor(rq, e);
          return work(root->get(), rq);
        },
        [ex](Reply r) { ex->Respond(std::move(r)); });
  });
}

bool Parse(const std::shared_ptr<Exchange>& ex, std::string_view body, model::EnvdFsRequest* req) {
  model::ApiError error;
  if (model::ParseEnvdFsRequest(body, Caps(ex->s), req, &error)) return true;
  ex->Refuse(error);
  return false;
}

// A unary call on one path: parsed, resolved, then `op(root, place)` on a worker.
void OnePath(const std::shared_ptr<Exchange>& ex, std::function<Reply(int, const Place&, const Request&)> op) {
  model::EnvdFsRequest req;
  if (!Parse(ex, ex->rq.body, &req)) return;
  Place place;
  if (auto bad = Resolve(req.path, "path", &place)) return ex->Refuse(*bad);
  OnSandbox(ex, place.base, [place, op = std::move(op)](int root, const Request& rq) { return op(root, place, rq); });
}

Reply EntryReply(const Request& rq, const StatusOr<isolation::FsEntry>& e, const std::string& base) {
  if (!e.ok()) return RefusalFor(rq, FsError(e.status()));
  return JsonReply(200, model::EnvdEntryResponse(EnvdEntryOf(*e, base)));
}

void Stat(const std::shared_ptr<Exchange>& ex) {
  OnePath(ex, [](int root, const Place& p, const Request& rq) {
    return EntryReply(rq, isolation::StatSandboxEntry(root, p.rel), p.base);
  });
}

void MakeDir(const std::shared_ptr<Exchange>& ex) {
  OnePath(ex, [](int root, const Place& p, const Request& rq) {
    const std::string shown = p.rel.empty() ? p.base : p.base + "/" + p.rel;
    bool created = false;
    if (!p.rel.empty()) {
      if (Status st = isolation::MakeSandboxDir(root, p.rel, &created); !st.ok()) return RefusalFor(rq, FsError(st));
    }
    if (!created) {
      return RefusalFor(rq, Connect(model::ErrorKind::kConflict, "directory " + shown + " already exists", "already_exists"));
    }
    return EntryReply(rq, isolation::StatSandboxEntry(root, p.rel), p.base);
  });
}

void Move(const std::shared_ptr<Exchange>& ex) {
  model::EnvdFsRequest req;
  if (!Parse(ex, ex->rq.body, &req)) return;
  Place from, to;
  if (auto bad = Resolve(req.source, "source", &from)) return ex->Refuse(*bad);
  if (auto bad = Resolve(req.destination, "destination", &to)) return ex->Refuse(*bad);
  if (from.rel.empty() || to.rel.empty()) {
    return ex->Refuse(Connect(model::ErrorKind::kBadRequest, "/home/user and /tmp themselves cannot be moved or replaced",
                              "invalid_argument"));
  }
  if (from.base != to.base) {
    // Two mounts: rename(2) cannot cross them, and a copy is not a move.
    return ex->Refuse(Connect(model::ErrorKind::kBadRequest,
                              "a move between /home/user and /tmp is not supported: read the file and write it "
                              "to its new place, then remove the old one",
                              "invalid_argument"));
  }
  OnSandbox(ex, from.base, [from, to](int root, const Request& rq) {
    return EntryReply(rq, isolation::MoveSandboxEntry(root, from.rel, to.rel), from.base);
  });
}

void ListDir(const std::shared_ptr<Exchange>& ex) {
  model::EnvdFsRequest req;
  if (!Parse(ex, ex->rq.body, &req)) return;
  Place place;
  if (auto bad = Resolve(req.path, "path", &place)) return ex->Refuse(*bad);
  // envd's default depth is 1 (proto3 omits a 0, the SDKs always send >= 1).
  const int64_t depth = req.depth.value_or(0) == 0 ? 1 : *req.depth;
  if (depth < 1 || depth > isolation::kMaxListDepth) {
    return ex->Refuse(Connect(model::ErrorKind::kBadRequest,
                              "depth " + std::to_string(depth) + " is not between 1 (the directory's own entries) and " +
                                  std::to_string(isolation::kMaxListDepth),
                              "invalid_argument"));
  }
  OnSandbox(ex, place.base, [place, depth](int root, const Request& rq) {
    auto list = isolation::ListSandboxEntries(root, place.rel, static_cast<int>(depth), kMaxListEntries);
    if (!list.ok()) return RefusalFor(rq, FsError(list.status()));
    std::vector<model::EnvdEntry> entries;
    entries.reserve(list->size());
    for (const auto& e : *list) entries.push_back(EnvdEntryOf(e, place.base));
    return JsonReply(200, model::EnvdListResponse(entries));
  });
}

void Remove(const std::shared_ptr<Exchange>& ex) {
  OnePath(ex, [](int root, const Place& p, const Request& rq) {
    // Nothing there is done, as envd's (os.RemoveAll) says.
    if (Status st = isolation::RemoveSandboxTree(root, p.rel, kMaxRemoveEntries);
        !st.ok() && st.code() != ErrorCode::kNotFound) {
      return RefusalFor(rq, FsError(st));
    }
    return JsonReply(200, "{}");
  });
}

// ---------------------------------------------------------------------------
// Watches.

struct Opening {
  std::shared_ptr<OpenedWatch> opened;  // (shared: the result goes through std::function)
  model::ApiError error;
};

// Opens the watch of `req` on the caller's default sandbox, in one of the
// caller's slots, then `then` on the loop.
void OpenWatch(const std::shared_ptr<Exchange>& ex, const model::EnvdFsRequest& req,
               std::function<void(Opening)> then) {
  Place place;
  if (auto bad = Resolve(req.path, "path", &place)) return ex->Refuse(*bad);
  if (!ex->s.envd_watchers) ex->s.envd_watchers = std::make_shared<EnvdWatchers>();
  model::ApiError full;
  std::shared_ptr<void> slot = ex->s.envd_watchers->TakeSlot(ex->rq.caller.name, &full);
  if (!slot) return ex->Refuse(full);
  ex->s.e2b->Default(ex->rq.caller.name, [ex, place, req, slot, then = std::move(then)](std::optional<std::string> id,
                                                                                         model::ApiError error) {
    if (!id) return ex->Refuse(error);
    ex->OnWorker(
        [&s = ex->s, id = *id, owner = ex->rq.caller.name, place, req] {
          Opening o;
          std::optional<UniqueFd> root = OpenBase(s, id, owner, place.base, &o.error);
          if (!root) return o;
          auto w = isolation::DirWatch::Open(root->get(), place.rel, req.recursive, kMaxWatchDirs);
          if (!w.ok()) {
            o.error = FsError(w.status());
            return o;
          }
          o.opened = std::make_shared<OpenedWatch>(
              OpenedWatch{std::move(*w), std::move(*root), place.base, place.rel, req.include_entry, id, owner, nullptr});
          return o;
        },
        // The slot joins the watch back on the loop: it is counted there only.
        [slot, then](Opening o) {
          if (o.opened) o.opened->slot = slot;
          then(std::move(o));
        });
  });
}

void WatchDir(const std::shared_ptr<Exchange>& ex) {
  std::string json, why;
  if (!model::ConnectUnwrap(ex->rq.body, kMaxBody, &json, &why)) {
    return ex->Refuse(Connect(model::ErrorKind::kBadRequest, why, "invalid_argument"));
  }
  model::EnvdFsRequest req;
  if (!Parse(ex, json, &req)) return;
  OpenWatch(ex, req, [ex](Opening o) {
    if (!o.opened) return ex->Refuse(o.error);
    if (ex->gone()) return ex->Abandon();
    ex->MakeEvents(model::StreamFormat::kConnect, model::EnvdWatchKeepalive());
    ex->BeginEvents();
    ex->events()->Event("start", model::EnvdWatchStart());
    std::weak_ptr<Exchange> weak = ex;
    auto pump = WatchPump::Start(ex->s, std::move(*o.opened), [weak](std::vector<model::EnvdFsEvent> events, bool ended,
                                                                     std::string ended_why) {
      auto e = weak.lock();
      if (!e || e->answered()) return;
      // Droppable: a client that does not read loses events (counted by the
      // stream), never the server's memory.
      for (const auto& ev : events) e->events()->Event("filesystem", model::EnvdWatchEvent(ev), /*droppable=*/true);
      if (!ended) return;
      model::ApiError error = Connect(model::ErrorKind::kGone, "the watch ended: " + ended_why, "unavailable");
      e->EndEvents({}, "end_stream", model::ConnectEndStream(&error));
    });
    // The client leaving (the SDK's handle.stop()) ends the watch.
    ex->WatchDisconnect([pump, weak] {
      pump->Stop();
      if (auto e = weak.lock()) e->Abandon();
    });
  });
}

void CreateWatcher(const std::shared_ptr<Exchange>& ex) {
  model::EnvdFsRequest req;
  if (!Parse(ex, ex->rq.body, &req)) return;
  OpenWatch(ex, req, [ex](Opening o) {
    if (!o.opened) return ex->Refuse(o.error);
    std::string id = ex->s.envd_watchers->Add(ex->s, std::move(*o.opened));
    ex->Respond(JsonReply(200, model::EnvdWatcherCreated(id)));
  });
}

EnvdWatchers::Watcher* FindWatcher(const std::shared_ptr<Exchange>& ex, const std::string& id) {
  EnvdWatchers::Watcher* w = ex->s.envd_watchers ? ex->s.envd_watchers->Find(id, ex->rq.caller.name) : nullptr;
  if (w == nullptr) {
    ex->Refuse(Connect(model::ErrorKind::kNotFound, "no watcher '" + id.substr(0, 64) + "' (CreateWatcher makes one)",
                       "not_found"));
  }
  return w;
}

void GetWatcherEvents(const std::shared_ptr<Exchange>& ex) {
  model::EnvdFsRequest req;
  if (!Parse(ex, ex->rq.body, &req)) return;
  EnvdWatchers::Watcher* w = FindWatcher(ex, req.watcher_id);
  if (w == nullptr) return;
  if (w->queue.empty() && !w->ended.empty()) {
    const std::string why = w->ended;
    ex->s.envd_watchers->Remove(req.watcher_id);
    return ex->Refuse(Connect(model::ErrorKind::kNotFound, "the watcher ended: " + why, "not_found"));
  }
  std::vector<model::EnvdFsEvent> events(std::make_move_iterator(w->queue.begin()),
                                         std::make_move_iterator(w->queue.end()));
  w->queue.clear();
  Reply r = JsonReply(200, model::EnvdWatcherEvents(events));
  // The proto has no field for it: said in a header, so it is never silent.
  if (w->dropped > 0) r.headers.emplace_back("X-Airlock-Dropped-Events", std::to_string(w->dropped));
  if (w->pump && w->pump->lost()) r.headers.emplace_back("X-Airlock-Events-Lost", "kernel queue overflow or unwatched directories");
  w->dropped = 0;
  ex->Respond(std::move(r));
}

void RemoveWatcher(const std::shared_ptr<Exchange>& ex) {
  model::EnvdFsRequest req;
  if (!Parse(ex, ex->rq.body, &req)) return;
  if (FindWatcher(ex, req.watcher_id) == nullptr) return;
  ex->s.envd_watchers->Remove(req.watcher_id);
  ex->Respond(JsonReply(200, "{}"));
}

}  // namespace

std::vector<Route> EnvdFilesystemRoutes::Table() {
  using B = BodyPolicy;
  using O = OwnerRule;
  using P = ReplyPolicy;
  using A = Accounting;
  const Role kRun = Role::kRun;
  auto unary = [&](const char* pattern, LoopHandler h) {
    return SmallJson(Row("POST", pattern, kRun, O::kCaller, B::kJson, RunsOn::kDriver, P::kConnect, A::kRequest, h),
                     kMaxBody);
  };
  return {
      unary("/filesystem.Filesystem/Stat", &Stat),
      unary("/filesystem.Filesystem/MakeDir", &MakeDir),
      unary("/filesystem.Filesystem/Move", &Move),
      unary("/filesystem.Filesystem/ListDir", &ListDir),
      unary("/filesystem.Filesystem/Remove", &Remove),
      SmallJson(Row("POST", "/filesystem.Filesystem/WatchDir", kRun, O::kCaller, B::kJson, RunsOn::kDriver,
                    P::kConnectStream, A::kRequest, &WatchDir),
                kMaxBody),
      unary("/filesystem.Filesystem/CreateWatcher", &CreateWatcher),
      unary("/filesystem.Filesystem/GetWatcherEvents", &GetWatcherEvents),
      unary("/filesystem.Filesystem/RemoveWatcher", &RemoveWatcher),
  };
}

}  // namespace airlock::api
