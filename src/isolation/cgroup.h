// Per-run cgroups, v2 where its controllers are usable, else v1 (as on hosts
// whose memory/pids/cpu controllers are bound to v1 hierarchies).
//
//   ASSIGN_OR_RETURN(CgroupSetup setup, DetectCgroups());      // once, at startup
//   ASSIGN_OR_RETURN(auto cg, RunCgroup::Create(setup, "run-42", limits));
//   RETURN_IF_ERROR(cg->AddProcess(pid));                     // before the run proceeds
//   ... cg->ReadStats() while it runs ...
//   cg->KillAll(); cg.reset();                                 // destructor removes the dirs
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "isolation/spec.h"

namespace airlock::isolation {

enum class CgroupVersion { kNone = 0, kV1 = 1, kV2 = 2 };

struct CgroupSetup {
  CgroupVersion version = CgroupVersion::kNone;
  // v2: the directory under which per-run cgroups are created (controllers
  // memory, pids, cpu enabled in its cgroup.subtree_control).
  std::string v2_parent;
  // v1: per-controller parent directories ("" when that controller is absent).
  std::string v1_memory_parent, v1_pids_parent, v1_cpu_parent, v1_cpuacct_parent;
  std::string why_not;  // when version == kNone: what is missing and what to change
  // Tests only: the tree is plain directories, not a cgroup filesystem (a fake
  // tree given to DetectCgroups(root_override) or DetectCgroupsFrom). Control
  // files are then created when written, KillAll() signals nobody (a fake
  // cgroup.procs may list any pid), and the destructor deletes the files it
  // finds before rmdir. Never set on a real hierarchy.
  bool fake_tree = false;
};

// Looks at /proc/self/mountinfo and /proc/self/cgroup and prepares the parent
// directory ("airlock" under the hierarchy). `root_override` (tests) replaces
// /sys/fs/cgroup for v2 detection on a fake tree.
//
// v2 is preferred when memory, pids and cpu are all listed in cgroup.controllers
// of our own v2 cgroup (the root, or a delegated subtree). Controllers are then
// enabled in our cgroup's cgroup.subtree_control; if that fails because our
// cgroup has processes (the kernel's no-internal-process rule, e.g. a systemd
// service with Delegate=yes, or a container's cgroup namespace root), this
// process first moves itself into the leaf `<own>/airlock-supervisor`. Runs are
// created under `<own>/airlock` (v2_parent) with the controllers enabled there
// too, so they never mix with the supervisor's leaf. Else v1: per controller
// `<mount>/<our path>/airlock`. Else kNone with why_not. Host refusals
// (permissions, missing controllers) give kNone, not an error.
//
// With `root_override` only that tree is looked at, as a cgroup2 root that we
// are in (own path "/"); v1 hierarchies of the host are ignored, so tests never
// touch the host.
StatusOr<CgroupSetup> DetectCgroups(const std::string& root_override = "");

// What DetectCgroups reads, so tests can describe any host layout.
struct CgroupHostView {
  std::string mountinfo;    // text of /proc/self/mountinfo
  std::string proc_cgroup;  // text of /proc/self/cgroup
  bool allow_fake_tree = false;  // true in tests: may set CgroupSetup::fake_tree
};
StatusOr<CgroupSetup> DetectCgroupsFrom(const CgroupHostView& view);

struct CgroupStats {
  uint64_t oom_kills = 0;        // processes killed by the memory controller
  uint64_t pids_max_hits = 0;    // forks refused by pids.max
  uint64_t cpu_usage_ns = 0;     // CPU time used by every process of the run
  uint64_t memory_peak_bytes = 0;
  uint64_t nprocs = 0;           // processes currently in the cgroup
};

// A name for a run's cgroup no other airlock process makes: `prefix-PID-TAG-N`,
// TAG random per process. The pid alone is not enough: a server that was
// killed leaves its empty directories behind, and a later process may get
// its pid (a CI machine did).
std::string UniqueCgroupName(const std::string& prefix);

// What an airlock process that is gone left behind: a server killed (SIGKILL,
// a crash, the OOM killer) never removes its runs' and zygotes' cgroups. Looks
// at the setup's parent directories for cgroups named `run-PID-...` or
// `warm-PID-...` (UniqueCgroupName, and the older `run-PID-N`) whose PID is no
// live process, and removes those that are empty (the kernel refuses to remove
// one that still holds a process: it is left, and counted). A PID that was
// reused by another process keeps its directory until a later sweep. There is
// no age guard: cgroupfs has no creation time (a directory's times are those
// of its in-memory inode). A server in another pid namespace that shares this
// parent (its pids are not ours to check) keeps processes in its cgroups but
// for the moment one is made or torn down; a sweep landing in that moment
// fails that one run's start, it never reaches into a run. Best effort, never
// an error; a server's startup calls it once.
struct SweepResult {
  int removed = 0;
  int busy = 0;  // a gone server's cgroup that still holds processes
};
SweepResult SweepStaleCgroups(const CgroupSetup& setup);

class RunCgroup {
 public:
  // Creates the run's cgroup(s) and writes the limits (memory.max / memory.limit_in_bytes,
  // pids.max, cpu.max / cpu.cfs_quota_us). v2 also sets memory.oom.group=1 and memory.swap.max=0.
  static StatusOr<std::unique_ptr<RunCgroup>> Create(const CgroupSetup& setup, const std::string& name,
                                                      const Limits& limits);
  ~RunCgroup();  // KillAll(), then removes the directories (retrying while they drain)

