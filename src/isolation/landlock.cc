#include "isolation/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

// Debian 12's <linux/landlock.h> stops at ABI 2; the rest, from the kernel UAPI.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  // ABI 3
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)  // ABI 5
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)  // ABI 4
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)  // ABI 6
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

namespace airlock::isolation {
namespace {

// struct landlock_ruleset_attr as of ABI 6; the header's has only the first field.
// The kernel takes the size we pass and requires the fields it does not know to
// be absent, so the size follows the ABI (AttrSize below).
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
static_assert(sizeof(RulesetAttr) == 24);
static_assert(sizeof(landlock_path_beneath_attr) == 12, "packed in the UAPI");

// The newest ABI whose rights this file knows; a newer kernel gets these (ABI 7
// added only logging flags).
constexpr int kNewestKnownAbi = 7;

constexpr uint64_t kFsAbi1 =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
    LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
    LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
    LANDLOCK_ACCESS_FS_MAKE_SYM;

// The only rights a rule on a non-directory may carry (the kernel answers EINVAL
// otherwise).
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                 LANDLOCK_ACCESS_FS_IOCTL_DEV;

uint64_t HandledFs(int abi) {
  uint64_t fs = kFsAbi1;
  if (abi >= 2) fs |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return fs;
}

size_t AttrSize(int abi) {
  if (abi >= 6) return 24;  // + scoped
  if (abi >= 4) return 16;  // + handled_access_net
  return 8;
}

int CloseKeepErrno(int fd, int err) {
  close(fd);
  return err;
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
  if (plan.abi <= 0) return 0;
  RulesetAttr attr = {plan.handled_fs, plan.handled_net, plan.scoped};
  const int ruleset =
      static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, AttrSize(plan.abi), 0));
  if (ruleset < 0) return errno;

  for (const LandlockPlan::Rule& rule : plan.rules) {
    // O_PATH follows symlinks (/lib -> usr/lib): the rule lands on the target.
    const int fd = open(rule.path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // not in this sandbox's view: nothing to allow
      return CloseKeepErrno(ruleset, errno);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
      const int err = errno;
      close(fd);
      return CloseKeepErrno(ruleset, err);
    }
    // Decided here, not in the plan: the plan is made in the parent from paths of
    // the sandbox's future root, which the parent cannot stat.
    uint64_t access = rule.access;
    if (!S_ISDIR(st.st_mode)) access &= kFileRights;
    if (access == 0) {
      close(fd);
      continue;
    }
    landlock_path_beneath_attr beneath = {};
    beneath.allowed_access = access;
    beneath.parent_fd = fd;
    const long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0);
    const int err = rc != 0 ? errno : 0;
    close(fd);
    if (err) return CloseKeepErrno(ruleset, err);
  }

  if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) return CloseKeepErrno(ruleset, errno);
  close(ruleset);
  return 0;
}

}  // namespace airlock::isolation
