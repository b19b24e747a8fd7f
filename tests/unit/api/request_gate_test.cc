// The browser rules on headers alone (api/request_gate.h): Host, Origin and
// Content-Type, as a browser, a rebinding page and a plain client send them.
#include "api/request_gate.h"

#include <gtest/gtest.h>

namespace airlock::api {
namespace {

RequestGate Gate(std::vector<std::string> hosts = {}, std::vector<std::string> origins = {},
                 std::vector<std::string> local = {"127.0.0.1"}) {
  auto g = RequestGate::Create({std::move(hosts), std::move(origins)}, std::move(local));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(*g) : RequestGate();
}

int StatusOf(const RequestGate& g, std::string_view method, std::string_view host, std::string_view origin,
             std::string_view ctype) {
  auto r = g.Check(method, host, origin, ctype, /*json_body=*/true);
  return r ? r->status : 0;
}

TEST(RequestGateTest, ParsesHostHeaders) {
  EXPECT_EQ(HostName("LocalHost:8000"), "localhost");
  EXPECT_EQ(HostName("localhost."), "localhost");
  EXPECT_EQ(HostName("[::1]:8000"), "::1");
  EXPECT_EQ(HostName("127.0.0.1"), "127.0.0.1");
  EXPECT_FALSE(HostName(""));
  EXPECT_FALSE(HostName("a b"));
  EXPECT_FALSE(HostName("[::1"));
  EXPECT_FALSE(HostName("[nothex]:80"));
  EXPECT_FALSE(HostName("host:port"));
  EXPECT_FALSE(HostName("host:123456"));
  EXPECT_FALSE(HostName("user@host"));
  EXPECT_FALSE(HostName(std::string(300, 'a')));
}

TEST(RequestGateTest, NormalizesOrigins) {
  EXPECT_EQ(NormalizeOrigin("HTTP://Console.Example:80"), "http://console.example");
  EXPECT_EQ(NormalizeOrigin("https://a.example:443"), "https://a.example");
  EXPECT_EQ(NormalizeOrigin("https://a.example:8443/"), "https://a.example:8443");
  EXPECT_EQ(NormalizeOrigin("http://[::1]:8000"), "http://[::1]:8000");
  EXPECT_FALSE(NormalizeOrigin("null"));
  EXPECT_FALSE(NormalizeOrigin("file://"));
  EXPECT_FALSE(NormalizeOrigin("ftp://a.example"));
  EXPECT_FALSE(NormalizeOrigin("http://a.example/path"));
  EXPECT_FALSE(NormalizeOrigin("http://user@a.example"));
}

TEST(RequestGateTest, MediaTypeIgnoresParametersAndCase) {
  EXPECT_EQ(MediaType("Application/JSON; charset=utf-8"), "application/json");
  EXPECT_EQ(MediaType(" text/plain "), "text/plain");
  EXPECT_EQ(MediaType(""), "");
}

TEST(RequestGateTest, HostMustNameThisServer) {
  RequestGate g = Gate({"airlock.internal"});
  EXPECT_EQ(StatusOf(g, "POST", "127.0.0.1:8000", "", "application/json"), 0);
  EXPECT_EQ(StatusOf(g, "POST", "127.9.9.9", "", "application/json"), 0);
  EXPECT_EQ(StatusOf(g, "POST", "localhost:8000", "", "application/json"), 0);
  EXPECT_EQ(StatusOf(g, "POST", "[::1]:8000", "", "application/json"), 0);
  EXPECT_EQ(StatusOf(g, "POST", "[::ffff:127.0.0.1]:8000", "", "application/json"), 0);
  EXPECT_EQ(StatusOf(g, "POST", "airlock.internal:8000", "", "application/json"), 0);
  EXPECT_EQ(StatusOf(g, "POST", "attacker.example:8000", "", "application/json"), 421);
  EXPECT_EQ(StatusOf(g, "POST", "localhost.attacker.example", "", "application/json"), 421);
  EXPECT_EQ(StatusOf(g, "POST", "10.0.0.5:8000", "", "application/json"), 421);
  EXPECT_EQ(StatusOf(g, "POST", "bad host", "", "application/json"), 421);
  // The listen address itself (a wildcard listener gets every local address).
  RequestGate wide = Gate({}, {}, {"10.0.0.5", "fe80::1"});
  EXPECT_EQ(StatusOf(wide, "POST", "10.0.0.5:8000", "", "application/json"), 0);
  EXPECT_EQ(StatusOf(wide, "POST", "[fe80::1]:8000", "", "application/json"), 0);
  RequestGate any = Gate({"*"});
  EXPECT_EQ(StatusOf(any, "POST", "whatever.example", "", "application/json"), 0);
}

TEST(RequestGateTest, OriginMustBeOwnOrListed) {
  RequestGate g = Gate({}, {"https://console.example:8443"});
  EXPECT_EQ(StatusOf(g, "POST", "127.0.0.1:8000", "http://127.0.0.1:8000", "application/json"), 0);
  EXPECT_EQ(StatusOf(g, "POST", "localhost", "http://localhost:80", "application/json"), 0);
  EXPECT_EQ(StatusOf(g, "POST", "localhost:8000", "http://127.0.0.1:8000", "application/json"), 403);
  EXPECT_EQ(StatusOf(g, "POST", "127.0.0.1:8000", "http://127.0.0.1:8001", "application/json"), 403);
  EXPECT_EQ(StatusOf(g, "POST", "127.0.0.1:8000", "http://attacker.example", "application/json"), 403);
  EXPECT_EQ(StatusOf(g, "POST", "127.0.0.1:8000", "null", "application/json"), 403);
  EXPECT_EQ(StatusOf(g, "POST", "127.0.0.1:8000", "https://console.example:8443", "application/json"), 0);
  EXPECT_EQ(StatusOf(g, "GET", "127.0.0.1:8000", "https://console.example:8443", ""), 0);
  EXPECT_EQ(g.CorsHeaders("https://console.example:8443").size(), 3u);
  EXPECT_TRUE(g.CorsHeaders("http://attacker.example").empty());
  EXPECT_TRUE(g.PreflightHeaders("http://attacker.example").empty());
  EXPECT_FALSE(g.PreflightHeaders("https://console.example:8443").empty());
}

TEST(RequestGateTest, BodiesMustBeDeclaredJson) {
  RequestGate g = Gate();
  EXPECT_EQ(StatusOf(g, "POST", "localhost", "", "application/json; charset=utf-8"), 0);
  EXPECT_EQ(StatusOf(g, "POST", "localhost", "", "text/plain"), 415);
  EXPECT_EQ(StatusOf(g, "POST", "localhost", "", "application/x-www-form-urlencoded"), 415);
  EXPECT_EQ(StatusOf(g, "POST", "localhost", "", ""), 415);
  EXPECT_EQ(StatusOf(g, "GET", "localhost", "", ""), 0);
  EXPECT_FALSE(g.Check("PUT", "localhost", "", "application/octet-stream", /*json_body=*/false));
}

TEST(RequestGateTest, RefusesOriginsThatWouldLetEveryPageIn) {
  for (const char* o : {"*", "null", "console.example", "http://a.example/path"}) {
    EXPECT_FALSE(RequestGate::Create({{}, {o}}, {}).ok()) << o;
  }
  EXPECT_FALSE(RequestGate::Create({{"a b"}, {}}, {}).ok());
}

}  // namespace
}  // namespace airlock::api
