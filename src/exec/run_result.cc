#include "exec/run_result.h"

namespace airlock::exec {

const char* KillReasonName(KillReason reason) {
  switch (reason) {
    case KillReason::kNone: return nullptr;
    case KillReason::kTimeout: return "timeout";
    case KillReason::kMemory: return "memory";
    case KillReason::kPids: return "pids";
    case KillReason::kOutput: return "output";
    case KillReason::kSignal: return "signal";
    case KillReason::kCancelled: return "cancelled";
    case KillReason::kLost: return "lost";
    case KillReason::kChannel: return "channel";
  }
  return nullptr;
}

}  // namespace airlock::exec
