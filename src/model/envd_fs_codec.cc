#include <cstdio>
#include <ctime>

#include "model/envd_fs.h"
#include "model/json_util.h"

namespace airlock::model {
namespace {

using internal::Dump;
using internal::json;

ApiError Invalid(std::string message) {
  ApiError e{ErrorKind::kBadRequest, std::move(message), ""};
  e.code = "invalid_argument";
  return e;
}

// The member named `camel` or, as proto3 JSON parsers also accept, `proto`.
const json* Member(const json& doc, const char* camel, const char* proto) {
  auto it = doc.find(camel);
  if (it == doc.end() && proto != nullptr) it = doc.find(proto);
  if (it == doc.end() || it->is_null()) return nullptr;
  return &*it;
}

bool String(const json& doc, const char* camel, const char* proto, std::string* out, ApiError* error) {
  const json* v = Member(doc, camel, proto);
  if (v == nullptr) return true;
  if (!v->is_string()) {
    *error = Invalid(std::string(camel) + ": must be a string");
    return false;
  }
  *out = v->get<std::string>();
  return true;
}

bool Bool(const json& doc, const char* camel, const char* proto, bool* out, ApiError* error) {
  const json* v = Member(doc, camel, proto);
  if (v == nullptr) return true;
  if (!v->is_boolean()) {
    *error = Invalid(std::string(camel) + ": must be true or false");
    return false;
  }
  *out = v->get<bool>();
  return true;
}

// A proto3 integer: a JSON number without a fraction, or its decimal string.
bool Integer(const json& doc, const char* name, std::optional<int64_t>* out, ApiError* error) {
  const json* v = Member(doc, name, nullptr);
  if (v == nullptr) return true;
  if (v->is_number_integer()) {
    *out = v->get<int64_t>();
    return true;
  }
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    const bool digits = !s.empty() && s.size() <= 18 &&
                        s.find_first_not_of("0123456789", s[0] == '-' ? 1 : 0) == std::string::npos && s != "-";
    if (digits) {
      *out = std::stoll(s);
      return true;
    }
  }
  *error = Invalid(std::string(name) + ": must be an integer");
  return false;
}

const char* FileTypeName(EnvdFileType t) {
  switch (t) {
    case EnvdFileType::kFile: return "FILE_TYPE_FILE";
    case EnvdFileType::kDirectory: return "FILE_TYPE_DIRECTORY";
    case EnvdFileType::kSymlink: return "FILE_TYPE_SYMLINK";
  }
  return "FILE_TYPE_UNSPECIFIED";
}

const char* EventTypeName(EnvdEventType t) {
  switch (t) {
    case EnvdEventType::kCreate: return "EVENT_TYPE_CREATE";
    case EnvdEventType::kWrite: return "EVENT_TYPE_WRITE";
    case EnvdEventType::kRemove: return "EVENT_TYPE_REMOVE";
    case EnvdEventType::kRename: return "EVENT_TYPE_RENAME";
    case EnvdEventType::kChmod: return "EVENT_TYPE_CHMOD";
  }
  return "EVENT_TYPE_UNSPECIFIED";
}

json EntryJson(const EnvdEntry& e) {
  json j = {{"name", e.name},
            {"type", FileTypeName(e.type)},
            {"path", e.path},
            {"size", std::to_string(e.size)},  // int64: a string in proto3 JSON
            {"mode", e.mode},
            {"permissions", e.permissions},
            {"owner", e.owner},
            {"group", e.group},
            {"modifiedTime", Rfc3339(e.mtime_s, e.mtime_ns)}};
  if (e.symlink_target) j["symlinkTarget"] = *e.symlink_target;
  if (!e.metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : e.metadata) m[k] = v;
    j["metadata"] = std::move(m);
  }
  return j;
}

json EventJson(const EnvdFsEvent& e) {
  json j = {{"name", e.name}, {"type", EventTypeName(e.type)}};
  if (e.entry) j["entry"] = EntryJson(*e.entry);
  return j;
}

}  // namespace

bool ParseEnvdFsRequest(std::string_view body, const RequestCaps& caps, EnvdFsRequest* request, ApiError* error) {
  *request = EnvdFsRequest();
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return true;  // the empty message
  json doc;
  if (!internal::ParseRequestObject(body, caps, &doc, error)) {
    error->code = "invalid_argument";
    return false;
  }
  return String(doc, "path", nullptr, &request->path, error) &&
         String(doc, "source", nullptr, &request->source, error) &&
         String(doc, "destination", nullptr, &request->destination, error) &&
         String(doc, "watcherId", "watcher_id", &request->watcher_id, error) &&
         Integer(doc, "depth", &request->depth, error) &&
         Bool(doc, "recursive", nullptr, &request->recursive, error) &&
         Bool(doc, "includeEntry", "include_entry", &request->include_entry, error) &&
         Bool(doc, "allowNetworkMounts", "allow_network_mounts", &request->allow_network_mounts, error);
}

std::string Rfc3339(int64_t seconds, int32_t nanos) {
  std::time_t t = static_cast<std::time_t>(seconds);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(nanos));
  return buf;
}

std::string EnvdEntryResponse(const EnvdEntry& entry) { return Dump({{"entry", EntryJson(entry)}}); }

std::string EnvdListResponse(const std::vector<EnvdEntry>& entries) {
  json list = json::array();
  for (const auto& e : entries) list.push_back(EntryJson(e));
  return Dump({{"entries", std::move(list)}});
}

std::string EnvdWatchStart() { return R"({"start":{}})"; }
std::string EnvdWatchKeepalive() { return R"({"keepalive":{}})"; }

std::string EnvdWatchEvent(const EnvdFsEvent& event) { return Dump({{"filesystem", EventJson(event)}}); }

std::string EnvdWatcherCreated(std::string_view id) { return Dump({{"watcherId", std::string(id)}}); }

std::string EnvdWatcherEvents(const std::vector<EnvdFsEvent>& events) {
  json list = json::array();
  for (const auto& e : events) list.push_back(EventJson(e));
  return Dump({{"events", std::move(list)}});
}

}  // namespace airlock::model
