// What starts a context's interpreter (a kernel) in a session's sandbox
// (session/live_session.h, "Contexts"): the program, its arguments and the
// kernel's own source, for each language. Every kernel speaks the runner's
// session protocol (model/runner_protocol.h): calls in on fd 3, result
// events out on fd 4, the cell's output on fds 1 and 2.
//
//   KernelLaunch k = KernelFor(Language::kR, "/home/user", host, memory_bytes, python_config);
//   // the sandbox starts k.argv with fds 3 (control), 4 (events) and, when
//   // k.source is not empty, 5: a sealed memfd holding it (/proc/self/fd/5)
//
// The kernels live in runtime/<language>/ and are embedded in the binary:
//   javascript, typescript  runtime/javascript/airlock_kernel.js   node -e (typescript: the same kernel,
//                                                                  which transpiles with node-typescript)
//   r                       runtime/r/airlock_kernel.R             Rscript /proc/self/fd/5
//   java                    runtime/java/AirlockKernel.java        java --source 11 /proc/self/fd/5 (JShell)
//   bash                    runtime/bash/airlock_bash_kernel.py    python3 /proc/self/fd/5, which keeps a bash
//   python                  runtime/python/airlock_runner.py       python3 -c <boot> (the runner's session, as
//                                                                  a cold session runs it; its sources on fd 5)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/runner_protocol.h"
#include "profile/profile.h"
#include "service/language_runtime.h"

namespace airlock::service {

struct KernelLaunch {
  std::vector<std::string> argv;  // argv[0] absolute
  std::string source;             // given as fd 5 (a sealed memfd) when not empty
};

// The kernel of `language`, to work in `cwd` (it changes there itself: a
// context may name any directory of the sandbox). `memory_bytes`: the
// sandbox's memory limit (a JVM sizes its heap from it). `python_config`:
// the session's runner config (its profile's policy; Python only): the
// kernel serves it as a cold session's runner does, with control fd 3 and
// result fd 4. The caller checks HostLanguages::Missing first.
KernelLaunch KernelFor(profile::Language language, const std::string& cwd, const HostLanguages& host,
                       int64_t memory_bytes, const model::RunnerConfig& python_config);

// The embedded kernel sources (for tests that run a kernel directly).
std::string_view KernelSource(profile::Language language);

}  // namespace airlock::service
