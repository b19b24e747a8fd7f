#include "isolation/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "base/clock.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/random.h"
#include "base/scope_exit.h"
#include "base/unique_fd.h"
#include "isolation/sandbox.h"

namespace airlock::isolation {
namespace {

constexpr std::string_view kControllers = "+memory +pids +cpu";
constexpr const char* kParentName = "airlock";
constexpr const char* kSupervisorLeaf = "airlock-supervisor";
constexpr int64_t kCpuPeriodUs = 100000;
// The kernel refuses CFS quotas below 1 ms.
constexpr int64_t kMinCpuQuotaUs = 1000;
constexpr auto kDrainTimeout = std::chrono::seconds(2);

// statfs magic numbers (linux/magic.h), spelled out to avoid the header.
constexpr long kCgroupMagic = 0x27e0eb;
constexpr long kCgroup2Magic = 0x63677270;

// ---------------------------------------------------------------------------
// Small control-file helpers. Control files are tiny; these use one open, one
// read or write, one close, and report errno instead of building a Status so
// that callers on the hot path (ReadStats, KillAll, the destructor) allocate
// little and callers that need a message build it once.

// Writes `data` to an existing control file (or creates it on a fake tree).
// Returns 0 or an errno.
int WriteControl(const std::string& path, std::string_view data, bool create) {
  int flags = O_WRONLY | O_CLOEXEC;
  if (create) flags |= O_CREAT | O_TRUNC;
  UniqueFd fd(::open(path.c_str(), flags, 0644));
  if (!fd) return errno;
  ssize_t n;
  do {
    n = ::write(fd.get(), data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  if (static_cast<size_t>(n) != data.size()) return EIO;
  return 0;
}

Status WriteStatus(const std::string& path, std::string_view data, int err) {
  return Status(err == EACCES || err == EPERM || err == EROFS ? ErrorCode::kUnavailable
                                                              : ErrorCode::kInternal,
                "cannot write \"" + std::string(data) + "\" to " + path, err);
}

// Reads a whole control file into `out`. Returns 0 or an errno.
int ReadControl(const std::string& path, std::string* out) {
  out->clear();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;
    out->append(buf, static_cast<size_t>(n));
    // Bounded: a cgroup.procs of a run is capped by pids.max; this is a guard
    // against a runaway file (fake trees), not a limit met in practice.
    if (out->size() > (4u << 20)) return EFBIG;
  }
}

uint64_t ParseU64(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;  // 0 on garbage or "max": stats are best effort
}

// The value of `key` in a flat-keyed file ("key value\n" lines); 0 if absent.
uint64_t KeyedValue(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return ParseU64(line.substr(key.size() + 1));
    }
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
  return 0;
}

uint64_t ReadKeyed(const std::string& path, std::string_view key, std::string* scratch) {
  if (ReadControl(path, scratch) != 0) return 0;
  return KeyedValue(*scratch, key);
}

uint64_t ReadNumber(const std::string& path, std::string* scratch) {
  if (ReadControl(path, scratch) != 0) return 0;
  return ParseU64(*scratch);
}

// Appends the pids listed in a cgroup.procs text to `pids`.
void ParsePids(std::string_view text, std::vector<pid_t>* pids) {
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    pid_t pid = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), pid);
    (void)p;
    if (ec == std::errc() && pid > 0) pids->push_back(pid);
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
}

uint64_t CountLines(std::string_view text) {
  uint64_t n = 0;
  for (char c : text) n += (c == '\n');
  if (!text.empty() && text.back() != '\n') ++n;
  return n;
}

bool IsCgroupFs(const std::string& path) {
  struct statfs st;
  if (::statfs(path.c_str(), &st) != 0) return false;
  return static_cast<long>(st.f_type) == kCgroupMagic || static_cast<long>(st.f_type) == kCgroup2Magic;
}

// Removes the regular files of a fake-tree directory so rmdir can succeed.
void RemoveFakeFiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_type == DT_REG) ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

std::string Errno(int err) { return std::string(strerror(err)); }

// ---------------------------------------------------------------------------
// /proc parsing.

struct MountEntry {
  std::string root;        // the mount's root inside its hierarchy ("/" usually)
  std::string mountpoint;
  std::string fstype;
  std::vector<std::string> super_options;
};

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' &&
        s[i + 1] <= '3' && s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

