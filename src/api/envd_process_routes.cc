#include "api/envd_process_routes.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "api/command_driver.h"
#include "api/e2b_routes.h"
#include "api/exchange.h"
#include "api/server_state.h"
#include "exec/process_watch.h"
#include "exec/sandbox.h"
#include "model/connect.h"
#include "model/envd_process.h"
#include "session/session_commands.h"

namespace airlock::api {

// One process's output, read once and sent to every stream attached to it.
// On the event loop only.
class ProcessHub : public std::enable_shared_from_this<ProcessHub> {
 public:
  ProcessHub(ServerState& s, std::string session, int64_t pid) : s_(s), session_(std::move(session)), pid_(pid) {}

  // A stream attached: its header and the start event go now, then what the
  // process writes. deadline_s > 0: the stream ends then (deadline_exceeded),
  // the process running on.
  void Join(const std::shared_ptr<Exchange>& ex, double deadline_s);
  void Data(exec::Stream which, std::string_view bytes);
  void End(const exec::ProcessOutcome& o);
  // Ends every attached stream with `error` (the process runs on).
  void EndStreams(const model::ApiError& error);

  std::shared_ptr<CommandDriver> driver;

 private:
  struct Attached {
    std::weak_ptr<Exchange> ex;
    std::shared_ptr<net::steady_timer> deadline;
  };
  void Leave(const Exchange* ex);

