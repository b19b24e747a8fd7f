#include "api/console_routes.h"

#include "api/exchange.h"

namespace airlock::api {

namespace {

void Redirect(const std::shared_ptr<Exchange>& ex) {
  Reply r;
  r.status = 302;
  r.content_type = "text/plain; charset=utf-8";
  r.headers.emplace_back("Location", "/console");
  ex->Respond(std::move(r));
}

void Page(const std::shared_ptr<Exchange>& ex) {
  Reply r;
  r.body = std::string(ConsoleFile("index.html"));
  r.content_type = "text/html; charset=utf-8";
  ex->Respond(std::move(r));
}

void File(const std::shared_ptr<Exchange>& ex) {
  const std::string& path = ex->rq.path;
  std::string name = path.substr(std::string("/console/").size());
  Reply r;
  r.body = std::string(ConsoleFile(name));
  r.content_type = name == "app.css" ? "text/css; charset=utf-8" : "text/javascript; charset=utf-8";
  ex->Respond(std::move(r));
}

Route Asset(const char* pattern, LoopHandler handler) {
  return Row("GET", pattern, Role::kNoToken, OwnerRule::kNone, BodyPolicy::kNone, RunsOn::kLoop, ReplyPolicy::kConsole,
             Accounting::kRequest, handler);
}

}  // namespace

std::vector<Route> ConsoleRoutes::Table() {
  return {Asset("/", &Redirect),      Asset("/console", &Page),         Asset("/console/", &Page),
          Asset("/console/app.js", &File), Asset("/console/app.css", &File), Asset("/console/editor.js", &File)};
}

}  // namespace airlock::api
