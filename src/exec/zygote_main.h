// The zygote process of the warm pool (DESIGN §3): `airlock __zygote ...`,
// exec'd fresh by the server's WarmPool inside a base sandbox (isolation::Spec
// nested_sandbox_host) with a clean environment and the pool socket as fd 3.
// It embeds CPython, loads the in-sandbox runner, imports the profile's
// modules, then forks runs on request (isolation/warm_run.h) and never runs
// user code itself. Single-threaded by construction (it checks before each
// fork); exits when the pool socket closes.
//
// Arguments (written by WarmPool, not meant for people):
//   __zygote --preimport numpy,pandas --memory BYTES --pids N --cpus X
//            --disk BYTES --open-files N --cpu-time-ms MS [--ro-bind PATH]...
#pragma once

#include <span>
#include <string_view>

namespace airlock::exec {

inline constexpr const char* kZygoteSubcommand = "__zygote";

// A Python module given as source: its import name and its text.
struct PythonModule {
  std::string_view name;
  std::string_view source;
};

// Returns the process's exit code. runner_source: runtime/python/airlock_runner.py;
// helpers: the modules it loads from beside it (given to its zygote_preimport,
// which loads them as /sandbox/<name>.py after the profile's modules).
int ZygoteMain(int argc, char** argv, std::string_view runner_source, std::span<const PythonModule> helpers);

}  // namespace airlock::exec
