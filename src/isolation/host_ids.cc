#include "isolation/host_ids.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "base/fs.h"

namespace airlock::isolation {
namespace {

constexpr uint32_t kMaxCount = 1u << 24;
constexpr size_t kMaxConflictsShown = 8;

bool ParseU64(const std::string& text, uint64_t* out) {
  if (text.empty()) return false;
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  for (size_t i = hex ? 2 : 0; i < text.size(); ++i) {
    if (hex ? !std::isxdigit(static_cast<unsigned char>(text[i])) : !std::isdigit(static_cast<unsigned char>(text[i]))) {
      return false;
    }
  }
  if (text.size() > 18) return false;
  *out = std::strtoull(text.c_str(), nullptr, hex ? 16 : 10);
  return true;
}

std::vector<std::string> SplitFields(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// Whether every id of `range` is inside the ranges of an id map
// ("inside outside count" lines, as /proc/self/uid_map shows ours).
bool MapCovers(const std::string& map, const HostIdRange& range) {
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // [first, end)
  std::istringstream in(map);
  uint64_t inside, outside, count;
  while (in >> inside >> outside >> count) spans.push_back({inside, inside + count});
  std::sort(spans.begin(), spans.end());
  uint64_t need = range.start;
  for (auto [first, end] : spans) {
    if (first > need) break;
    if (end > need) need = end;
    if (need >= range.end()) return true;
  }
  return need >= range.end();
}

// Whether the pidfd's process has exited and been reaped.
bool Gone(int pidfd) {
  struct pollfd p = {pidfd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  auto info = ReadFile("/proc/self/fdinfo/" + std::to_string(pidfd));
  if (!info.ok()) return true;
  size_t pos = info->find("\nPid:");
  if (pos == std::string::npos) return true;
  // -1 once it is reaped (the kernel detached its pid); a zombie still shows its pid.
  return std::strtol(info->c_str() + pos + 5, nullptr, 10) <= 0;
}

// Creates (0700) or checks the directory of the block locks. ENOENT (in the
// status) when it does not exist and cannot be made.
Status MakeLockDir(const std::string& dir) {
  std::string parent = dir.substr(0, dir.rfind('/'));
  if (!parent.empty()) ::mkdir(parent.c_str(), 0755);
  ::mkdir(dir.c_str(), 0700);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return ErrnoError("stat(" + dir + ") for the host id locks");
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    return Unavailable(dir + " must be a directory of this user that nobody else can write (it holds the " +
                       "locks that keep airlock processes from sharing host ids); remove it");
  }
  return Status::Ok();
}

}  // namespace

std::string HostIdRange::ToString() const { return std::to_string(start) + ":" + std::to_string(count); }

StatusOr<HostIdRange> ParseHostIdRange(const std::string& text) {
  size_t colon = text.find(':');
  uint64_t start = 0, count = 0;
  if (colon == std::string::npos || !ParseU64(text.substr(0, colon), &start) ||
      !ParseU64(text.substr(colon + 1), &count)) {
    return InvalidArgument("--uid-range '" + text + "': write START:COUNT, e.g. " + kDefaultHostIdRange.ToString());
  }
  if (count == 0 || count > kMaxCount) {
    return InvalidArgument("--uid-range '" + text + "': COUNT must be 1 to " + std::to_string(kMaxCount));
  }
  if (start <= 1000) {
    return InvalidArgument("--uid-range '" + text + "': START must be above 1000 (system ids, and 1000 is a run's own uid inside)");
  }
  if (start + count > 0xFFFFFFFFull) {
    return InvalidArgument("--uid-range '" + text + "': the range must end below 4294967295 ((uid_t)-1)");
  }
  return HostIdRange{static_cast<uint32_t>(start), static_cast<uint32_t>(count)};
}

namespace {

// Calls fn with the colon-separated fields of each line of etc_dir/file
// (passwd, group, subuid, subgid). A missing file is skipped; one that cannot
// be read is a conflict (the range could not be checked against it).
void ForEachIdFileLine(const std::string& etc_dir, const char* file, HostIdCheck* out,
                       const std::function<void(const std::string& path, const std::vector<std::string>& fields)>& fn,
                       const std::function<void(std::string)>& conflict) {
  const std::string path = etc_dir + "/" + file;
  auto text = ReadFile(path, 64 << 20);
  if (!text.ok()) {
    if (text.status().sys_errno() != ENOENT) conflict(path + " could not be read: " + text.status().ToString());
    return;
  }
  out->checked.push_back(path);
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) fn(path, SplitFields(line, ':'));
}

}  // namespace

HostIdCheck CheckHostIdRange(const HostIdRange& range, const std::string& etc_dir) {
  HostIdCheck out;
  std::function<void(std::string)> conflict = [&](std::string what) {
    if (out.conflicts.size() < kMaxConflictsShown) out.conflicts.push_back(std::move(what));
  };
  // name:x:uid:gid:... and name:x:gid:members
  for (auto [file, kind] : {std::pair{"passwd", 0}, std::pair{"group", 1}}) {
    ForEachIdFileLine(etc_dir, file, &out, [&, kind = kind](const std::string& path, const std::vector<std::string>& f) {
      if (f.size() < 3 || f[0].empty() || f[0][0] == '#') return;
      for (size_t i : kind == 0 ? std::vector<size_t>{2, 3} : std::vector<size_t>{2}) {
        uint64_t id;
        if (i < f.size() && ParseU64(f[i], &id) && id <= 0xFFFFFFFFull && range.Contains(static_cast<uint32_t>(id))) {
          conflict(path + ": " + (kind == 0 ? "user '" : "group '") + f[0] + "' has " +
                   (kind == 0 && i == 2 ? "uid " : "gid ") + f[i]);
        }
      }
    }, conflict);
  }
  // name:start:count
  for (const char* file : {"subuid", "subgid"}) {
    ForEachIdFileLine(etc_dir, file, &out, [&](const std::string& path, const std::vector<std::string>& f) {
      uint64_t start, count;
      if (f.size() < 3 || !ParseU64(f[1], &start) || !ParseU64(f[2], &count)) return;
      if (start < range.end() && range.start < start + count) {
        conflict(path + ": '" + f[0] + "' has the subordinate ids " + f[1] + ":" + f[2]);
      }
    }, conflict);
  }
  for (const char* file : {"uid_map", "gid_map"}) {
    const std::string path = std::string("/proc/self/") + file;
    auto map = ReadFile(path);
    if (!map.ok()) {
      conflict(path + " could not be read: " + map.status().ToString());
    } else if (!MapCovers(*map, range)) {
      conflict("the range is not mapped in this process's user namespace (" + path + ": " +
               [&] {
                 std::string m = *map;
                 std::replace(m.begin(), m.end(), '\n', ';');
                 return m;
               }() +
               "): choose one inside the ids mapped there");
    } else {
      out.checked.push_back(path);
    }
  }
  return out;
}

std::vector<std::pair<uint32_t, std::string>> ProcessIdsInRange(const HostIdRange& range, const std::string& proc_dir) {
  std::vector<std::pair<uint32_t, std::string>> out;
  DIR* d = ::opendir(proc_dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    auto status = ReadFile(proc_dir + "/" + e->d_name + "/status", 1 << 16);
    if (!status.ok()) continue;  // exited meanwhile
    std::string comm;
    std::istringstream in(*status);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Name:", 0) == 0) {
        comm = line.substr(5);
        comm.erase(0, comm.find_first_not_of(" \t"));
        continue;
      }
      const char* kind = line.rfind("Uid:", 0) == 0 ? "uid" : line.rfind("Gid:", 0) == 0 ? "gid"
                         : line.rfind("Groups:", 0) == 0 ? "group" : nullptr;
      if (kind == nullptr) continue;
      std::istringstream ids(line.substr(line.find(':') + 1));
      uint64_t id;
      while (ids >> id) {
        if (id <= 0xFFFFFFFFull && range.Contains(static_cast<uint32_t>(id))) {
          out.push_back({static_cast<uint32_t>(id), std::string("process ") + e->d_name + " (" + comm + ") has " +
                                                        kind + " " + std::to_string(id)});
        }
      }
    }
  }
  ::closedir(d);
  return out;
}

