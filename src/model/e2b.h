// E2B's wire shapes (research/ecosystem.md §2), for the E2B-compatible
// listener (api/e2b_routes.h): the code-interpreter API's POST /execute body
// and NDJSON lines, its /contexts objects, envd's /files answers and error
// bodies, and the multipart/form-data upload the SDKs send. Pure functions,
// no I/O; untrusted input is parsed with the same bounds as every body
// (UTF-8, depth, code size).
//
//   model::E2bExecuteRequest req;
//   if (!model::ParseE2bExecuteRequest(body, caps, &req, &error)) reply(400, E2bErrorBody(...));
//   lines: E2bNumberOfExecutions(n), stdout/stderr (stream_events.h's OutputEvent
//   has E2B's exact shape), E2bFinalEvents(response)..., E2bEndOfExecution()
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/execute.h"
#include "model/multipart.h"
#include "model/stream_events.h"

namespace airlock::model {

// POST /execute {"code", "context_id"?, "language"?, "env_vars"?}.
struct E2bExecuteRequest {
  std::string code;
  std::optional<std::string> context_id;
  std::optional<std::string> language;  // normalized: "python", "javascript", ...
  // runCode's envs, for this execution only; bounded as ExecuteRequest::env.
  std::map<std::string, std::string> env_vars;
};
// Errors: kUnprocessable (bad JSON or field type), kPayloadTooLarge (code over
// the cap), kBadRequest (both context_id and language, as E2B answers).
bool ParseE2bExecuteRequest(std::string_view body, const RequestCaps& caps, E2bExecuteRequest* request,
                            ApiError* error);

// POST /contexts {"language"?, "cwd"?} (an empty body is all defaults).
struct E2bContextRequest {
  std::optional<std::string> language;
  std::optional<std::string> cwd;
};
bool ParseE2bContextRequest(std::string_view body, const RequestCaps& caps, E2bContextRequest* request,
                            ApiError* error);

// E2B's language names: none -> "python", "js" -> "javascript", "ts" ->
// "typescript"; others lower-cased as given.
std::string E2bNormalizeLanguage(std::string_view language);

struct E2bContext {
  std::string id;
  std::string language;
  std::string cwd;
};
// {"id","language","cwd"} and the list of them.
std::string E2bContextToJson(const E2bContext& context);
std::string E2bContextListToJson(const std::vector<E2bContext>& contexts);

// {"type":"number_of_executions","execution_count":n}
std::string E2bNumberOfExecutions(int64_t count);
// What a finished call adds before end_of_execution: one "result" line per
// display result, in order, E2B's fields at top level ({"type":"result",
// "text"?,"png"?,...,"chart"?,"data"?,"extra":{...},"is_main_result"}: a MIME
// type E2B has no field for goes into "extra"; "text" loses the quotes of a
// string's repr, as E2B's server does), then "error" when the code raised (or
// the run was killed: name "TimeoutError"/"MemoryError"/..., from the run report).
std::vector<StreamEvent> E2bFinalEvents(const ExecuteResponse& response);
// {"type":"error","name","value","traceback"}
std::string E2bErrorEvent(std::string_view name, std::string_view value, std::string_view traceback);
// {"type":"end_of_execution"}
std::string E2bEndOfExecution();

// envd's error body: {"message": ..., "code": status}.
std::string E2bErrorBody(std::string_view message, int code);
// POST /files' answer: [{"path","name","type":"file","metadata"?}] per
// written file; "metadata" ({key: value}, what the upload stored on every file
// it wrote) only when not empty, as envd answers.
std::string E2bWrittenFilesToJson(const std::vector<std::string>& absolute_paths,
                                  const std::map<std::string, std::string>& metadata = {});

// An E2B path (absolute under /home/user, the E2B working directory, or
// relative to it) as a path relative to the session's working directory.
// False with *error for any other absolute path, "/home/user" itself, or a
// path CheckSandboxPath refuses (/tmp/...: E2bPathToPlace).
bool E2bPathToSandbox(std::string_view e2b_path, std::string* relative, std::string* error);
// The E2B path of a relative sandbox path: "/home/user/" + relative.
std::string E2bPathFromSandbox(std::string_view relative);

// A path of E2B's files API in one of the sandbox's two writable
// directories: /home/user (absolute, or relative to it) or /tmp.
struct E2bPlace {
  bool tmp = false;      // beneath /tmp, else /home/user
  std::string relative;  // beneath that directory (CheckSandboxPath holds)
  const char* dir() const { return tmp ? "/tmp" : "/home/user"; }
  std::string e2b_path() const { return std::string(dir()) + "/" + relative; }
};
// As E2bPathToSandbox, also taking /tmp/... . False with *error for any other
// absolute path, either directory itself, or a path CheckSandboxPath refuses.
bool E2bPathToPlace(std::string_view e2b_path, E2bPlace* place, std::string* error);

}  // namespace airlock::model
