// envd's filesystem messages (model/envd_fs.h): requests read tolerantly but
// strictly typed (untrusted JSON), answers in proto3's JSON mapping as the
// SDK's protobuf-es reads them.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "model/envd_fs.h"

namespace airlock::model {
namespace {

using nlohmann::json;

RequestCaps Caps() {
  RequestCaps c;
  c.max_depth = 16;
  return c;
}

TEST(EnvdFsRequest, ReadsCamelCaseAndProtoNamesAndIgnoresUnknownFields) {
  EnvdFsRequest r;
  ApiError e;
  ASSERT_TRUE(ParseEnvdFsRequest(R"({"path":"/home/user/a","depth":"3","recursive":true,"includeEntry":true,
                                      "allowNetworkMounts":false,"futureOption":{"x":1}})",
                                 Caps(), &r, &e))
      << e.message;
  EXPECT_EQ(r.path, "/home/user/a");
  EXPECT_EQ(r.depth, 3);
  EXPECT_TRUE(r.recursive);
  EXPECT_TRUE(r.include_entry);
  ASSERT_TRUE(ParseEnvdFsRequest(R"({"watcher_id":"w1","include_entry":true,"depth":2})", Caps(), &r, &e));
  EXPECT_EQ(r.watcher_id, "w1");
  EXPECT_TRUE(r.include_entry);
  EXPECT_EQ(r.depth, 2);
  ASSERT_TRUE(ParseEnvdFsRequest("", Caps(), &r, &e)) << "the empty message";
  EXPECT_FALSE(r.depth.has_value());
}

TEST(EnvdFsRequest, RefusesWhatIsNotTheMessage) {
  for (const char* body : {R"({"path":)", R"([1])", R"({"path":7})", R"({"depth":1.5})", R"({"depth":"1e3"})",
                           R"({"recursive":"yes"})", R"({"path":"a","path":"b"})", R"({"source":null,"depth":"-"})",
                           R"({"depth":"99999999999999999999"})"}) {
    EnvdFsRequest r;
    ApiError e;
    EXPECT_FALSE(ParseEnvdFsRequest(body, Caps(), &r, &e)) << body;
    EXPECT_EQ(e.code, "invalid_argument") << body;
  }
  std::string deep(100, '[');
  EnvdFsRequest r;
  ApiError e;
  EXPECT_FALSE(ParseEnvdFsRequest("{\"a\":" + deep, Caps(), &r, &e));
  EXPECT_EQ(e.code, "invalid_argument");
}

EnvdEntry Sample() {
  EnvdEntry e;
  e.name = "f.txt";
  e.path = "/home/user/f.txt";
  e.size = 5;
  e.mode = 0644;
  e.permissions = "-rw-r--r--";
  e.owner = e.group = "user";
  e.mtime_s = 1700000000;
  e.mtime_ns = 5;
  return e;
}

TEST(EnvdFsAnswers, EntriesAreProto3Json) {
  EnvdEntry e = Sample();
  json j = json::parse(EnvdEntryResponse(e))["entry"];
  EXPECT_EQ(j["type"], "FILE_TYPE_FILE");
  EXPECT_EQ(j["size"], "5") << "int64 is a string";
  EXPECT_EQ(j["mode"], 0644);
  EXPECT_EQ(j["modifiedTime"], "2023-11-14T22:13:20.000000005Z");
  EXPECT_FALSE(j.contains("symlinkTarget"));
  EXPECT_FALSE(j.contains("metadata"));
  e.type = EnvdFileType::kSymlink;
  e.symlink_target = "/etc";
  e.metadata = {{"author", "me"}, {"bad", "\xff"}};
  j = json::parse(EnvdListResponse({e}))["entries"][0];
  EXPECT_EQ(j["type"], "FILE_TYPE_SYMLINK");
  EXPECT_EQ(j["symlinkTarget"], "/etc");
  EXPECT_EQ(j["metadata"]["author"], "me");
  EXPECT_EQ(j["metadata"]["bad"], "\xef\xbf\xbd") << "invalid UTF-8 is replaced, never a throw";
}

TEST(EnvdFsAnswers, WatchMessages) {
  EXPECT_EQ(json::parse(EnvdWatchStart()), json::parse(R"({"start":{}})"));
  EXPECT_EQ(json::parse(EnvdWatchKeepalive()), json::parse(R"({"keepalive":{}})"));
  EnvdFsEvent ev{"sub/a.txt", EnvdEventType::kWrite, std::nullopt};
  EXPECT_EQ(json::parse(EnvdWatchEvent(ev)), json::parse(R"({"filesystem":{"name":"sub/a.txt","type":"EVENT_TYPE_WRITE"}})"));
  ev.entry = Sample();
  json j = json::parse(EnvdWatcherEvents({ev, {"b", EnvdEventType::kRename, std::nullopt}}));
  EXPECT_EQ(j["events"][0]["entry"]["name"], "f.txt");
  EXPECT_EQ(j["events"][1]["type"], "EVENT_TYPE_RENAME");
  EXPECT_EQ(json::parse(EnvdWatcherCreated("w1"))["watcherId"], "w1");
}

}  // namespace
}  // namespace airlock::model
