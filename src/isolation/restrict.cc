#include "isolation/restrict.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isolation/landlock_uapi.h"
#include "isolation/lock_supervisor.h"
#include "isolation/steps.h"

namespace airlock::isolation::internal {
namespace {

// struct landlock_ruleset_attr as of ABI 6; the kernel takes the size we pass
// and requires the fields it does not know to be absent (AttrSize).
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

size_t AttrSize(int abi) {
  if (abi >= 6) return 24;  // + scoped
  if (abi >= 4) return 16;  // + handled_access_net
  return 8;
}

// The only rights a rule on a non-directory may carry (the kernel answers
// EINVAL otherwise).
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                 LANDLOCK_ACCESS_FS_IOCTL_DEV;

int CloseKeepErrno(int fd, int err) {
  ::close(fd);
  return err;
}

int DropAllCaps() {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  return ::syscall(SYS_capset, &hdr, data) == 0 ? 0 : errno;
}

// A cursor over the serialized plan: every read is bounds-checked.
struct Reader {
  const char* p;
  const char* end;
  bool ok = true;
  template <typename T>
  T Get() {
    T v;
    memset(&v, 0, sizeof v);
    if (!ok || static_cast<size_t>(end - p) < sizeof v) {
      ok = false;
      return v;
    }
    memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  const char* Take(size_t n) {
    if (!ok || static_cast<size_t>(end - p) < n) {
      ok = false;
      return nullptr;
    }
    const char* at = p;
    p += n;
    return at;
  }
  void Align8() {
    const size_t rem = static_cast<size_t>(reinterpret_cast<uintptr_t>(p) & 7);
    if (rem != 0) Take(8 - rem);
  }
};

}  // namespace

int ApplyLandlock(const RestrictPlan& plan) {
  if (plan.landlock_abi <= 0) return 0;
  RulesetAttr attr = {plan.handled_fs, plan.handled_net, plan.scoped};
  const int ruleset = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, AttrSize(plan.landlock_abi), 0));
  if (ruleset < 0) return errno;
  for (int i = 0; i < plan.n_rules; ++i) {
    const RestrictPlan::Rule& rule = plan.rules[i];
    // O_PATH follows symlinks (/lib -> usr/lib): the rule lands on the target.
    const int fd = ::open(rule.path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // not in this sandbox's view: nothing to allow
      return CloseKeepErrno(ruleset, errno);
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return CloseKeepErrno(ruleset, err);
    }
    // Decided here, not in the plan: the plan is made from paths of the
    // sandbox's root, which its maker cannot stat.
    uint64_t access = rule.access;
    if (!S_ISDIR(st.st_mode)) access &= kFileRights;
    if (access == 0) {
      ::close(fd);
      continue;
    }
    struct landlock_path_beneath_attr beneath;
    memset(&beneath, 0, sizeof beneath);
    beneath.allowed_access = access;
    beneath.parent_fd = fd;
    const long rc = ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0);
    const int err = rc != 0 ? errno : 0;
    ::close(fd);
    if (err) return CloseKeepErrno(ruleset, err);
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) return CloseKeepErrno(ruleset, errno);
  ::close(ruleset);
  return 0;
}

int ApplySeccomp(const RestrictPlan& plan) {
  if (plan.filter == nullptr || plan.filter_len == 0 || plan.filter_len > BPF_MAXINSNS) return EINVAL;
  struct sock_fprog prog;
  prog.len = static_cast<unsigned short>(plan.filter_len);
  prog.filter = const_cast<struct sock_filter*>(plan.filter);
  return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : errno;
}

int InstallLockFilterFirst(const RestrictPlan& plan, int lock_sock, int* step) {
  *step = kStepNoNewPrivs;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    const int err = errno;
    if (lock_sock >= 0) ::close(lock_sock);
    return err;
  }
  if (lock_sock < 0) return 0;
  *step = kStepLocks;
  if (plan.lock_filter == nullptr || plan.lock_filter_len == 0) {
    ::close(lock_sock);
    return 0;
  }
  return InstallLockFilter(plan.lock_filter, plan.lock_filter_len, lock_sock);
}

