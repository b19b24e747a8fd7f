#include "api/approval_routes.h"

#include "api/approvals.h"
#include "api/exchange.h"
#include "api/query.h"
#include "api/server_state.h"

namespace airlock::api {
namespace {

Caller CallerOf(const Request& rq) { return {rq.caller.name, rq.caller.run, rq.caller.approve}; }

// The book's answers are whole bodies, errors included (their verdict in the
// record comes from the status).
void Answer(const std::shared_ptr<Exchange>& ex, const RouteAnswer& a) { ex->Respond(JsonReply(a.status, a.body)); }

// A page of the pending requests, oldest first, without their code: 60 held
// requests of a megabyte each were one answer of 57 MiB, built on the loop.
void List(const std::shared_ptr<Exchange>& ex) {
  PageRequest page;
  if (auto bad = ParsePage(ex->rq.query, 50, 200, &page)) return ex->Refuse(*bad);
  std::optional<std::string> next;
  RouteAnswer a = ex->s.approvals->List(page.limit, page.cursor, &next);
  a.body.pop_back();  // '}'
  a.body += ",\"next_cursor\":" + CursorJson(next) + "}";
  Answer(ex, a);
}

// One approval, its code and files included: made on a worker, from a copy,
// when they are large (a held request of a megabyte, written as JSON and its
// invisible characters escaped, is not constant time on the loop).
void Get(const std::shared_ptr<Exchange>& ex) {
  const model::ApprovalView* v = ex->s.approvals->View(ex->rq.param);
  size_t bytes = v == nullptr ? 0 : v->code.size() + v->result_json.size();
  if (v != nullptr) {
    for (const model::ApprovalFile& f : v->files) bytes += f.content.size();
  }
  if (bytes <= kInlineBytes) return Answer(ex, ex->s.approvals->Get(ex->rq.param));
  ex->OnWorker([view = *v] { return Approvals::Render(view); }, [ex](RouteAnswer a) { Answer(ex, a); });
}

void File(const std::shared_ptr<Exchange>& ex) { Answer(ex, ex->s.approvals->File(ex->rq.param, ex->rq.tail)); }

void Decide(const std::shared_ptr<Exchange>& ex) {
  Answer(ex, ex->s.approvals->Decide(ex->rq.param, ex->rq.body, CallerOf(ex->rq)));
}

}  // namespace

std::vector<Route> ApprovalRoutes::Table() {
  const RunsOn kLoop = RunsOn::kLoop;
  const ReplyPolicy kJson = ReplyPolicy::kJson;
  const Accounting kRequest = Accounting::kRequest;
  return {
      Row("GET", "/v1/approvals", Role::kApprove, OwnerRule::kNone, BodyPolicy::kNone, kLoop, kJson, kRequest, &List),
      Row("GET", "/v1/approvals/{id}", Role::kAny, OwnerRule::kApproval, BodyPolicy::kNone, kLoop, kJson, kRequest,
          &Get),
      Row("GET", "/v1/approvals/{id}/files/{n...}", Role::kAny, OwnerRule::kApproval, BodyPolicy::kNone, kLoop,
          kJson, kRequest, &File),
      SmallJson(Row("POST", "/v1/approvals/{id}", Role::kApprove, OwnerRule::kNone, BodyPolicy::kJson, kLoop, kJson,
                    kRequest, &Decide)),
  };
}

}  // namespace airlock::api
