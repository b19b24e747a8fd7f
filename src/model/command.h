// The sandbox's commands as the REST API speaks them (docs/api.md "Commands",
// issue 22): a command's request, its end, the list of a sandbox's processes,
// a signal's name. Pure data and JSON, no I/O; the routes are
// api/command_routes.cc, the processes exec::Sandbox.
//
//   CommandRequest rq;
//   if (!ParseCommandRequest(body, caps, &rq, &error)) refuse(error);
//   argv = {"/bin/bash", "-l", "-c", rq.cmd};
//   ... CommandEndToJson(end) / CommandListToJson(items) / CommandStartEvent(pid)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/execute.h"

namespace airlock::model {

// A foreground command's default timeout (E2B's commands.run default).
inline constexpr double kCommandDefaultTimeoutS = 60;
// The longest a command's timeout, and a GET's wait, may be.
inline constexpr double kCommandMaxTimeoutS = 24 * 3600;
inline constexpr double kCommandMaxWaitS = 300;

struct CommandRequest {
  std::string cmd;  // run as /bin/bash -l -c cmd
  // When not empty, run as is instead (envd's process.Start: a program and
  // its arguments); argv[0] absolute or looked up in the PATH.
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string cwd;  // "" for the sandbox's working directory (/home/user)
  // Seconds until the process (and its group) is killed; 0: none. Default:
  // kCommandDefaultTimeoutS in the foreground, none in the background.
  double timeout_s = 0;
  bool background = false;
  bool stdin_open = false;
  std::string tag;
};

// Parses POST /v1/sessions/{id}/commands: a JSON object with "cmd" (a
// non-empty string without NUL), and optional "env", "cwd" (an absolute
// path without NUL), "timeout" (seconds, 0 for none), "background", "stdin"
// (booleans), "tag" (at most 256 bytes). Unknown keys are refused so that a
// misspelt option is not silently ignored. False with *error (422 for a body
// of the wrong shape, naming the field; 400 for a relative cwd) otherwise.
bool ParseCommandRequest(std::string_view body, const RequestCaps& caps, CommandRequest* request, ApiError* error);

// The signal a name stands for: SIGTERM, SIGKILL, SIGINT, SIGHUP (with or
// without the SIG prefix, any case), or nullopt.
std::optional<int> CommandSignal(std::string_view name);
// Parses POST .../commands/{pid}/signal: {"signal": "SIGTERM"}. False with
// *error (400 naming the signals taken) otherwise.
bool ParseSignalRequest(std::string_view body, const RequestCaps& caps, int* signal, ApiError* error);

// How a command ended, or what it wrote so far (running).
struct CommandEnd {
  int64_t pid = -1;
  std::string tag;
  bool running = false;     // a GET whose wait passed before the end
  int exit_code = 0;        // its own, or 128 + signal
  int signal = 0;           // when a signal ended it
  std::string out, err;     // kept (up to output_cap each)
  uint64_t out_bytes = 0, err_bytes = 0;  // written in all
  bool out_truncated = false, err_truncated = false;
  int64_t output_cap = 0;
  std::string kill_reason;  // "timeout", "cancelled" (its client left), "lost" (the sandbox ended); "" none
  std::string kill_detail;
  double duration_ms = 0;   // from its start; < 0: not known (a later read of a background one), left out
};

// {"pid","tag"?,"running","exit_code","signal"?,"stdout","stderr",
//  "truncated"?:{"stdout","stderr","cap_bytes","stdout_bytes","stderr_bytes"},
//  "kill_reason"?,"kill_detail"?,"duration_ms"?}. While running, exit_code is null.
std::string CommandEndToJson(const CommandEnd& end);

// One process of a sandbox, as GET /v1/sessions/{id}/commands lists it.
struct CommandInfo {
  int64_t pid = -1;
  std::string tag;
  std::vector<std::string> argv;
  std::string cwd;
  bool running = true;
  int exit_code = 0;  // when !running
  int signal = 0;
};
// {"pid","tag","argv","cwd","running","exit_code" (null while running),"signal"?}
std::string CommandInfoToJson(const CommandInfo& info);
// {"commands":[CommandInfoToJson...]}
std::string CommandListToJson(const std::vector<CommandInfo>& items);

// The first event of a streamed command: {"type":"start","pid":n}.
std::string CommandStartEvent(int64_t pid);

}  // namespace airlock::model