// Only cgroup and cgroup2 mounts are kept.
std::vector<MountEntry> ParseCgroupMounts(std::string_view mountinfo) {
  std::vector<MountEntry> mounts;
  for (std::string_view line : Split(mountinfo, '\n')) {
    if (line.empty()) continue;
    std::vector<std::string_view> f = Split(line, ' ');
    // id parent maj:min root mountpoint options [optional fields...] - fstype source super
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 3 >= f.size()) continue;
    std::string_view fstype = f[dash + 1];
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    MountEntry m;
    m.root = Unescape(f[3]);
    m.mountpoint = Unescape(f[4]);
    m.fstype = std::string(fstype);
    for (std::string_view opt : Split(f[dash + 3], ',')) m.super_options.emplace_back(opt);
    mounts.push_back(std::move(m));
  }
  return mounts;
}

struct ProcCgroup {
  std::optional<std::string> v2_path;
  // v1: (controller list, path), e.g. ({"cpu","cpuacct"}, "/").
  std::vector<std::pair<std::vector<std::string>, std::string>> v1;
};

ProcCgroup ParseProcCgroup(std::string_view text) {
  ProcCgroup out;
  for (std::string_view line : Split(text, '\n')) {
    size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view id = line.substr(0, c1);
    std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    std::string path(line.substr(c2 + 1));
    if (id == "0" && controllers.empty()) {
      out.v2_path = path;
    } else {
      std::vector<std::string> names;
      for (std::string_view c : Split(controllers, ',')) names.emplace_back(c);
      out.v1.emplace_back(std::move(names), std::move(path));
    }
  }
  return out;
}

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The directory of cgroup `own` (a path in the hierarchy) through mount `m`,
// or nullopt when the mount does not show it (a mount of another subtree).
std::optional<std::string> Resolve(const MountEntry& m, const std::string& own) {
  std::string rel;
  if (m.root == "/") {
    rel = own;
  } else if (own == m.root) {
    rel = "/";
  } else if (own.size() > m.root.size() && own.compare(0, m.root.size(), m.root) == 0 &&
             own[m.root.size()] == '/') {
    rel = own.substr(m.root.size());
  } else {
    return std::nullopt;
  }
  // "/.." style paths appear when our cgroup is outside our cgroup namespace.
  if (rel.find("/../") != std::string::npos ||
      (rel.size() >= 3 && rel.compare(rel.size() - 3, 3, "/..") == 0)) {
    return std::nullopt;
  }
  if (rel == "/" || rel.empty()) return m.mountpoint;
  return m.mountpoint + rel;
}

// ---------------------------------------------------------------------------
// v2 detection.

// Tries to make `<own>/airlock` a parent with memory, pids and cpu usable by
// its children. Returns true on success, else false with `why` set.
bool TryV2(const CgroupHostView& view, const std::vector<MountEntry>& mounts, const ProcCgroup& pc,
           CgroupSetup* setup, std::string* why) {
  const MountEntry* mount = nullptr;
  for (const MountEntry& m : mounts) {
    if (m.fstype == "cgroup2") {
      mount = &m;
      break;
    }
  }
  if (mount == nullptr) {
    *why = "no cgroup2 filesystem is mounted";
    return false;
  }
  if (!pc.v2_path) {
    *why = "/proc/self/cgroup has no cgroup v2 line (0::/path)";
    return false;
  }
  // A second detection in the same process finds itself in the supervisor
  // leaf; the cgroup it manages is the leaf's parent.
  std::string own = *pc.v2_path;
  std::string leaf_suffix = std::string("/") + kSupervisorLeaf;
  if (own.size() >= leaf_suffix.size() &&
      own.compare(own.size() - leaf_suffix.size(), leaf_suffix.size(), leaf_suffix) == 0) {
    own.resize(own.size() - leaf_suffix.size());
    if (own.empty()) own = "/";
  }
  std::optional<std::string> base_opt;
  for (const MountEntry& m : mounts) {
    if (m.fstype != "cgroup2") continue;
    if ((base_opt = Resolve(m, own))) break;
  }
  if (!base_opt) {
    *why = "our cgroup v2 " + own + " is not visible under the cgroup2 mount at " + mount->mountpoint;
    return false;
  }
  const std::string base = *base_opt;
  const bool fake = view.allow_fake_tree && !IsCgroupFs(base);

  std::string text;
  if (int err = ReadControl(base + "/cgroup.controllers", &text)) {
    *why = "cannot read " + base + "/cgroup.controllers: " + Errno(err);
    return false;
  }
  std::vector<std::string> available;
  for (std::string_view w : Split(text, ' ')) {
    while (!w.empty() && (w.back() == '\n' || w.back() == ' ')) w.remove_suffix(1);
    if (!w.empty()) available.emplace_back(w);
  }
  std::string missing;
  int nmissing = 0;
  for (const char* c : {"memory", "pids", "cpu"}) {
    if (Contains(available, c)) continue;
    missing += missing.empty() ? c : std::string(", ") + c;
    ++nmissing;
  }
  if (!missing.empty()) {
    std::string listed = text;
    while (!listed.empty() && listed.back() == '\n') listed.pop_back();
    *why = "cgroup v2 at " + base + " has no " + missing + (nmissing > 1 ? " controllers" : " controller") + " available (its cgroup.controllers lists \"" +
           listed + "\"; the controllers are bound to cgroup v1 hierarchies or not delegated to this cgroup)";
    return false;
  }

  const std::string subtree = base + "/cgroup.subtree_control";
  int err = WriteControl(subtree, kControllers, fake);
  if (err == EBUSY) {
    // Our cgroup has processes (us, at least) and is not the hierarchy's root:
    // controllers can only be enabled once it has none. Move ourselves into a
    // leaf and retry; other processes in it make this fail for good.
    const std::string leaf = base + "/" + kSupervisorLeaf;
    if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
      *why = "cannot create " + leaf + " to move airlock out of " + base + ": " + Errno(errno);
      return false;
    }
    const std::string self = std::to_string(::getpid());
    if (int e = WriteControl(leaf + "/cgroup.procs", self, fake)) {
      ::rmdir(leaf.c_str());
      *why = "cannot move airlock into " + leaf + ": " + Errno(e);
      return false;
    }
    err = WriteControl(subtree, kControllers, fake);
    if (err != 0) {
      WriteControl(base + "/cgroup.procs", self, fake);  // best effort: undo the move
      ::rmdir(leaf.c_str());
      *why = "cannot enable controllers in " + subtree + ": " + Errno(err) +
             (err == EBUSY ? " (other processes are in " + base +
                                 "; start airlock in a cgroup of its own, e.g. a systemd service with Delegate=yes)"
                           : std::string());
      return false;
    }
  } else if (err != 0) {
    *why = "cannot write \"" + std::string(kControllers) + "\" to " + subtree + ": " + Errno(err);
    return false;
  }

  const std::string parent = base + "/" + kParentName;
  if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
    *why = "cannot create " + parent + ": " + Errno(errno);
    return false;
  }
  if (int e = WriteControl(parent + "/cgroup.subtree_control", kControllers, fake)) {
    *why = "cannot write \"" + std::string(kControllers) + "\" to " + parent + "/cgroup.subtree_control: " + Errno(e);
    return false;
  }
  setup->version = CgroupVersion::kV2;
  setup->v2_parent = parent;
  setup->fake_tree = fake;
  return true;
}