StatusOr<std::shared_ptr<HostIdPool>> HostIdPool::Claim(const HostIdRange& range, const std::string& lock_dir,
                                                        const std::string& etc_dir, const std::string& proc_dir) {
  HostIdCheck check = CheckHostIdRange(range, etc_dir);
  if (!check.conflicts.empty()) {
    std::string what;
    for (const std::string& c : check.conflicts) what += "\n  " + c;
    return Unavailable("the host id range " + range.ToString() + " (--uid-range) is not free on this host:" + what +
                       "\nchoose another range with --uid-range START:COUNT (ids no user, group, subordinate id "
                       "range or process of this host has)");
  }
  // The lock directory: ours alone (another user able to write there could
  // hold or remove the locks of blocks). Where /run cannot be written (a
  // read-only container root), every airlock process falls back alike.
  std::string dir = lock_dir;
  Status made = MakeLockDir(dir);
  if (!made.ok() && made.sys_errno() == ENOENT && lock_dir == kHostIdLockDir) {
    dir = kHostIdLockDirFallback;
    made = MakeLockDir(dir);
  }
  if (!made.ok()) return made;
  std::vector<std::string> busy;
  int held_by_others = 0;
  for (uint64_t b = range.start / kHostIdBlock * kHostIdBlock; b < range.end(); b += kHostIdBlock) {
    HostIdRange block;
    block.start = static_cast<uint32_t>(std::max<uint64_t>(b, range.start));
    block.count = static_cast<uint32_t>(std::min<uint64_t>(b + kHostIdBlock, range.end()) - block.start);
    const std::string path = dir + "/" + std::to_string(b / kHostIdBlock);
    UniqueFd lock(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!lock) return ErrnoError("open(" + path + ") for a host id lock");
    if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return ErrnoError("flock(" + path + ")");
      ++held_by_others;
      continue;
    }
    // Ours now; still, a process may have its ids (a leftover of an airlock
    // process that just ended, or something else on the host).
    auto used = ProcessIdsInRange(block, proc_dir);
    if (!used.empty()) {
      if (busy.size() < kMaxConflictsShown) busy.push_back(used.front().second);
      continue;
    }
    std::shared_ptr<HostIdPool> pool(new HostIdPool());
    pool->range_ = range;
    pool->block_ = block;
    pool->lock_ = std::move(lock);
    pool->used_.assign(block.count, false);
    pool->free_ = block.count;
    return pool;
  }
  std::string what = "no block of the host id range " + range.ToString() + " (--uid-range) is free: " +
                     std::to_string(held_by_others) + " held by other airlock processes";
  for (const std::string& b : busy) what += "\n  " + b;
  return Unavailable(what + "\nstop them, or give this one another range with --uid-range START:COUNT");
}

