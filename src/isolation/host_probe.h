// What this host can do, layer by layer (for `airlock check` and /readyz).
#pragma once

#include <string>
#include <vector>

namespace airlock::isolation {

struct ProbeItem {
  std::string name;
  bool ok = false;
  bool required = true;  // a missing required layer makes the host unfit
  std::string detail;    // what was found, or what is missing and what to change
};

// Which foreign system-call ABIs this host lets a 64-bit process enter at
// all, found by trying getpid through each in a child process, unconfined.
// Inside a run the seccomp filter kills any such call (SIGSYS); where the host
// itself refuses one (a hypervisor that does not deliver `int $0x80` kills the
// caller with SIGSEGV first), the run dies that way instead. Either way no
// foreign-ABI call executes; this says which of the two a host does.
struct ForeignAbi {
  std::string name;       // "i386 (int $0x80)", "x32"
  bool enterable = false; // the call ran (returned a value or an errno)
  std::string detail;
};
std::vector<ForeignAbi> ProbeForeignAbis();

// Tries each namespace type, Landlock, seccomp and cgroups. `degradable` marks
// layers the configuration allows to be missing (isolation::Degradable bits).
std::vector<ProbeItem> ProbeHost(uint32_t degradable);

}  // namespace airlock::isolation
