// Commands in a session's sandbox (issue 22, docs/api.md "Commands") for the
// doors: the checks and the start every door shares (the REST routes in
// api/command_routes.cc, MCP's run_command), and a blocking run for callers
// without an event loop (MCP over stdio). A command is `/bin/bash -l -c CMD`
// started by the sandbox's init (exec::Sandbox), so the session's profile
// must allow bash.
//
//   model::ApiError error;
//   auto started = StartSessionCommand(profiles, mgr, id, owner, request, &error);   // worker: blocks
//   if (!started) refuse(error);
//   ... watch started->process from a loop (exec::ProcessWatch), then CommandEndOf(outcome, ...)
//   std::optional<model::CommandEnd> end = RunSessionCommand(profiles, mgr, id, owner, request, &error);  // blocking
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "exec/process_watch.h"
#include "exec/sandbox.h"
#include "model/command.h"
#include "profile/profile.h"
#include "session/session_manager.h"

namespace airlock::session {

// Output kept per stream of a command's answer (a stream carries every byte).
inline constexpr int64_t kCommandOutputCap = int64_t{1} << 20;

// nullopt when session `id` (the owner's) may run commands: its profile allows
// bash. Else 404/410 for the session, or 400 language_not_allowed naming the
// profiles that allow bash.
std::optional<model::ApiError> CommandsAllowed(const profile::ProfileSet& profiles, SessionManager& mgr,
                                               const std::string& id, const std::string& owner);

// What exec::Sandbox's Start, Signal, SendInput and ProcessWatch::Attach
// said, as the API's error: 400 bad request (cwd, program), 429 the
// sandbox's process cap, 410 the sandbox ended, 404 no such process, 409 a
// process in the wrong state.
model::ApiError ProcessError(const Status& st);

struct StartedCommand {
  std::shared_ptr<exec::Sandbox> sandbox;
  std::shared_ptr<exec::Process> process;
  Clock::time_point start;  // just before it started: its duration counts from here
};

// The checks, the session's sandbox (opened on first use), then the process.
// Blocking (a fork and an execve by init): a worker thread.
std::optional<StartedCommand> StartSessionCommand(const profile::ProfileSet& profiles, SessionManager& mgr,
                                                  const std::string& id, const std::string& owner,
                                                  const model::CommandRequest& request, model::ApiError* error);

// A watch's outcome as the API's end (`ended` false: it runs on).
model::CommandEnd CommandEndOf(const exec::ProcessOutcome& o, pid_t pid, const std::string& tag, bool ended);

// Starts a foreground command and waits for its end (its timeout enforced).
// Blocking for as long as it runs: callers without a loop only.
std::optional<model::CommandEnd> RunSessionCommand(const profile::ProfileSet& profiles, SessionManager& mgr,
                                                   const std::string& id, const std::string& owner,
                                                   const model::CommandRequest& request, model::ApiError* error);

}  // namespace airlock::session