  ServerState& s_;
  std::string session_;
  int64_t pid_;
  std::vector<Attached> attached_;
  // What the process wrote before the first stream attached (while the watch
  // was made): bounded, sent to it first.
  std::vector<std::pair<exec::Stream, std::string>> held_;
  size_t held_bytes_ = 0;
  bool joined_ = false;
};

namespace {

constexpr size_t kStartMax = size_t{1} << 20;
constexpr size_t kSmallMax = 16 * 1024;
constexpr size_t kHeldMax = size_t{1} << 20;

model::ApiError ConnectError(const char* code, std::string message, model::ErrorKind kind = model::ErrorKind::kBadRequest) {
  model::ApiError e{kind, std::move(message), ""};
  e.code = code;
  return e;
}

// Connect-Timeout-Ms: at most 10 digits (the spec's bound); 0 when absent.
bool Deadline(const std::string& header, double* seconds) {
  *seconds = 0;
  if (header.empty()) return true;
  if (header.size() > 10 || header.find_first_not_of("0123456789") != std::string::npos) return false;
  *seconds = static_cast<double>(std::strtoull(header.c_str(), nullptr, 10)) / 1000.0;
  return true;
}

model::ApiError DeadlineExceeded(double seconds, bool killed) {
  char secs[32];
  snprintf(secs, sizeof secs, "%g", seconds);
  return ConnectError("deadline_exceeded",
                      std::string("the call's deadline (Connect-Timeout-Ms, ") + secs + " s) passed" +
                          (killed ? ": the process it started was killed" : "; the process runs on"),
                      model::ErrorKind::kUnavailable);
}

model::ApiError NoProcess(const model::EnvdSelector& sel) {
  return ConnectError("not_found",
                      (sel.pid >= 0 ? "process " + std::to_string(sel.pid) : "no running process tagged '" + sel.tag + "'") +
                          (sel.pid >= 0 ? " not found: it ended, or never ran in this sandbox" : ""),
                      model::ErrorKind::kNotFound);
}

// An exec::Sandbox status of a call on one process, in Connect's codes.
model::ApiError ProcessStatus(const Status& st, const model::EnvdSelector& sel) {
  if (st.code() == ErrorCode::kNotFound) return NoProcess(sel);
  if (st.code() == ErrorCode::kFailedPrecondition) return ConnectError("failed_precondition", st.message());
  model::ApiError e = session::ProcessError(st);
  if (e.code != "quota_exceeded") e.code = "";
  return e;
}

// The request's one message: the JSON of a unary call, or the envelope of a stream's.
bool Message(const std::shared_ptr<Exchange>& ex, size_t max, std::string* json) {
  if (ex->rq.route->reply != ReplyPolicy::kConnectStream) {
    *json = std::move(ex->rq.body);
    return true;
  }
  std::string why;
  if (model::ConnectUnwrap(ex->rq.body, max, json, &why)) return true;
  ex->Refuse(ConnectError("invalid_argument", why));
  return false;
}

// A server stream's request (Start, Connect): its message and its deadline
// (Connect-Timeout-Ms, in seconds; 0: none). Refuses the call when either is malformed.
bool StreamMessage(const std::shared_ptr<Exchange>& ex, size_t max, std::string* json, double* deadline) {
  if (!Deadline(ex->rq.headers.connect_timeout_ms, deadline)) {
    ex->Refuse(ConnectError("invalid_argument", "Connect-Timeout-Ms: at most 10 digits"));
    return false;
  }
  return Message(ex, max, json);
}

// The caller's default sandbox (E2B's one sandbox: the session /execute and
// /files reach), then work(session id) on a worker, then then(id, result) on
// the loop.
template <class Work, class Then>
void InDefaultSandbox(const std::shared_ptr<Exchange>& ex, Work work, Then then) {
  ex->s.e2b->Default(ex->rq.caller.name, [ex, work, then](std::optional<std::string> id, model::ApiError why) {
    if (!id) return ex->Refuse(why);
    ex->OnWorker([work, id = *id] { return work(id); },
                 [then, id = *id](auto result) { then(id, std::move(result)); });
  });
}

struct Target {
  std::shared_ptr<exec::Sandbox> sandbox;
  std::shared_ptr<exec::Process> process;
  std::optional<model::ApiError> error;
};

// The selected process of the session's sandbox, running.
Target FindProcess(ServerState& s, const std::string& id, const std::string& owner, const model::EnvdSelector& sel) {
  Target t;
  model::ApiError error;
  t.sandbox = s.session_mgr->OpenSandbox(id, owner, &error);
  if (!t.sandbox) {
    t.error = error;
    return t;
  }
  pid_t pid = static_cast<pid_t>(sel.pid);
  if (sel.pid < 0) {
    for (const exec::ProcessInfo& p : t.sandbox->List()) {
      if (p.running && p.tag == sel.tag) {
        pid = p.pid;
        break;
      }
    }
  }
  if (pid > 0) t.process = t.sandbox->Find(pid);
  if (!t.process || t.process->Exit()) t.error = NoProcess(sel);
  return t;
}

// Watches a process from now on (started_here: by this call): its hub, its driver (own_deadline_s > 0:
// the process is killed then), and `ex` its first stream.
void Watch(const std::shared_ptr<Exchange>& ex, const std::string& session, std::shared_ptr<exec::Sandbox> sandbox,
           std::shared_ptr<exec::Process> process, double own_deadline_s, double stream_deadline_s,
           bool started_here) {
  ServerState& s = ex->s;
  const pid_t pid = process->pid();
  auto hub = std::make_shared<ProcessHub>(s, session, pid);
  std::weak_ptr<ProcessHub> weak = hub;
  exec::WatchOptions wo;
  wo.output_cap = 0;  // every piece goes to the streams; nothing is kept for an answer
  wo.on_output = [weak](exec::Stream which, std::string_view bytes) {
    if (auto h = weak.lock()) h->Data(which, bytes);
  };
  auto watch = exec::ProcessWatch::Attach(process, sandbox, std::move(wo));
  if (!watch.ok()) {
    // One this call started is not left running with nobody reading it.
    if (started_here) net::post(*s.session_pool, [sandbox, pid] { (void)sandbox->Signal(pid, SIGKILL); });
    return ex->Refuse(ConnectError("failed_precondition",
                                   "process " + std::to_string(pid) +
                                       "'s output is read by another request (a REST command's): " +
                                       watch.status().message()));
  }
  hub->driver = std::make_shared<CommandDriver>(s, std::move(*watch), std::move(sandbox), pid,
                                                CommandDriver::Limits{own_deadline_s, 0},
                                                [weak](exec::ProcessOutcome o, bool) {
                                                  if (auto h = weak.lock()) h->End(o);
                                                });
  s.envd->Put(session, pid, hub);
  hub->Join(ex, stream_deadline_s);
  hub->driver->Start();
}

// ---------------------------------------------------------------------------

void Start(const std::shared_ptr<Exchange>& ex) {
  std::string json;
  double deadline = 0;
  if (!StreamMessage(ex, kStartMax, &json, &deadline)) return;
  model::CommandRequest request;
  model::ApiError error;
  if (!model::ParseEnvdStart(json, Caps(ex->s), &request, &error)) return ex->Refuse(error);
  struct Job {
    std::optional<session::StartedCommand> started;
    model::ApiError error;
  };
  InDefaultSandbox(
      ex,
      [&s = ex->s, owner = ex->rq.caller.name, request](const std::string& id) {
        Job j;
        j.started = session::StartSessionCommand(s.svc.profiles(), *s.session_mgr, id, owner, request, &j.error);
        return j;
      },
      [ex, deadline](const std::string& id, Job j) {
        if (!j.started) return ex->Refuse(j.error);
        Watch(ex, id, std::move(j.started->sandbox), std::move(j.started->process), deadline, 0, true);
      });
}

void Connect(const std::shared_ptr<Exchange>& ex) {
  std::string json;
  double deadline = 0;
  if (!StreamMessage(ex, kSmallMax, &json, &deadline)) return;
  model::EnvdSelector sel;
  model::ApiError error;
  if (!model::ParseEnvdSelectorRequest(json, Caps(ex->s), &sel, &error)) return ex->Refuse(error);
  InDefaultSandbox(
      ex,
      [&s = ex->s, owner = ex->rq.caller.name, sel](const std::string& id) { return FindProcess(s, id, owner, sel); },
      [ex, deadline](const std::string& id, Target t) {
        if (t.error) return ex->Refuse(*t.error);
        if (auto hub = ex->s.envd->Find(id, t.process->pid())) return hub->Join(ex, deadline);
        Watch(ex, id, std::move(t.sandbox), std::move(t.process), 0, deadline, false);
      });
}

void List(const std::shared_ptr<Exchange>& ex) {
  model::ApiError bad;
  if (!model::ParseEnvdListRequest(ex->rq.body, Caps(ex->s), &bad)) return ex->Refuse(bad);
  InDefaultSandbox(
      ex,
      [&s = ex->s, owner = ex->rq.caller.name](const std::string& id) -> Reply {
        model::ApiError error;
        auto sandbox = s.session_mgr->OpenSandbox(id, owner, &error);
        if (!sandbox) return Reply{500, "", "", {}, nullptr, {}, error, {}};
        std::vector<model::EnvdProcessInfo> list;
        for (const exec::ProcessInfo& p : sandbox->List()) {
          if (p.running) list.push_back({p.pid, p.tag, p.argv, p.cwd, {}});
        }
        return JsonReply(200, model::EnvdProcessListToJson(list));
      },
      [ex](const std::string&, Reply r) {
        if (r.error) return ex->Refuse(*r.error);
        ex->Respond(std::move(r));
      });
}

// SendInput, CloseStdin, SendSignal: a selector, then one thing done to the process.
enum class Act { kInput, kClose, kSignal };

void Act_(const std::shared_ptr<Exchange>& ex, Act act) {
  model::EnvdSelector sel;
  model::ApiError error;
  std::string data;
  int sig = 0;
  const bool ok = act == Act::kInput    ? model::ParseEnvdSendInput(ex->rq.body, Caps(ex->s), &sel, &data, &error)
                  : act == Act::kSignal ? model::ParseEnvdSendSignal(ex->rq.body, Caps(ex->s), &sel, &sig, &error)
                                        : model::ParseEnvdSelectorRequest(ex->rq.body, Caps(ex->s), &sel, &error);
  if (!ok) return ex->Refuse(error);
  InDefaultSandbox(
      ex,
      [&s = ex->s, owner = ex->rq.caller.name, sel, act, data, sig](const std::string& id) -> std::optional<model::ApiError> {
        Target t = FindProcess(s, id, owner, sel);
        if (t.error) return t.error;
        Status st = Status::Ok();
        switch (act) {
          case Act::kInput:
            st = t.process->SendInput(data);
            if (st.code() == ErrorCode::kFailedPrecondition) {
              return ConnectError("failed_precondition",
                                  st.message() + " (start it with stdin: true to send it input)");
            }
            break;
          case Act::kClose: t.process->CloseInput(); break;
          case Act::kSignal: st = t.sandbox->Signal(t.process->pid(), sig); break;
        }
        if (!st.ok()) return ProcessStatus(st, sel);
        return std::nullopt;
      },
      [ex](const std::string&, std::optional<model::ApiError> refused) {
        if (refused) return ex->Refuse(*refused);
        ex->Respond(JsonReply(200, "{}"));
      });
}

void SendInput(const std::shared_ptr<Exchange>& ex) { Act_(ex, Act::kInput); }
void CloseStdin(const std::shared_ptr<Exchange>& ex) { Act_(ex, Act::kClose); }
void SendSignal(const std::shared_ptr<Exchange>& ex) { Act_(ex, Act::kSignal); }

void Unimplemented(const std::shared_ptr<Exchange>& ex) {
  const bool update = ex->rq.path.find("/Update") != std::string::npos;
  ex->Refuse(ConnectError("unimplemented",
                          update ? "a PTY is not served here, so there is none to resize (process.Process/Update)"
                                 : "client streams are not served here: send input with process.Process/SendInput"));
}

}  // namespace

// ---------------------------------------------------------------------------

void ProcessHub::Join(const std::shared_ptr<Exchange>& ex, double deadline_s) {
  if (ex->gone()) return ex->Abandon();
  ex->MakeEvents(model::StreamFormat::kConnect, model::EnvdKeepaliveEvent());
  ex->BeginEvents();
  ex->events()->Event("start", model::EnvdStartEvent(pid_));
  if (!joined_) {
    joined_ = true;
    for (const auto& [which, bytes] : held_) {
      ex->events()->Event("data", model::EnvdDataEvent(which == exec::Stream::kStdout, bytes), true);
    }
    held_.clear();
  }
  Attached a{ex, nullptr};
  std::weak_ptr<ProcessHub> weak = weak_from_this();
  std::weak_ptr<Exchange> wex = ex;
  if (deadline_s > 0) {
    a.deadline = std::make_shared<net::steady_timer>(*s_.io);
    a.deadline->expires_after(std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
    a.deadline->async_wait([weak, wex, deadline_s](const error_code& ec) {
      auto h = weak.lock();
      auto e = wex.lock();
      if (ec || !h || !e || e->answered()) return;
      h->Leave(e.get());
      model::ApiError late = DeadlineExceeded(deadline_s, false);
      e->EndEvents({}, "end_stream", model::ConnectEndStream(&late));
    });
  }
  attached_.push_back(std::move(a));
  // The client leaving ends its stream, not the process (as envd).
  ex->WatchDisconnect([weak, wex] {
    auto e = wex.lock();
    if (!e) return;
    if (auto h = weak.lock()) h->Leave(e.get());
    e->Abandon();
  });
}

void ProcessHub::Leave(const Exchange* ex) {
  attached_.erase(std::remove_if(attached_.begin(), attached_.end(),
                                 [ex](const Attached& a) {
                                   auto e = a.ex.lock();
                                   if (e.get() != ex && e) return false;
                                   if (a.deadline) a.deadline->cancel();
                                   return true;
                                 }),
                  attached_.end());
}

void ProcessHub::Data(exec::Stream which, std::string_view bytes) {
  if (!joined_) {
    if (held_bytes_ + bytes.size() <= kHeldMax) {
      held_.emplace_back(which, std::string(bytes));
      held_bytes_ += bytes.size();
    }
    return;
  }
  if (attached_.empty()) return;  // nobody attached: dropped, as envd does
  const std::string event = model::EnvdDataEvent(which == exec::Stream::kStdout, bytes);
  for (const Attached& a : attached_) {
    auto e = a.ex.lock();
    if (e && !e->answered() && e->events()) e->events()->Event("data", event, /*droppable=*/true);
  }
}

void ProcessHub::End(const exec::ProcessOutcome& o) {
  auto self = shared_from_this();
  s_.envd->Erase(session_, pid_);
  std::vector<Attached> attached = std::move(attached_);
  attached_.clear();
  model::EnvdEnd end;
  end.exited = o.exit.exited;
  end.exit_code = o.exit.exit_code;
  end.signal = o.exit.signal;
  std::optional<model::ApiError> failed;
  if (o.kill_reason == exec::KillReason::kTimeout) {
    failed = ConnectError("deadline_exceeded",
                          (o.kill_detail.empty() ? std::string("the process ran past its deadline and was killed")
                                                 : o.kill_detail) +
                              " (the Connect-Timeout-Ms of the call that started it)",
                          model::ErrorKind::kUnavailable);
  } else if (o.kill_reason == exec::KillReason::kLost || o.exit.sandbox_ended) {
    failed = ConnectError("unavailable", "the sandbox ended while the process ran" +
                                             (o.kill_detail.empty() ? std::string() : ": " + o.kill_detail),
                          model::ErrorKind::kUnavailable);
  }
  for (Attached& a : attached) {
    if (a.deadline) a.deadline->cancel();
    auto e = a.ex.lock();
    if (!e || e->answered()) continue;
    if (e->gone()) {
      e->Abandon();
      continue;
    }
    if (failed) {
      e->EndEvents({}, "end_stream", model::ConnectEndStream(&*failed));
      continue;
    }
    model::EnvdEnd mine = end;
    if (auto es = e->events(); es && es->dropped_bytes() > 0) {
      mine.error = std::to_string(es->dropped_bytes()) + " bytes of output were not sent: the client read too slowly";
    }
    e->EndEvents({{"end", model::EnvdEndEvent(mine)}}, "end_stream", model::ConnectEndStream(nullptr));
  }
}

void ProcessHub::EndStreams(const model::ApiError& error) {
  std::vector<Attached> attached = std::move(attached_);
  attached_.clear();
  for (Attached& a : attached) {
    if (a.deadline) a.deadline->cancel();
    auto e = a.ex.lock();
    if (!e || e->answered()) continue;
    if (e->gone()) {
      e->Abandon();
      continue;
    }
    e->EndEvents({}, "end_stream", model::ConnectEndStream(&error));
  }
}

void EnvdProcesses::Drain() {
  const model::ApiError error =
      ConnectError("unavailable", "the server is shutting down: this stream ends (the process was not killed by it)",
                   model::ErrorKind::kUnavailable);
  auto hubs = hubs_;  // a stream's end may touch the map
  for (auto& [key, hub] : hubs) hub->EndStreams(error);
}

std::shared_ptr<ProcessHub> EnvdProcesses::Find(const std::string& session, int64_t pid) const {
  auto it = hubs_.find({session, pid});
  return it == hubs_.end() ? nullptr : it->second;
}

void EnvdProcesses::Put(const std::string& session, int64_t pid, std::shared_ptr<ProcessHub> hub) {
  hubs_[{session, pid}] = std::move(hub);
}

void EnvdProcesses::Erase(const std::string& session, int64_t pid) { hubs_.erase({session, pid}); }

std::vector<Route> EnvdProcesses::Table() {
  using B = BodyPolicy;
  using O = OwnerRule;
  using P = ReplyPolicy;
  using A = Accounting;
  const Role kRun = Role::kRun;
  const RunsOn kDriver = RunsOn::kDriver;
  return {
      SmallJson(Row("POST", "/process.Process/Start", kRun, O::kCaller, B::kJson, kDriver, P::kConnectStream,
                    A::kRequest, &Start),
                kStartMax + 5),
      SmallJson(Row("POST", "/process.Process/Connect", kRun, O::kCaller, B::kJson, kDriver, P::kConnectStream,
                    A::kRequest, &Connect),
                kSmallMax + 5),
      SmallJson(Row("POST", "/process.Process/List", kRun, O::kCaller, B::kJson, kDriver, P::kConnect, A::kRequest,
                    &List)),
      SmallJson(Row("POST", "/process.Process/SendInput", kRun, O::kCaller, B::kJson, kDriver, P::kConnect,
                    A::kRequest, &SendInput),
                kStartMax),
      SmallJson(Row("POST", "/process.Process/CloseStdin", kRun, O::kCaller, B::kJson, kDriver, P::kConnect,
                    A::kRequest, &CloseStdin)),
      SmallJson(Row("POST", "/process.Process/SendSignal", kRun, O::kCaller, B::kJson, kDriver, P::kConnect,
                    A::kRequest, &SendSignal)),
      SmallJson(Row("POST", "/process.Process/Update", kRun, O::kCaller, B::kJson, RunsOn::kLoop, P::kConnect,
                    A::kRequest, &Unimplemented)),
      SmallJson(Row("POST", "/process.Process/StreamInput", kRun, O::kCaller, B::kJson, RunsOn::kLoop,
                    P::kConnectStream, A::kRequest, &Unimplemented)),
  };
}

}  // namespace airlock::api
