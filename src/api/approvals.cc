#include "api/approvals.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "analyzer/unicode.h"
#include "api/audit_log.h"
#include "api/error_mapping.h"
#include "base/log.h"
#include "base/random.h"

namespace airlock::api {

namespace {

// RFC 3339 UTC, `seconds` from now (expires_at).
std::string Rfc3339After(double seconds) {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  time_t t = ts.tv_sec + static_cast<time_t>(seconds);
  struct tm tm;
  ::gmtime_r(&t, &tm);
  char buf[64];
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
  return buf;
}

RouteAnswer Error(model::ErrorKind kind, std::string message) {
  return {HttpStatus(kind), model::ErrorToJson({kind, std::move(message), ""}, "")};
}

bool Terminal(const std::string& status) {
  return status == "ran" || status == "failed" || status == "denied" || status == "expired";
}

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// An input file's content is shown in the approval when it is text a person
// reads on the page: valid UTF-8, no NUL, at most this long; else it is a
// download link.
constexpr size_t kShownFileBytes = 64 << 10;

bool ShownAsText(const std::string& content) {
  return content.size() <= kShownFileBytes && content.find('\0') == std::string::npos &&
         !analyzer::FindInvalidUtf8(content).has_value();
}

// Every approval JSON leaves the server with its invisible characters
// (bidirectional controls, zero-width ones) escaped: whoever reads the code or
// a file, in the console or in a terminal, sees \u202e where the text would
// otherwise be reordered.
RouteAnswer Json(int status, const std::string& body) { return {status, analyzer::EscapeInvisibleInJson(body)}; }

}  // namespace

Approvals::Approvals(boost::asio::io_context& io, ApprovalOptions options, StartRun start_run, AuditFn audit)
    : io_(io), opt_(options), start_run_(std::move(start_run)), audit_(std::move(audit)) {}

Approvals::~Approvals() { *alive_ = false; }

std::string Approvals::NewId() {
  // 128 random bits: an id is not a secret (the routes check who asks), but
  // guessing one must not be a way to find others' requests.
  return "apr_" + base::RandomHex(16);
}

Approvals::Entry* Approvals::Find(const std::string& id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.get();
}
const Approvals::Entry* Approvals::Find(const std::string& id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.get();
}

StatusOr<std::string> Approvals::Hold(service::Prepared p, const std::string& requested_by,
                                      const profile::Approval& policy, const std::string& request_id) {
  if (pending_ >= opt_.max_pending) {
    return Status(ErrorCode::kResourceExhausted, std::to_string(pending_) +
                             " requests are waiting for approval already (--max-pending-approvals); decide some "
                             "(GET /v1/approvals) or retry later");
  }
  if (!p.plan) return Status(ErrorCode::kInternal, "Approvals::Hold: a request without a prepared run");
  // The digests come from Service::Prepare (a worker for a large request):
  // never a hash of megabytes here, on the event loop.
  if (p.request_sha256.empty() || p.file_sha256.size() != p.files.size()) {
    return Status(ErrorCode::kInternal, "Approvals::Hold: a request without its digests (Service::Prepare makes them)");
  }
  auto e = std::make_unique<Entry>();
  std::string id = NewId();
  model::ApprovalView& v = e->view;
  v.id = id;
  v.status = "pending";
  v.request_id = request_id;
  v.profile = p.profile_name;
  v.language = std::string(profile::LanguageName(p.plan->language));
  v.limits = service::ToView(p.plan->limits);
  v.code = std::move(p.code);
  v.code_sha256 = p.code_sha256;
  v.code_bytes = p.code_bytes;
  for (size_t i = 0; i < p.files.size(); ++i) {
    model::InputFile& f = p.files[i];
    model::ApprovalFile af;
    af.path = std::move(f.path);
    af.size = static_cast<int64_t>(f.content.size());
    af.sha256 = std::move(p.file_sha256[i]);
    af.shown = ShownAsText(f.content);
    af.content = std::move(f.content);
    v.files.push_back(std::move(af));
  }
  v.request_sha256 = std::move(p.request_sha256);
  v.findings = std::move(p.violations);
  v.requested_by = requested_by;
  v.created_at = NowRfc3339();
  v.expires_at = Rfc3339After(policy.expires_s);
  e->plan = std::move(p.plan);
  e->self_approve = policy.self_approve;
  e->seq = ++seq_;
  e->expiry = std::make_unique<boost::asio::steady_timer>(io_);
  e->expiry->expires_after(Ms(policy.expires_s));
  std::weak_ptr<bool> alive = alive_;
  e->expiry->async_wait([this, alive, id](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    Expire(id);
  });
  entries_.emplace(id, std::move(e));
  ++pending_;
  Trim();
  return id;
}

std::string Approvals::PendingJson(const std::string& id) const {
  const Entry* e = Find(id);
  return e ? Json(200, model::ApprovalToJson(e->view, false, false)).body : "{}";
}

void Approvals::Wait(const std::string& id, double wait_s, std::function<void()> done) {
  Entry* e = Find(id);
  if (e == nullptr || Terminal(e->view.status)) return done();
  auto timer = std::make_unique<boost::asio::steady_timer>(io_);
  timer->expires_after(Ms(wait_s));
  boost::asio::steady_timer* raw = timer.get();
  e->waiters.emplace_back(std::move(timer), std::move(done));
  std::weak_ptr<bool> alive = alive_;
  raw->async_wait([this, alive, id, raw](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    Entry* en = Find(id);
    // An approved request is waited for until its run ends (bounded by its timeout).
    if (en == nullptr || en->view.status != "pending") return;
    for (auto it = en->waiters.begin(); it != en->waiters.end(); ++it) {
      if (it->first.get() != raw) continue;
      std::function<void()> fn = std::move(it->second);
      en->waiters.erase(it);  // destroys the timer: we are its (completed) handler
      fn();
      return;
    }
  });
}

RouteAnswer Approvals::Outcome(const std::string& id, bool compat) const {
  const Entry* e = Find(id);
  if (e == nullptr) return Error(model::ErrorKind::kNotFound, "no approval " + id.substr(0, 64) + " (expired from memory)");
  const std::string& s = e->view.status;
  if (s == "ran") {
    if (e->has_response) {
      return {200, compat ? model::CompatExecuteToJson(e->response) : model::V1ExecuteToJson(e->response)};
    }
    return Json(200, model::ApprovalToJson(e->view, false, true));
  }
  if (s == "denied" || s == "expired") return Json(403, model::ApprovalToJson(e->view, false, false));
  if (s == "failed") return Json(500, model::ApprovalToJson(e->view, false, false));
  return Json(202, model::ApprovalToJson(e->view, false, false));
}

RouteAnswer Approvals::List(size_t limit, const std::string& cursor, std::optional<std::string>* next) const {
  // The cursor is the sequence number of the last item of the page before.
  const uint64_t after = cursor.empty() ? 0 : std::strtoull(cursor.c_str(), nullptr, 10);
  std::vector<const Entry*> pending;
  for (const auto& [id, e] : entries_) {
    if (e->view.status == "pending" && e->seq > after) pending.push_back(e.get());
  }
  std::sort(pending.begin(), pending.end(), [](const Entry* a, const Entry* b) { return a->seq < b->seq; });
  next->reset();
  if (pending.size() > limit) {
    pending.resize(limit);
    *next = std::to_string(pending.back()->seq);
  }
  std::vector<const model::ApprovalView*> views;  // no copy: the code is never read for a list
  for (const Entry* e : pending) views.push_back(&e->view);
  return Json(200, model::ApprovalListToJson(views));
}

RouteAnswer Approvals::Get(const std::string& id) const {
  const Entry* e = Find(id);
  if (e == nullptr) {
    return Error(model::ErrorKind::kNotFound, "no approval '" + id.substr(0, 64) + "' (GET /v1/approvals lists pending ones)");
  }
  return Render(e->view);
}

const model::ApprovalView* Approvals::View(const std::string& id) const {
  const Entry* e = Find(id);
  return e == nullptr ? nullptr : &e->view;
}

RouteAnswer Approvals::Render(const model::ApprovalView& view) { return Json(200, model::ApprovalToJson(view, true, true)); }

RouteAnswer Approvals::File(const std::string& id, const std::string& index) const {
  const Entry* e = Find(id);
  if (e == nullptr) {
    return Error(model::ErrorKind::kNotFound, "no approval '" + id.substr(0, 64) + "' (GET /v1/approvals lists pending ones)");
  }
  if (index.empty() || index.size() > 5 || index.find_first_not_of("0123456789") != std::string::npos) {
    return Error(model::ErrorKind::kNotFound, "no such route under /v1/approvals/{id}/files/ (a file's number: 0, 1, ...)");
  }
  const size_t n = std::stoul(index);
  if (n >= e->view.files.size()) {
    return Error(model::ErrorKind::kNotFound, "approval " + id + " has " + std::to_string(e->view.files.size()) +
                                                  " input files; numbered from 0");
  }
  if (!e->view.files[n].kept) {
    return Error(model::ErrorKind::kNotFound, "approval " + id + " is " + e->view.status +
                                                  ": its files are no longer kept (their sha256 is)");
  }
  return Json(200, model::ApprovalFileToJson(e->view.files[n]));
}

bool Approvals::Visible(const std::string& id, const Caller& caller) const {
  const Entry* e = Find(id);
  if (e == nullptr) return true;  // Get answers 404 for it, as for another's
  return !opt_.auth_enabled || caller.approve || e->view.requested_by == caller.name;
}

size_t Approvals::PendingOf(const std::string& requester) const {
  size_t n = 0;
  for (const auto& [id, e] : entries_) {
    if (e->view.status == "pending" && e->view.requested_by == requester) ++n;
  }
  return n;
}

RouteAnswer Approvals::Decide(const std::string& id, const std::string& body, const Caller& caller) {
  if (opt_.auth_enabled && !caller.approve) {
    return Error(model::ErrorKind::kForbidden, "token '" + caller.name +
                                                   "' may not approve: give it the approve role in the tokens file "
                                                   "(name:token:approve or name:token:run+approve)");
  }
  Entry* e = Find(id);
  if (e == nullptr) return Error(model::ErrorKind::kNotFound, "no approval '" + id.substr(0, 64) + "'");
  model::ApprovalDecision d;
  model::ApiError err;
  if (!model::ParseApprovalDecision(body, opt_.max_depth, &d, &err)) return {HttpStatus(err.kind), model::ErrorToJson(err, "")};
  if (e->view.status != "pending") {
    return Error(model::ErrorKind::kConflict, "approval " + id + " is " + e->view.status + " already");
  }
  if (d.request_sha256 && *d.request_sha256 != e->view.request_sha256) {
    return Error(model::ErrorKind::kConflict, "request_sha256 " + *d.request_sha256 +
                                                  " is not the held request's (" + e->view.request_sha256 +
                                                  "): decide on the request GET /v1/approvals/" + id +
                                                  " shows (code, language, limits and files)");
  }
  if (d.code_sha256 && *d.code_sha256 != e->view.code_sha256) {
    return Error(model::ErrorKind::kConflict, "code_sha256 " + d.code_sha256->substr(0, 64) +
                                                  " is not the held code's (" + e->view.code_sha256 +
                                                  "): decide on the code GET /v1/approvals shows");
  }
  if (opt_.auth_enabled && caller.name == e->view.requested_by && !e->self_approve) {
    return Error(model::ErrorKind::kForbidden, "token '" + caller.name +
                                                   "' sent this request and may not decide on it (profile " +
                                                   e->view.profile + " does not set approval.self_approve)");
  }
  --pending_;
  e->expiry->cancel();
  model::ApprovalView& v = e->view;
  v.decided_at = NowRfc3339();
  v.decided_by = opt_.auth_enabled ? caller.name : "(no tokens configured)";
  v.reason = d.reason;
  if (!d.approve) {
    v.status = "denied";
    v.error = "denied by " + v.decided_by + (d.reason.empty() ? "" : ": " + d.reason);
    e->plan.reset();
    AuditDecision(*e, "denied", v.decided_by, 200);
    RouteAnswer a = Json(200, model::ApprovalToJson(v, false, false));
    Finish(*e);
    return a;
  }
  v.status = "approved";
  AuditDecision(*e, "approved", v.decided_by, 200);
  RouteAnswer a = Json(200, model::ApprovalToJson(v, false, false));
  std::weak_ptr<bool> alive = alive_;
  // The held Plan itself runs: the code, profile and limits decided on.
  start_run_(std::move(e->plan), [this, alive, id](Status st, model::ExecuteResponse resp) {
    if (alive.expired()) return;
    OnRan(id, std::move(st), std::move(resp));
  });
  return a;
}

void Approvals::OnRan(const std::string& id, Status st, model::ExecuteResponse resp) {
  Entry* e = Find(id);
  if (e == nullptr) return;
  model::ApprovalView& v = e->view;
  model::AuditRecord a;
  a.time = NowRfc3339();
  a.request_id = v.request_id;
  a.route = "/v1/approvals/" + id;
  a.token_name = v.requested_by;
  a.profile = v.profile;
  a.code_sha256 = v.code_sha256;
  a.code_bytes = v.code_bytes;
  a.violations = v.findings;
  a.approval_id = id;
  a.request_sha256 = v.request_sha256;
  if (!st.ok()) {
    v.status = "failed";
    v.error = "the run could not be started: " + st.ToString();
    a.verdict = "error";
    a.http_status = 500;
    a.error = v.error;
  } else {
    v.status = "ran";
    e->response = std::move(resp);
    e->has_response = true;
    v.result_json = model::V1ExecuteToJson(e->response);
    const model::RunReport& run = e->response.run;
    a.verdict = "ran";
    a.http_status = 200;
    model::RecordRunIn(&a, run);
    a.duration_ms = run.duration_ms;
  }
  if (audit_) audit_(std::move(a));
  Finish(*e);
}

void Approvals::Expire(const std::string& id) {
  Entry* e = Find(id);
  if (e == nullptr || e->view.status != "pending") return;
  --pending_;
  e->view.status = "expired";
  e->view.decided_at = NowRfc3339();
  e->view.error = "not decided before " + e->view.expires_at + ": denied";
  e->plan.reset();
  AuditDecision(*e, "expired", "", 0);
  Finish(*e);
}

void Approvals::AuditDecision(const Entry& e, const std::string& verdict, const std::string& by, int status) {
  if (!audit_) return;
  model::AuditRecord a;
  a.type = "approval";
  a.time = NowRfc3339();
  a.request_id = e.view.request_id;
  a.route = "/v1/approvals/" + e.view.id;
  a.token_name = by;
  a.requested_by = e.view.requested_by;
  a.profile = e.view.profile;
  a.code_sha256 = e.view.code_sha256;
  a.code_bytes = e.view.code_bytes;
  a.verdict = verdict;
  a.http_status = status;
  a.violations = e.view.findings;
  a.approval_id = e.view.id;
  a.request_sha256 = e.view.request_sha256;
  a.reason = e.view.reason;
  audit_(std::move(a));
}

void Approvals::Finish(Entry& e) {
  // Decided and done: the files' bytes go (their path, size and sha256 stay).
  for (model::ApprovalFile& f : e.view.files) {
    f.content = std::string();
    f.kept = false;
  }
  auto waiters = std::move(e.waiters);
  e.waiters.clear();
  for (auto& [timer, fn] : waiters) {
    timer->cancel();
    if (fn) fn();
  }
  Trim();
}

void Approvals::ReleaseWaiters() {
  for (auto& [id, e] : entries_) {
    auto waiters = std::move(e->waiters);
    e->waiters.clear();
    for (auto& [timer, fn] : waiters) {
      timer->cancel();
      if (fn) fn();
    }
  }
}

void Approvals::Trim() {
  std::vector<Entry*> done;
  for (auto& [id, e] : entries_) {
    if (Terminal(e->view.status)) done.push_back(e.get());
  }
  std::sort(done.begin(), done.end(), [](const Entry* a, const Entry* b) { return a->seq > b->seq; });  // newest first
  size_t with_result = 0;
  for (size_t i = 0; i < done.size(); ++i) {
    Entry* e = done[i];
    if (i >= opt_.max_kept && e->waiters.empty()) {
      entries_.erase(e->view.id);
      continue;
    }
    if (e->has_response && ++with_result > opt_.max_results && e->waiters.empty()) {
      e->response = model::ExecuteResponse();
      e->has_response = false;
      e->view.result_json.clear();
      e->view.result_dropped = true;
    }
  }
}

}  // namespace airlock::api