// ---------------------------------------------------------------------------
// v1 detection.

// `<mount>/<our path>/airlock` for `controller`, created; nullopt with `why`.
std::optional<std::string> V1Parent(const CgroupHostView& view, const std::vector<MountEntry>& mounts,
                                    const ProcCgroup& pc, const char* controller, bool* fake,
                                    std::string* mount_point, std::string* why) {
  const std::string* own = nullptr;
  for (const auto& [names, path] : pc.v1) {
    if (Contains(names, controller)) own = &path;
  }
  bool mounted = false;
  for (const MountEntry& m : mounts) {
    if (m.fstype != "cgroup" || !Contains(m.super_options, controller)) continue;
    mounted = true;
    if (own == nullptr) continue;
    std::optional<std::string> dir = Resolve(m, *own);
    if (!dir) continue;
    std::string parent = *dir + "/" + kParentName;
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      *why = "cannot create " + parent + ": " + Errno(errno);
      return std::nullopt;
    }
    // An existing parent (made by root earlier) may not be ours to use.
    if (::access(parent.c_str(), W_OK) != 0) {
      *why = "cannot write to " + parent + ": " + Errno(errno);
      return std::nullopt;
    }
    *fake = *fake || (view.allow_fake_tree && !IsCgroupFs(parent));
    *mount_point = m.mountpoint;
    return parent;
  }
  if (!mounted) {
    *why = std::string("no cgroup v1 hierarchy has the ") + controller + " controller";
  } else if (own == nullptr) {
    *why = std::string("/proc/self/cgroup has no line for the ") + controller + " controller";
  } else {
    *why = std::string("our ") + controller + " cgroup " + *own + " is not visible under any of its mounts";
  }
  return std::nullopt;
}

