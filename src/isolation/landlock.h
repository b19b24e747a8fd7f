// Landlock: a filesystem, TCP and scope ruleset built in the parent from the
// sandbox's own view (paths inside the new root), applied in the child after
// pivot_root and no_new_privs, before seccomp.
//
//   LandlockPlan plan = PlanLandlock(abi, {"/"}, {"/tmp", "/dev/shm"}, {"/dev/null", ...});
//   ... in the child:  if (int err = ApplyLandlockInChild(plan)) report(err);
#pragma once

#include <string>
#include <vector>

namespace airlock::isolation {

// The kernel's Landlock ABI version, 0 when Landlock is unavailable.
int LandlockAbi();

struct LandlockPlan {
  int abi = 0;  // 0: do not apply
  unsigned long long handled_fs = 0;
  unsigned long long handled_net = 0;
  unsigned long long scoped = 0;
  struct Rule {
    std::string path;
    unsigned long long access = 0;
  };
  std::vector<Rule> rules;
};

// read_only: trees that may be read and executed; read_write: trees that may be
// changed too; devices: single files that may be read and written (/dev/null...).
// TCP bind/connect get no rule (denied); abstract unix sockets and signals are
// scoped to the sandbox where the ABI has scopes (>= 6).
LandlockPlan PlanLandlock(int abi, const std::vector<std::string>& read_only,
                          const std::vector<std::string>& read_write,
                          const std::vector<std::string>& devices);

// Child side: creates the ruleset, adds the rules and restricts the calling
// thread. Allocation-free. Returns 0 or an errno.
int ApplyLandlockInChild(const LandlockPlan& plan);

}  // namespace airlock::isolation