int StartOwnSession(bool default_signals) {
  if (::setsid() < 0) return errno;
  // execve keeps the signal mask and ignored signals: start from the
  // defaults, whatever the parent blocked or ignored.
  if (default_signals) {
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
    }
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Dies with init, whatever happens to the rest of the namespace.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return 0;
}

int ApplyRlimits(const RestrictPlan& plan) {
  for (int i = 0; i < plan.n_rlimits; ++i) {
    struct rlimit r;
    r.rlim_cur = static_cast<rlim_t>(plan.rlimits[i].cur);
    r.rlim_max = static_cast<rlim_t>(plan.rlimits[i].max);
    if (::syscall(SYS_setrlimit, plan.rlimits[i].resource, &r) != 0) return errno;
  }
  return 0;
}

int LockDown(const RestrictPlan& plan, int* step) {
  // Capabilities: lock the securebits so that no execve (even of a setuid
  // file, even as uid 0) gives any back, empty the bounding and ambient sets,
  // then drop everything we hold.
  *step = kStepSecurebits;
  if (::prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
                                     SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                                     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) != 0) {
    return errno;
  }
  *step = kStepCapsDrop;
  for (int cap = 0;; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;  // past the last capability this kernel knows
      return errno;
    }
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return errno;
  if (int err = DropAllCaps()) return err;
  *step = kStepNoNewPrivs;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  *step = kStepLandlock;
  if (int err = ApplyLandlock(plan)) return err;
  // Last: after this only the allowlisted system calls exist.
  *step = kStepSeccomp;
  return ApplySeccomp(plan);
}

bool ParseRestrictPlan(const char* bytes, size_t size, RestrictPlan* out) {
  memset(out, 0, sizeof *out);
  if ((reinterpret_cast<uintptr_t>(bytes) & 7) != 0) return false;  // the filters are read in place
  Reader r{bytes, bytes + size};
  if (r.Get<uint32_t>() != kRestrictPlanMagic) return false;
  const uint32_t n_rlimits = r.Get<uint32_t>();
  if (!r.ok || n_rlimits > RestrictPlan::kMaxRlimits) return false;
  for (uint32_t i = 0; i < n_rlimits; ++i) {
    out->rlimits[i].resource = r.Get<int32_t>();
    r.Get<uint32_t>();
    out->rlimits[i].cur = r.Get<uint64_t>();
    out->rlimits[i].max = r.Get<uint64_t>();
  }
  out->n_rlimits = static_cast<int>(n_rlimits);
  out->landlock_abi = r.Get<int32_t>();
  const uint32_t n_rules = r.Get<uint32_t>();
  if (!r.ok || n_rules > RestrictPlan::kMaxRules) return false;
  out->handled_fs = r.Get<uint64_t>();
  out->handled_net = r.Get<uint64_t>();
  out->scoped = r.Get<uint64_t>();
  for (uint32_t i = 0; i < n_rules; ++i) {
    out->rules[i].access = r.Get<uint64_t>();
    const uint32_t len = r.Get<uint32_t>();
    const char* path = r.Take(len);
    // A path: absolute, NUL-terminated, no NUL before its end.
    if (!r.ok || len < 2 || path[0] != '/' || path[len - 1] != '\0' || memchr(path, '\0', len - 1) != nullptr) {
      return false;
    }
    out->rules[i].path = path;
    r.Align8();
  }
  out->n_rules = static_cast<int>(n_rules);
  const uint32_t filter_len = r.Get<uint32_t>();
  const uint32_t lock_len = r.Get<uint32_t>();
  if (!r.ok || filter_len == 0 || filter_len > BPF_MAXINSNS || lock_len > BPF_MAXINSNS) return false;
  out->filter = reinterpret_cast<const struct sock_filter*>(r.Take(filter_len * sizeof(struct sock_filter)));
  out->filter_len = filter_len;
  const char* lock = r.Take(lock_len * sizeof(struct sock_filter));
  out->lock_filter = lock_len > 0 ? reinterpret_cast<const struct sock_filter*>(lock) : nullptr;
  out->lock_filter_len = lock_len;
  return r.ok && r.p == r.end;
}

}  // namespace airlock::isolation::internal
