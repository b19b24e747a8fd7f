// The in-sandbox runner (runtime/python/airlock_runner.py) and its helper
// modules (airlock_display.py, airlock_charts.py), embedded in the binary at
// build time so that an installed airlock needs no file beside it.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "exec/zygote_main.h"

extern "C" const char airlock_runner_bytecode_begin[];
extern "C" const char airlock_runner_bytecode_end[];

namespace airlock::service {

// Its source.
std::string_view EmbeddedRunner();

// Its helper modules' sources, named as the runner imports them, in the order
// it loads them. A cold run gets each as /sandbox/<name>.py beside the runner.
std::span<const exec::PythonModule> EmbeddedRunnerHelpers();

// The code objects of the runner and its helpers, compiled at build time
// (compile_runner.py): the bytecode magic number of the python3 that compiled
// them (4 bytes), then the marshalled (name, code) pairs, the runner last.
// Empty when the build had no python3. Only a python3 with the same magic may
// load it; the cold run's bootstrap checks (service.cc).
inline std::string_view EmbeddedRunnerBytecode() {
  return std::string_view(airlock_runner_bytecode_begin,
                          static_cast<size_t>(airlock_runner_bytecode_end - airlock_runner_bytecode_begin));
}

}  // namespace airlock::service
