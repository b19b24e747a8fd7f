#include "cli/runtime_setup.h"

#include <algorithm>
#include <iostream>

#include "base/log.h"
#include "cli/commands.h"
#include "profile/loader.h"

namespace airlock::cli {
namespace {

constexpr int kExitAirlockError = 125;

}  // namespace

exec::PoolOptions PoolOptionsFor(const profile::ProfileSet& profiles, const RuntimeFlags& flags) {
  exec::PoolOptions popts;
  popts.profiles = service::WarmPoolProfiles(profiles);
  popts.size = static_cast<int>(flags.pool_size);
  popts.recycle_after = flags.pool_recycle;
  popts.recycle_after_s = flags.pool_recycle_s;
  popts.network_per_run = flags.netns_per_run;
  popts.zygote_env = service::RunEnvironment();
  // The zygote's own limits; its runs' rlimits must fit under them.
  isolation::Limits& z = popts.zygote_limits;
  z.memory_bytes = int64_t{8} << 30;
  z.pids = 4096;
  z.cpus = 0;  // no CPU bandwidth cap: it only forks
  z.disk_bytes = int64_t{1} << 30;
  z.open_files = 4096;
  for (const exec::PoolProfile& p : popts.profiles) {
    z.memory_bytes = std::max(z.memory_bytes, p.limits.memory_bytes);
    z.disk_bytes = std::max(z.disk_bytes, p.limits.disk_bytes);
    z.open_files = std::max(z.open_files, p.limits.open_files);
    z.pids = std::max(z.pids, 4 * p.limits.pids);
  }
  return popts;
}

std::unique_ptr<Runtime> BuildRuntime(const RuntimeFlags& flags, int* exit_code) {
  *exit_code = 2;
  isolation::HostOptions host_options;
  host_options.sweep_stale_cgroups = flags.sweep_stale_cgroups;
  std::string error;
  if (!ParseDegradable(flags.allow_degraded, &host_options.degradable, &error) ||
      !ParseUidRange(flags.uid_range, &host_options.id_range, &error)) {
    std::cerr << "airlock: " << error << "\n";
    return nullptr;
  }
  const std::string dir = flags.profiles_dir.empty() ? profile::DefaultProfilesDir() : flags.profiles_dir;
  auto profiles = profile::LoadProfiles(dir);
  if (!profiles.ok()) {
    std::cerr << "airlock: cannot load the profiles from " << dir << ": " << profiles.status().ToString() << "\n";
    return nullptr;
  }
  if (!flags.default_profile.empty()) {
    if (Status st = profiles->SetDefault(flags.default_profile); !st.ok()) {
      std::cerr << "airlock: --default-profile: " << st.ToString() << "\n";
      return nullptr;
    }
  }
  auto rt = std::make_unique<Runtime>();
  auto host = isolation::PrepareHost(host_options);
  if (!host.ok()) {
    std::cerr << "airlock: this host cannot run sandboxes: " << host.status().ToString()
              << "\n(`airlock check` lists every layer; --allow-degraded=cgroup,landlock runs without those)\n";
    *exit_code = kExitAirlockError;
    return nullptr;
  }
  rt->host = std::make_unique<isolation::HostSetup>(std::move(*host));
  // The warm path: a zygote per profile. Without it every run takes the cold path.
  if (flags.pool_size > 0) {
    auto started = exec::WarmPool::Start(*rt->host, PoolOptionsFor(*profiles, flags));
    if (started.ok()) {
      rt->pool = std::move(*started);
    } else {
      log::Warn("warm pool off, every run takes the cold path: " + started.status().ToString());
    }
  }
  service::ServiceOptions sopts;
  sopts.pool = rt->pool.get();
  sopts.profiles = std::move(*profiles);
  sopts.host = rt->host.get();
  sopts.max_code_bytes = flags.max_code_bytes;
  auto svc = service::Service::Create(std::move(sopts));
  if (!svc.ok()) {
    std::cerr << "airlock: " << svc.status().ToString() << "\n";
    *exit_code = kExitAirlockError;
    return nullptr;
  }
  rt->service = std::move(*svc);
  *exit_code = 0;
  return rt;
}

}  // namespace airlock::cli
