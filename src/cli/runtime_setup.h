// What `airlock serve` and `airlock mcp` both stand on: the profiles, the
// host's isolation setup, the warm pool and the service facade, made in that
// order on the calling thread (which must outlive them: the zygotes die with
// it, PR_SET_PDEATHSIG).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/warm_pool.h"
#include "isolation/sandbox.h"
#include "profile/profile.h"
#include "service/service.h"

namespace airlock::cli {

struct RuntimeFlags {
  std::string profiles_dir;     // "": profile::DefaultProfilesDir()
  std::string default_profile;  // "": "minimal" when present
  std::vector<std::string> allow_degraded;
  std::string uid_range;  // --uid-range; "": the default
  int64_t pool_size = 4;
  int64_t pool_recycle = 5000;
  double pool_recycle_s = 600;
  bool netns_per_run = false;  // --netns-per-run (exec::PoolOptions::network_per_run)
  size_t max_code_bytes = size_t{1} << 20;
  bool sweep_stale_cgroups = true;  // a long-lived server clears what a killed one left
};

// Destroyed in reverse order: the service first, then the pool, then the host.
struct Runtime {
  std::unique_ptr<isolation::HostSetup> host;
  std::unique_ptr<exec::WarmPool> pool;
  std::unique_ptr<service::Service> service;
  ~Runtime() {
    service.reset();
    pool.reset();
  }
};

// The warm pool's options for these profiles: their limits, the zygotes' own
// limits above every profile's, the run environment.
exec::PoolOptions PoolOptionsFor(const profile::ProfileSet& profiles, const RuntimeFlags& flags);

// On failure prints what is wrong to stderr and returns the exit code to use
// (2: configuration, 125: this host cannot run sandboxes) in *exit_code.
std::unique_ptr<Runtime> BuildRuntime(const RuntimeFlags& flags, int* exit_code);

}  // namespace airlock::cli
