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

// Tries each namespace type, Landlock, seccomp and cgroups. `degradable` marks
// layers the configuration allows to be missing (isolation::Degradable bits).
std::vector<ProbeItem> ProbeHost(uint32_t degradable);

}  // namespace airlock::isolation