std::shared_ptr<HostIdPool> HostIdPool::ForTesting(const HostIdRange& block) {
  std::shared_ptr<HostIdPool> pool(new HostIdPool());
  pool->range_ = block;
  pool->block_ = block;
  pool->used_.assign(block.count, false);
  pool->free_ = block.count;
  return pool;
}

void HostIdPool::SweepLocked() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (Gone(it->pidfd.get())) {
      used_[it->id - block_.start] = false;
      ++free_;
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
}

StatusOr<uint32_t> HostIdPool::Acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  SweepLocked();
  if (free_ == 0) {
    return Status(ErrorCode::kResourceExhausted,
                  "every host id of this server's block " + block_.ToString() + " is held by a live run (" +
                      std::to_string(waiting_.size()) + " of them ended, not yet gone); run fewer at once or give a "
                      "larger --uid-range");
  }
  for (uint32_t i = 0; i < block_.count; ++i) {
    uint32_t k = (next_ + i) % block_.count;
    if (!used_[k]) {
      used_[k] = true;
      --free_;
      next_ = (k + 1) % block_.count;
      return block_.start + k;
    }
  }
  return Internal("host id pool: the free count is wrong");
}

void HostIdPool::Release(uint32_t id, UniqueFd pidfd) {
  if (!block_.Contains(id)) return;
  std::lock_guard<std::mutex> lock(mu_);
  // Swept on every call: the list (and the pidfds it holds) stays as long as
  // the number of runs ended but not yet gone.
  SweepLocked();
  if (!used_[id - block_.start]) return;
  if (pidfd && !Gone(pidfd.get())) {
    waiting_.push_back({id, std::move(pidfd)});
    return;
  }
  used_[id - block_.start] = false;
  ++free_;
}

void HostIdPool::Sweep() {
  std::lock_guard<std::mutex> lock(mu_);
  SweepLocked();
}

size_t HostIdPool::FreeCount() {
  std::lock_guard<std::mutex> lock(mu_);
  SweepLocked();
  return free_;
}

std::string HostIdPool::Describe() const {
  return "range " + range_.ToString() + ", this process's block " + block_.ToString();
}

StatusOr<HostIdLease> HostIdLease::Take(std::shared_ptr<HostIdPool> pool) {
  HostIdLease lease;
  if (!pool) return lease;
  ASSIGN_OR_RETURN(lease.id_, pool->Acquire());
  lease.pool_ = std::move(pool);
  return lease;
}

HostIdLease::HostIdLease(HostIdLease&& o) noexcept
    : pool_(std::move(o.pool_)), id_(o.id_), pidfd_(std::move(o.pidfd_)), never_back_(o.never_back_) {
  o.pool_.reset();
}

HostIdLease& HostIdLease::operator=(HostIdLease&& o) noexcept {
  if (this != &o) {
    Reset();
    pool_ = std::move(o.pool_);
    o.pool_.reset();
    id_ = o.id_;
    pidfd_ = std::move(o.pidfd_);
    never_back_ = o.never_back_;
  }
  return *this;
}

void HostIdLease::Watch(int pidfd) {
  pidfd_.reset(pidfd >= 0 ? ::fcntl(pidfd, F_DUPFD_CLOEXEC, 3) : -1);
  // Cannot tell when that process is gone: the id is never given back.
  if (!pidfd_) never_back_ = true;
}

void HostIdLease::Reset() {
  if (!pool_) return;
  if (!never_back_) pool_->Release(id_, std::move(pidfd_));
  pool_.reset();
  pidfd_.reset();
  never_back_ = false;
}

}  // namespace airlock::isolation
