#include "api/mcp_routes.h"

#include <algorithm>

#include "api/admission.h"
#include "api/call_driver.h"
#include "api/command_routes.h"
#include "api/exchange.h"
#include "api/run_driver.h"
#include "api/server_state.h"
#include "api/session_routes.h"
#include "base/random.h"
#include "model/mcp.h"

namespace airlock::api {
namespace {

// 128 random bits from getrandom, as hex: visible ASCII, as the spec asks.
std::string NewConversationId() { return "mcp-" + base::RandomHex(16); }

Reply JsonRpcError(int status, int code, const std::string& message, const std::string& id_json = "null") {
  return JsonReply(status, model::McpErrorLine(id_json, code, message));
}

bool AcceptsJson(std::string_view accept) {
  if (accept.empty()) return true;
  return accept.find("application/json") != std::string_view::npos || accept.find("*/*") != std::string_view::npos ||
         accept.find("application/*") != std::string_view::npos;
}

model::ApiError SessionNotFound() {
  model::ApiError e{model::ErrorKind::kNotFound, "Session not found (it ended or expired): initialize again", ""};
  return e;
}

}  // namespace

struct McpHandlers {
  // A message, answered on the loop; a tool call it carries is driven from there.
  static void Post(const std::shared_ptr<Exchange>& ex) {
    McpSessions& m = *ex->s.mcp;
    m.Sweep();
    const Request& rq = ex->rq;
    if (!rq.headers.mcp_version.empty()) {
      const auto* b = std::begin(mcp::kProtocolVersions);
      const auto* e = std::end(mcp::kProtocolVersions);
      if (std::find(b, e, rq.headers.mcp_version) == e) {
        return ex->Respond(JsonRpcError(400, -32000,
                                        "Bad Request: unsupported MCP-Protocol-Version '" +
                                            rq.headers.mcp_version.substr(0, 32) +
                                            "' (supported: 2025-11-25, 2025-06-18, 2025-03-26)"));
      }
    }
    if (!AcceptsJson(rq.headers.accept)) {
      return ex->Respond(
          JsonRpcError(406, -32000, "Not Acceptable: this server answers application/json; list it in Accept"));
    }
    // The message is parsed once, by the MCP session's server (a new one for
    // a message without Mcp-Session-Id: it is kept only if that message is an
    // initialize within the quotas), on a worker when it is large.
    std::shared_ptr<mcp::McpServer> server;
    if (rq.headers.mcp_session.empty()) {
      server = m.New(rq.caller.name, Caps(ex->s));
    } else {
      auto it = m.sessions_.find(rq.headers.mcp_session);
      if (it == m.sessions_.end() || it->second.owner != rq.caller.name) return ex->Refuse(SessionNotFound());
      it->second.last_used = Clock::now();
      server = it->second.server;
    }
    ex->OnWorkerIf(
        rq.body.size() > kInlineBytes, [server, body = std::move(ex->rq.body)] { return server->Begin(body); },
        [ex, server](mcp::McpServer::Step step) { Begun(ex, server, std::move(step)); });
  }