bool TryV1(const CgroupHostView& view, const std::vector<MountEntry>& mounts, const ProcCgroup& pc,
           CgroupSetup* setup, std::string* why) {
  bool fake = false;
  std::string mp_memory, mp_pids, mp_cpu, mp_cpuacct;
  auto memory = V1Parent(view, mounts, pc, "memory", &fake, &mp_memory, why);
  if (!memory) return false;
  auto pids = V1Parent(view, mounts, pc, "pids", &fake, &mp_pids, why);
  if (!pids) return false;
  auto cpu = V1Parent(view, mounts, pc, "cpu", &fake, &mp_cpu, why);
  if (!cpu) return false;
  // cpuacct only feeds CgroupStats::cpu_usage_ns: its absence is not fatal.
  std::string cpuacct_why;
  auto cpuacct = V1Parent(view, mounts, pc, "cpuacct", &fake, &mp_cpuacct, &cpuacct_why);
  if (!cpuacct) log::Info("cgroup v1: no cpuacct controller (" + cpuacct_why + "); runs report no CPU usage");
  setup->version = CgroupVersion::kV1;
  setup->v1_memory_parent = *memory;
  setup->v1_pids_parent = *pids;
  setup->v1_cpu_parent = *cpu;
  setup->v1_cpuacct_parent = cpuacct ? *cpuacct : "";
  setup->fake_tree = fake;
  return true;
}

void AddUnique(std::vector<std::string>* v, const std::string& s) {
  if (!s.empty() && !Contains(*v, s)) v->push_back(s);
}

std::string FormatQuota(double cpus) {
  int64_t quota = static_cast<int64_t>(std::llround(cpus * static_cast<double>(kCpuPeriodUs)));
  return std::to_string(std::max(quota, kMinCpuQuotaUs));
}

// The kernel's pidfd calls (5.3+), through syscall(2) so older libcs build.
int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

int PidfdKill(int pidfd) {
#ifdef SYS_pidfd_send_signal
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0));
#else
  (void)pidfd;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

// ---------------------------------------------------------------------------

StatusOr<CgroupSetup> DetectCgroupsFrom(const CgroupHostView& view) {
  CgroupSetup setup;
  std::vector<MountEntry> mounts = ParseCgroupMounts(view.mountinfo);
  ProcCgroup pc = ParseProcCgroup(view.proc_cgroup);
  std::string why_v2, why_v1;
  if (TryV2(view, mounts, pc, &setup, &why_v2)) return setup;
  setup = CgroupSetup();
  if (TryV1(view, mounts, pc, &setup, &why_v1)) return setup;
  setup = CgroupSetup();
  setup.version = CgroupVersion::kNone;
  setup.why_not = "no usable cgroup for per-run limits: " + why_v2 + "; cgroup v1: " + why_v1 +
                  ". To fix: run airlock as root on a host whose memory, pids and cpu controllers are "
                  "available (cgroup v2 listing them in cgroup.controllers, or cgroup v1 hierarchies), or "
                  "start it in a delegated cgroup v2 subtree (systemd: Delegate=yes; Docker: "
                  "--cgroupns=private with /sys/fs/cgroup writable), or allow degradation with "
                  "--allow-degraded=cgroup (rlimits only)";
  return setup;
}

StatusOr<CgroupSetup> DetectCgroups(const std::string& root_override) {
  CgroupHostView view;
  std::string root = root_override;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (!root.empty()) {
    // A cgroup2 root we are in; mountinfo escapes spaces as \040.
    std::string escaped;
    for (char c : root) {
      if (c == ' ') escaped += "\\040";
      else if (c == '\\') escaped += "\\134";
      else escaped += c;
    }
    view.mountinfo = "1 0 0:0 / " + escaped + " rw - cgroup2 cgroup2 rw\n";
    view.proc_cgroup = "0::/\n";
    view.allow_fake_tree = true;
    return DetectCgroupsFrom(view);
  }
  auto mi = ReadFile("/proc/self/mountinfo");
  if (!mi.ok()) return mi.status();
  auto pc = ReadFile("/proc/self/cgroup");
  if (!pc.ok()) return pc.status();
  view.mountinfo = std::move(mi).value();
  view.proc_cgroup = std::move(pc).value();
  return DetectCgroupsFrom(view);
}

// ---------------------------------------------------------------------------

