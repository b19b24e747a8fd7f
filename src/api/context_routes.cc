#include "api/context_routes.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "api/exchange.h"
#include "api/server_state.h"
#include "api/session_routes.h"
#include "model/session.h"

namespace airlock::api {
namespace {

// A context id as the session manager makes them (short, [A-Za-z0-9-_]).
bool IsContextId(const std::string& id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
         });
}

// {ctx}[/action] of the path's tail.
bool ParseTail(const std::string& tail, std::string* ctx, std::string* action) {
  const size_t slash = tail.find('/');
  *ctx = tail.substr(0, slash);
  *action = slash == std::string::npos ? "" : tail.substr(slash + 1);
  return IsContextId(*ctx);
}

model::ApiError NoRoute(const std::string& method) {
  model::ApiError e{model::ErrorKind::kNotFound,
                    method + " takes .../contexts/{ctx}" +
                        (method == "POST" ? "/restart or .../contexts/{ctx}/execute" : std::string()),
                    ""};
  e.code = "route_not_found";
  return e;
}

Reply Create(ServerState& s, const Request& rq) {
  model::ContextCreateRequest request;
  model::ApiError error;
  if (!model::ParseContextCreateRequest(rq.body, Caps(s), &request, &error)) return RefusalFor(rq, error);
  auto v = s.session_mgr->CreateContext(rq.param, rq.caller.name, request, &error);
  if (!v) return RefusalFor(rq, error);
  Reply r = JsonReply(201, model::ContextToJson(*v));
  r.headers.emplace_back("Location", "/v1/sessions/" + rq.param + "/contexts/" + v->id);
  return r;
}

Reply List(ServerState& s, const Request& rq) {
  model::ApiError error;
  auto list = s.session_mgr->ListContexts(rq.param, rq.caller.name, &error);
  return list ? JsonReply(200, model::ContextListToJson(*list)) : RefusalFor(rq, error);
}

Reply GetOrDelete(ServerState& s, const Request& rq) {
  std::string ctx, action;
  if (!ParseTail(rq.tail, &ctx, &action) || !action.empty()) return RefusalFor(rq, NoRoute(rq.method));
  model::ApiError error;
  if (rq.method == "DELETE") {
    return s.session_mgr->DeleteContext(rq.param, rq.caller.name, ctx, &error) ? JsonReply(204, "")
                                                                               : RefusalFor(rq, error);
  }
  auto v = s.session_mgr->GetContext(rq.param, rq.caller.name, ctx, &error);
  return v ? JsonReply(200, model::ContextToJson(*v)) : RefusalFor(rq, error);
}

void Post(const std::shared_ptr<Exchange>& ex) {
  std::string ctx, action;
  if (!ParseTail(ex->rq.tail, &ctx, &action) || (action != "restart" && action != "execute")) {
    return ex->Refuse(NoRoute("POST"));
  }
  if (action == "restart") {
    return ex->OnWorker(
        [&s = ex->s, rq = ex->rq, ctx] {
          model::ApiError error;
          auto v = s.session_mgr->RestartContext(rq.param, rq.caller.name, ctx, &error);
          return v ? JsonReply(200, model::ContextToJson(*v)) : RefusalFor(rq, error);
        },
        [ex](Reply r) { ex->Respond(std::move(r)); });
  }
  ex->execution = true;
  ex->audit.code_bytes = static_cast<int64_t>(ex->rq.body.size());
  ex->ParseBody<model::ExecuteRequest>(
      [caps = Caps(ex->s)](const std::string& body, model::ExecuteRequest* request, model::ApiError* error) {
        return model::ParseContextExecuteRequest(body, caps, request, error);
      },
      [ex, ctx](model::ExecuteRequest request) { CallSession(ex, ctx, std::move(request)); });
}

}  // namespace

std::vector<Route> ContextRoutes::Table() {
  using B = BodyPolicy;
  using O = OwnerRule;
  using P = ReplyPolicy;
  using A = Accounting;
  const Role kRun = Role::kRun;
  const RunsOn kWorker = RunsOn::kWorker;
  const char* kOne = "/v1/sessions/{id}/contexts/{ctx...}";
  std::vector<Route> t = {
      SmallJson(Row("POST", "/v1/sessions/{id}/contexts", kRun, O::kSession, B::kJson, kWorker, P::kJson, A::kRequest,
                    nullptr, &Create),
                size_t{256} << 10),
      Row("GET", "/v1/sessions/{id}/contexts", kRun, O::kSession, B::kNone, kWorker, P::kJson, A::kRequest, nullptr,
          &List),
      Row("GET", kOne, kRun, O::kSession, B::kNone, kWorker, P::kJson, A::kRequest, nullptr, &GetOrDelete),
      Row("DELETE", kOne, kRun, O::kSession, B::kNone, kWorker, P::kJson, A::kRequest, nullptr, &GetOrDelete),
      // restart (no body) or execute (code: --max-body, as the session's own call).
      Row("POST", kOne, kRun, O::kSession, B::kJson, RunsOn::kDriver, P::kRun, A::kRun, &Post),
  };
  for (Route& r : t) {
    if (std::string_view(r.pattern) == kOne) r.name = "/v1/sessions/{id}/contexts/{ctx}";
  }
  return t;
}

}  // namespace airlock::api
