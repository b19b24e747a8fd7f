#include "isolation/restrict_blob.h"

#include <cstring>

namespace airlock::isolation::internal {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

void Align8(std::string* out) {
  while (out->size() % 8 != 0) out->push_back('\0');
}

}  // namespace

// The layout ParseRestrictPlan (restrict.cc) reads: magic, rlimits, Landlock
// (each rule's path NUL-terminated and padded to 8 bytes), then the two
// filters' instructions, 8-byte aligned from the start.
std::string SerializeRestrictPlan(const RestrictPlan& plan) {
  std::string out;
  Put<uint32_t>(&out, kRestrictPlanMagic);
  Put<uint32_t>(&out, static_cast<uint32_t>(plan.n_rlimits));
  for (int i = 0; i < plan.n_rlimits; ++i) {
    Put<int32_t>(&out, plan.rlimits[i].resource);
    Put<uint32_t>(&out, 0);
    Put<uint64_t>(&out, plan.rlimits[i].cur);
    Put<uint64_t>(&out, plan.rlimits[i].max);
  }
  Put<int32_t>(&out, plan.landlock_abi);
  Put<uint32_t>(&out, static_cast<uint32_t>(plan.n_rules));
  Put<uint64_t>(&out, plan.handled_fs);
  Put<uint64_t>(&out, plan.handled_net);
  Put<uint64_t>(&out, plan.scoped);
  for (int i = 0; i < plan.n_rules; ++i) {
    Put<uint64_t>(&out, plan.rules[i].access);
    const size_t len = std::strlen(plan.rules[i].path) + 1;
    Put<uint32_t>(&out, static_cast<uint32_t>(len));
    out.append(plan.rules[i].path, len);
    Align8(&out);
  }
  Put<uint32_t>(&out, static_cast<uint32_t>(plan.filter_len));
  Put<uint32_t>(&out, static_cast<uint32_t>(plan.lock_filter_len));
  out.append(reinterpret_cast<const char*>(plan.filter), plan.filter_len * sizeof(struct sock_filter));
  if (plan.lock_filter_len > 0) {
    out.append(reinterpret_cast<const char*>(plan.lock_filter), plan.lock_filter_len * sizeof(struct sock_filter));
  }
  return out;
}

}  // namespace airlock::isolation::internal
