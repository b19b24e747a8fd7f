// envd's process.Process over Connect (issue 22 item 4; docs/api.md "E2B's
// envd"): the calls E2B's SDKs make for `sandbox.commands` (run, list,
// connect, sendStdin, closeStdin, kill), served on the E2B door for the
// caller's default sandbox (the session /files and /execute reach), over
// that sandbox's processes (exec::Sandbox).
//
//   POST /process.Process/Start       stream: start{pid}, data{stdout|stderr}..., end{exitCode,...}  driver
//   POST /process.Process/Connect     stream: the same for a running process (its start, new output, its end)
//   POST /process.Process/List        {processes:[{config:{cmd,args,envs,cwd},pid,tag}]}   the running ones
//   POST /process.Process/SendInput   {process:{pid|tag}, input:{stdin: base64}}
//   POST /process.Process/CloseStdin  {process}
//   POST /process.Process/SendSignal  {process, signal: SIGNAL_SIGKILL | SIGNAL_SIGTERM}
//   POST /process.Process/Update, StreamInput   unimplemented (no PTY; no client streams over HTTP/1.1)
//
// A process's output pipe has one reader: the hub of that process, made by
// the Start (or the first Connect) that watches it, which sends every piece to
// each stream attached to it. A stream that ends (its client left, its
// Connect-Timeout-Ms passed) leaves the process running, as envd does; the
// deadline of the Start that made it kills it, so a command never outlives
// the time its caller gave it (E2B's default is 60 s). Nothing holds a thread
// while a process runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/route.h"

namespace airlock::api {

class ServerState;
class ProcessHub;

class EnvdProcesses {
 public:
  static std::vector<Route> Table();

  // The hub watching process `pid` of session `session`, or null.
  std::shared_ptr<ProcessHub> Find(const std::string& session, int64_t pid) const;
  void Put(const std::string& session, int64_t pid, std::shared_ptr<ProcessHub> hub);
  void Erase(const std::string& session, int64_t pid);
  size_t size() const { return hubs_.size(); }
  // The server drains: every stream attached to a process ends now
  // (unavailable, saying why), the processes run on until the sandboxes close.
  void Drain();

 private:
  std::map<std::pair<std::string, int64_t>, std::shared_ptr<ProcessHub>> hubs_;
};

}  // namespace airlock::api
