// isolation::Spec: plain data describing one sandboxed program. It knows nothing
// of HTTP, JSON or YAML; the service layer builds it from a profile and a request,
// the CLI from flags. Launch() (sandbox.h) applies it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace airlock::isolation {

struct Limits {
  int64_t memory_bytes = 256ll << 20;  // cgroup memory limit (RLIMIT_AS backstop is larger)
  int64_t pids = 64;                   // cgroup pids.max (RLIMIT_NPROC backstop)
  double cpus = 1.0;                   // cgroup CPU bandwidth, in cores
  int64_t cpu_time_ms = 0;             // CPU time across all processes; 0 = no limit
  int64_t disk_bytes = 64ll << 20;     // size of the writable tmpfs working dir
  int64_t open_files = 256;            // RLIMIT_NOFILE
};

// A layer that a run may be allowed to lack. Everything not listed here is
// required: when it cannot be applied the run fails closed.
enum class Degradable : uint32_t {
  kNone = 0,
  kCgroup = 1u << 0,    // fall back to rlimits only
  kLandlock = 1u << 1,  // kernel without Landlock
};

struct FileEntry {
  std::string path;     // absolute path inside the sandbox (read-only area)
  std::string content;
  unsigned mode = 0444;
};

struct Spec {
  // What to run. argv[0] is an absolute path inside the sandbox.
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "KEY=value"; nothing else reaches the run
  // The working directory: kWorkspaceDir or /tmp, the two writable
  // directories of the run's workspace tmpfs (one disk limit for both).
  std::string workdir = "/home/user";
  std::string hostname = "sandbox";

  // Extra read-only files put in the sandbox's root before it turns read-only
  // (the program's code, for instance).
  std::vector<FileEntry> files;
  // Extra host paths bound read-only at the same place (besides /usr and the
  // /etc subset every run gets).
  std::vector<std::string> ro_binds;

  Limits limits;
  uint32_t degradable = static_cast<uint32_t>(Degradable::kNone);

  // Host ids the sandbox's single uid/gid map to. -1: the caller's uid when it
  // is not root, else 65534 (nobody), never host root.
  int64_t host_uid = -1;
  int64_t host_gid = -1;

  // Extra fd (e.g. a result channel) given to the program as fd 3; -1 = none.
  int extra_fd = -1;

  // The warm pool's zygote only (exec/zygote_*): a long-lived process that
  // creates sandboxes itself. It gets every namespace, the read-only root,
  // rlimits, the cgroup, a clean environment and no capabilities after execve
  // (it runs as kSandboxUid), but no seccomp filter, no Landlock domain and no
  // locked securebits, because each would forbid what its runs need (clone of
  // namespaces, mount, pivot_root, setresuid). It never runs user code: each of
  // its runs applies the full set of layers itself before any.
  bool nested_sandbox_host = false;
  // When >= 0, the program is this open file (execveat(exec_fd, "")), not
  // argv[0]: lets a binary that is not inside the sandbox's root run there.
  int exec_fd = -1;
};

// The workspace: every process's working directory and HOME, where files go
// in and out (isolation/sandbox_files.h), the same tmpfs as /tmp.
inline constexpr const char* kWorkspaceDir = "/home/user";

// Ids the program sees inside its user namespace.
constexpr uid_t kSandboxUid = 1000;
constexpr gid_t kSandboxGid = 1000;

}  // namespace airlock::isolation