  // The message parsed (and answered, unless it is a tool call to run).
  static void Begun(const std::shared_ptr<Exchange>& ex, const std::shared_ptr<mcp::McpServer>& server,
                    mcp::McpServer::Step step) {
    McpSessions& m = *ex->s.mcp;
    const Request& rq = ex->rq;
    std::string new_id;
    if (step.invalid) return ex->Respond(JsonReply(400, std::move(*step.answer)));  // as the TS SDK's server
    if (step.method == "initialize" && !rq.headers.mcp_session.empty()) {
      return ex->Respond(JsonRpcError(400, model::kJsonRpcInvalidRequest,
                                      "Bad Request: initialize opens a new MCP session; send it without "
                                      "Mcp-Session-Id"));
    }
    if (rq.headers.mcp_session.empty()) {
      if (step.method != "initialize") {
        return ex->Respond(
            JsonRpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required (initialize first)"));
      }
      if (auto refused = m.Admit(rq.caller.name)) return ex->Refuse(*refused);
      new_id = NewConversationId();
      m.Keep(new_id, rq.caller.name, server);
    }
    if (!step.tool) {
      Reply r;
      if (!new_id.empty()) r.headers.emplace_back("Mcp-Session-Id", new_id);
      if (!step.answer) {
        r.status = 202;
        r.content_type = "text/plain";
        return ex->Respond(std::move(r));
      }
      r.body = std::move(*step.answer);
      return ex->Respond(std::move(r));
    }
    const std::string id = rq.headers.mcp_session;
    if (auto it = m.sessions_.find(id); it != m.sessions_.end()) ++it->second.in_flight;
    RunTool(ex, server, std::make_shared<mcp::ToolCall>(std::move(*step.tool)), id);
  }

  // DELETE /mcp: the MCP session ends, and the airlock sessions it made (on a worker: kills).
  static void Delete(const std::shared_ptr<Exchange>& ex) {
    McpSessions& m = *ex->s.mcp;
    if (ex->rq.headers.mcp_session.empty()) {
      return ex->Respond(
          JsonRpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required (initialize first)"));
    }
    auto it = m.sessions_.find(ex->rq.headers.mcp_session);
    if (it == m.sessions_.end() || it->second.owner != ex->rq.caller.name) return ex->Refuse(SessionNotFound());
    std::shared_ptr<mcp::McpServer> server = it->second.server;
    m.sessions_.erase(it);
    ex->OnWorker(
        [server] {
          server->CloseSessions();
          return 0;
        },
        [ex](int) { ex->Respond(JsonReply(200, "{}")); });
  }

 private:
  static model::McpCaps Caps(const ServerState& s) {
    model::McpCaps caps;
    caps.max_bytes = s.opt.max_body_bytes;
    caps.max_depth = s.opt.max_json_depth;
    caps.max_code_bytes = s.opt.max_code_bytes;
    return caps;
  }

  static void Answer(const std::shared_ptr<Exchange>& ex, const std::string& conversation, const mcp::ToolCall& t,
                     std::string line) {
    McpSessions& m = *ex->s.mcp;
    if (auto it = m.sessions_.find(conversation); it != m.sessions_.end()) {
      --it->second.in_flight;
      it->second.last_used = Clock::now();
    }
    // The call's execution record is this request's record, under the
    // call's request id (mcp_...: its run's, in the logs).
    if (t.audited) {
      model::AuditRecord& a = ex->audit;
      const model::AuditRecord& r = t.record;
      a.request_id = r.request_id;
      a.profile = r.profile;
      a.code_sha256 = r.code_sha256;
      a.code_bytes = r.code_bytes;
      a.verdict = r.verdict;
      a.violations = r.violations;
      a.exit_code = r.exit_code;
      a.signal = r.signal;
      a.kill_reason = r.kill_reason;
      a.run_ms = r.run_ms;
      a.cpu_ms = r.cpu_ms;
      a.max_rss_kb = r.max_rss_kb;
      a.error = r.error;
      a.approval_id = r.approval_id;
      ex->execution = true;
    }
    if (ex->gone()) return ex->Abandon();
    ex->Respond(JsonReply(200, std::move(line)));
  }

  static void RunTool(const std::shared_ptr<Exchange>& ex, const std::shared_ptr<mcp::McpServer>& server,
                      const std::shared_ptr<mcp::ToolCall>& t, const std::string& conversation) {
    ServerState& s = ex->s;
    auto answer = [ex, t, conversation](std::string line) { Answer(ex, conversation, *t, std::move(line)); };
    switch (t->kind) {
      case mcp::ToolCall::Kind::kOneShot: {
        auto prepared = [ex, server, t, answer](service::Prepared p) {
          if (auto line = server->OneShotPrepared(*t, p)) return answer(std::move(*line));
          auto driver_of = std::make_shared<std::shared_ptr<RunDriver>>();
          uint64_t ticket = 0;
          RunSlots::Result r = RunWhenSlotFree(
              ex->s, std::move(p.plan), [driver_of](const std::shared_ptr<RunDriver>& d) { *driver_of = d; },
              [ex, server, t, answer](RunOutcome o) {
                // The tool's answer is made on a worker when it is large (figures, megabytes of output).
                const bool large = o.status.ok() && AnswerBytes(o.response) > kInlineBytes;
                ex->OnWorkerIf(
                    large,
                    [server, t, o = std::move(o)]() mutable {
                      return server->OneShotDone(*t, o.status.ok()
                                                         ? StatusOr<model::ExecuteResponse>(std::move(o.response))
                                                         : StatusOr<model::ExecuteResponse>(o.status));
                    },
                    answer);
              },
              &ticket);
          if (r == RunSlots::kFull) {
            return answer(server->OneShotDone(
                *t, Status(ErrorCode::kResourceExhausted,
                           "the server is busy: " + std::to_string(ex->s.slots.running()) + " runs executing and " +
                               std::to_string(ex->s.slots.queued()) + " queued; retry shortly")));
          }
          ex->WatchDisconnect([ex, driver_of, ticket] {
            if (*driver_of) return (*driver_of)->Cancel("the client disconnected");
            ex->s.slots.Cancel(ticket);  // never started: nothing ran, the exchange is abandoned
            ex->Abandon();
          });
        };
        if (t->call.execute.code.size() <= kInlineBytes) return prepared(s.svc.Prepare(t->call.execute, t->request_id));
        return ex->OnWorker([&svc = s.svc, request = t->call.execute, id = t->request_id] { return svc.Prepare(request, id); },
                            std::move(prepared));
      }
      case mcp::ToolCall::Kind::kSessionCall: {
        const std::string id = t->call.session_id;
        ex->WatchDisconnect([&s, id] { s.session_mgr->Cancel(id, "the client disconnected"); });
        std::weak_ptr<Exchange> weak = ex;
        return StartSessionCall(
            s, {id, ex->rq.caller.name, t->request_id, t->call.execute, {}},
            [](const session::CallReply&) { return Reply(); },
            [ex, server, t, answer](bool, session::CallReply c, Reply) {
              ex->OnWorkerIf(
                  AnswerBytes(c.response) > kInlineBytes,
                  [server, t, c = std::move(c)] { return server->SessionCallDone(*t, c); }, answer);
            },
            [weak] {
              auto e = weak.lock();
              return !e || e->gone();
            });
      }
      case mcp::ToolCall::Kind::kCreateSession: {
        model::SessionCreateRequest req;
        req.base.profile = t->call.execute.profile;
        req.base.env = t->call.execute.env;
        // A session is a warm run: while none is ready, retried from the loop
        // (up to 15 s) rather than handing the model a "retry shortly".
        return CreateSessionFromLoop(s, ex->rq.caller.name, std::move(req), profile::Door::kMcp, 150,
                                     [server, t, answer](session::Created made) {
                                       answer(server->SessionCreated(*t, made));
                                     });
      }
      case mcp::ToolCall::Kind::kCommand:
        // Started on a worker, watched from the loop: no thread held while it runs.
        return RunCommandFromLoop(ex, t->call.session_id, mcp::McpServer::CommandRequestOf(*t),
                                  [server, t, answer](std::optional<model::ApiError> refused, model::CommandEnd end) {
                                    answer(server->CommandDone(*t, refused, end));
                                  });
      case mcp::ToolCall::Kind::kBlocking:
        return ex->OnWorker([server, t] { return server->RunBlockingTool(*t); }, answer);
    }
  }
};

McpSessions::~McpSessions() {
  for (auto& [id, c] : sessions_) c.server->CloseSessions();
}

std::optional<model::ApiError> McpSessions::Owner(const std::string& id, const std::string& owner) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.owner != owner) return SessionNotFound();
  return std::nullopt;
}

std::optional<model::ApiError> McpSessions::Admit(const std::string& owner) const {
  if (sessions_.size() >= opt_.max_sessions) {
    return QuotaError("mcp_sessions", "--max-mcp-sessions",
                      std::to_string(sessions_.size()) + " MCP sessions are open, the most this server keeps; end one "
                      "with DELETE /mcp or retry later",
                      5);
  }
  if (opt_.per_owner) {
    size_t mine = 0;
    for (const auto& [id, c] : sessions_) mine += c.owner == owner;
    if (mine >= opt_.max_per_owner) {
      return QuotaError("mcp_sessions_per_owner", "--max-mcp-sessions-per-owner",
                        "token '" + owner + "' has " + std::to_string(mine) +
                            " MCP sessions open, the most it may; end one with DELETE /mcp",
                        5);
    }
  }
  return std::nullopt;
}

std::shared_ptr<mcp::McpServer> McpSessions::New(const std::string& owner, const model::McpCaps& caps) {
  mcp::McpOptions o;
  o.version = opt_.version;
  o.caps = caps;
  o.owner = owner;
  o.max_file_bytes = s_.opt.max_file_bytes;
  // Held code: through the approvals book, right here on the loop (where the
  // book lives), with the owner's quota.
  ServerState& s = s_;
  o.hold = [&s](service::Prepared p, const std::string& who) -> StatusOr<mcp::McpOptions::Held> {
    const std::string request_id = p.plan ? p.plan->request_id : std::string();
    std::string approval;
    if (auto refused = s.Hold(std::move(p), who, request_id, &approval)) {
      return Status(ErrorCode::kResourceExhausted, refused->message);
    }
    return mcp::McpOptions::Held{approval, s.approvals->PendingJson(approval)};
  };
  // Request ids reach logs and the audit trail: never derived from the MCP session id.
  o.request_id_prefix = "mcp_" + NewConversationId().substr(4, 8) + "_";
  return std::make_shared<mcp::McpServer>(s_.svc, s_.session_mgr.get(), std::move(o));
}

void McpSessions::Keep(const std::string& id, const std::string& owner, std::shared_ptr<mcp::McpServer> server) {
  Conversation c;
  c.server = std::move(server);
  c.owner = owner;
  c.last_used = Clock::now();
  sessions_[id] = std::move(c);
}

void McpSessions::Sweep() {
  auto cutoff = Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.idle_s));
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.in_flight == 0 && it->second.last_used < cutoff) {
      std::shared_ptr<mcp::McpServer> server = it->second.server;
      net::post(*s_.session_pool, [server] { server->CloseSessions(); });
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<Route> McpSessions::Table() {
  return {
      Row("POST", "/mcp", Role::kRun, OwnerRule::kMcpSession, BodyPolicy::kJson, RunsOn::kDriver,
          ReplyPolicy::kJsonRpc, Accounting::kRun, &McpHandlers::Post),
      Row("DELETE", "/mcp", Role::kRun, OwnerRule::kMcpSession, BodyPolicy::kNone, RunsOn::kDriver,
          ReplyPolicy::kJsonRpc, Accounting::kRequest, &McpHandlers::Delete),
  };
}

}  // namespace airlock::api
