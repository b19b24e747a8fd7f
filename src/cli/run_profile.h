// `airlock run` through a profile (--profile, --language, --input): the code
// runs as POST /v1/execute runs it, on the cold path.
#pragma once

#include <string>

#include "cli/commands.h"

namespace airlock::cli {

// Runs `code` and returns the exit code airlock run exits with (the
// program's, or 125 when airlock could not run it: a refusal, a bad flag, a
// host that cannot). When the run was cancelled through `cancel_fd` (a
// signalfd), *cancel_signal is set non-zero and the caller picks the code.
int RunThroughProfile(const RunFlags& flags, std::string code, int cancel_fd, int* cancel_signal);

}  // namespace airlock::cli