namespace {

// The PID in `run-PID-...` / `warm-PID-...`, or 0 when the name is not one of ours.
pid_t OwnerPid(const std::string& name) {
  size_t dash = name.find('-');
  if (dash == std::string::npos) return 0;
  std::string prefix = name.substr(0, dash);
  if (prefix != "run" && prefix != "warm") return 0;
  size_t end = name.find('-', dash + 1);
  std::string digits = name.substr(dash + 1, end == std::string::npos ? std::string::npos : end - dash - 1);
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return static_cast<pid_t>(std::stol(digits));
}

bool ProcessAlive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

SweepResult SweepStaleCgroups(const CgroupSetup& setup) {
  SweepResult out;
  std::vector<std::string> parents;
  if (setup.version == CgroupVersion::kV2) {
    parents.push_back(setup.v2_parent);
  } else if (setup.version == CgroupVersion::kV1) {
    for (const std::string* p : {&setup.v1_memory_parent, &setup.v1_pids_parent, &setup.v1_cpu_parent,
                                 &setup.v1_cpuacct_parent}) {
      if (!p->empty() && std::find(parents.begin(), parents.end(), *p) == parents.end()) parents.push_back(*p);
    }
  }
  for (const std::string& parent : parents) {
    DIR* d = ::opendir(parent.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> stale;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      pid_t pid = OwnerPid(name);
      if (pid <= 0 || pid == ::getpid() || ProcessAlive(pid)) continue;
      stale.push_back(name);
    }
    ::closedir(d);
    for (const std::string& name : stale) {
      std::string dir = parent + "/" + name;
      if (setup.fake_tree) {
        // Tests: plain directories; a control file written there is a plain file.
        if (DIR* fd = ::opendir(dir.c_str())) {
          while (struct dirent* e = ::readdir(fd)) {
            if (e->d_type == DT_REG) ::unlink((dir + "/" + e->d_name).c_str());
          }
          ::closedir(fd);
        }
      }
      if (::rmdir(dir.c_str()) == 0) {
        ++out.removed;
      } else if (errno == EBUSY || errno == ENOTEMPTY) {
        ++out.busy;
      }
    }
  }
  return out;
}

std::string UniqueCgroupName(const std::string& prefix) {
  static const std::string tag = base::RandomHex(4);
  static std::atomic<uint64_t> counter{0};
  return prefix + "-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(counter++);
}

StatusOr<std::unique_ptr<RunCgroup>> RunCgroup::Create(const CgroupSetup& setup, const std::string& name,
                                                       const Limits& limits) {
  if (setup.version == CgroupVersion::kNone) {
    return Unavailable(setup.why_not.empty() ? std::string("no usable cgroup (DetectCgroups found none)")
                                             : setup.why_not);
  }
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.size() > 200) {
    return InvalidArgument("cgroup name \"" + name + "\" must be 1-200 characters without '/'");
  }
  std::unique_ptr<RunCgroup> cg(new RunCgroup());
  cg->version_ = setup.version;
  cg->fake_tree_ = setup.fake_tree;
  const bool fake = setup.fake_tree;

  if (setup.version == CgroupVersion::kV2) {
    const std::string dir = setup.v2_parent + "/" + name;
    cg->memory_dir_ = cg->pids_dir_ = cg->cpu_dir_ = cg->cpuacct_dir_ = dir;
  } else {
    if (setup.v1_memory_parent.empty() || setup.v1_pids_parent.empty() || setup.v1_cpu_parent.empty()) {
      return InvalidArgument("cgroup v1 setup lacks a memory, pids or cpu parent directory");
    }
    cg->memory_dir_ = setup.v1_memory_parent + "/" + name;
    cg->pids_dir_ = setup.v1_pids_parent + "/" + name;
    cg->cpu_dir_ = setup.v1_cpu_parent + "/" + name;
    cg->cpuacct_dir_ = setup.v1_cpuacct_parent.empty() ? "" : setup.v1_cpuacct_parent + "/" + name;
  }

  // Directories are recorded as they are made, so that a failure removes
  // exactly what this call created (the destructor does it: nothing has
  // joined the cgroup yet, KillAll() finds it empty).
  std::vector<std::string> wanted;
  AddUnique(&wanted, cg->memory_dir_);
  AddUnique(&wanted, cg->pids_dir_);
  AddUnique(&wanted, cg->cpu_dir_);
  AddUnique(&wanted, cg->cpuacct_dir_);
  for (const std::string& dir : wanted) {
    if (::mkdir(dir.c_str(), 0755) != 0) {
      int err = errno;
      if (err == EEXIST) {
        return Status(ErrorCode::kFailedPrecondition,
                      "cgroup " + dir + " already exists (a live run has this name, or a previous server left it behind)");
      }
      return Status(err == EACCES || err == EPERM ? ErrorCode::kUnavailable : ErrorCode::kInternal,
                    "cannot create cgroup " + dir, err);
    }
    cg->dirs_.push_back(dir);
  }

  // A required limit file; the failure names it.
  auto set = [fake](const std::string& path, std::string_view value) -> Status {
    if (int err = WriteControl(path, value, fake)) return WriteStatus(path, value, err);
    return Status::Ok();
  };
  // A file that older kernels or configurations lack (swap accounting off).
  auto set_optional = [fake](const std::string& path, std::string_view value) -> Status {
    int err = WriteControl(path, value, fake);
    if (err == 0 || err == ENOENT) return Status::Ok();
    return WriteStatus(path, value, err);
  };

