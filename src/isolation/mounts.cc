// The sandbox's filesystem: a tmpfs root assembled at a staging path, then
// pivot_root into it. What the run sees is only what PlanMounts() lists.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "isolation/child_plan.h"
#include "isolation/sandbox.h"
#include "isolation/spec.h"

namespace airlock::isolation::internal {
namespace {

// System trees bound read-only when they are directories, recreated as the
// same symlink when they are symlinks (merged /usr on Debian 12).
constexpr const char* kSystemPaths[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// The /etc subset a runtime needs. passwd, group, hosts and hostname are
// synthesized instead, so no host account or host name reaches the run.
constexpr const char* kEtcPaths[] = {
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
    "/etc/alternatives", "/etc/fonts",     "/etc/matplotlibrc", "/etc/python3",
    "/etc/python3.11",  "/etc/mime.types", "/etc/nsswitch.conf", "/etc/R",
};

// The JDK's configuration (its conf/ and lib/security/ files are symlinks
// into /etc/java-<version>-openjdk on Debian): every such directory there is.
std::vector<std::string> EtcJavaDirs() {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/etc")) {
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("java-", 0) == 0) out.push_back("/etc/" + name);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Where the host's root stays reachable while the new root is assembled; bind
// sources are read through it, then it is detached.
const std::string kOldRoot = "/.oldroot";
// Where the workspace tmpfs is mounted until /home/user and /tmp are bound from it.
constexpr const char* kWorkspaceStaging = "/.workspace";

// What a run's /proc hides (docs/security.md, part 4): runc's and podman's
// default maskedPaths under /proc, and the two host identifiers that tell
// tenants they share a machine: the kernel command line and the boot id.
constexpr const char* kMaskedProcPaths[] = {
    "/proc/acpi",          "/proc/asound",      "/proc/interrupts", "/proc/kcore",  "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list",  "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
    "/proc/cmdline",       "/proc/sys/kernel/random/boot_id",
};
// And their readonlyPaths (after the masks: /proc/sys keeps the boot_id mask).
constexpr const char* kReadOnlyProcPaths[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"};

constexpr const char* kDevices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};

// Flags a read-only remount must keep: in a user namespace the kernel refuses to
// clear nosuid/nodev/noexec or change the atime mode of a mount we did not make.
unsigned long RemountFlags(const std::string& source) {
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV;
  struct statvfs sv;
  if (::statvfs(source.c_str(), &sv) != 0) return flags;
  if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  if (!(sv.f_flag & (ST_NOATIME | ST_RELATIME))) flags |= MS_STRICTATIME;
  return flags;
}

class Planner {
 public:
  // prefix: where the tree is built ("" for the new root itself, kRunTemplate
  // for a zygote's template of its runs' roots); paths given to the methods
  // are the ones the tree's users see, and host paths are read as such.
  explicit Planner(std::string prefix = "") : prefix_(std::move(prefix)) {
    if (!prefix_.empty()) ops_.push_back(MountOp{MountOp::kDir, prefix_, "", "", 0, 0755});
  }

  void Dir(const std::string& path, unsigned mode = 0755) {
    if (path.empty() || path == "/" || dirs_.count(path)) return;
    Dir(path.substr(0, std::max<size_t>(1, path.rfind('/'))));
    dirs_.insert(path);
    Add(MountOp::kDir, path, "", "", mode);
  }
  void Parent(const std::string& path) { Dir(path.substr(0, std::max<size_t>(1, path.rfind('/')))); }

  // Mirrors a host path: symlink stays a symlink, directory or file is bound read-only.
  void MirrorRo(const std::string& host_path) {
    struct stat st;
    if (::lstat(host_path.c_str(), &st) != 0) return;  // absent on this host: nothing to mirror
    Parent(host_path);
    if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      ssize_t n = ::readlink(host_path.c_str(), buf, sizeof buf - 1);
      if (n <= 0) return;
      Add(MountOp::kSymlink, host_path, std::string(buf, static_cast<size_t>(n)));
      return;
    }
    bool is_dir = S_ISDIR(st.st_mode);
    if (is_dir) dirs_.insert(host_path);
    MountOp& op = Add(MountOp::kBindRo, host_path, kOldRoot + host_path, "", is_dir ? 0755 : 0444);
    op.remount_flags = RemountFlags(host_path);
    if (!is_dir) op.mode |= S_IFREG;  // tells the child to create a file, not a directory
  }

  // Like MirrorRo, but a small regular file is copied into the run's root
  // (its content read now) instead of bound. A bind pins the inode seen when
  // the plan was made: once dpkg or ldconfig renames a new file over the host
  // path, that inode is unlinked, and a warm run (whose plan was made once, in
  // the zygote, and binds from the zygote's root) can no longer bind it. A copy
  // has no inode to lose. Directories stay bound: package managers replace the
  // files inside them, and a bound directory shows those live.
  void CopyOrMirrorRo(const std::string& host_path) {
    constexpr off_t kMaxCopy = 1 << 20;
    struct stat st;
    if (::lstat(host_path.c_str(), &st) != 0) return;
    // Only what anyone may read is copied (the server reads as root): a file an
    // operator made private stays a bind, which keeps its permissions.
    if (!S_ISREG(st.st_mode) || st.st_size > kMaxCopy || !(st.st_mode & S_IROTH)) return MirrorRo(host_path);
    int fd = ::open(host_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return MirrorRo(host_path);
    std::string content;
    char buf[65536];
    ssize_t n;
    while (content.size() <= static_cast<size_t>(kMaxCopy) && (n = ::read(fd, buf, sizeof buf)) > 0) {
      content.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    if (n < 0 || content.size() > static_cast<size_t>(kMaxCopy)) return MirrorRo(host_path);
    File(host_path, std::move(content), 0444);
  }

  void Symlink(const std::string& path, const std::string& target) {
    Parent(path);
    Add(MountOp::kSymlink, path, target);
  }
  void File(const std::string& path, std::string content, unsigned mode = 0444) {
    Parent(path);
    Add(MountOp::kFile, path, std::move(content), "", mode);
  }
  void Tmpfs(const std::string& path, const std::string& options) {
    Dir(path);
    Add(MountOp::kTmpfs, path, "", options);
  }
  void Device(const std::string& path) {
    Parent(path);
    Add(MountOp::kBindFile, path, kOldRoot + path);
  }
  void Proc(const std::string& path) {
    Dir(path);
    Add(MountOp::kProc, path);
  }
  void Bind(const std::string& source, const std::string& target) {
    Dir(target);
    Add(MountOp::kBind, target, source);
  }
  void Detach(const std::string& path) { Add(MountOp::kDetach, path); }
  void Unmount(const std::string& path) { Add(MountOp::kUnmount, path); }
  void Mask(const std::string& path) { Add(MountOp::kMask, path); }
  void ReadOnly(const std::string& path) { Add(MountOp::kReadOnly, path); }
  void RemountRo(const std::string& path) { Add(MountOp::kRemountRo, path); }

  std::vector<MountOp> Take() { return std::move(ops_); }

 private:
  MountOp& Add(MountOp::Kind kind, const std::string& path, std::string source = "",
               std::string data = "", unsigned mode = 0755) {
    MountOp op{kind, prefix_ + path, std::move(source), std::move(data), 0, mode};
    ops_.push_back(std::move(op));
    return ops_.back();
  }

  std::string prefix_;
  std::set<std::string> dirs_;
  std::vector<MountOp> ops_;
};

std::string SizeOption(int64_t bytes) { return "size=" + std::to_string(std::max<int64_t>(bytes, 4096)); }

// What every root has and no run of it changes: the system trees, /etc, and
// /dev with its devices.
void PlanSystem(Planner& p, const Spec& spec) {
  for (const char* path : kSystemPaths) p.MirrorRo(path);

  p.Dir("/etc");
  const std::string uid = std::to_string(kSandboxUid), gid = std::to_string(kSandboxGid);
  p.File("/etc/passwd", "sandbox:x:" + uid + ":" + gid + ":sandbox:" + spec.workdir +
                            ":/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
  p.File("/etc/group", "sandbox:x:" + gid + ":\nnogroup:x:65534:\n");
  p.File("/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t" + spec.hostname + "\n");
  p.File("/etc/hostname", spec.hostname + "\n");
  for (const char* path : kEtcPaths) p.CopyOrMirrorRo(path);
  for (const std::string& path : EtcJavaDirs()) p.MirrorRo(path);

  // /dev: a small tmpfs with the harmless character devices bound from the host.
  p.Tmpfs("/dev", "mode=0755,size=65536");
  for (const char* dev : kDevices) p.Device(dev);
  p.Symlink("/dev/fd", "/proc/self/fd");
  p.Symlink("/dev/stdin", "/proc/self/fd/0");
  p.Symlink("/dev/stdout", "/proc/self/fd/1");
  p.Symlink("/dev/stderr", "/proc/self/fd/2");
}

// /proc's masked and read-only paths (docs/security.md, part 4), over a proc
// already mounted at /proc.
void PlanProcMasks(Planner& p) {
  for (const char* path : kMaskedProcPaths) p.Mask(path);
  for (const char* path : kReadOnlyProcPaths) p.ReadOnly(path);
}

// The only writable places: the workspace, one tmpfs of the run's disk size,
// seen as /home/user (the working directory and HOME) and /tmp, two
// directories of it bound there, so that both share one disk limit. It is
// mounted at `staging` first, which is detached once both binds hold it (they
// keep it alive); remove_staging: its directory too (a directory the plan made).
void PlanWorkspace(Planner& p, const Spec& spec, const std::string& staging, bool remove_staging) {
  const std::string uid = std::to_string(kSandboxUid), gid = std::to_string(kSandboxGid);
  p.Tmpfs(staging, "mode=0755,uid=" + uid + ",gid=" + gid + "," + SizeOption(spec.limits.disk_bytes));
  p.Dir(staging + "/home", 0755);
  p.Dir(staging + "/tmp", 01777);
  p.Bind(staging + "/home", kWorkspaceDir);
  p.Bind(staging + "/tmp", "/tmp");
  if (remove_staging) {
    p.Detach(staging);
  } else {
    p.Unmount(staging);
  }
}

// Whether path is dir or lies below it.
bool Below(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// A zygote's template of its runs' roots (PlanRunFromTemplate): their static
// part, built once with the zygote's own root, read-only. Mount points for
// what each run mounts itself: /proc, the workspace's two places, /dev/shm.
std::vector<MountOp> PlanRunTemplate(const Spec& spec) {
  Planner t(kRunTemplate);
  PlanSystem(t, spec);
  t.Dir("/dev/shm", 01777);
  t.Dir("/proc", 0555);
  t.Dir(kWorkspaceDir, 0755);
  t.Dir("/tmp", 01777);
  for (const std::string& path : spec.ro_binds) t.MirrorRo(path);
  // Shared by every run of the zygote: nothing of it may be writable.
  t.RemountRo("/dev");
  return t.Take();
}

}  // namespace

const char kRunTemplate[] = "/.runroot";

bool RunTemplateFits(const Spec& spec) {
  if (!spec.files.empty()) return false;
  for (const std::string& path : spec.ro_binds) {
    for (const char* dir : {kWorkspaceDir, "/tmp", "/dev", "/proc"}) {
      // Inside what a run mounts itself, or over it (the bind would hide the
      // template's mount point).
      if (Below(path, dir) || Below(dir, path)) return false;
    }
  }
  return true;
}

std::vector<MountOp> PlanRunFromTemplate(const Spec& spec) {
  Planner p;
  // The zygote's root is parked at kWorkspaceDir by pivot_root (ApplyMountsInChild)
  // while proc is mounted: the kernel allows it only where a fully visible proc
  // is mounted (the zygote's, unmasked).
  p.Proc("/proc");
  PlanProcMasks(p);
  // Detach the zygote's tree: from here no path leads back to it.
  p.Unmount(kWorkspaceDir);
  // The workspace as PlanMounts makes it, staged at /dev/shm (a mount point of
  // the read-only template, where no directory can be made), which then gets
  // its own tmpfs.
  PlanWorkspace(p, spec, "/dev/shm", /*remove_staging=*/false);
  p.Tmpfs("/dev/shm", "mode=1777," + SizeOption(spec.limits.disk_bytes));
  return p.Take();
}

std::vector<MountOp> PlanMounts(const Spec& spec) {
  Planner p;
  PlanSystem(p, spec);
  // POSIX semaphores (multiprocessing) live in /dev/shm; it counts toward the run's memory.
  p.Tmpfs("/dev/shm", "mode=1777," + SizeOption(spec.limits.disk_bytes));

  p.Proc("/proc");
  // Not in a zygote's /proc: its runs mount their own, which the kernel allows
  // only while a fully visible proc is mounted in the namespace they come from
  // (mount_too_revealing). The zygote runs no user code; each run masks its own.
  if (!spec.nested_sandbox_host) PlanProcMasks(p);

  PlanWorkspace(p, spec, kWorkspaceStaging, /*remove_staging=*/true);
  // After the working dir, so that a bind below it is not hidden by its tmpfs.
  for (const std::string& path : spec.ro_binds) p.MirrorRo(path);

  for (const FileEntry& f : spec.files) p.File(f.path, f.content, f.mode);
  std::vector<MountOp> ops = p.Take();
  if (spec.nested_sandbox_host && RunTemplateFits(spec)) {
    std::vector<MountOp> t = PlanRunTemplate(spec);
    ops.insert(ops.end(), std::make_move_iterator(t.begin()), std::make_move_iterator(t.end()));
  }
  return ops;
}

}  // namespace airlock::isolation::internal

namespace airlock::isolation {

std::vector<std::string> HostPathsOfPlan(const Spec& spec) {
  using namespace internal;
  std::vector<std::string> out(std::begin(kSystemPaths), std::end(kSystemPaths));
  out.insert(out.end(), std::begin(kEtcPaths), std::end(kEtcPaths));
  for (const std::string& path : EtcJavaDirs()) out.push_back(path);
  out.insert(out.end(), std::begin(kDevices), std::end(kDevices));
  out.insert(out.end(), spec.ro_binds.begin(), spec.ro_binds.end());
  return out;
}

}  // namespace airlock::isolation

namespace airlock::isolation::internal {
namespace {

int MakeEmptyFile(const char* path, unsigned mode) {
  int fd = ::open(path, O_CREAT | O_WRONLY | O_CLOEXEC, mode & 07777);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

int MkdirOk(const char* path, unsigned mode) {
  if (::mkdir(path, mode & 07777) == 0 || errno == EEXIST) return 0;
  return errno;
}

int WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

int ApplyOp(const MountOp& op) {
  const char* target = op.target.c_str();
  switch (op.kind) {
    case MountOp::kDir:
      return MkdirOk(target, op.mode);
    case MountOp::kBindRo: {
      int err = (op.mode & S_IFREG) ? MakeEmptyFile(target, 0444) : MkdirOk(target, 0755);
      if (err) return err;
      if (::mount(op.source.c_str(), target, nullptr, MS_BIND, nullptr) != 0) return errno;
      if (::mount(nullptr, target, nullptr, op.remount_flags, nullptr) != 0) return errno;
      return 0;
    }
    case MountOp::kBindFile: {
      if (int err = MakeEmptyFile(target, 0666)) return err;
      if (::mount(op.source.c_str(), target, nullptr, MS_BIND, nullptr) != 0) return errno;
      return 0;
    }
    case MountOp::kSymlink:
      return ::symlink(op.source.c_str(), target) == 0 ? 0 : errno;
    case MountOp::kFile: {
      int fd = ::open(target, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, op.mode & 07777);
      if (fd < 0) return errno;
      int err = WriteAll(fd, op.source.data(), op.source.size());
      ::close(fd);
      return err;
    }
    case MountOp::kTmpfs:
      if (int err = MkdirOk(target, 0755)) return err;
      return ::mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, op.data.c_str()) == 0 ? 0 : errno;
    case MountOp::kProc:
      if (int err = MkdirOk(target, 0555)) return err;
      return ::mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0 ? 0 : errno;
    case MountOp::kMask: {
      struct stat st;
      if (::stat(target, &st) != 0) return errno == ENOENT ? 0 : errno;
      if (S_ISDIR(st.st_mode)) {
        return ::mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=4096") == 0
                   ? 0
                   : errno;
      }
      return ::mount("/dev/null", target, nullptr, MS_BIND, nullptr) == 0 ? 0 : errno;
    }
    case MountOp::kBind:
      return ::mount(op.source.c_str(), target, nullptr, MS_BIND, nullptr) == 0 ? 0 : errno;
    case MountOp::kDetach:
      if (::umount2(target, MNT_DETACH) != 0) return errno;
      return ::rmdir(target) == 0 ? 0 : errno;
    case MountOp::kUnmount:
      return ::umount2(target, MNT_DETACH) == 0 ? 0 : errno;
    case MountOp::kRemountRo:
      return ::mount(nullptr, target, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) == 0
                 ? 0
                 : errno;
    case MountOp::kReadOnly: {
      struct stat st;
      if (::stat(target, &st) != 0) return errno == ENOENT ? 0 : errno;
      if (::mount(target, target, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
      return ::mount(nullptr, target, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     nullptr) == 0
                 ? 0
                 : errno;
    }
  }
  return EINVAL;
}

}  // namespace

namespace {

// A warm run's root from its zygote's template: a recursive bind of it (the
// template's mounts come along, read-only and locked: this user namespace is
// not the one that made them), pivoted into with the zygote's root parked at
// kWorkspaceDir, then the plan (PlanRunFromTemplate), which mounts proc while
// that root is there and detaches it before anything else.
int EnterRunTemplate(const ChildPlan& plan, int* failed_index, int* failed_step) {
  const char* tpl = plan.run_template.c_str();
  *failed_step = kStepMountRoot;
  if (::mount(tpl, tpl, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
  *failed_step = kStepPivotRoot;
  if (::chdir(tpl) != 0) return errno;
  if (::syscall(SYS_pivot_root, ".", kWorkspaceDir + 1) != 0) return errno;
  if (::chdir("/") != 0) return errno;
  *failed_step = kStepMountOp;
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    if (int err = ApplyOp(plan.ops[i])) {
      *failed_index = static_cast<int>(i);
      return err;
    }
  }
  // Read-only since the zygote made it so (and locked so: not ours to change).
  // EINVAL: a template that is not read-only, which PlanMounts never makes.
  *failed_step = kStepRemountRoot;
  struct statvfs sv;
  if (::statvfs("/", &sv) != 0) return errno;
  return (sv.f_flag & ST_RDONLY) ? 0 : EINVAL;
}

}  // namespace

int ApplyMountsInChild(const ChildPlan& plan, int* failed_index, int* failed_step) {
  *failed_step = kStepMountPrivate;
  // Nothing we mount may propagate back to the host.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  if (!plan.run_template.empty()) return EnterRunTemplate(plan, failed_index, failed_step);
  *failed_step = kStepMountRoot;
  if (::mount("tmpfs", plan.staging.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=67108864") != 0) {
    return errno;
  }
  // Enter the new root first, keeping the host's root at /.oldroot: every bind
  // source is then read through /.oldroot, whatever the staging path hides.
  *failed_step = kStepPivotRoot;
  if (::chdir(plan.staging.c_str()) != 0) return errno;
  if (::mkdir(".oldroot", 0700) != 0) return errno;
  if (::syscall(SYS_pivot_root, ".", ".oldroot") != 0) return errno;
  if (::chdir("/") != 0) return errno;
  *failed_step = kStepMountOp;
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    if (int err = ApplyOp(plan.ops[i])) {
      *failed_index = static_cast<int>(i);
      return err;
    }
  }
  // Detach the host's tree: from here no path leads back to it.
  *failed_step = kStepPivotRoot;
  if (::umount2(kOldRoot.c_str(), MNT_DETACH) != 0) return errno;
  if (::rmdir(kOldRoot.c_str()) != 0) return errno;
  *failed_step = kStepRemountRoot;
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
    return errno;
  }
  return 0;
}

}  // namespace airlock::isolation::internal
