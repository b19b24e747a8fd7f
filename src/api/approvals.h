// Approvals: requests held for a person's decision (docs/api.md, "Approvals").
// A request whose profile's approval policy holds it (service::Verdict::
// kNeedsApproval) is kept here with its prepared Plan: the Plan is what runs
// once approved, so the code, profile and limits a person saw are exactly
// what runs (nothing of the request is read again). Everything here runs on
// the server's event-loop thread; waits and expiries are asio timers.
//
//   Approvals book(io, opts, start_run, audit);
//   StatusOr<std::string> id = book.Hold(std::move(prepared), requester, policy, request_id);
//   book.Wait(*id, 30, [..] { reply(book.Outcome(*id, compat)); });
//   RouteAnswer a = book.Decide("apr_..", body, caller);     // the routes: api/approval_routes.h
#pragma once

#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/auth.h"
#include "base/status.h"
#include "model/approval.h"
#include "model/execute.h"
#include "profile/profile.h"
#include "service/service.h"

namespace airlock::api {

struct ApprovalOptions {
  size_t max_pending = 64;      // held requests at once; beyond: 429
  size_t max_kept = 256;        // decided ones kept for GET (oldest dropped first)
  size_t max_results = 32;      // of those, how many keep their run's result
  size_t max_depth = 32;        // of a decision's JSON body
  bool auth_enabled = false;    // without tokens there are no identities: anyone may decide
};

// Who is calling: the token's name and roles (every role without tokens).
struct Caller {
  std::string name;
  bool run = true;
  bool approve = true;
};

struct RouteAnswer {
  int status = 200;
  std::string body;  // JSON
};

class Approvals {
 public:
  // Starts an approved Plan (taking a run slot, or queueing for one); `done`
  // is called on the event loop with the launch's status and the response.
  using RunDone = std::function<void(Status, model::ExecuteResponse)>;
  using StartRun = std::function<void(std::unique_ptr<service::Plan>, RunDone)>;
  using AuditFn = std::function<void(model::AuditRecord)>;

  Approvals(boost::asio::io_context& io, ApprovalOptions options, StartRun start_run, AuditFn audit);
  ~Approvals();

  // Keeps a kNeedsApproval request. ResourceExhausted when max_pending are held.
  StatusOr<std::string> Hold(service::Prepared prepared, const std::string& requested_by,
                             const profile::Approval& policy, const std::string& request_id);
  // The 202 body of a held request (no code echoed).
  std::string PendingJson(const std::string& id) const;

  // Calls `done` once: when the request is denied, expires, ran or failed, or
  // when `wait_s` passes while it is still pending (an approved run is waited for).
  void Wait(const std::string& id, double wait_s, std::function<void()> done);
  // What a waiting client is answered: 200 the run's response (compat: the
  // sidecar's shape), 403 denied/expired, 202 still pending, 500 failed.
  RouteAnswer Outcome(const std::string& id, bool compat) const;

  // GET /v1/approvals (an approver's: the route's role): a page of the
  // pending requests, oldest first, `limit` of them after `cursor` ("": the
  // first page), each without its code (GET /v1/approvals/{id} has it), and
  // the next page's cursor (nullopt on the last).
  RouteAnswer List(size_t limit, const std::string& cursor, std::optional<std::string>* next) const;
  // GET /v1/approvals/{id}, once Visible(): the whole approval, code and result.
  RouteAnswer Get(const std::string& id) const;
  // The approval `id` as it is now (nullptr: none), for a caller that renders
  // it elsewhere: Render(view) is Get's answer, linear in its code and files,
  // so a large one is made on a worker from a copy (api/approval_routes.cc).
  const model::ApprovalView* View(const std::string& id) const;
  static RouteAnswer Render(const model::ApprovalView& view);
  // GET /v1/approvals/{id}/files/{n}, once Visible(): an input file too large
  // or not text enough to be shown in the approval itself.
  RouteAnswer File(const std::string& id, const std::string& index) const;
  // POST /v1/approvals/{id}: {"decision", "reason"?, "code_sha256"?}.
  RouteAnswer Decide(const std::string& id, const std::string& body, const Caller& caller);
  // Whether `caller` may see approval `id`: its requester, or an approver
  // (without tokens, anyone). Others are told nothing (404, as for an id
  // that does not exist): the pipeline's owner check.
  bool Visible(const std::string& id, const Caller& caller) const;
  // The requests `requester` has held for approval now (its quota).
  size_t PendingOf(const std::string& requester) const;

  // Shutdown: every waiter is answered now (held requests are in memory only
  // and end with the server).
  void ReleaseWaiters();

 private:
  struct Entry {
    model::ApprovalView view;
    std::unique_ptr<service::Plan> plan;
    bool self_approve = false;
    bool compat = false;
    std::unique_ptr<boost::asio::steady_timer> expiry;
    std::vector<std::pair<std::unique_ptr<boost::asio::steady_timer>, std::function<void()>>> waiters;
    model::ExecuteResponse response;  // once ran (while kept)
    bool has_response = false;
    uint64_t seq = 0;
  };

  Entry* Find(const std::string& id);
  const Entry* Find(const std::string& id) const;
  void Expire(const std::string& id);
  void Finish(Entry& e);  // a terminal state: waiters answered, retention applied
  void OnRan(const std::string& id, Status st, model::ExecuteResponse resp);
  void AuditDecision(const Entry& e, const std::string& verdict, const std::string& by, int status);
  void Trim();
  std::string NewId();

  boost::asio::io_context& io_;
  ApprovalOptions opt_;
  StartRun start_run_;
  AuditFn audit_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  size_t pending_ = 0;
  uint64_t seq_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace airlock::api
