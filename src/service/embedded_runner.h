// The in-sandbox runner (runtime/python/airlock_runner.py), embedded in the
// binary at build time so that an installed airlock needs no file beside it.
#pragma once

#include <cstddef>
#include <string_view>

extern "C" const char airlock_runner_bytecode_begin[];
extern "C" const char airlock_runner_bytecode_end[];

namespace airlock::service {

// Its source.
std::string_view EmbeddedRunner();

// Its code object, compiled at build time (compile_runner.py): the bytecode
// magic number of the python3 that compiled it (4 bytes), then the marshalled
// code. Empty when the build had no python3. Only a python3 with the same magic
// may load it; the cold run's bootstrap checks (service.cc).
inline std::string_view EmbeddedRunnerBytecode() {
  return std::string_view(airlock_runner_bytecode_begin,
                          static_cast<size_t>(airlock_runner_bytecode_end - airlock_runner_bytecode_begin));
}

}  // namespace airlock::service
