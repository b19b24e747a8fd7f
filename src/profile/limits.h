// Requests ask, profiles decide: a request may ask for less than a profile's
// ceiling (a shorter timeout, less memory), never for more.
//
//   RequestedLimits req;
//   req.timeout_s = body.timeout;                    // absent: the profile's default
//   Status st = Validate(profile, req);              // out of range: the caller's 422
//   if (!st.ok()) return Reply422(st.message());
//   EffectiveLimits eff = Clamp(profile, req);       // echoed in the response's `profile`
//
// Validate and Clamp are separate so that a caller can choose: the
// fips-compatible /execute rejects `timeout` > ceiling (422) like the peer's
// schema, while a lenient caller may clamp without validating.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "profile/profile.h"

namespace airlock::profile {

// What a request asked for; an absent field takes the profile's default.
struct RequestedLimits {
  std::optional<double> timeout_s;
  std::optional<int64_t> memory_bytes;
  std::optional<double> cpu_cores;
  std::optional<double> cpu_time_s;
  std::optional<int64_t> pids;
  std::optional<int64_t> disk_bytes;
  std::optional<int64_t> output_bytes;
};

// The limits a run gets. Every field is set.
struct EffectiveLimits {
  std::string profile;   // the profile's name
  double timeout_s = 0;  // wall clock
  int64_t memory_bytes = 0;
  double cpu_cores = 0;
  // CPU seconds (RLIMIT_CPU backstop). The profile's resources.cpu_time when
  // it sets one, else timeout_s * max(1, cpu_cores): a run cannot use more
  // than that anyway, so the backstop only catches a runaway the wall clock
  // would also catch.
  double cpu_time_s = 0;
  int64_t pids = 0;
  int64_t disk_bytes = 0;
  int64_t output_bytes = 0;  // per stream
  // Request fields that asked for more than the ceiling and got the ceiling
  // ("timeout", "memory", ...), in the order of the fields above.
  std::vector<std::string> clamped;
};

// The smallest value a request may ask for, where zero would not start a run.
inline constexpr int64_t kMinRequestMemoryBytes = 16ll << 20;
inline constexpr int64_t kMinRequestDiskBytes = 1ll << 20;

// InvalidArgument when a requested value is outside what the profile allows;
// the message names the request field, the value and the allowed range:
//   "timeout: 60 is out of range for profile 'minimal' (0 < timeout <= 30 seconds)"
Status Validate(const Profile& profile, const RequestedLimits& request);

// min(requested, ceiling) for every field; the profile's default for an absent
// one. Clamp never returns a limit a run cannot start with: a zero, negative
// or NaN request counts as absent, and a positive one below the minimum
// (memory 16Mi, disk 1Mi) is raised to it. Call Validate first to reject them.
EffectiveLimits Clamp(const Profile& profile, const RequestedLimits& request);

}  // namespace airlock::profile
