#include "api/command_routes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "api/command_driver.h"
#include "api/exchange.h"
#include "api/query.h"
#include "api/server_state.h"
#include "base/clock.h"
#include "exec/process_watch.h"
#include "exec/sandbox.h"
#include "model/command.h"
#include "model/stream_events.h"
#include "session/session_commands.h"

namespace airlock::api {
namespace {

using session::kCommandOutputCap;
using session::ProcessError;
// A signal's body.
constexpr size_t kSignalBodyMax = 4096;

model::ApiError Err(model::ErrorKind kind, std::string message, std::string code = "", std::string field = "") {
  model::ApiError e{kind, std::move(message), std::move(field)};
  e.code = std::move(code);
  return e;
}

model::ApiError NoSuchProcess(pid_t pid) {
  return Err(model::ErrorKind::kNotFound,
             "no process " + std::to_string(pid) + " in this session's sandbox (GET .../commands lists them)",
             "process_not_found");
}

// {pid...}: the pid and what follows it ("", "stdin", "signal").
bool ParseTail(const std::string& tail, pid_t* pid, std::string* rest) {
  size_t slash = tail.find('/');
  std::string digits = tail.substr(0, slash);
  *rest = slash == std::string::npos ? "" : tail.substr(slash + 1);
  if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return false;
  *pid = static_cast<pid_t>(std::strtol(digits.c_str(), nullptr, 10));
  return *pid > 0;
}

bool Large(const exec::ProcessOutcome& o) { return o.out.data.size() + o.err.data.size() > kInlineBytes; }

// The session's sandbox (opened on first use) and, when pid > 0, its process.
struct Target {
  std::shared_ptr<exec::Sandbox> sandbox;
  std::shared_ptr<exec::Process> process;
  std::optional<model::ApiError> error;
};

Target FindTarget(ServerState& s, const Request& rq, pid_t pid) {
  Target t;
  model::ApiError error;
  t.sandbox = s.session_mgr->OpenSandbox(rq.param, rq.caller.name, &error);
  if (!t.sandbox) {
    t.error = error;
    return t;
  }
  if (pid > 0) {
    t.process = t.sandbox->Find(pid);
    if (!t.process) t.error = NoSuchProcess(pid);
  }
  return t;
}

// ---------------------------------------------------------------------------
// POST /v1/sessions/{id}/commands

struct Started {
  model::CommandRequest request;
  Target target;
  Clock::time_point start;  // just before it was started: its duration counts from here
};

Started StartCommand(ServerState& s, const Request& rq) {
  Started st;
  model::ApiError error;
  if (!model::ParseCommandRequest(rq.body, Caps(s), &st.request, &error)) {
    st.target.error = error;
    return st;
  }
  auto started = session::StartSessionCommand(s.svc.profiles(), *s.session_mgr, rq.param, rq.caller.name,
                                              st.request, &error);
  if (!started) {
    st.target.error = error;
    return st;
  }
  st.target.sandbox = std::move(started->sandbox);
  st.target.process = std::move(started->process);
  st.start = started->start;
  return st;
}

// A background command's timeout: a loop timer, then a kill on a worker (the
// process ends with signal 9, as its end then says).
// Only that process: once it ended, its pid may name a later one.
void KillLater(ServerState& s, std::weak_ptr<exec::Sandbox> sandbox, std::weak_ptr<exec::Process> process,
               double timeout_s) {
  auto timer = std::make_shared<net::steady_timer>(*s.io);
  timer->expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  timer->async_wait([&s, timer, sandbox, process](const error_code& ec) {
    if (ec) return;
    net::post(*s.session_pool, [sandbox, process] {
      auto sb = sandbox.lock();
      auto p = process.lock();
      if (sb && p && !p->Exit() && sb->Find(p->pid()) == p) (void)sb->Signal(p->pid(), SIGKILL);
    });
  });
}

void RunForeground(const std::shared_ptr<Exchange>& ex, Started st);

void Run(const std::shared_ptr<Exchange>& ex) {
  ex->OnWorker([&s = ex->s, rq = ex->rq] { return StartCommand(s, rq); },
               [ex](Started st) {
                 if (st.target.error) return ex->Refuse(*st.target.error);
                 if (!st.request.background) return RunForeground(ex, std::move(st));
                 const pid_t pid = st.target.process->pid();
                 if (st.request.timeout_s > 0) KillLater(ex->s, st.target.sandbox, st.target.process, st.request.timeout_s);
                 ex->Respond(JsonReply(201, model::CommandInfoToJson({pid, st.request.tag,
                                                                       {"/bin/bash", "-l", "-c", st.request.cmd},
                                                                       st.request.cwd.empty() ? "/home/user" : st.request.cwd,
                                                                       true, 0, 0})));
               });
}

// The answer of an outcome: JSON, or the end of the stream (made on a worker when large).
void Answer(const std::shared_ptr<Exchange>& ex, exec::ProcessOutcome o, pid_t pid, std::string tag, bool ended,
            int status) {
  ex->OnWorkerIf(Large(o), [o = std::move(o), pid, tag, ended] { return model::CommandEndToJson(session::CommandEndOf(o, pid, tag, ended)); },
                 [ex, status](std::string body) {
                   if (ex->gone()) return ex->Abandon();
                   if (ex->events() && ex->events()->started()) {
                     return ex->EndEvents({}, "end", model::EndEvent("end", body, ex->events()->StatsJson()));
                   }
                   ex->Respond(JsonReply(status, std::move(body)));
                 });
}

void RunForeground(const std::shared_ptr<Exchange>& ex, Started st) {
  const pid_t pid = st.target.process->pid();
  const model::StreamFormat format = model::NegotiateStreamFormat(ex->rq.headers.accept);
  exec::WatchOptions wo;
  wo.output_cap = kCommandOutputCap;
  // Output read before the "start" event is written (Attach reads what the
  // pipes already hold: a fast command may have written, or ended) is held
  // until then, so that "start" is always the first event.
  struct Early {
    bool begun = false;
    std::vector<std::pair<std::string, std::string>> held;
  };
  auto early = std::make_shared<Early>();
  if (format != model::StreamFormat::kNone) {
    std::weak_ptr<EventStream> events = ex->MakeEvents(format);
    // OnReady runs on the loop: the output goes to the stream as it is read.
    wo.on_output = [events, early](exec::Stream which, std::string_view bytes) {
      const char* name = which == exec::Stream::kStdout ? "stdout" : "stderr";
      if (!early->begun) {
        early->held.emplace_back(name, std::string(bytes));
      } else if (auto es = events.lock()) {
        es->Output(name, bytes);
      }
    };
  }
  auto watch = exec::ProcessWatch::Attach(st.target.process, st.target.sandbox, std::move(wo));
  if (!watch.ok()) {
    // Nobody else knows its pid yet, so this does not happen; were it to, it is killed rather than left unread.
    net::post(*ex->s.session_pool, [sb = st.target.sandbox, pid] { (void)sb->Signal(pid, SIGKILL); });
    ex->DropEvents();
    return ex->Refuse(ProcessError(watch.status()));
  }
  if (ex->events()) {
    ex->BeginEvents();
    ex->events()->Event("start", model::CommandStartEvent(pid));
    early->begun = true;
    for (const auto& [name, bytes] : early->held) ex->events()->Output(name, bytes);
    early->held.clear();
  }
  auto driver = std::make_shared<CommandDriver>(
      ex->s, std::move(*watch), st.target.sandbox, pid, CommandDriver::Limits{st.request.timeout_s, 0},
      [ex, pid, tag = st.request.tag, t0 = st.start](exec::ProcessOutcome o, bool ended) {
        o.duration_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        Answer(ex, std::move(o), pid, tag, ended, 200);
      });
  std::weak_ptr<CommandDriver> weak = driver;
  ex->WatchDisconnect([weak] {
    if (auto d = weak.lock()) d->Kill(exec::KillReason::kCancelled, "the client disconnected");
  });
  driver->Start();
}

// ---------------------------------------------------------------------------
// GET /v1/sessions/{id}/commands

Reply List(ServerState& s, const Request& rq) {
  Target t = FindTarget(s, rq, 0);
  if (t.error) return RefusalFor(rq, *t.error);
  std::vector<model::CommandInfo> items;
  for (const exec::ProcessInfo& p : t.sandbox->List()) {
    items.push_back({p.pid, p.tag, p.argv, p.cwd, p.running, p.exit.exit_code, p.exit.exited ? 0 : p.exit.signal});
  }
  return JsonReply(200, model::CommandListToJson(items));
}

// ---------------------------------------------------------------------------
// GET /v1/sessions/{id}/commands/{pid}[?wait=s]

void Get(const std::shared_ptr<Exchange>& ex) {
  pid_t pid = 0;
  std::string rest;
  if (!ParseTail(ex->rq.tail, &pid, &rest) || !rest.empty()) {
    return ex->Refuse(Err(model::ErrorKind::kNotFound, "GET takes .../commands/{pid} (a number)", "process_not_found"));
  }
  double wait_s = 0;
  bool malformed = false;
  if (auto w = QueryParam(ex->rq.query, "wait", &malformed); w && !malformed) {
    char* end = nullptr;
    wait_s = std::strtod(w->c_str(), &end);
    if (w->empty() || *end != '\0' || !std::isfinite(wait_s) || wait_s < 0 || wait_s > model::kCommandMaxWaitS) {
      malformed = true;
    }
  }
  if (malformed) {
    return ex->Refuse(Err(model::ErrorKind::kBadRequest,
                          "wait: seconds from 0 to " + std::to_string(static_cast<int>(model::kCommandMaxWaitS)), "",
                          "wait"));
  }
  ex->OnWorker([&s = ex->s, rq = ex->rq, pid] { return FindTarget(s, rq, pid); },
               [ex, pid, wait_s](Target t) {
                 if (t.error) return ex->Refuse(*t.error);
                 exec::WatchOptions wo;
                 wo.output_cap = kCommandOutputCap;
                 auto watch = exec::ProcessWatch::Attach(t.process, t.sandbox, std::move(wo));
                 if (!watch.ok()) {
                   return ex->Refuse(Err(model::ErrorKind::kConflict,
                                         watch.status().message() + ": its output goes to the request that ran it"));
                 }
                 const std::string tag = t.process->tag();
                 if (wait_s <= 0) {
                   // What is there now, without waiting (non-blocking reads).
                   exec::ProcessWatch& w = **watch;
                   for (auto fd : {exec::ProcessWatch::kExit, exec::ProcessWatch::kOut, exec::ProcessWatch::kErr}) {
                     if (!w.done()) w.OnReady(fd);
                   }
                   const bool ended = w.done();
                   exec::ProcessOutcome o = w.Finish();
                   o.duration_ms = -1;  // not known here (its start was another request's)
                   watch->reset();
                   return Answer(ex, std::move(o), pid, tag, ended, 200);
                 }
                 auto driver = std::make_shared<CommandDriver>(
                     ex->s, std::move(*watch), t.sandbox, pid, CommandDriver::Limits{0, wait_s},
                     [ex, pid, tag](exec::ProcessOutcome o, bool ended) {
                       o.duration_ms = -1;
                       Answer(ex, std::move(o), pid, tag, ended, 200);
                     });
                 // A reader that leaves is answered nothing once the wait ends (the process runs on).
                 ex->WatchDisconnect([] {});
                 driver->Start();
               });
}

// ---------------------------------------------------------------------------
// POST /v1/sessions/{id}/commands/{pid}/stdin and .../signal

// The body goes to the process's stdin as it arrives.
class StdinSink : public BodySink {
 public:
  StdinSink(std::shared_ptr<exec::Process> p, bool close) : p_(std::move(p)), close_(close) {}
  Status Write(std::string_view bytes) override {
    bytes_ += static_cast<int64_t>(bytes.size());
    return p_->SendInput(bytes);
  }
  Status Finish() override {
    if (close_) p_->CloseInput();
    return Status::Ok();
  }
  int64_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<exec::Process> p_;
  bool close_;
  int64_t bytes_ = 0;
};

// A small body kept in memory (a signal's JSON).
class SmallSink : public BodySink {
 public:
  Status Write(std::string_view bytes) override {
    if (body.size() + bytes.size() > kSignalBodyMax) {
      return Status(ErrorCode::kInvalidArgument, "a signal's body is at most " + std::to_string(kSignalBodyMax) + " bytes");
    }
    body.append(bytes);
    return Status::Ok();
  }
  Status Finish() override { return Status::Ok(); }
  std::string body;
};

void Stdin(const std::shared_ptr<Exchange>& ex, pid_t pid) {
  bool malformed = false;
  auto close = QueryParam(ex->rq.query, "close", &malformed);
  if (malformed || (close && *close != "true" && *close != "false")) {
    return ex->Refuse(Err(model::ErrorKind::kBadRequest, "close: true or false", "", "close"));
  }
  const bool closing = close && *close == "true";
  ex->OnWorker(
      [&s = ex->s, rq = ex->rq, pid] {
        Target t = FindTarget(s, rq, pid);
        if (t.error) return t;
        if (t.process->Exit()) {
          t.error = Err(model::ErrorKind::kConflict, "process " + std::to_string(pid) + " has ended: it reads no input");
        } else if (Status st = t.process->SendInput(""); !st.ok()) {
          t.error = Err(model::ErrorKind::kConflict, st.message() + " (start it with \"stdin\": true to feed it)");
        }
        return t;
      },
      [ex, pid, closing](Target t) {
        if (t.error) return ex->Refuse(*t.error);
        auto sink = std::make_shared<StdinSink>(t.process, closing);
        ex->ReadBodyInto(sink, [ex, sink, pid, closing](Status st) {
          if (st.code() == ErrorCode::kCancelled) return ex->Abandon();
          if (st.code() == ErrorCode::kFailedPrecondition) {
            return ex->Refuse(Err(model::ErrorKind::kConflict, st.message()));
          }
          if (st.code() == ErrorCode::kUnavailable) {
            return ex->Refuse(Err(model::ErrorKind::kConflict, st.message() + "; what it took was written"));
          }
          if (!st.ok()) return ex->Refuse(ProcessError(st));
          ex->Respond(JsonReply(200, "{\"pid\":" + std::to_string(pid) + ",\"bytes\":" + std::to_string(sink->bytes()) +
                                         ",\"closed\":" + (closing ? "true" : "false") + "}"));
        });
      });
}

void Signal(const std::shared_ptr<Exchange>& ex, pid_t pid) {
  auto sink = std::make_shared<SmallSink>();
  ex->ReadBodyInto(sink, [ex, sink, pid](Status st) {
    if (st.code() == ErrorCode::kCancelled) return ex->Abandon();
    if (!st.ok()) return ex->Refuse(Err(model::ErrorKind::kBadRequest, st.message()));
    int sig = 0;
    model::ApiError error;
    if (!model::ParseSignalRequest(sink->body, Caps(ex->s), &sig, &error)) return ex->Refuse(error);
    ex->OnWorker(
        [&s = ex->s, rq = ex->rq, pid, sig]() -> std::optional<model::ApiError> {
          Target t = FindTarget(s, rq, pid);
          if (t.error) return t.error;
          if (Status sent = t.sandbox->Signal(pid, sig); !sent.ok()) {
            // Not one of its running processes: it ended already (409), or never was (404).
            if (sent.code() == ErrorCode::kNotFound) {
              return Err(model::ErrorKind::kConflict, "process " + std::to_string(pid) + " has ended", "process_ended");
            }
            return ProcessError(sent);
          }
          return std::nullopt;
        },
        [ex, pid, sig](std::optional<model::ApiError> refused) {
          if (refused) return ex->Refuse(*refused);
          ex->Respond(JsonReply(200, "{\"pid\":" + std::to_string(pid) + ",\"signal\":" + std::to_string(sig) + "}"));
        });
  });
}

void Post(const std::shared_ptr<Exchange>& ex) {
  pid_t pid = 0;
  std::string rest;
  if (ParseTail(ex->rq.tail, &pid, &rest)) {
    if (rest == "stdin") return Stdin(ex, pid);
    if (rest == "signal") return Signal(ex, pid);
  }
  ex->Refuse(Err(model::ErrorKind::kNotFound,
                 "POST takes .../commands/{pid}/stdin (the bytes) or .../commands/{pid}/signal ({\"signal\":...})",
                 "route_not_found"));
}

}  // namespace

void RunCommandFromLoop(const std::shared_ptr<Exchange>& ex, std::string session_id, model::CommandRequest request,
                        std::function<void(std::optional<model::ApiError> refused, model::CommandEnd end)> done) {
  ServerState& s = ex->s;
  std::string owner = ex->rq.caller.name;
  std::weak_ptr<Exchange> weak = ex;
  struct Job {
    std::optional<session::StartedCommand> started;
    model::ApiError error;
  };
  // `done` (which may hold an exchange) is moved to the loop's function: never released on the worker.
  net::post(*s.session_pool, [&s, weak, session_id = std::move(session_id), owner = std::move(owner),
                              request = std::move(request), done = std::move(done)]() mutable {
    auto job = std::make_shared<Job>();
    job->started = session::StartSessionCommand(s.svc.profiles(), *s.session_mgr, session_id, owner, request, &job->error);
    net::post(*s.io, [&s, weak, job, request = std::move(request), done = std::move(done)]() mutable {
      if (!job->started) return done(job->error, {});
      session::StartedCommand& c = *job->started;
      const pid_t pid = c.process->pid();
      exec::WatchOptions wo;
      wo.output_cap = kCommandOutputCap;
      auto watch = exec::ProcessWatch::Attach(c.process, c.sandbox, std::move(wo));
      if (!watch.ok()) {
        net::post(*s.session_pool, [sb = c.sandbox, pid] { (void)sb->Signal(pid, SIGKILL); });
        return done(ProcessError(watch.status()), {});
      }
      auto driver = std::make_shared<CommandDriver>(
          s, std::move(*watch), c.sandbox, pid, CommandDriver::Limits{request.timeout_s, 0},
          [done = std::move(done), pid, tag = request.tag, t0 = c.start](exec::ProcessOutcome o, bool ended) mutable {
            o.duration_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            done(std::nullopt, session::CommandEndOf(o, pid, tag, ended));
          });
      std::weak_ptr<CommandDriver> d = driver;
      auto kill = [d] {
        if (auto live = d.lock()) live->Kill(exec::KillReason::kCancelled, "the client disconnected");
      };
      // Watched before it starts: a command already ended is answered within Start().
      auto e = weak.lock();
      const bool gone = !e || e->gone();
      if (!gone) e->WatchDisconnect(kill);
      driver->Start();
      if (gone) kill();
    });
  });
}

std::vector<Route> CommandRoutes::Table() {
  using B = BodyPolicy;
  using O = OwnerRule;
  using P = ReplyPolicy;
  using A = Accounting;
  const Role kRun = Role::kRun;
  const char* kOne = "/v1/sessions/{id}/commands/{pid...}";
  std::vector<Route> t = {
      SmallJson(Row("POST", "/v1/sessions/{id}/commands", kRun, O::kSession, B::kJson, RunsOn::kDriver, P::kRun,
                    A::kRequest, &Run),
                size_t{1} << 20),
      Row("GET", "/v1/sessions/{id}/commands", kRun, O::kSession, B::kNone, RunsOn::kWorker, P::kJson, A::kRequest,
          nullptr, &List),
      Row("GET", kOne, kRun, O::kSession, B::kNone, RunsOn::kDriver, P::kJson, A::kRequest, &Get),
      Row("POST", kOne, kRun, O::kSession, B::kUpload, RunsOn::kDriver, P::kJson, A::kRequest, &Post),
  };
  for (Route& r : t) {
    if (std::string_view(r.pattern) == kOne) r.name = "/v1/sessions/{id}/commands/{pid}";
  }
  return t;
}

}  // namespace airlock::api