  if (setup.version == CgroupVersion::kV2) {
    const std::string& d = cg->memory_dir_;
    if (limits.memory_bytes > 0) RETURN_IF_ERROR(set(d + "/memory.max", std::to_string(limits.memory_bytes)));
    RETURN_IF_ERROR(set_optional(d + "/memory.swap.max", "0"));
    // One OOM kill takes the whole run, not a random worker of it (4.19+;
    // without it the kernel kills one process, and the run still ends).
    RETURN_IF_ERROR(set_optional(d + "/memory.oom.group", "1"));
    if (limits.pids > 0) RETURN_IF_ERROR(set(d + "/pids.max", std::to_string(limits.pids)));
    if (limits.cpus > 0) {
      RETURN_IF_ERROR(set(d + "/cpu.max", FormatQuota(limits.cpus) + " " + std::to_string(kCpuPeriodUs)));
    }
  } else {
    if (limits.memory_bytes > 0) {
      const std::string bytes = std::to_string(limits.memory_bytes);
      RETURN_IF_ERROR(set(cg->memory_dir_ + "/memory.limit_in_bytes", bytes));
      // memory+swap at the same value: the run cannot swap. After the memory
      // limit, since the kernel wants memsw >= memory.
      RETURN_IF_ERROR(set_optional(cg->memory_dir_ + "/memory.memsw.limit_in_bytes", bytes));
    }
    if (limits.pids > 0) RETURN_IF_ERROR(set(cg->pids_dir_ + "/pids.max", std::to_string(limits.pids)));
    if (limits.cpus > 0) {
      // cpu.cfs_period_us is not written: a new cgroup always starts at the
      // kernel's default of 100000 (not inherited from the parent), which is
      // kCpuPeriodUs; one write fewer per run.
      RETURN_IF_ERROR(set(cg->cpu_dir_ + "/cpu.cfs_quota_us", FormatQuota(limits.cpus)));
    }
  }
  return cg;
}

Status RunCgroup::ChangeLimits(const Limits& from, const Limits& to) {
  const bool fake = fake_tree_;
  auto set = [fake](const std::string& path, std::string_view value) -> Status {
    if (int err = WriteControl(path, value, fake)) return WriteStatus(path, value, err);
    return Status::Ok();
  };
  if (to.memory_bytes > 0 && to.memory_bytes != from.memory_bytes) {
    const std::string bytes = std::to_string(to.memory_bytes);
    if (version_ == CgroupVersion::kV2) {
      RETURN_IF_ERROR(set(memory_dir_ + "/memory.max", bytes));
    } else {
      // The kernel keeps memsw >= memory at every step.
      const std::string mem = memory_dir_ + "/memory.limit_in_bytes";
      const std::string memsw = memory_dir_ + "/memory.memsw.limit_in_bytes";
      bool have_memsw = ::access(memsw.c_str(), F_OK) == 0 || fake;
      if (to.memory_bytes < from.memory_bytes) {
        RETURN_IF_ERROR(set(mem, bytes));
        if (have_memsw) RETURN_IF_ERROR(set(memsw, bytes));
      } else {
        if (have_memsw) RETURN_IF_ERROR(set(memsw, bytes));
        RETURN_IF_ERROR(set(mem, bytes));
      }
    }
  }
  if (to.pids > 0 && to.pids != from.pids) RETURN_IF_ERROR(set(pids_dir_ + "/pids.max", std::to_string(to.pids)));
  if (to.cpus > 0 && to.cpus != from.cpus) {
    if (version_ == CgroupVersion::kV2) {
      RETURN_IF_ERROR(set(cpu_dir_ + "/cpu.max", FormatQuota(to.cpus) + " " + std::to_string(kCpuPeriodUs)));
    } else {
      RETURN_IF_ERROR(set(cpu_dir_ + "/cpu.cfs_quota_us", FormatQuota(to.cpus)));
    }
  }
  return Status::Ok();
}

int64_t RunCgroup::ReadTaskCount() const {
  if (pids_dir_.empty() || fake_tree_) return -1;
  std::string buf;
  if (ReadControl(pids_dir_ + "/pids.current", &buf) != 0) return -1;
  char* end = nullptr;
  long long n = std::strtoll(buf.c_str(), &end, 10);
  return end == buf.c_str() || n < 0 ? -1 : n;
}

Status RunCgroup::LiftCpuLimit() {
  if (cpu_dir_.empty() || fake_tree_) return Status::Ok();
  // And the largest weight: among busy runs, the dying one is scheduled first.
  const bool v2 = version_ == CgroupVersion::kV2;
  const std::string quota = cpu_dir_ + (v2 ? "/cpu.max" : "/cpu.cfs_quota_us");
  const char* unlimited = v2 ? "max" : "-1";
  const std::string weight = cpu_dir_ + (v2 ? "/cpu.weight" : "/cpu.shares");
  const char* largest = v2 ? "10000" : "262144";
  int err = WriteControl(quota, unlimited, false);
  if (err != 0) return WriteStatus(quota, unlimited, err);
  err = WriteControl(weight, largest, false);
  if (err != 0) return WriteStatus(weight, largest, err);
  return Status::Ok();
}

