// envd's filesystem.Filesystem service over Connect (JSON), on the E2B door:
// what the SDKs' sandbox.files.getInfo / exists / makeDir / rename / list /
// remove / watchDir call, on the caller's default E2B sandbox's /home/user
// (the one /files reads and writes: api/e2b_routes.h) and its /tmp.
//
//   POST /filesystem.Filesystem/Stat            {path}                -> {entry}
//   POST /filesystem.Filesystem/MakeDir         {path}                -> {entry} | already_exists
//   POST /filesystem.Filesystem/Move            {source,destination}  -> {entry}
//   POST /filesystem.Filesystem/ListDir         {path,depth?}         -> {entries}  (depth 1..64, default 1)
//   POST /filesystem.Filesystem/Remove          {path}                -> {}         (a whole tree, bounded)
//   POST /filesystem.Filesystem/WatchDir        {path,recursive?,includeEntry?} -> stream (application/connect+json):
//                                               {"start":{}}, {"filesystem":{name,type,entry?}}..., keepalives
//   POST /filesystem.Filesystem/CreateWatcher   {path,recursive?,includeEntry?} -> {watcherId}
//   POST /filesystem.Filesystem/GetWatcherEvents {watcherId}          -> {events}   (what arrived since the last call)
//   POST /filesystem.Filesystem/RemoveWatcher   {watcherId}           -> {}
//
// Paths: absolute under /home/user or /tmp, or relative to /home/user; every one resolved as
// isolation/sandbox_fs.h resolves it (no symlink followed, nothing outside).
// Errors are Connect's {"code","message"}: invalid_argument, not_found,
// already_exists, failed_precondition (a symlink or mount in the way),
// resource_exhausted (a listing or removal past its bound).
#pragma once

#include <vector>

#include "api/route.h"

namespace airlock::api {

struct EnvdFilesystemRoutes {
  static std::vector<Route> Table();
};

}  // namespace airlock::api
