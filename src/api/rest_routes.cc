#include "api/rest_routes.h"

#include <algorithm>

#include "api/error_mapping.h"
#include "api/exchange.h"
#include "api/query.h"
#include "api/run_driver.h"
#include "api/server_state.h"
#include "api/session_routes.h"
#include "base/log.h"
#include "model/mcp.h"
#include "model/stream_events.h"

namespace airlock::api {
namespace {

// ---------------------------------------------------------------------------
// Probes, profiles, metrics, runs, tools: constant time, on the loop.

void Healthz(const std::shared_ptr<Exchange>& ex) { ex->Respond(JsonReply(200, model::StatusToJson("ok", ""))); }

// The pools still starting of the profiles a request that names none gets
// (each door's default): "" once each has had a warm run, or cannot make one
// (degraded: runs take the cold path, and /readyz's pools say why). Latched in
// s.pools_warm: a pool refilling under load does not make the server unready.
std::string StartingPools(ServerState& s, const std::vector<model::PoolView>& pools) {
  if (s.pools_warm) return "";
  std::string starting;
  for (const auto& [door, name] : s.svc.DoorDefaults()) {
    for (const model::PoolView& p : pools) {
      if (p.profile != name || p.ready > 0 || p.state == "degraded" || p.zygote == "down") continue;
      if (starting.find("'" + name + "'") == std::string::npos) starting += (starting.empty() ? "'" : ", '") + name + "'";
    }
  }
  if (starting.empty()) s.pools_warm = true;
  return starting;
}

void Readyz(const std::shared_ptr<Exchange>& ex) {
  ServerState& s = ex->s;
  const std::vector<model::PoolView> pools = s.svc.Pools();
  std::string detail = s.draining ? "the server is shutting down" : s.not_ready_detail;
  if (s.ready && !s.draining) {
    const std::string starting = StartingPools(s, pools);
    if (starting.empty()) return ex->Respond(JsonReply(200, model::ReadyToJson("ready", "", pools)));
    detail = "the warm pools of " + starting +
             " (a door's default profile) are still starting: requests would take the cold path";
  }
  Reply r = JsonReply(503, model::ReadyToJson("not ready", detail, pools));
  r.headers = MakeErrorReply({model::ErrorKind::kUnavailable, "", ""}, {}, false, ex->rq.id).headers;
  ex->Respond(std::move(r));
}

void Profile(const std::shared_ptr<Exchange>& ex) {
  const profile::Profile& p = ex->s.svc.profiles().Default();
  ex->Respond(JsonReply(200, model::ProfileToJson(ex->s.svc.View(p), ex->s.layers)));
}

void Profiles(const std::shared_ptr<Exchange>& ex) {
  const service::Service& svc = ex->s.svc;
  std::vector<model::ProfileView> views;
  for (const profile::Profile& p : svc.profiles().profiles()) views.push_back(svc.View(p, profile::Door::kApi));
  ex->Respond(JsonReply(
      200, model::ProfileListToJson(views, svc.profiles().DefaultFor(profile::Door::kApi).name, svc.DoorDefaults())));
}

// The analyzer's rule catalog: each rule's id, what it finds, a sample.
void Rules(const std::shared_ptr<Exchange>& ex) {
  ex->Respond(JsonReply(200, model::RulesToJson(service::Service::Rules())));
}

void ProfileByName(const std::shared_ptr<Exchange>& ex) {
  const std::string& name = ex->rq.param;
  const profile::Profile* p = ex->s.svc.profiles().Find(name);
  if (p == nullptr) {
    return ex->Refuse({model::ErrorKind::kNotFound,
                       "no profile named '" + name.substr(0, 64) + "' (GET /v1/profiles lists them)", ""});
  }
  ex->Respond(JsonReply(200, model::ProfileToJson(ex->s.svc.View(*p, profile::Door::kApi), ex->s.layers)));
}

void MetricsText(const std::shared_ptr<Exchange>& ex) {
  ServerState& s = ex->s;
  Reply r;
  r.body = s.metrics.Render() + RenderPoolMetrics(s.svc.Pools()) + RenderSessionMetrics(s.session_mgr->Stats());
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  ex->Respond(std::move(r));
}

// Approvers see every run; a run-only token its own.
void Runs(const std::shared_ptr<Exchange>& ex) {
  PageRequest page;
  if (auto bad = ParsePage(ex->rq.query, 50, RecentRuns::kKept, &page)) return ex->Refuse(*bad);
  const bool all = !ex->rq.auth_enabled || ex->rq.caller.approve;
  std::optional<std::string> next;
  std::string body = ex->s.recent.ToJson(all ? nullptr : &ex->rq.caller.name, page.limit, page.cursor, &next);
  body.pop_back();  // '}'
  ex->Respond(JsonReply(200, body + ",\"next_cursor\":" + CursorJson(next) + "}"));
}

// GET /v1/tools?format=openai|openai-responses|anthropic|mcp (default openai).
void Tools(const std::shared_ptr<Exchange>& ex) {
  const service::Service& svc = ex->s.svc;
  std::string format = QueryParam(ex->rq.query, "format").value_or("").substr(0, 64);
  if (format.empty()) format = "openai";
  model::McpToolsInfo info;
  info.default_profile = svc.profiles().DefaultFor(profile::Door::kMcp).name;
  info.profiles = svc.profiles().Names();
  for (const profile::Profile& p : svc.profiles().profiles()) {
    info.max_timeout_s = std::max(info.max_timeout_s, p.resources.timeout_max_s);
  }
  info.max_file_bytes = ex->s.opt.max_file_bytes;
  std::string body = model::ToolDefinitions(format, info);
  if (body.empty()) {
    return ex->Refuse(
        {model::ErrorKind::kBadRequest, "format must be openai, openai-responses, anthropic or mcp", "format"});
  }
  ex->Respond(JsonReply(200, std::move(body)));
}

// ---------------------------------------------------------------------------
// One-shot runs: /execute (the sidecar's shapes) and /v1/execute.

struct RunState {
  uint64_t ticket = 0;
  std::shared_ptr<RunDriver> driver;
  model::StreamFormat format = model::StreamFormat::kNone;
};

void OnRunDone(const std::shared_ptr<Exchange>& ex, RunOutcome o);
void HoldForApproval(const std::shared_ptr<Exchange>& ex, service::Prepared p, std::optional<double> wait_s);

void OnPrepared(const std::shared_ptr<Exchange>& ex, service::Prepared p, model::StreamFormat format,
                std::optional<double> wait_s) {
  ServerState& s = ex->s;
  ex->RecordCode(p.profile_name, p.code_sha256, p.code_bytes);
  if (p.verdict == service::Verdict::kInvalid) return ex->Refuse(p.error);
  if (p.verdict == service::Verdict::kRejected) return ex->Refuse(p.error, p.violations);
  if (p.verdict == service::Verdict::kNeedsApproval) return HoldForApproval(ex, std::move(p), wait_s);
  ex->audit.violations = p.plan->warnings;
  auto state = std::make_shared<RunState>();
  state->format = format;
  RunSlots::Result admitted = RunWhenSlotFree(
      s, std::move(p.plan),
      [ex, state](const std::shared_ptr<RunDriver>& driver) {
        state->driver = driver;
        if (state->format == model::StreamFormat::kNone) return;
        // A streamed response: the run's output goes to the writer as it is
        // read (on this loop, or on a worker while the run is finished; in
        // order, before the run's end), and the response begins once the run
        // is launched. Until then every refusal keeps its status and JSON body.
        std::weak_ptr<EventStream> events = ex->MakeEvents(state->format);
        net::io_context& io = *ex->s.io;
        driver->plan_options().on_output = [events, &io](exec::Stream which, std::string_view bytes) {
          net::dispatch(io, [events, which, data = std::string(bytes)] {
            if (auto es = events.lock()) es->Output(which == exec::Stream::kStdout ? "stdout" : "stderr", data);
          });
        };
        std::weak_ptr<Exchange> weak = ex;
        driver->OnStarted([weak] {
          if (auto e = weak.lock()) e->BeginEvents();
        });
      },
      [ex](RunOutcome o) { OnRunDone(ex, std::move(o)); }, &state->ticket);
  if (admitted == RunSlots::kFull) {
    return ex->Refuse({model::ErrorKind::kTooManyRequests,
                       "the server is busy: " + std::to_string(s.slots.running()) + " runs executing and " +
                           std::to_string(s.slots.queued()) + " queued; retry after 1 s",
                       ""});
  }
  // A client that leaves: a queued request leaves the queue, a running one is killed.
  ex->WatchDisconnect([ex, state] {
    if (state->driver) return state->driver->Cancel("the client disconnected");
    if (ex->s.slots.Cancel(state->ticket)) {
      ex->s.metrics.CountExecution("cancelled", 0);
      ex->audit.error = "the client disconnected while the request was queued";
      ex->audit.verdict = "client_gone";
      ex->Abandon();
    }
  });
}

void OnRunDone(const std::shared_ptr<Exchange>& ex, RunOutcome o) {
  const bool streaming = ex->events() && ex->events()->started();
  if (o.drained) return ex->Refuse({model::ErrorKind::kUnavailable, o.status.message(), ""});
  if (!o.status.ok()) {
    log::Error("request " + ex->rq.id + ": the run could not be started: " + o.status.ToString());
    ex->s.metrics.CountExecution("failed", 0);
    ex->audit.verdict = "error";
    return ex->Refuse({model::ErrorKind::kInternal, "the run could not be started: " + o.status.ToString(), ""});
  }
  const model::RunReport& run = o.response.run;
  ex->RecordRun(run);
  if (run.kill_reason && *run.kill_reason == "lost" && !ex->gone() && !streaming) {
    // Not the code's doing: the warm pool's zygote died under it. Say so, and
    // that the same request can simply be sent again.
    ex->audit.verdict = "error";
    return ex->Refuse({model::ErrorKind::kUnavailable, run.kill_detail, ""});
  }
  ex->audit.verdict = ex->gone() ? "client_gone" : "ran";
  if (ex->gone()) return ex->Abandon();
  // The answer: made on a worker when it is large (megabytes of output,
  // results and files are not constant time to write as JSON).
  struct Answer {
    std::string body;
    std::vector<model::StreamEvent> final_events;
  };
  const bool large = AnswerBytes(o.response) > kInlineBytes;
  ex->OnWorkerIf(
      large,
      [resp = std::move(o.response), compat = ex->compat, streaming] {
        Answer a;
        if (streaming) {
          a.final_events = model::FinalEvents(resp);
          a.body = model::V1ExecuteToJson(resp);
        } else {
          a.body = compat ? model::CompatExecuteToJson(resp) : model::V1ExecuteToJson(resp);
        }
        return a;
      },
      [ex, streaming](Answer a) {
        if (ex->gone() || (streaming && !ex->events())) return ex->Abandon();
        // A stream already begun ends with the response as its last event (a
        // run lost with its zygote says so there: kill_reason "lost").
        if (streaming) {
          return ex->EndEvents(a.final_events, "end_of_execution",
                               model::EndOfExecutionEvent(a.body, ex->events()->StatsJson()));
        }
        ex->Respond(JsonReply(200, std::move(a.body)));
      });
}

// The profile holds this request for a person: 202 at once, or after the
// decision and the run when the client asked to wait (the connection is held
// by a timer, never by a thread).
void HoldForApproval(const std::shared_ptr<Exchange>& ex, service::Prepared p, std::optional<double> wait_s) {
  ServerState& s = ex->s;
  ex->audit.violations = p.violations;
  std::string id;
  if (auto refused = s.Hold(std::move(p), ex->rq.caller.name, ex->rq.id, &id)) return ex->Refuse(*refused);
  ex->audit.approval_id = id;
  ex->audit.verdict = "pending_approval";
  ex->audit.http_status = 202;
  if (!wait_s) {
    Reply r = JsonReply(202, s.approvals->PendingJson(id));
    r.headers.emplace_back("X-Approval-Id", id);
    return ex->Respond(std::move(r));
  }
  ex->WatchDisconnect([] {});  // a disconnect only marks the request: the approval stays
  s.approvals->Wait(id, *wait_s, [ex, id] {
    RouteAnswer a = ex->s.approvals->Outcome(id, ex->compat);
    Reply r = JsonReply(a.status, a.body);
    r.headers.emplace_back("X-Approval-Id", id);
    ex->Respond(std::move(r));
  });
}

// The request parsed and its code analyzed: on the loop for a small body, on
// a worker for a large one (a megabyte of JSON and code is not constant time).
struct Parsed {
  model::ApiError error;
  bool ok = false;
  int64_t code_bytes = 0;
  std::optional<double> wait_s;
  std::optional<service::Prepared> prepared;
};

void Execute(const std::shared_ptr<Exchange>& ex) {
  ServerState& s = ex->s;
  ex->compat = ex->rq.path == "/execute";
  ex->execution = true;
  if (s.draining) {
    return ex->Refuse({model::ErrorKind::kUnavailable, "the server is shutting down; retry on another instance", ""});
  }
  const model::RequestCaps caps = Caps(s);
  const model::StreamFormat format =
      ex->compat ? model::StreamFormat::kNone : model::NegotiateStreamFormat(ex->rq.headers.accept);
  const bool large = ex->rq.body.size() > kInlineBytes;
  ex->OnWorkerIf(
      large,
      [&svc = s.svc, caps, format, compat = ex->compat, body = std::move(ex->rq.body), id = ex->rq.id] {
        Parsed p;
        model::ExecuteRequest request;
        if (!model::ParseExecuteRequest(body, caps, &request, &p.error)) return p;
        p.ok = true;
        p.code_bytes = static_cast<int64_t>(request.code.size());
        p.wait_s = request.wait_s;
        request.stream_output = format != model::StreamFormat::kNone;
        // Each door's default profile: /execute the fips sidecar's, /v1 one where agent code runs.
        if (!request.profile && !compat) request.profile = svc.profiles().DefaultFor(profile::Door::kApi).name;
        p.prepared = svc.Prepare(request, id);
        return p;
      },
      [ex, format](Parsed p) {
        if (!p.ok) return ex->Refuse(p.error);
        if (ex->gone()) return ex->Abandon();
        ex->audit.code_bytes = p.code_bytes;
        OnPrepared(ex, std::move(*p.prepared), format, p.wait_s);
      });
}

}  // namespace

std::vector<Route> RestRoutes::Table() {
  using B = BodyPolicy;
  using P = ReplyPolicy;
  using A = Accounting;
  using O = OwnerRule;
  const RunsOn kLoop = RunsOn::kLoop;
  std::vector<Route> t = {
      Row("GET", "/healthz", Role::kOpen, O::kNone, B::kNone, kLoop, P::kJson, A::kNone, &Healthz),
      Row("GET", "/readyz", Role::kOpen, O::kNone, B::kNone, kLoop, P::kJson, A::kNone, &Readyz),
      Row("GET", "/profile", Role::kAny, O::kNone, B::kNone, kLoop, P::kJson, A::kRequest, &Profile),
      Row("GET", "/v1/profiles", Role::kAny, O::kNone, B::kNone, kLoop, P::kJson, A::kRequest, &Profiles),
      Row("GET", "/v1/rules", Role::kAny, O::kNone, B::kNone, kLoop, P::kJson, A::kRequest, &Rules),
      Row("GET", "/v1/profiles/{name}", Role::kAny, O::kNone, B::kNone, kLoop, P::kJson, A::kRequest, &ProfileByName),
      Row("GET", "/metrics", Role::kAny, O::kNone, B::kNone, kLoop, P::kText, A::kRequest, &MetricsText),
      // The caller's own runs (an approver's: all).
      Row("GET", "/v1/runs", Role::kAny, O::kCaller, B::kNone, kLoop, P::kJson, A::kRequest, &Runs),
      Row("GET", "/v1/tools", Role::kAny, O::kNone, B::kNone, kLoop, P::kJson, A::kRequest, &Tools),
      Row("POST", "/execute", Role::kRun, O::kNone, B::kJson, RunsOn::kDriver, P::kRun, A::kRun, &Execute),
      Row("POST", "/v1/execute", Role::kRun, O::kNone, B::kJson, RunsOn::kDriver, P::kRun, A::kRun, &Execute),
  };
  return t;
}

}  // namespace airlock::api