Status RunCgroup::AddProcess(pid_t pid) {
  if (pid <= 0) return InvalidArgument("AddProcess: pid " + std::to_string(pid) + " is not a process");
  const std::string value = std::to_string(pid);
  for (const std::string& dir : dirs_) {
    const std::string path = dir + "/cgroup.procs";
    if (int err = WriteControl(path, value, fake_tree_)) return WriteStatus(path, value, err);
  }
  return Status::Ok();
}

Status RunCgroup::AddProcessByPidfd(int pidfd, pid_t pid) {
  auto exited = [pidfd] {
    struct pollfd p = {pidfd, POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
  };
  if (pid <= 0) {
    ASSIGN_OR_RETURN(pid, PidOfPidfd(pidfd));
  }
  // Not exited, so not reaped: `pid` is still the pidfd's (ChildrenOfPidfd).
  if (exited()) return Unavailable("AddProcessByPidfd: the process exited before it was added");
  RETURN_IF_ERROR(AddProcess(pid));
  if (exited()) {
    // It may have been reaped and its pid reused before the write: what was
    // moved cannot be told. Nothing in this cgroup is killed by us.
    foreign_ = true;
    return Unavailable("AddProcessByPidfd: the process exited while it was being added");
  }
  return Status::Ok();
}

CgroupStats RunCgroup::ReadStats() const {
  CgroupStats s;
  if (dirs_.empty()) return s;
  std::string buf;
  buf.reserve(1024);
  if (version_ == CgroupVersion::kV2) {
    const std::string& d = memory_dir_;
    s.oom_kills = ReadKeyed(d + "/memory.events", "oom_kill", &buf);
    s.pids_max_hits = ReadKeyed(d + "/pids.events", "max", &buf);
    s.cpu_usage_ns = ReadKeyed(d + "/cpu.stat", "usage_usec", &buf) * 1000;
    s.memory_peak_bytes = ReadNumber(d + "/memory.peak", &buf);  // 5.19+
    if (ReadControl(d + "/cgroup.procs", &buf) == 0) s.nprocs = CountLines(buf);
  } else {
    // oom_kill in memory.oom_control needs 4.13+; older kernels give 0.
    s.oom_kills = ReadKeyed(memory_dir_ + "/memory.oom_control", "oom_kill", &buf);
    s.pids_max_hits = ReadKeyed(pids_dir_ + "/pids.events", "max", &buf);
    if (!cpuacct_dir_.empty()) s.cpu_usage_ns = ReadNumber(cpuacct_dir_ + "/cpuacct.usage", &buf);
    s.memory_peak_bytes = ReadNumber(memory_dir_ + "/memory.max_usage_in_bytes", &buf);
    if (ReadControl(memory_dir_ + "/cgroup.procs", &buf) == 0) s.nprocs = CountLines(buf);
  }
  return s;
}

uint64_t RunCgroup::ReadCpuUsageNs() const {
  if (dirs_.empty()) return 0;
  std::string buf;
  if (version_ == CgroupVersion::kV2) return ReadKeyed(memory_dir_ + "/cpu.stat", "usage_usec", &buf) * 1000;
  return cpuacct_dir_.empty() ? 0 : ReadNumber(cpuacct_dir_ + "/cpuacct.usage", &buf);
}

void RunCgroup::KillAll() {
  // A fake tree's cgroup.procs lists whatever a test wrote (often its own pid).
  if (fake_tree_ || foreign_ || dirs_.empty()) return;
  const auto start = Clock::now();
  bool kernel_kill = false;
  if (version_ == CgroupVersion::kV2) {
    // cgroup.kill (5.14+) kills every process, forks in flight included.
    kernel_kill = WriteControl(memory_dir_ + "/cgroup.kill", "1", false) == 0;
  }
  // Every process of the run is in each of our directories (AddProcess writes
  // all, forks inherit all). v1: the memory and pids directories are enough;
  // memory is written first by AddProcess, so a half-added process is seen.
  const std::string* scan[2] = {&memory_dir_, nullptr};
  if (version_ == CgroupVersion::kV1 && pids_dir_ != memory_dir_) scan[1] = &pids_dir_;
  std::string buf;
  std::vector<pid_t> pids;
  std::vector<std::pair<pid_t, int>> pidfds;
  auto read_procs = [&](std::vector<pid_t>* out) {
    for (const std::string* dir : scan) {
      if (dir != nullptr && ReadControl(*dir + "/cgroup.procs", &buf) == 0) ParsePids(buf, out);
    }
  };
  auto delay = std::chrono::microseconds(1000);
  for (;;) {
    pids.clear();
    read_procs(&pids);
    if (pids.empty()) return;
    std::sort(pids.begin(), pids.end());
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    if (Clock::now() - start > kDrainTimeout) {
      log::Warn("cgroup " + dirs_.front() + " still has " + std::to_string(pids.size()) +
                " process(es) after SIGKILL for 2 s");
      return;
    }
    if (kernel_kill) {
      WriteControl(memory_dir_ + "/cgroup.kill", "1", false);
    } else {
      // A pid read from cgroup.procs may have exited and been reused by an
      // unrelated process by the time we signal it. Pin each with a pidfd,
      // then keep only those still listed: the pidfd then refers to the
      // process that is in the cgroup (or to one that exited: harmless).
      pidfds.clear();
      bool have_pidfd = true;
      for (pid_t pid : pids) {
        int fd = PidfdOpen(pid);
        if (fd < 0 && errno == ENOSYS) {
          have_pidfd = false;
          break;
        }
        if (fd >= 0) pidfds.emplace_back(pid, fd);
      }
      if (have_pidfd) {
        std::vector<pid_t> still;
        read_procs(&still);
        for (auto [pid, fd] : pidfds) {
          if (std::find(still.begin(), still.end(), pid) != still.end()) PidfdKill(fd);
          ::close(fd);
        }
      } else {
        for (auto [pid, fd] : pidfds) ::close(fd);
        for (pid_t pid : pids) ::kill(pid, SIGKILL);
      }
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::microseconds(10000));
  }
}

namespace {

// Directories whose removal failed, retried by later destructors.
std::mutex g_leaked_mu;
struct Leak {
  std::string dir;
  bool kill;  // false: what is in it may not be the run's (AddProcessByPidfd)
};
std::vector<Leak> g_leaked;  // guarded by g_leaked_mu
std::atomic<int64_t> g_leaked_count{0};

// One pass over leaked directories: SIGKILL what is listed (pinned by pidfd
// and checked still listed, as KillAll does), then one rmdir each.
void RetryLeaked() {
  std::vector<Leak> dirs;
  {
    std::lock_guard<std::mutex> lock(g_leaked_mu);
    dirs.swap(g_leaked);
  }
  if (dirs.empty()) return;
  std::vector<Leak> still;
  std::string buf;
  for (const Leak& leak : dirs) {
    const std::string& dir = leak.dir;
    std::vector<pid_t> pids;
    if (leak.kill && ReadControl(dir + "/cgroup.procs", &buf) == 0) ParsePids(buf, &pids);
    for (pid_t pid : pids) {
      int fd = PidfdOpen(pid);
      if (fd < 0) continue;
      std::vector<pid_t> now;
      if (ReadControl(dir + "/cgroup.procs", &buf) == 0) ParsePids(buf, &now);
      if (std::find(now.begin(), now.end(), pid) != now.end()) PidfdKill(fd);
      ::close(fd);
    }
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) {
      log::Info("removed cgroup " + dir + " on a retry");
      continue;
    }
    still.push_back(leak);
  }
  std::lock_guard<std::mutex> lock(g_leaked_mu);
  g_leaked.insert(g_leaked.end(), still.begin(), still.end());
  g_leaked_count = static_cast<int64_t>(g_leaked.size());
}

}  // namespace

int64_t RunCgroup::LeakedDirs() { return g_leaked_count.load(); }

RunCgroup::~RunCgroup() {
  if (!fake_tree_) RetryLeaked();
  KillAll();
  const auto start = Clock::now();
  // Children before parents would matter only for nested dirs; ours are
  // siblings in separate hierarchies, removed in reverse creation order.
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    const std::string& dir = *it;
    if (fake_tree_) RemoveFakeFiles(dir);
    auto delay = std::chrono::microseconds(200);
    for (;;) {
      if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) break;
      int err = errno;
      // EBUSY: tasks that were killed are still leaving the cgroup.
      if (err != EBUSY || Clock::now() - start > kDrainTimeout || foreign_) {
        log::Warn("cannot remove cgroup " + dir + ": " + Errno(err) + " (retried when another run ends)");
        std::lock_guard<std::mutex> lock(g_leaked_mu);
        g_leaked.push_back(Leak{dir, !foreign_});
        g_leaked_count = static_cast<int64_t>(g_leaked.size());
        break;
      }
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, std::chrono::microseconds(10000));
    }
  }
}

}  // namespace airlock::isolation
