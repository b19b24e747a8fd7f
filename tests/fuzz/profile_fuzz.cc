// libFuzzer target: profile YAML. Any input must come back as a profile or an
// InvalidArgument error, never a crash, a hang, an escaped exception or a
// profile that breaks the loader's own guarantees.
//
//   clang++ -fsanitize=fuzzer,address,undefined ... (see tests/fuzz/CMakeLists.txt)
//   ./profile_fuzz -max_len=4096 corpus/
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profile/limits.h"
#include "profile/loader.h"
#include "profile/units.h"

namespace {

using airlock::ErrorCode;
using airlock::profile::Clamp;
using airlock::profile::EffectiveLimits;
using airlock::profile::Profile;
using airlock::profile::ProfileSource;
using airlock::profile::RequestedLimits;

// A parent for the input to extend, so inheritance is exercised too.
constexpr char kParent[] = R"(name: minimal
imports:
  allowed: [math, json, numpy]
blocklist: [[numpy, ctypeslib]]
preimport: [json]
resources: {memory: 256Mi, cpu: 500m, timeout_max: 30, pids: 32}
scan_stages: {pre: [ast_scan]}
)";

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// What every loaded profile promises (profile.h, limits.h).
void CheckProfile(const Profile& p) {
  Check(!p.name.empty());
  for (size_t i = 1; i < p.allowed_imports.size(); ++i) {
    Check(p.allowed_imports[i - 1] < p.allowed_imports[i]);  // sorted, unique
  }
  Check(!p.any_import || p.allowed_imports.empty());
  const auto& r = p.resources;
  Check(r.memory_bytes >= (16 << 20));
  Check(r.cpu_cores >= 0.001 && r.cpu_cores <= 1024);
  Check(r.timeout_max_s > 0 && std::isfinite(r.timeout_max_s));
  Check(r.timeout_default_s > 0 && r.timeout_default_s <= r.timeout_max_s);
  Check(r.pids >= 1);
  Check(p.files.max_in_bytes <= r.disk_bytes);
  Check(p.scan_stages.post.empty());
  for (const std::string& m : p.preimport) Check(p.AllowsImport(m));

  RequestedLimits req;
  req.timeout_s = 1e300;
  req.memory_bytes = INT64_MAX;
  req.cpu_cores = std::nan("");
  req.pids = -1;
  EffectiveLimits e = Clamp(p, req);
  Check(e.timeout_s > 0 && e.timeout_s <= r.timeout_max_s);
  Check(e.memory_bytes > 0 && e.memory_bytes <= r.memory_bytes);
  Check(e.cpu_cores > 0 && e.pids >= 1 && e.cpu_time_s > 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto one = airlock::profile::ParseProfileYaml(text, "fuzz.yaml");
  if (one.ok()) {
    CheckProfile(one.value());
  } else {
    Check(one.status().code() == ErrorCode::kInvalidArgument);
    Check(!one.status().message().empty());
    // Messages go to logs and JSON as they are.
    Check(airlock::profile::IsValidUtf8(one.status().message()));
  }

  std::vector<ProfileSource> sources = {{"minimal.yaml", kParent},
                                        {"fuzz.yaml", std::string(text)}};
  auto set = airlock::profile::ParseProfiles(sources);
  if (set.ok()) {
    for (const Profile& p : set->profiles()) CheckProfile(p);
    Check(set->Default().name == "minimal");
  } else {
    Check(set.status().code() == ErrorCode::kInvalidArgument);
  }
  return 0;
}
