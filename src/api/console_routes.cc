#include "api/console_routes.h"

namespace airlock::api {

// img-src data: the figures a run returns are shown as data: URLs of the
// PNG bytes (never HTML). connect-src 'self': the page talks to this server
// only. No 'unsafe-inline' anywhere.
const char* ConsoleRoutes::kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

bool ConsoleRoutes::Matches(const std::string& path) {
  return path == "/" || path == "/console" || path == "/console/" || path == "/console/app.js" ||
         path == "/console/app.css" || path == "/console/editor.js";
}

ConsoleAsset ConsoleRoutes::Get(const std::string& path) {
  ConsoleAsset a;
  a.headers = {{"Content-Security-Policy", kCsp},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Frame-Options", "DENY"},
               {"Referrer-Policy", "no-referrer"},
               {"Cross-Origin-Opener-Policy", "same-origin"},
               {"Cross-Origin-Resource-Policy", "same-origin"}};
  if (path == "/") {
    a.status = 302;
    a.headers.emplace_back("Location", "/console");
    return a;
  }
  if (path == "/console/app.js" || path == "/console/editor.js") {
    a.body = std::string(ConsoleFile(path.substr(std::string("/console/").size())));
    a.content_type = "text/javascript; charset=utf-8";
  } else if (path == "/console/app.css") {
    a.body = std::string(ConsoleFile("app.css"));
    a.content_type = "text/css; charset=utf-8";
  } else {
    a.body = std::string(ConsoleFile("index.html"));
    a.content_type = "text/html; charset=utf-8";
  }
  return a;
}

}  // namespace airlock::api
