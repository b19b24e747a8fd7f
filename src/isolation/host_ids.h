// Host ids of their own for runs (docs/security.md, "Every run is the same host
// user (part 1)"). The kernel keeps per-user pools (pipe buffer pages, file
// descriptors in flight over unix sockets) per host uid and queued signals and
// processes per (user namespace, uid): a run that shares its host uid with
// other runs shares those pools. A server running as root reserves a range of
// host ids; every run (and every zygote) gets an id of its own from it, as uid
// and gid, returned only once nothing of that run is left.
//
//   ASSIGN_OR_RETURN(auto pool, HostIdPool::Claim(range));   // once, at start
//   ASSIGN_OR_RETURN(HostIdLease lease, HostIdLease::Take(pool));
//   ... map the run's 1000 to lease.id() ...
//   lease.Watch(run_init_pidfd);  // the id comes back once that process is gone and reaped
//
// Several airlock processes may share one range (parallel `airlock run`, a test
// suite, two servers): the range is cut into blocks of kHostIdBlock ids aligned
// on multiples of kHostIdBlock, and each process takes one block for its life
// with an flock() on a file in kHostIdLockDir. No two live processes hold the
// same block; a block whose ids a running process has is never taken.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace airlock::isolation {

struct HostIdRange {
  uint32_t start = 0;
  uint32_t count = 0;
  uint32_t end() const { return start + count; }  // one past the last
  bool Contains(uint32_t id) const { return id >= start && id - start < count; }
  std::string ToString() const;  // "START:COUNT"
};

// 65536 ids at 0x70000000 (1879048192): systemd documents 1879048192-2147483647
// as unused by Linux, distributions and systemd (docs UIDS-GIDS: the container
// ranges of systemd-nspawn end at 1879048191, regular users at 60000, useradd's
// subordinate ids start at 100000 and grow by 65536 per user), and it stays
// below 2^31, which some programs mishandle.
inline constexpr HostIdRange kDefaultHostIdRange{0x70000000u, 65536};
inline constexpr uint32_t kHostIdBlock = 1024;
inline constexpr const char* kHostIdLockDir = "/run/airlock/host-ids";
// Where /run cannot be written (a read-only container root).
inline constexpr const char* kHostIdLockDirFallback = "/tmp/.airlock-host-ids";

// "START:COUNT" (decimal or 0x hex) -> a range; an error says what is wrong.
// Refuses ids up to 1000 (a run's own uid inside is 1000; system ids below),
// ranges reaching 2^32-1 (not a uid) and counts above 2^24.
StatusOr<HostIdRange> ParseHostIdRange(const std::string& text);

// What a check of a range against the host found.
struct HostIdCheck {
  std::vector<std::string> conflicts;  // "/etc/passwd: user 'x' has uid N", ...
  std::vector<std::string> checked;    // what was read, for `airlock check`
};
// Whether the user and group databases and the subordinate id files under
// etc_dir (passwd, group, subuid, subgid) name any id of the range, and
// whether the whole range is mapped in this process's user namespace
// (/proc/self/uid_map and gid_map).
HostIdCheck CheckHostIdRange(const HostIdRange& range, const std::string& etc_dir = "/etc");
// Every uid and gid (real, effective, saved, filesystem; supplementary groups)
// of a process under proc_dir that falls in the range: "process 123 (comm) has uid N".
std::vector<std::pair<uint32_t, std::string>> ProcessIdsInRange(const HostIdRange& range,
                                                                 const std::string& proc_dir = "/proc");

// The ids of one airlock process: its block of the range, thread-safe.
class HostIdPool {
 public:
  // Checks the range (CheckHostIdRange: any conflict refuses), then takes the
  // first block of it that no other airlock process holds and no running
  // process has an id of. lock_dir: where the block locks live (created 0700).
  static StatusOr<std::shared_ptr<HostIdPool>> Claim(const HostIdRange& range,
                                                     const std::string& lock_dir = kHostIdLockDir,
                                                     const std::string& etc_dir = "/etc",
                                                     const std::string& proc_dir = "/proc");
  // A pool over `block` with no lock and no check (unit tests).
  static std::shared_ptr<HostIdPool> ForTesting(const HostIdRange& block);

  // An id no live run has. Ids are handed out in turn through the block, so a
  // returned id is the last to be used again.
  StatusOr<uint32_t> Acquire();
  // Gives `id` back once the process `pidfd` refers to has exited and been
  // reaped (an empty pidfd: now).
  void Release(uint32_t id, UniqueFd pidfd);
  // Ids free now (released ids whose process is gone are counted).
  size_t FreeCount();
  // Gives back the released ids whose process is gone now, and closes their
  // pidfds (Acquire and Release do it too; a warm pool, whose runs are reaped
  // by their zygote after the server is done with them, calls it regularly).
  void Sweep();

  const HostIdRange& range() const { return range_; }  // the configured range
  const HostIdRange& block() const { return block_; }  // this process's part of it
  std::string Describe() const;  // "range 1879048192:65536, this server's block 1879048192:1024"

 private:
  HostIdPool() = default;
  void SweepLocked();

  HostIdRange range_, block_;
  UniqueFd lock_;
  std::mutex mu_;
  std::vector<bool> used_;  // index: id - block_.start
  uint32_t next_ = 0;       // where the next search starts
  size_t free_ = 0;
  struct Waiting {
    uint32_t id;
    UniqueFd pidfd;
  };
  std::deque<Waiting> waiting_;  // released, their process not gone yet
};

// One id taken from a pool; gives it back when destroyed (after the watched
// process is gone). Move-only. An empty lease (no pool) holds nothing.
class HostIdLease {
 public:
  HostIdLease() = default;
  static StatusOr<HostIdLease> Take(std::shared_ptr<HostIdPool> pool);
  HostIdLease(HostIdLease&& o) noexcept;
  HostIdLease& operator=(HostIdLease&& o) noexcept;
  HostIdLease(const HostIdLease&) = delete;
  HostIdLease& operator=(const HostIdLease&) = delete;
  ~HostIdLease() { Reset(); }

  explicit operator bool() const { return pool_ != nullptr; }
  uint32_t id() const { return id_; }
  // The process that holds the id: it is given back once this is gone and reaped.
  void Watch(int pidfd);
  void Reset();

 private:
  std::shared_ptr<HostIdPool> pool_;
  uint32_t id_ = 0;
  UniqueFd pidfd_;
  bool never_back_ = false;  // Watch() could not keep the pidfd
};

}  // namespace airlock::isolation
