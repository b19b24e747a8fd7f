// The web console (docs/console.md): one static page, its script and its
// style, built into the binary (src/api/console/, embedded at build time; no
// CDN, nothing fetched). The page holds no data: it asks the person for a
// token (kept in the tab's sessionStorage) and calls the JSON API with it in
// an Authorization header, so the routes here need no token (Role::kNoToken),
// and a cross-site page can neither read the token nor make the browser send
// it (no cookie). Every answer carries a strict Content-Security-Policy
// (scripts and styles from this origin only, no inline code, no framing) and
// nosniff: the reply policy kConsole (api/pipeline.cc).
//
//   GET /                  302 to /console
//   GET /console, /console/, /console/app.js, /console/app.css, /console/editor.js
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/route.h"

namespace airlock::api {

// The embedded file ("index.html", "app.js", "app.css", "editor.js"); empty when unknown.
std::string_view ConsoleFile(std::string_view name);

class ConsoleRoutes {
 public:
  // The console's rows of the API door's table (their answers' headers are
  // the respond phase's, ReplyPolicy::kConsole).
  static std::vector<Route> Table();
};

}  // namespace airlock::api
