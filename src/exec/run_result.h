// The outcome of one run: data, not an error (a timeout or an OOM kill is a
// normal result). Produced by exec::Execution, rendered by the CLI and the API.
#pragma once

#include <cstdint>
#include <string>

#include "isolation/sandbox.h"

namespace airlock::exec {

enum class KillReason { kNone, kTimeout, kMemory, kPids, kOutput, kSignal, kCancelled, kLost, kChannel };

// "timeout", "memory", "pids", "output", "signal", "cancelled", "lost" (the warm
// pool's zygote died under the run: not the code's doing), "channel" (the run
// wrote more to its result channel than the runner protocol allows); nullptr
// for kNone.
const char* KillReasonName(KillReason reason);

struct StreamCapture {
  std::string data;         // at most the cap
  bool truncated = false;   // bytes beyond the cap were discarded
  uint64_t total_bytes = 0; // everything the program wrote to the stream
};

struct RunResult {
  int exit_code = 0;    // the program's exit code; 128+N when killed by signal N
  int signal = 0;       // the signal that ended the program, 0 when it exited
  bool timed_out = false;
  KillReason kill_reason = KillReason::kNone;
  std::string kill_detail;  // human-readable: which limit, what value
  StreamCapture out, err;
  double duration_ms = 0;
  int64_t cpu_ms = 0;
  int64_t max_rss_kb = 0;
  isolation::IsolationReport isolation;
};

}  // namespace airlock::exec