  Status AddProcess(pid_t pid);
  // The same for the process a pidfd refers to (a warm run's init, another
  // process's child): by its pid, checked that it had not exited before and
  // after the write, so a recycled pid is never taken for it. When it exited
  // meanwhile, the error says so and the cgroup is marked not ours to kill in
  // (whatever is in it then may be an unrelated process that got the pid):
  // it is only removed when empty.
  // `pid`: as isolation::ChildrenOfPidfd's (the pidfd's pid when the caller
  // has it already; 0: read from /proc/self/fdinfo).
  Status AddProcessByPidfd(int pidfd, pid_t pid = 0);
  // Rewrites the memory, pids and cpu limits that differ between `from` (what
  // the cgroup has) and `to` (a warm run handed to a request with its own).
  Status ChangeLimits(const Limits& from, const Limits& to);
  CgroupStats ReadStats() const;
  // cpu_usage_ns alone (one file instead of ReadStats' five).
  uint64_t ReadCpuUsageNs() const;
  // pids.current: every task charged to the cgroup (threads, and processes
  // until they are reaped, zombies included). -1 when it cannot be read.
  int64_t ReadTaskCount() const;
  // Removes the CPU bandwidth limit and gives the largest CPU weight (best
  // effort): a run that is being killed must not wait for its quota's next
  // period (up to 100 ms), or behind busy runs, to die.
  Status LiftCpuLimit();
  // SIGKILLs every process in the cgroup (cgroup.kill on v2 where present, else
  // repeated reads of cgroup.procs) and waits until it is empty (bounded, ~2 s).
  void KillAll();
  CgroupVersion version() const { return version_; }
  // Paths created, for diagnostics and leak tests.
  const std::vector<std::string>& dirs() const { return dirs_; }

  // Cgroup directories whose removal failed (a KillAll that gave up, a
  // process we may not kill): each later ~RunCgroup retries them (one kill
  // pass and one rmdir each, no waiting). For /metrics.
  static int64_t LeakedDirs();

 private:
  RunCgroup() = default;
  CgroupVersion version_ = CgroupVersion::kNone;
  std::vector<std::string> dirs_;
  std::string memory_dir_, pids_dir_, cpu_dir_, cpuacct_dir_;
  bool fake_tree_ = false;
  bool foreign_ = false;  // AddProcessByPidfd could not tell what it moved: never KillAll
};

}  // namespace airlock::isolation
