// The checks every request passes on its headers alone, before its body is
// read and before `100 Continue`: what keeps web pages from driving a local
// airlock (docs/security.md, "Browsers").
//
//   Host          must name this server: `localhost`, a loopback address, the
//                 address it listens on (every local address when it listens
//                 on 0.0.0.0 or ::), or a name given with --allowed-host
//                 (`*`: any, for a proxy that checks it). Else 421. This is
//                 what defeats DNS rebinding: after a rebinding the browser
//                 still sends the attacker's name.
//   Origin        when present, must be the server's own origin (http or https,
//                 the same host and port as the Host header) or one given with
//                 --allowed-origin. Else 403. Browsers send it on every
//                 cross-origin request and on same-origin POSTs.
//   Content-Type  a body-carrying request (POST, PUT) to a JSON route must say
//                 `application/json` (parameters allowed). Else 415. A form or
//                 text/plain body is what a page can send without a preflight.
//
//   RequestGate gate(options, {"127.0.0.1"}, 8000);
//   if (auto refusal = gate.Check(method, host, origin, content_type, json_body)) reply(*refusal);
//   auto cors = gate.CorsHeaders(origin);   // for an allowed cross-origin caller
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace airlock::api {

struct GateOptions {
  std::vector<std::string> allowed_hosts;    // --allowed-host (names or addresses; "*" = any)
  std::vector<std::string> allowed_origins;  // --allowed-origin ("https://app.example:8443")
};

// A request the gate refuses: the status (403, 415, 421) and a message saying
// which rule and what to change.
struct GateRefusal {
  int status = 403;
  std::string reason;  // metrics label: "host", "origin", "media_type"
  std::string message;
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class RequestGate {
 public:
  // `local_addresses`: the addresses the server listens on (all of the host's
  // when it listens on a wildcard address). Errors: an --allowed-origin that is
  // not scheme://host[:port], or "*" (which would let every page in).
  static StatusOr<RequestGate> Create(GateOptions options, std::vector<std::string> local_addresses);
  RequestGate() = default;

  // Empty header values mean "absent". `json_body`: the route takes a JSON body.
  std::optional<GateRefusal> Check(std::string_view method, std::string_view host, std::string_view origin,
                                   std::string_view content_type, bool json_body) const;

  // Whether `origin` may call cross-origin (listed with --allowed-origin).
  bool CrossOriginAllowed(std::string_view origin) const;
  // The CORS headers of an answer to an allowed cross-origin caller (empty
  // for anyone else, and for same-origin requests).
  HeaderList CorsHeaders(std::string_view origin) const;
  // The answer headers of a preflight (OPTIONS with Origin): CORS headers for
  // an allowed origin, none otherwise.
  HeaderList PreflightHeaders(std::string_view origin) const;

 private:
  bool HostAllowed(std::string_view name) const;

  GateOptions options_;
  bool any_host_ = false;
  std::vector<std::string> names_;    // lowercased, no trailing dot
  std::vector<std::string> origins_;  // normalized
};

// Pieces exposed for tests. "Name" is lowercased, without port, brackets or
// trailing dot; nullopt when the header is not a valid authority.
std::optional<std::string> HostName(std::string_view host_header);
// "scheme://host[:port]" lowercased, the default port of the scheme dropped;
// nullopt when it is not an http(s) origin.
std::optional<std::string> NormalizeOrigin(std::string_view origin);
// The media type of a Content-Type value, lowercased, without parameters.
std::string MediaType(std::string_view content_type);

}  // namespace airlock::api
