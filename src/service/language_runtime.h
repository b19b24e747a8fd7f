// How each language's code is run in a sandbox, and what the host has of it.
//
// Python is run by airlock's runner itself. JavaScript (Debian's node) and
// bash are programs the runner launches (model::RunnerConfig::program): it
// places the input files, waits for the program, reports the files it wrote
// and its exit status. Their binaries come from the host's /usr, bound
// read-only into every sandbox.
//
// TypeScript, R and Java run as contexts of a session only: a kernel started
// in its sandbox (service/kernels.h); Missing() says what each needs.
//
//   HostLanguages host = ProbeHostLanguages({Language::kJavaScript, Language::kBash});
//   if (std::string why = host.Missing(Language::kJavaScript); !why.empty()) reject(why);
//   LanguageRuntime rt = RuntimeOf(Language::kJavaScript, host);
#pragma once

#include <string>
#include <vector>

#include "profile/profile.h"

namespace airlock::service {

struct LanguageRuntime {
  std::string code_path;             // where the code is placed (read-only)
  std::string filename;              // its name in tracebacks
  std::vector<std::string> program;  // empty: Python, run by the runner itself
};

struct HostLanguages {
  bool javascript = false;  // /usr/bin/node runs
  bool bash = false;        // /usr/bin/bash is there
  bool typescript = false;  // node and Debian's node-typescript
  bool r = false;           // /usr/bin/Rscript (r-base-core)
  bool java = false;        // /usr/bin/java and /usr/bin/jshell (default-jdk-headless: the jdk.jshell module)
  // Flags node is started with: --disable-wasm-trap-handler where this node
  // has it (Node >= 20.15): WebAssembly then checks bounds in code instead of
  // reserving 8-10 GiB of guard pages per memory, which the run's address-space
  // limit (RLIMIT_AS) refuses. Without it WebAssembly.Memory fails; nothing
  // else does.
  std::vector<std::string> node_flags;
  // Why a language cannot run on this host ("" when it can): what is
  // missing, and the Debian package that brings it.
  std::string Missing(profile::Language language) const;
};

// Where Debian's node-typescript puts the compiler (require()d by the kernel).
inline constexpr const char* kTypeScriptModule = "/usr/share/nodejs/typescript";

// Probes only what is asked for (node is started once, with -e "", to learn
// its flags: ~40 ms; the others are files looked for). Python needs nothing
// here: the runner is Python.
HostLanguages ProbeHostLanguages(const std::vector<profile::Language>& wanted);

LanguageRuntime RuntimeOf(profile::Language language, const HostLanguages& host);

}  // namespace airlock::service
