#include "isolation/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isolation/landlock_uapi.h"
#include "isolation/restrict.h"

namespace airlock::isolation {
namespace {

// The newest ABI whose rights this file knows; a newer kernel gets these (ABI 7
// added only logging flags).
constexpr int kNewestKnownAbi = 7;

constexpr uint64_t kFsAbi1 =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
    LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
    LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
    LANDLOCK_ACCESS_FS_MAKE_SYM;

uint64_t HandledFs(int abi) {
  uint64_t fs = kFsAbi1;
  if (abi >= 2) fs |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return fs;
}

}  // namespace

int LandlockAbi() {
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

LandlockPlan PlanLandlock(int abi, const std::vector<std::string>& read_only,
                          const std::vector<std::string>& read_write,
                          const std::vector<std::string>& devices) {
  LandlockPlan plan;
  if (abi <= 0) return plan;
  plan.abi = abi;
  const int known = abi < kNewestKnownAbi ? abi : kNewestKnownAbi;
  plan.handled_fs = HandledFs(known);
  // No network rule is ever added: every TCP bind and connect is refused.
  if (known >= 4) plan.handled_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
  if (known >= 6) plan.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;

  const uint64_t ro = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_EXECUTE;
  uint64_t dev = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE;
  if (known >= 3) dev |= LANDLOCK_ACCESS_FS_TRUNCATE;  // `> /dev/null` opens with O_TRUNC
  if (known >= 5) dev |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  for (const auto& p : read_only) plan.rules.push_back({p, ro});
  // Everything handled, IOCTL_DEV included: a working tree holds no device nodes
  // (MAKE_CHAR/MAKE_BLOCK need CAP_MKNOD, which the run lacks).
  for (const auto& p : read_write) plan.rules.push_back({p, plan.handled_fs});
  for (const auto& p : devices) plan.rules.push_back({p, dev});
  return plan;
}

int ApplyLandlockInChild(const LandlockPlan& plan) {
  internal::RestrictPlan r{};
  if (plan.rules.size() > static_cast<size_t>(internal::RestrictPlan::kMaxRules)) return E2BIG;
  r.landlock_abi = plan.abi;
  r.handled_fs = plan.handled_fs;
  r.handled_net = plan.handled_net;
  r.scoped = plan.scoped;
  for (const LandlockPlan::Rule& rule : plan.rules) r.rules[r.n_rules++] = {rule.path.c_str(), rule.access};
  return internal::ApplyLandlock(r);
}

}  // namespace airlock::isolation
