#include "profile/limits.h"

#include <algorithm>
#include <cmath>

#include "profile/units.h"

namespace airlock::profile {
namespace {

double CpuTimeCeiling(const Profile& p, double timeout_s) {
  if (p.resources.cpu_time_s) return *p.resources.cpu_time_s;
  return timeout_s * std::max(1.0, p.resources.cpu_cores);
}

std::string Prefix(std::string_view field, const std::string& value, const Profile& p) {
  return std::string(field) + ": " + value + " is out of range for profile '" + p.name + "' (";
}

std::string SizeRange(int64_t min, int64_t max) {
  return std::to_string(min) + " to " + std::to_string(max) + " bytes = " + FormatSize(max) + ")";
}

Status CheckSeconds(std::string_view field, std::optional<double> v, double max, const Profile& p) {
  if (!v) return Status::Ok();
  if (!(*v > 0 && *v <= max)) {  // also rejects NaN
    return InvalidArgument(Prefix(field, FormatNumber(*v), p) + "0 < " + std::string(field) +
                           " <= " + FormatNumber(max) + " seconds)");
  }
  return Status::Ok();
}

Status CheckSize(std::string_view field, std::optional<int64_t> v, int64_t min, int64_t max,
                 const Profile& p) {
  if (!v) return Status::Ok();
  if (*v < min || *v > max) {
    return InvalidArgument(Prefix(field, std::to_string(*v) + " bytes", p) + SizeRange(min, max));
  }
  return Status::Ok();
}

// The request's value when usable, the ceiling when it asks for more (noting
// the field as clamped), the default when absent or unusable.
template <typename T>
T Pick(std::optional<T> requested, T minimum, T ceiling, T default_value, const char* field,
       std::vector<std::string>* clamped) {
  if (!requested || !(*requested > 0)) return default_value;
  if (*requested > ceiling) {
    clamped->push_back(field);
    return ceiling;
  }
  return std::max(*requested, minimum);
}

}  // namespace

Status Validate(const Profile& p, const RequestedLimits& r) {
  const Resources& c = p.resources;
  RETURN_IF_ERROR(CheckSeconds("timeout", r.timeout_s, c.timeout_max_s, p));
  RETURN_IF_ERROR(CheckSize("memory", r.memory_bytes, kMinRequestMemoryBytes, c.memory_bytes, p));
  if (r.cpu_cores && !(*r.cpu_cores >= 0.001 && *r.cpu_cores <= c.cpu_cores)) {
    return InvalidArgument(Prefix("cpu", FormatNumber(*r.cpu_cores), p) + "0.001 to " +
                           FormatNumber(c.cpu_cores) + " cores)");
  }
  // The same ceiling Clamp uses: derived from the run's timeout when the
  // profile sets no cpu_time.
  RETURN_IF_ERROR(CheckSeconds("cpu_time", r.cpu_time_s,
                               CpuTimeCeiling(p, r.timeout_s.value_or(c.timeout_default_s)), p));
  if (r.pids && (*r.pids < 1 || *r.pids > c.pids)) {
    return InvalidArgument(Prefix("pids", std::to_string(*r.pids), p) + "1 to " +
                           std::to_string(c.pids) + ")");
  }
  RETURN_IF_ERROR(CheckSize("disk", r.disk_bytes, kMinRequestDiskBytes, c.disk_bytes, p));
  RETURN_IF_ERROR(CheckSize("output", r.output_bytes, 1, c.output_bytes, p));
  return Status::Ok();
}

EffectiveLimits Clamp(const Profile& p, const RequestedLimits& r) {
  const Resources& c = p.resources;
  EffectiveLimits e;
  e.profile = p.name;
  e.timeout_s = Pick(r.timeout_s, 0.0, c.timeout_max_s, c.timeout_default_s, "timeout", &e.clamped);
  e.memory_bytes = Pick(r.memory_bytes, std::min(kMinRequestMemoryBytes, c.memory_bytes),
                        c.memory_bytes, c.memory_bytes, "memory", &e.clamped);
  e.cpu_cores =
      Pick(r.cpu_cores, std::min(0.001, c.cpu_cores), c.cpu_cores, c.cpu_cores, "cpu", &e.clamped);
  const double cpu_time_ceiling = CpuTimeCeiling(p, e.timeout_s);
  e.cpu_time_s =
      Pick(r.cpu_time_s, 0.0, cpu_time_ceiling, cpu_time_ceiling, "cpu_time", &e.clamped);
  e.pids = Pick(r.pids, int64_t{1}, c.pids, c.pids, "pids", &e.clamped);
  e.disk_bytes = Pick(r.disk_bytes, std::min(kMinRequestDiskBytes, c.disk_bytes), c.disk_bytes,
                      c.disk_bytes, "disk", &e.clamped);
  e.output_bytes =
      Pick(r.output_bytes, int64_t{1}, c.output_bytes, c.output_bytes, "output", &e.clamped);
  return e;
}

}  // namespace airlock::profile
