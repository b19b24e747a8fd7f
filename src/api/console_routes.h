// The web console (docs/console.md): one static page, its script and its
// style, built into the binary (src/api/console/, embedded at build time; no
// CDN, nothing fetched). The page holds no data: it asks the person for a
// token (kept in the tab's sessionStorage) and calls the JSON API with it in
// an Authorization header, so the routes here need no auth, and a cross-site
// page can neither read the token nor make the browser send it (no cookie).
// Every answer carries a strict Content-Security-Policy (scripts and styles
// from this origin only, no inline code, no framing) and nosniff.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace airlock::api {

// The embedded file ("index.html", "app.js", "app.css"); empty when unknown.
std::string_view ConsoleFile(std::string_view name);

struct ConsoleAsset {
  int status = 200;
  std::string body;
  const char* content_type = "text/plain; charset=utf-8";
  std::vector<std::pair<std::string, std::string>> headers;
};

class ConsoleRoutes {
 public:
  // "/", "/console", "/console/" and "/console/{app.js,app.css}".
  static bool Matches(const std::string& path);
  // A GET of a matching path ("/" redirects to /console).
  static ConsoleAsset Get(const std::string& path);
  // The Content-Security-Policy every console answer carries.
  static const char* kCsp;
};

}  // namespace airlock::api
