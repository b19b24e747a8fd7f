// envd's process.Process messages (E2B's spec/envd/process/process.proto) in
// proto3's JSON mapping, as E2B's SDKs send and read them over Connect
// (model/connect.h; the routes: api/envd_process_routes.cc). Pure data and
// JSON, no I/O; untrusted input parsed with the bounds of every body.
//
//   EnvdStart start;
//   if (!ParseEnvdStart(json, caps, &start, &error)) refuse(error);   // error.code: a Connect code
//   stream: EnvdStartEvent(pid), EnvdDataEvent(true, bytes)..., EnvdEndEvent(exit)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/command.h"
#include "model/execute.h"

namespace airlock::model {

// A ProcessSelector: a pid, or a tag.
struct EnvdSelector {
  int64_t pid = -1;
  std::string tag;  // when pid < 0
};

// StartRequest: {process:{cmd, args, envs, cwd}, pty?, tag?, stdin?} as a
// command (its argv is cmd and args). A PTY is refused (unimplemented).
// stdin: E2B's default for old SDKs is true; the SDKs of today send it.
bool ParseEnvdStart(std::string_view body, const RequestCaps& caps, CommandRequest* request, ApiError* error);
// ListRequest: a JSON object (its fields, none today, ignored); an empty body is one.
bool ParseEnvdListRequest(std::string_view body, const RequestCaps& caps, ApiError* error);
// ConnectRequest, CloseStdinRequest: {process: selector}.
bool ParseEnvdSelectorRequest(std::string_view body, const RequestCaps& caps, EnvdSelector* selector,
                              ApiError* error);
// SendInputRequest: {process, input:{stdin: base64}} (a PTY's input is refused).
bool ParseEnvdSendInput(std::string_view body, const RequestCaps& caps, EnvdSelector* selector, std::string* data,
                        ApiError* error);
// SendSignalRequest: {process, signal: "SIGNAL_SIGKILL" | "SIGNAL_SIGTERM" (or 9, 15)}.
bool ParseEnvdSendSignal(std::string_view body, const RequestCaps& caps, EnvdSelector* selector, int* signal,
                         ApiError* error);

// The messages of a Start or Connect stream: {"event":{...}}.
std::string EnvdStartEvent(int64_t pid);
std::string EnvdDataEvent(bool stdout_stream, std::string_view bytes);
std::string EnvdKeepaliveEvent();
// How it ended, as envd says it (Go's ProcessState): exited and its code
// ("exit status N"), or a signal (exitCode -1, "signal: killed"); `error`
// when airlock ended it (its timeout, its sandbox's end).
struct EnvdEnd {
  bool exited = true;
  int exit_code = 0;
  int signal = 0;
  std::string error;
};
std::string EnvdEndEvent(const EnvdEnd& end);

// One process of ListResponse.
struct EnvdProcessInfo {
  int64_t pid = -1;
  std::string tag;
  std::vector<std::string> argv;  // cmd, then args
  std::string cwd;
  std::map<std::string, std::string> envs;
};
// ListResponse: {"processes":[{"config":{"cmd","args","envs","cwd"},"pid","tag"?}]}.
std::string EnvdProcessListToJson(const std::vector<EnvdProcessInfo>& processes);

}  // namespace airlock::model
