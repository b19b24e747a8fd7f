#include "api/request_gate.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace airlock::api {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 5 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

struct Authority {
  std::string name;  // lowercased; an IPv6 literal without brackets
  std::string port;  // "" when absent
  bool v6 = false;
};

// host [":" port], where host is a reg-name, an IPv4 address or "[" IPv6 "]".
std::optional<Authority> ParseAuthority(std::string_view text) {
  text = Trim(text);
  if (text.empty() || text.size() > 255) return std::nullopt;
  Authority a;
  std::string_view rest;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    a.name = Lower(text.substr(1, close - 1));
    a.v6 = true;
    struct in6_addr addr;
    if (::inet_pton(AF_INET6, a.name.c_str(), &addr) != 1) return std::nullopt;
    rest = text.substr(close + 1);
  } else {
    size_t colon = text.find(':');
    a.name = Lower(text.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : text.substr(colon);
    if (a.name.empty()) return std::nullopt;
    for (char c : a.name) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) return std::nullopt;
    }
    if (a.name.size() > 1 && a.name.back() == '.') a.name.pop_back();  // "localhost." is "localhost"
  }
  if (!rest.empty()) {
    if (rest.front() != ':' || !AllDigits(rest.substr(1))) return std::nullopt;
    a.port = std::string(rest.substr(1));
  }
  return a;
}

bool IsLoopbackName(const std::string& name) {
  if (name == "localhost") return true;
  struct in_addr v4;
  if (::inet_pton(AF_INET, name.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  struct in6_addr v6;
  if (::inet_pton(AF_INET6, name.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) return v6.s6_addr[12] == 127;
  }
  return false;
}

std::string DefaultPort(std::string_view scheme) { return scheme == "https" ? "443" : "80"; }

}  // namespace

std::optional<std::string> HostName(std::string_view host_header) {
  auto a = ParseAuthority(host_header);
  if (!a) return std::nullopt;
  return a->name;
}

std::optional<std::string> NormalizeOrigin(std::string_view origin) {
  origin = Trim(origin);
  size_t sep = origin.find("://");
  if (sep == std::string_view::npos) return std::nullopt;
  std::string scheme = Lower(origin.substr(0, sep));
  if (scheme != "http" && scheme != "https") return std::nullopt;
  std::string_view authority = origin.substr(sep + 3);
  if (!authority.empty() && authority.back() == '/') authority.remove_suffix(1);
  if (authority.find_first_of("/?#@") != std::string_view::npos) return std::nullopt;
  auto a = ParseAuthority(authority);
  if (!a) return std::nullopt;
  std::string out = scheme + "://" + (a->v6 ? "[" + a->name + "]" : a->name);
  if (!a->port.empty() && a->port != DefaultPort(scheme)) out += ":" + a->port;
  return out;
}

std::string MediaType(std::string_view content_type) {
  return Lower(Trim(content_type.substr(0, content_type.find(';'))));
}

StatusOr<RequestGate> RequestGate::Create(GateOptions options, std::vector<std::string> local_addresses) {
  RequestGate g;
  for (const std::string& h : options.allowed_hosts) {
    if (h == "*") {
      g.any_host_ = true;
      continue;
    }
    auto name = HostName(h);
    if (!name) {
      return InvalidArgument("--allowed-host '" + h + "' is not a host name or address (e.g. airlock.internal, 10.0.0.5)");
    }
    g.names_.push_back(*name);
  }
  for (const std::string& a : local_addresses) {
    if (auto name = HostName(a.find(':') != std::string::npos && a.front() != '[' ? "[" + a + "]" : a)) {
      g.names_.push_back(*name);
    }
  }
  for (const std::string& o : options.allowed_origins) {
    if (o == "*" || o == "null") {
      return InvalidArgument("--allowed-origin '" + o + "' would let any web page run code here; name each origin "
                             "(e.g. https://console.example:8443)");
    }
    auto n = NormalizeOrigin(o);
    if (!n) return InvalidArgument("--allowed-origin '" + o + "' is not an origin: write scheme://host[:port]");
    g.origins_.push_back(*n);
  }
  g.options_ = std::move(options);
  return g;
}

bool RequestGate::HostAllowed(std::string_view name) const {
  if (any_host_) return true;
  std::string n(name);
  if (IsLoopbackName(n)) return true;
  return std::find(names_.begin(), names_.end(), n) != names_.end();
}

bool RequestGate::CrossOriginAllowed(std::string_view origin) const {
  auto n = NormalizeOrigin(origin);
  return n && std::find(origins_.begin(), origins_.end(), *n) != origins_.end();
}

std::optional<GateRefusal> RequestGate::Check(std::string_view method, std::string_view host,
                                              std::string_view origin, std::string_view content_type,
                                              bool json_body) const {
  // Host: absent only from HTTP/1.0 clients (Beast fills nothing in), which no
  // browser is; a present one must name this server.
  std::optional<Authority> authority;
  if (!host.empty()) {
    authority = ParseAuthority(host);
    if (!authority || !HostAllowed(authority->name)) {
      std::string shown(host.substr(0, 128));
      return GateRefusal{421, "host",
                         "the Host header '" + shown +
                             "' does not name this server (a loopback address, localhost, or the address it "
                             "listens on); behind a proxy or under another name, start airlock with "
                             "--allowed-host NAME"};
    }
  }
  if (!origin.empty()) {
    auto n = NormalizeOrigin(origin);
    bool same_origin = false;
    if (n && authority) {
      std::string scheme = n->substr(0, n->find(':'));
      std::string own = scheme + "://" + (authority->v6 ? "[" + authority->name + "]" : authority->name);
      if (!authority->port.empty() && authority->port != DefaultPort(scheme)) own += ":" + authority->port;
      same_origin = *n == own;
    }
    if (!same_origin && !CrossOriginAllowed(origin)) {
      return GateRefusal{403, "origin",
                         "requests from the web origin '" + std::string(origin.substr(0, 128)) +
                             "' are refused: a web page may not drive airlock; to allow a console of your own, "
                             "start airlock with --allowed-origin ORIGIN"};
    }
  }
  if (json_body && (method == "POST" || method == "PUT" || method == "PATCH") &&
      MediaType(content_type) != "application/json") {
    std::string got = content_type.empty() ? "none" : "'" + std::string(content_type.substr(0, 64)) + "'";
    return GateRefusal{415, "media_type",
                       "the body must be JSON, sent with 'Content-Type: application/json' (got " + got + ")"};
  }
  return std::nullopt;
}

HeaderList RequestGate::CorsHeaders(std::string_view origin) const {
  if (origin.empty() || !CrossOriginAllowed(origin)) return {};
  return {{"Access-Control-Allow-Origin", std::string(origin)},
          {"Vary", "Origin"},
          {"Access-Control-Expose-Headers", "X-Request-Id, Retry-After"}};
}

HeaderList RequestGate::PreflightHeaders(std::string_view origin) const {
  if (origin.empty() || !CrossOriginAllowed(origin)) return {};
  return {{"Access-Control-Allow-Origin", std::string(origin)},
          {"Vary", "Origin"},
          {"Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS"},
          {"Access-Control-Allow-Headers", "Authorization, Content-Type, X-API-Key, Accept"},
          {"Access-Control-Max-Age", "600"}};
}

}  // namespace airlock::api
