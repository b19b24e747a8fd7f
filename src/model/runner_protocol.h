// The protocol between the server and the in-sandbox runner
// (runtime/python/airlock_runner.py): the config the server writes to
// /sandbox/config.json, and the JSON-line events the runner writes to fd 3.
//
//   std::string config = model::RunnerConfigToJson(cfg);       // into the Spec
//   ...                                                        // read fd 3, bounded
//   model::RunnerEvents ev = model::ParseRunnerEvents(bytes, truncated);
//
// The event channel is untrusted: user code can find it (/proc/self/fd) and
// write to it before the runner does. ParseRunnerEvents parses each line with
// a SAX pass (no DOM: memory is the line's strings; nesting refused past
// kMaxEventDepth; fields other than "data" must be scalars) and only takes the
// events of the runner's final batch (after the previous "end" event, up to
// the last one); without an "end" event (the run was killed, or called
// os._exit) it reports no result and no error. It is not cheap on a full
// channel (milliseconds per MiB): call it off an event loop.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/execute.h"

namespace airlock::model {

// JSON values in the final batch's results (each becomes a node of the
// response's DOM, ~50 bytes): a `_repr_json_` of a million empty lists must
// not cost the server 50 MB. Results past it are dropped, marked truncated.
inline constexpr size_t kMaxResultValues = size_t{1} << 16;

struct RunnerConfig {
  std::string code_path = "/sandbox/main.py";  // "" with `code` set: the code is inline
  std::optional<std::string> code;             // the warm path: the code itself
  std::string filename = "main.py";  // shown in tracebacks
  bool any_import = false;
  std::vector<std::string> allowed_imports;
  std::string runtime_imports_mode = "enforce";  // or "observe"
  std::vector<std::pair<std::string, std::string>> blocklist;
  std::vector<std::string> preimport;
  bool capture_figures = false;
  // The server streams the run's output: an uncaught exception's traceback
  // goes only into the error event (E2B's shape), not also to stderr. (stdout
  // and stderr are line-buffered in every run: what was printed survives a kill.)
  bool stream = false;
  // The analyzer's message for the syntax error it found: the runner compiles
  // the cell and never runs it (Python's SyntaxError is reported as a run's).
  std::optional<std::string> syntax_check;
  int result_fd = 3;
  int64_t max_result_bytes = 1 << 20;
  int max_results = 16;
  // JSON values of all results' data together: what ParseRunnerEvents keeps
  // (kMaxResultValues), so the runner shrinks its results to fit rather than
  // have the server drop them.
  int64_t max_result_values = static_cast<int64_t>(kMaxResultValues);
  // Environment variables the runner sets for the code (ExecuteRequest::env):
  // in a session's first request, for the session's life.
  std::map<std::string, std::string> env;
  // The warm path only: the first request of a session, then each of its
  // calls (numbered from 1; echoed in the call's end event). 0: not a call.
  bool session = false;
  int64_t call = 0;
  // Files written into the working directory before the code runs (content
  // base64 in the JSON), and the caps on files reported back after it (file
  // events): 0 files = none are looked for.
  std::vector<InputFile> files;
  int64_t max_out_files = 0;
  int64_t max_out_bytes = 0;
  // Another language's program (an argv; argv[0] absolute): the runner only
  // places the files, runs it and reports its files and status (no result or
  // error event). Empty: the code is Python and the runner runs it.
  std::vector<std::string> program;
};

std::string RunnerConfigToJson(const RunnerConfig& config);
// A session call's lean frame: {"frame":"call","code","call","stream"
// [,"syntax_check"][,"files"][,"env" (this call's only)]} from `config`'s code,
// stream, syntax_check, files and env; the runner takes everything else from
// the session's first request (the profile's policy cannot change over a
// session's life).
std::string RunnerCallFrameToJson(const RunnerConfig& config, int64_t call);

struct RunnerEvents {
  std::optional<DisplayResult> main_result;
  std::vector<DisplayResult> displays;  // non-main results, in order
  std::optional<ErrorInfo> error;
  std::optional<int> end_exit_code;     // the runner's "end" event
  bool truncated = false;               // the runner dropped results, or the server cut the channel
  std::vector<OutputFile> files;        // "file" events, well-formed ones only, in order
  bool files_truncated = false;         // the runner left files out or cut them (or the parser did)
  int malformed_lines = 0;              // lines that were not a well-formed event
};

// Caps: a line nested deeper than this, or longer, is dropped as malformed.
inline constexpr size_t kMaxEventDepth = 64;
// A line may carry a whole returned file (base64 of up to a profile's 64 MiB
// files.max_out_bytes); the channel's byte cap bounds it first.
inline constexpr size_t kMaxEventLineBytes = size_t{96} << 20;
// "file" events kept from one batch (profile files.max_out_files is at most this).
inline constexpr size_t kMaxFileEvents = 128;
// Lines a run may write to its channel: the runner writes at most max_results
// (16) results, max_out_files (<= 128) file events, two truncated, an error
// and an end event. A run past this (or past the server's byte cap) is killed
// with kill_reason "channel".
inline constexpr size_t kMaxChannelLines = 256;

// `channel_truncated`: the server stopped keeping bytes of the channel.
RunnerEvents ParseRunnerEvents(std::string_view channel, bool channel_truncated);

// The runner's last word, when the channel ends with it: the "end" event as
// the channel's last line (a warm run's program closes every fd right after
// it, so a server that saw it and end of file on every stream can answer
// without waiting for the process to be torn down). Cheap: only the last line
// is parsed. nullopt when the last line is anything else or the channel was cut.
struct ProgramEnd {
  int exit_code = 0;
  int64_t max_rss_kb = 0;  // 0 when the runner did not say
  std::optional<int64_t> call;  // a session call's number, when the event has one
};
std::optional<ProgramEnd> ParseProgramEnd(std::string_view channel, bool channel_truncated);

}  // namespace airlock::model
