// envd's filesystem.Filesystem messages (E2B's spec/envd/filesystem/
// filesystem.proto) in proto3's JSON mapping, as the SDKs' Connect clients
// send and read them: lowerCamelCase names, enums by name, int64 as a
// string, Timestamps as RFC 3339. Pure functions, no I/O.
//
// Requests are read tolerantly: one struct for every method's fields; the
// proto's own names are accepted besides the camelCase ones (proto3 JSON
// parsers must accept both), unknown fields are ignored (as protobuf-es does
// with ignoreUnknownFields, so a newer SDK's extra option does not break a
// call), a wrong type is invalid_argument naming the field.
//
//   EnvdFsRequest rq;
//   if (!ParseEnvdFsRequest(body, caps, &rq, &error)) refuse(error);   // error.code "invalid_argument"
//   reply(EnvdEntryResponse(entry));                                   // {"entry":{...}}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/execute.h"

namespace airlock::model {

struct EnvdFsRequest {
  std::string path;                      // Stat, MakeDir, ListDir, Remove, WatchDir, CreateWatcher
  std::string source, destination;       // Move
  std::optional<int64_t> depth;          // ListDir (absent: envd's default, 1)
  bool recursive = false;                // WatchDir, CreateWatcher
  bool include_entry = false;            // WatchDir, CreateWatcher
  bool allow_network_mounts = false;     // (no network mounts here: accepted, nothing to allow)
  std::string watcher_id;                // GetWatcherEvents, RemoveWatcher
};

// False with *error (kBadRequest, code "invalid_argument") for a body that is
// not one JSON object (empty is {}), a duplicate key, or a field of the wrong
// type; numbers may be JSON numbers or decimal strings (proto3 JSON).
bool ParseEnvdFsRequest(std::string_view body, const RequestCaps& caps, EnvdFsRequest* request, ApiError* error);

enum class EnvdFileType { kFile, kDirectory, kSymlink };
enum class EnvdEventType { kCreate, kWrite, kRemove, kRename, kChmod };

struct EnvdEntry {
  std::string name, path;  // path: absolute, as the sandbox sees it
  EnvdFileType type = EnvdFileType::kFile;
  int64_t size = 0;
  uint32_t mode = 0;         // the permission bits (0644)
  std::string permissions;   // "-rw-r--r--"
  std::string owner, group;
  int64_t mtime_s = 0;
  int32_t mtime_ns = 0;
  std::optional<std::string> symlink_target;
  std::vector<std::pair<std::string, std::string>> metadata;
};

struct EnvdFsEvent {
  std::string name;  // relative to the watched directory
  EnvdEventType type = EnvdEventType::kCreate;
  std::optional<EnvdEntry> entry;
};

// "2026-11-27T01:02:03.123456789Z".
std::string Rfc3339(int64_t seconds, int32_t nanos);

std::string EnvdEntryResponse(const EnvdEntry& entry);                // Stat, MakeDir, Move: {"entry":{...}}
std::string EnvdListResponse(const std::vector<EnvdEntry>& entries);  // {"entries":[...]}
std::string EnvdWatchStart();                                         // {"start":{}}
std::string EnvdWatchKeepalive();                                     // {"keepalive":{}}
std::string EnvdWatchEvent(const EnvdFsEvent& event);                 // {"filesystem":{...}}
std::string EnvdWatcherCreated(std::string_view id);                  // {"watcherId":...}
std::string EnvdWatcherEvents(const std::vector<EnvdFsEvent>& events);  // {"events":[...]}

}  // namespace airlock::model
