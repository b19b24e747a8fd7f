#include "exec/warm_pool.h"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "base/fs.h"
#include "base/log.h"
#include "exec/zygote_main.h"
#include "exec/zygote_protocol.h"
#include "isolation/cgroup.h"
#include "isolation/warm_run.h"

namespace airlock::exec {
namespace {

constexpr const char* kZygoteArgv0 = "/usr/libexec/airlock-zygote";  // a name only: it is exec'd by fd

// A sealed in-memory copy of the airlock binary for the zygotes to exec: a
// warm run is a fork of the zygote, and its /proc/self/maps and exe would
// otherwise show the server binary's host path (docs/security.md, part 4);
// they show "/memfd:runtime (deleted)". Only the part the loader maps is copied
// (every segment; about 2 MB, where debug info makes the file ~50 MB) and the
// section headers, which point past it, are dropped: execve never reads them.
StatusOr<UniqueFd> SealedExecCopy(int fd) {
  Elf64_Ehdr eh;
  if (::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
      eh.e_phnum > 256) {
    return Unavailable("the zygote binary is not a 64-bit ELF file this server can copy");
  }
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  const size_t ph_bytes = ph.size() * sizeof(Elf64_Phdr);
  if (::pread(fd, ph.data(), ph_bytes, static_cast<off_t>(eh.e_phoff)) != static_cast<ssize_t>(ph_bytes)) {
    return ErrnoError("pread (program headers of the zygote binary)");
  }
  uint64_t end = eh.e_phoff + ph_bytes;
  for (const Elf64_Phdr& h : ph) end = std::max<uint64_t>(end, h.p_offset + h.p_filesz);
  if (end > (uint64_t{1} << 30)) return Unavailable("the zygote binary's segments are larger than 1 GiB");
  ASSIGN_OR_RETURN(UniqueFd mem, CreateExecMemfd("runtime", "the zygote binary"));
  std::vector<char> buf(1 << 20);
  for (uint64_t off = 0; off < end;) {
    ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), end - off), static_cast<off_t>(off));
    if (n <= 0) return n < 0 ? ErrnoError("read (the zygote binary)") : Internal("the zygote binary is truncated");
    if (off == 0 && static_cast<size_t>(n) >= sizeof eh) {
      Elf64_Ehdr copy = eh;
      copy.e_shoff = 0;
      copy.e_shnum = 0;
      copy.e_shstrndx = SHN_UNDEF;
      std::memcpy(buf.data(), &copy, sizeof copy);
    }
    RETURN_IF_ERROR(WriteAll(mem.get(), std::string_view(buf.data(), static_cast<size_t>(n)), "the zygote binary's copy"));
    off += static_cast<uint64_t>(n);
  }
  RETURN_IF_ERROR(SealMemfd(mem.get(), "the zygote binary's copy"));
  return mem;
}
constexpr auto kReadyWithin = std::chrono::seconds(30);
constexpr int kMaxBackoffMs = 30000;

// What a zygote and the runs it made share with the pool.
struct ZygoteState : ZygoteLife {
  std::atomic<uint64_t> handoffs{0};
};

struct Slot {
  isolation::Launched run;
  UniqueFd control;  // the kWarmGo/kWarmReady handshake, then the request
  UniqueFd events;   // the result channel's read end
  std::shared_ptr<ZygoteState> zygote;
  Clock::time_point deadline;  // while pending: ready by then
};

// Kills a run that will never be handed off (its zygote reaps it).
void Discard(Slot& slot) {
  isolation::KillRun(slot.run);
  slot.run.cgroup.reset();
}

// What a host path was when a zygote was built from it; any change (a rename
// over it gives a new inode) means the zygote's copy or bind is stale.
struct PathStamp {
  std::string path;
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const PathStamp&) const = default;
};

PathStamp Stamp(const std::string& path) {
  PathStamp s;
  s.path = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  // Content matters only where it is copied: a bound directory shows changes
  // inside it live, and a device's times change with use.
  if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
    s.size = st.st_size;
    s.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  }
  return s;
}

struct Zygote {
  isolation::Launched launched;  // the zygote itself (pid 1 of its namespaces): our child
  std::vector<PathStamp> sources;  // the host paths it was built from, as they were
  UniqueFd control;
  std::shared_ptr<ZygoteState> state = std::make_shared<ZygoteState>();
  bool up = false;
  bool retiring = false;
  int spawns_asked = 0;  // kSpawn sent, no answer yet
  // The host ids sent with those kSpawn, in order (the zygote answers in
  // order); empty leases when the server has no id range.
  std::deque<isolation::HostIdLease> asked_ids;
  Clock::time_point started = Clock::now();
  Clock::time_point up_at{};  // when it said up: PoolOptions::recycle_after_s counts from here
  std::string log_out, log_err;  // partial lines of the zygote's output

  // A spawn never answered may have made a run: its id comes back only once
  // the zygote is gone (and with it every process of its namespace).
  ~Zygote() {
    for (auto& lease : asked_ids) lease.Watch(launched.pidfd.get());
  }
};

struct Pool {
  PoolProfile profile;
  std::unique_ptr<Zygote> current;
  std::vector<std::unique_ptr<Zygote>> retiring;
  std::deque<Slot> ready;      // guarded by Impl::mu
  std::vector<Slot> pending;   // the pool thread's only
  Clock::time_point next_start{};
  Clock::time_point next_spawn{};
  Clock::time_point next_source_check{};
  int backoff_ms = 500;
  int adopting = 0;  // runs handed to the adopters, not back yet (pool thread only)
  std::atomic<int> state{0};  // 0 down, 1 starting, 2 up
  std::atomic<uint64_t> handoffs{0}, refills{0}, cold_fallbacks{0}, restarts{0};
  std::atomic<uint64_t> recycles{0};
  std::string detail;  // guarded by Impl::mu
  std::string degraded;  // the reason, "" when not degraded; guarded by Impl::mu
  std::string degraded_detail;  // guarded by Impl::mu
  std::map<std::string, uint64_t> failures;  // guarded by Impl::mu
};

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

bool Readable(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Reads what a zygote wrote to its stdout/stderr and logs it line by line.
// Returns false at EOF.
bool DrainLog(int fd, std::string* partial, const std::string& who) {
  char buf[4096];
  for (int i = 0; i < 8; ++i) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) {
      if (!partial->empty()) log::Warn(who + ": " + *partial);
      partial->clear();
      return false;
    }
    partial->append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = partial->find('\n')) != std::string::npos) {
      log::Warn(who + ": " + partial->substr(0, nl));
      partial->erase(0, nl + 1);
    }
    if (partial->size() > 4096) {
      log::Warn(who + ": " + *partial);
      partial->clear();
    }
  }
  return true;
}

}  // namespace

struct WarmPool::Impl {
  isolation::HostSetup host;
  PoolOptions options;
  std::vector<std::unique_ptr<Pool>> pools;
  mutable std::mutex mu;
  std::condition_variable ready_cv;  // a run became ready, or a zygote went down
  UniqueFd wake;
  UniqueFd self_exe;
  std::atomic<bool> stop{false};
  std::thread thread;

  // Putting a run in its cgroup waits, on cgroup v1, for an RCU grace period
  // (~9 ms measured here) while doing almost nothing: a few adopter threads do
  // it for several runs at once, so the waits overlap instead of adding up.
  struct Adoption {
    Pool* pool;
    Slot slot;
    Status status;
  };
  static constexpr int kAdopters = 3;
  std::vector<std::thread> adopters;
  std::mutex adopt_mu;
  std::condition_variable adopt_cv;
  std::deque<Adoption> to_adopt;  // guarded by adopt_mu
  std::vector<Adoption> adopted;  // done (ok or not), for the pool thread; guarded by adopt_mu
  std::deque<Slot> to_discard;    // runs TakeRun gave up on; guarded by adopt_mu
  bool adopters_stop = false;     // guarded by adopt_mu

  // fresh_only: a run of the current zygote only, never one a replaced
  // (retired) zygote left ready (a session would keep that zygote alive).
  bool Claim(const std::string& profile, const isolation::Spec& spec, std::string_view request, bool may_wait,
             Slot* claimed, std::string* why_not, bool fresh_only = false);

  // Discards a run on an adopter thread: killing it and removing its cgroup
  // can wait on the kernel (up to seconds), and TakeRun runs on a server's
  // event loop or its launcher thread.
  void DiscardLater(Slot slot) {
    {
      std::lock_guard<std::mutex> lock(adopt_mu);
      to_discard.push_back(std::move(slot));
    }
    adopt_cv.notify_one();
  }

  void AdopterLoop() {
    for (;;) {
      Adoption a;
      {
        std::unique_lock<std::mutex> lock(adopt_mu);
        adopt_cv.wait(lock, [&] { return adopters_stop || !to_adopt.empty() || !to_discard.empty(); });
        if (!to_discard.empty()) {
          Slot slot = std::move(to_discard.front());
          to_discard.pop_front();
          lock.unlock();
          Discard(slot);
          continue;
        }
        if (to_adopt.empty()) return;  // stopping
        a = std::move(to_adopt.front());
        to_adopt.pop_front();
      }
      a.status = PutInCgroup(*a.pool, a.slot);
      {
        std::lock_guard<std::mutex> lock(adopt_mu);
        adopted.push_back(std::move(a));
      }
      Wake();
    }
  }

  // The run's own cgroup (the profile's limits), the run's init moved into
  // it, then "go". Thread-safe: touches only the slot.
  Status PutInCgroup(Pool& p, Slot& slot) {
    auto cgroup = isolation::RunCgroup::Create(host.cgroups, isolation::UniqueCgroupName("warm"), p.profile.limits);
    if (!cgroup.ok()) return cgroup.status();
    slot.run.cgroup = std::move(*cgroup);
    // slot.run.pid was read from the pidfd when the slot was adopted.
    RETURN_IF_ERROR(slot.run.cgroup->AddProcessByPidfd(slot.run.pidfd.get(), slot.run.pid));
    // And its program, which init forked before anything else and which waits
    // for the go below (isolation/warm_run.h): by pidfd, checked still init's
    // child once pinned, so that a recycled pid is never taken for it.
    ASSIGN_OR_RETURN(std::vector<pid_t> children, isolation::ChildrenOfPidfd(slot.run.pidfd.get(), slot.run.pid));
    if (children.size() != 1) {
      return Internal("a warm run's init has " + std::to_string(children.size()) +
                      " children before go; it must have its program alone");
    }
    UniqueFd program(static_cast<int>(::syscall(SYS_pidfd_open, children.front(), 0)));
    if (!program) return ErrnoError("pidfd_open of a warm run's program");
    ASSIGN_OR_RETURN(std::vector<pid_t> again, isolation::ChildrenOfPidfd(slot.run.pidfd.get(), slot.run.pid));
    if (again.size() != 1 || again.front() != children.front()) {
      return Unavailable("a warm run's program ended before it was put in its cgroup");
    }
    // Still init's child after the pidfd was opened: the pidfd is that pid's.
    RETURN_IF_ERROR(slot.run.cgroup->AddProcessByPidfd(program.get(), children.front()));
    slot.run.program_pid = children.front();
    struct timeval tv = {2, 0};  // a hand-off never waits long on a run that stopped reading
    ::setsockopt(slot.control.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::send(slot.control.get(), &isolation::kWarmGo, 1, MSG_NOSIGNAL) != 1) {
      return ErrnoError("send (go) to a warm run");
    }
    return Status::Ok();
  }

  // A run that could not be prepared: said, discarded, and the pool waits a
  // second before it asks its zygote for another.
  void PreparingFailed(Pool& p, Slot& slot, const Status& why) {
    log::Error("warm pool " + p.profile.name + ": preparing a run failed: " + why.ToString());
    Degrade(p, "run_prepare", why.ToString());
    p.next_spawn = Clock::now() + std::chrono::seconds(1);
    Discard(slot);
  }

  // Adoptions the adopters finished: to pending (or discarded).
  void CollectAdopted() {
    std::vector<Adoption> done;
    {
      std::lock_guard<std::mutex> lock(adopt_mu);
      done.swap(adopted);
    }
    for (Adoption& a : done) {
      Pool& p = *a.pool;
      --p.adopting;
      if (!a.status.ok()) {
        PreparingFailed(p, a.slot, a.status);
        continue;
      }
      if (a.slot.zygote->Died(0)) {  // its zygote went meanwhile: so did it
        Discard(a.slot);
        continue;
      }
      a.slot.deadline = Clock::now() + kReadyWithin;
      p.pending.push_back(std::move(a.slot));
    }
  }

  void Wake() const {
    uint64_t one = 1;
    ssize_t unused = ::write(wake.get(), &one, sizeof one);
    (void)unused;
  }

  void SetDetail(Pool& p, std::string detail) {
    std::lock_guard<std::mutex> lock(mu);
    p.detail = std::move(detail);
  }

  // The pool failed to make a ready run: counted, and "degraded" (with the
  // reason, a fixed word, and the detail) until a run is ready again.
  void Degrade(Pool& p, const std::string& reason, std::string detail) {
    std::lock_guard<std::mutex> lock(mu);
    p.detail = detail;
    p.degraded = reason;
    p.degraded_detail = std::move(detail);
    p.failures[reason]++;
  }

  void Recovered(Pool& p) {
    std::lock_guard<std::mutex> lock(mu);
    if (p.degraded.empty()) return;
    log::Info("warm pool " + p.profile.name + ": a run is ready again (was degraded: " + p.degraded + ")");
    if (p.detail == p.degraded_detail) p.detail.clear();
    p.degraded.clear();
    p.degraded_detail.clear();
  }

  // Runs of the current zygote fail their setup: what it plans them from (its
  // own root, made when it started) no longer works, most likely because the
  // host replaced a file it binds. Its ready runs stay usable (like a recycled
  // one's); a fresh zygote starts after the backoff, which doubles while no run
  // gets ready (StartZygote) and is reset by the first one that does.
  // The first host path the current zygote was built from that has changed
  // since (e.g. renamed over by dpkg or ldconfig); "" when none has.
  std::string ChangedSource(const Zygote& z) {
    for (const PathStamp& s : z.sources) {
      if (!(Stamp(s.path) == s)) return s.path;
    }
    return "";
  }

  void ReplaceZygote(Pool& p, const std::string& why) {
    log::Warn("warm pool " + p.profile.name + ": replacing the zygote: " + why + " (in " +
              std::to_string(p.backoff_ms) + " ms)");
    p.current->retiring = true;
    p.current->state->retired = true;
    p.retiring.push_back(std::move(p.current));
    p.state = 0;
    p.next_start = Clock::now() + std::chrono::milliseconds(p.backoff_ms);
    ready_cv.notify_all();
  }

  // Runs share their zygote's network namespace unless the operator asked for
  // one per run or the kernel lacks what makes sharing safe (warm_run.h).
  bool SharesNetwork() const {
    return !options.network_per_run && isolation::WarmRunsCanShareNetwork(host.landlock_abi);
  }

  void StartZygote(Pool& p) {
    p.next_start = Clock::now() + std::chrono::milliseconds(p.backoff_ms);
    p.backoff_ms = std::min(p.backoff_ms * 2, kMaxBackoffMs);
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      SetDetail(p, ErrnoError("socketpair for a zygote").ToString());
      return;
    }
    UniqueFd ours(sv[0]), theirs(sv[1]);
    const isolation::Limits& l = p.profile.limits;
    isolation::Spec spec;
    spec.argv = {kZygoteArgv0,    kZygoteSubcommand,
                 "--preimport",   Join(p.profile.preimport),
                 "--memory",      std::to_string(l.memory_bytes),
                 "--pids",        std::to_string(l.pids),
                 "--cpus",        std::to_string(l.cpus),
                 "--disk",        std::to_string(l.disk_bytes),
                 "--open-files",  std::to_string(l.open_files),
                 "--cpu-time-ms", std::to_string(l.cpu_time_ms)};
    spec.argv.push_back("--share-network");
    spec.argv.push_back(SharesNetwork() ? "1" : "0");
    for (const std::string& b : options.ro_binds) {
      spec.argv.push_back("--ro-bind");
      spec.argv.push_back(b);
    }
    spec.ro_binds = options.ro_binds;
    spec.env = options.zygote_env;
    spec.limits = options.zygote_limits;
    spec.hostname = "sandbox";
    spec.nested_sandbox_host = true;
    spec.exec_fd = self_exe.get();
    spec.extra_fd = theirs.get();
    std::vector<PathStamp> sources;
    for (const std::string& path : isolation::HostPathsOfPlan(spec)) sources.push_back(Stamp(path));
    auto launched = isolation::Launch(host, spec);
    if (!launched.ok()) {
      log::Error("warm pool " + p.profile.name + ": starting the zygote failed: " + launched.status().ToString());
      Degrade(p, "zygote_start", "zygote start failed: " + launched.status().ToString());
      p.state = 0;
      return;
    }
    auto z = std::make_unique<Zygote>();
    z->launched = std::move(*launched);
    z->state->pid = z->launched.pid;
    z->control = std::move(ours);
    z->sources = std::move(sources);
    p.current = std::move(z);
    p.state = 1;
    SetDetail(p, "starting");
  }

  // A message from a zygote on its pool socket.
  void OnZygoteMessage(Pool& p, Zygote& z) {
    char buf[65536];
    struct iovec iov = {buf, sizeof buf};
    union {
      char c[CMSG_SPACE(sizeof(int) * zygote::kSpawnedFds)];
      struct cmsghdr align;
    } u{};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = u.c;
    msg.msg_controllen = sizeof u.c;
    ssize_t n = ::recvmsg(z.control.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    std::vector<UniqueFd> fds;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
    if (n <= 0) {
      // The zygote closed its socket: it is exiting; its pidfd tells the rest.
      z.control.reset();
      return;
    }
    std::string text(buf + 1, static_cast<size_t>(n - 1));
    switch (buf[0]) {
      case zygote::kUp:
        if (fds.size() != 1) {
          log::Error("warm pool " + p.profile.name + ": the zygote's up message carried no pidfd");
          isolation::KillRun(z.launched);
          return;
        }
        z.state->pidfd = std::move(fds[0]);
        z.up = true;
        z.up_at = Clock::now();
        if (&z == p.current.get()) {
          p.state = 2;
          SetDetail(p, text.empty() ? "" : "preimport failed: " + text);
        }
        if (!text.empty()) log::Warn("warm pool " + p.profile.name + ": preimport failed: " + text);
        log::Info("warm pool " + p.profile.name + ": zygote up");
        return;
      case zygote::kSpawned: {
        --z.spawns_asked;
        isolation::HostIdLease lease = TakeAskedId(z);
        const std::string asked = lease ? std::to_string(lease.id()) : "";
        if (fds.size() != static_cast<size_t>(zygote::kSpawnedFds) || text != asked) {
          log::Error("warm pool " + p.profile.name + ": a spawned run came with " + std::to_string(fds.size()) +
                     " fds instead of " + std::to_string(zygote::kSpawnedFds) + " or host id '" + text +
                     "' instead of '" + asked + "'");
          if (!fds.empty()) ::syscall(SYS_pidfd_send_signal, fds[0].get(), SIGKILL, nullptr, 0);
          lease.Watch(z.launched.pidfd.get());  // back once the zygote is gone
          return;
        }
        AdoptSpawned(p, z, fds, std::move(lease));
        return;
      }
      case zygote::kFailed:
        if (z.up) {
          --z.spawns_asked;
          // The run may exist (being killed, not yet reaped): its id comes back with the zygote.
          TakeAskedId(z).Watch(z.launched.pidfd.get());
        }
        log::Error("warm pool " + p.profile.name + ": zygote: " + text);
        SetDetail(p, text);
        p.next_spawn = Clock::now() + std::chrono::seconds(1);
        if (!z.up) isolation::KillRun(z.launched);  // startup failed: it is of no use
        return;
      default:
        log::Error("warm pool " + p.profile.name + ": unknown zygote message");
        return;
    }
  }

  static isolation::HostIdLease TakeAskedId(Zygote& z) {
    if (z.asked_ids.empty()) return {};
    isolation::HostIdLease lease = std::move(z.asked_ids.front());
    z.asked_ids.pop_front();
    return lease;
  }

  // A run the zygote cloned: put it in its cgroup and let it go on.
  void AdoptSpawned(Pool& p, Zygote& z, std::vector<UniqueFd>& fds, isolation::HostIdLease lease) {
    Slot slot;
    slot.run.pidfd = std::move(fds[0]);
    // Its id comes back once its init is gone and reaped (by the zygote).
    lease.Watch(slot.run.pidfd.get());
    const int64_t host_uid = lease ? static_cast<int64_t>(lease.id()) : -1;
    slot.run.host_id = std::move(lease);
    slot.run.stdout_fd = std::move(fds[1]);
    slot.run.stderr_fd = std::move(fds[2]);
    slot.run.status_fd = std::move(fds[3]);
    slot.events = std::move(fds[4]);
    slot.control = std::move(fds[5]);
    for (int fd : {slot.run.stdout_fd.get(), slot.run.stderr_fd.get(), slot.run.status_fd.get(), slot.events.get()}) {
      SetNonBlocking(fd);
    }
    slot.run.adopted = true;
    slot.run.report = isolation::MakeIsolationReport(host, true, host_uid, SharesNetwork(), /*shared_uts=*/true);
    slot.run.report.mode = "warm";
    slot.zygote = z.state;
    auto pid = isolation::PidOfPidfd(slot.run.pidfd.get());
    if (!pid.ok()) return PreparingFailed(p, slot, pid.status());
    slot.run.pid = *pid;
    ++p.adopting;
    {
      std::lock_guard<std::mutex> lock(adopt_mu);
      to_adopt.push_back(Adoption{&p, std::move(slot), Status::Ok()});
    }
    adopt_cv.notify_one();
  }

  // A pending run answered: ready, or its setup failed.
  void OnPendingReadable(Pool& p, size_t index) {
    Slot slot = std::move(p.pending[index]);
    p.pending.erase(p.pending.begin() + static_cast<long>(index));
    char first = 0;
    ssize_t n = ::recv(slot.control.get(), &first, 1, MSG_DONTWAIT);
    if (n == 1 && first == isolation::kWarmReady) {
      p.backoff_ms = 500;
      p.refills++;
      Recovered(p);
      // Execution::CanFinishOnEnd needs the program's pid: PutInCgroup read it.
      {
        std::lock_guard<std::mutex> lock(mu);
        p.ready.push_back(std::move(slot));
      }
      ready_cv.notify_one();
      return;
    }
    Status why = Internal("a warm run closed its control socket during setup");
    if (n == 1) {
      std::string rest(isolation::WarmSetupFailureSize(), '\0');
      rest[0] = first;
      ssize_t m = ::recv(slot.control.get(), rest.data() + 1, rest.size() - 1, MSG_DONTWAIT);
      if (m == static_cast<ssize_t>(rest.size() - 1)) why = isolation::DescribeWarmSetupFailure(rest.data(), rest.size());
    }
    log::Error("warm pool " + p.profile.name + ": " + why.ToString());
    Degrade(p, "run_setup", why.ToString());
    p.next_spawn = Clock::now() + std::chrono::seconds(1);
    if (p.current && !p.current->retiring && slot.zygote == p.current->state) {
      ReplaceZygote(p, "its runs fail their setup");
    }
    Discard(slot);
  }

  // Drops every ready or pending run of zygote `z` (all of them when null).
  void DropRunsOf(Pool& p, const ZygoteState* z) {
    std::deque<Slot> dropped;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto it = p.ready.begin(); it != p.ready.end();) {
        if (z == nullptr || it->zygote.get() == z) {
          dropped.push_back(std::move(*it));
          it = p.ready.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto it = p.pending.begin(); it != p.pending.end();) {
      if (z == nullptr || it->zygote.get() == z) {
        dropped.push_back(std::move(*it));
        it = p.pending.erase(it);
      } else {
        ++it;
      }
    }
    for (Slot& s : dropped) Discard(s);
  }

  void OnZygoteExit(Pool& p, std::unique_ptr<Zygote>& z) {
    auto exit = isolation::Reap(z->launched);
    // The zygote is its namespace's init: its own wait status is the answer.
    int st = exit.ok() ? exit->init_wait_status : 0;
    std::string how = !exit.ok()          ? exit.status().ToString()
                      : WIFEXITED(st)     ? "exit code " + std::to_string(WEXITSTATUS(st))
                      : WIFSIGNALED(st)   ? "signal " + std::to_string(WTERMSIG(st))
                                          : "ended";
    DropRunsOf(p, z->state.get());
    if (z->retiring) {
      log::Info("warm pool " + p.profile.name + ": a recycled zygote ended (" + how + ")");
    } else {
      log::Error("warm pool " + p.profile.name + ": the zygote died (" + how + "); restarting");
      Degrade(p, "zygote_died", "zygote died (" + how + ")");
      p.restarts++;
      p.state = 0;
      ready_cv.notify_all();
    }
    z.reset();
  }

  void Retire(Pool& p, const std::string& why) {
    log::Info("warm pool " + p.profile.name + ": recycling the zygote after " + why);
    p.recycles++;
    // Its ready runs are still good (handed off as usual while the successor
    // starts); it ends once the last of them has finished.
    p.current->retiring = true;
    p.current->state->retired = true;
    p.retiring.push_back(std::move(p.current));
    p.state = 0;
    p.next_start = Clock::now();
    p.backoff_ms = 500;
    ready_cv.notify_all();
  }

  void Loop();
  void Shutdown();
};

void WarmPool::Impl::Loop() {
  Clock::time_point next_id_sweep{};
  while (!stop.load()) {
    CollectAdopted();
    auto now = Clock::now();
    // A warm run's id comes back once its zygote has reaped it, after the
    // server let go of the run: look for those every 100 ms or so.
    if (host.host_ids && now >= next_id_sweep) {
      host.host_ids->Sweep();
      next_id_sweep = now + std::chrono::milliseconds(100);
    }
    for (auto& pp : pools) {
      Pool& p = *pp;
      if (p.current && p.current->up && options.recycle_after > 0 &&
          p.current->state->handoffs.load() >= static_cast<uint64_t>(options.recycle_after)) {
        Retire(p, std::to_string(p.current->state->handoffs.load()) + " runs");
      } else if (p.current && p.current->up && options.recycle_after_s > 0 &&
                 now - p.current->up_at >= std::chrono::duration<double>(options.recycle_after_s)) {
        // Every run of a zygote shares its layout and secrets (docs/security.md):
        // a budget in time bounds how long one leak stays useful on a quiet server.
        Retire(p, std::to_string(static_cast<int64_t>(options.recycle_after_s)) + " s");
      }
      // A host file the zygote was built from was replaced (a package upgrade):
      // its copies are stale and its binds of replaced files fail. Checked
      // about once a second: a few lstat() calls.
      if (p.current && p.current->up && now >= p.next_source_check) {
        p.next_source_check = now + std::chrono::seconds(1);
        if (std::string changed = ChangedSource(*p.current); !changed.empty()) {
          ReplaceZygote(p, "the host replaced " + changed + " since it started");
        }
      }
      if (!p.current && now >= p.next_start) StartZygote(p);
      Zygote* z = p.current.get();
      if (z && !z->up && now - z->started > std::chrono::duration<double>(options.startup_timeout_s)) {
        log::Error("warm pool " + p.profile.name + ": the zygote did not come up in time; killing it");
        isolation::KillRun(z->launched);
      }
      if (z && z->up && z->control && now >= p.next_spawn) {
        int have;
        {
          std::lock_guard<std::mutex> lock(mu);
          have = static_cast<int>(p.ready.size());
        }
        have += static_cast<int>(p.pending.size()) + p.adopting + z->spawns_asked;
        for (; have < options.size; ++have) {
          // Each run's own host id, sent with the request (none without a range).
          isolation::HostIdLease lease;
          if (host.host_ids) {
            auto taken = isolation::HostIdLease::Take(host.host_ids);
            if (!taken.ok()) {
              log::Error("warm pool " + p.profile.name + ": " + taken.status().ToString());
              p.next_spawn = now + std::chrono::seconds(1);
              break;
            }
            lease = std::move(*taken);
          }
          std::string message(1, zygote::kSpawn);
          if (lease) message += std::to_string(lease.id());
          if (::send(z->control.get(), message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
              static_cast<ssize_t>(message.size())) {
            break;  // not sent: the lease gives the id back
          }
          ++z->spawns_asked;
          z->asked_ids.push_back(std::move(lease));
        }
      }
      for (size_t i = 0; i < p.pending.size();) {
        if (now > p.pending[i].deadline) {
          log::Error("warm pool " + p.profile.name + ": a run did not get ready within 30 s");
          Degrade(p, "run_timeout", "a run did not get ready within 30 s");
          Discard(p.pending[i]);
          p.pending.erase(p.pending.begin() + static_cast<long>(i));
        } else {
          ++i;
        }
      }
      for (auto& r : p.retiring) {
        // Its last run is over (only the zygote's own reference is left): end it.
        if (r->state.use_count() == 1 && r->launched.pid > 0) isolation::KillRun(r->launched);
      }
    }

    // Wait for anything to happen.
    enum Kind { kWake, kControl, kZygoteExit, kRetiredExit, kLogOut, kLogErr, kPending };
    struct Watch {
      Kind kind;
      Pool* pool;
      size_t index;
    };
    std::vector<struct pollfd> fds;
    std::vector<Watch> what;
    auto watch = [&](int fd, Kind k, Pool* p, size_t i) {
      if (fd < 0) return;
      fds.push_back({fd, POLLIN, 0});
      what.push_back({k, p, i});
    };
    watch(wake.get(), kWake, nullptr, 0);
    for (auto& pp : pools) {
      Pool& p = *pp;
      if (p.current) {
        watch(p.current->control.get(), kControl, &p, 0);
        watch(p.current->launched.pidfd.get(), kZygoteExit, &p, 0);
        watch(p.current->launched.stdout_fd.get(), kLogOut, &p, 0);
        watch(p.current->launched.stderr_fd.get(), kLogErr, &p, 0);
      }
      for (size_t i = 0; i < p.retiring.size(); ++i) watch(p.retiring[i]->launched.pidfd.get(), kRetiredExit, &p, i);
      for (size_t i = 0; i < p.pending.size(); ++i) watch(p.pending[i].control.get(), kPending, &p, i);
    }
    int r = ::poll(fds.data(), fds.size(), 100);
    if (r <= 0) continue;
    // Handle from the back: removing a pending run or a retired zygote then
    // does not move the indexes still to be handled.
    for (size_t k = fds.size(); k-- > 0;) {
      if (!fds[k].revents) continue;
      Watch w = what[k];
      Pool* p = w.pool;
      switch (w.kind) {
        case kWake: {
          uint64_t v;
          ssize_t unused = ::read(wake.get(), &v, sizeof v);
          (void)unused;
          break;
        }
        case kControl:
          if (p->current) OnZygoteMessage(*p, *p->current);
          break;
        case kZygoteExit:
          if (p->current) OnZygoteExit(*p, p->current);
          break;
        case kRetiredExit:
          OnZygoteExit(*p, p->retiring[w.index]);
          p->retiring.erase(p->retiring.begin() + static_cast<long>(w.index));
          break;
        case kLogOut:
          if (p->current && !DrainLog(p->current->launched.stdout_fd.get(), &p->current->log_out,
                                      "zygote " + p->profile.name)) {
            p->current->launched.stdout_fd.reset();
          }
          break;
        case kLogErr:
          if (p->current && !DrainLog(p->current->launched.stderr_fd.get(), &p->current->log_err,
                                      "zygote " + p->profile.name)) {
            p->current->launched.stderr_fd.reset();
          }
          break;
        case kPending:
          OnPendingReadable(*p, w.index);
          break;
      }
    }
  }
  Shutdown();
}

void WarmPool::Impl::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(adopt_mu);
    adopters_stop = true;
  }
  adopt_cv.notify_all();
  for (std::thread& t : adopters) t.join();
  for (Adoption& a : to_adopt) Discard(a.slot);
  to_adopt.clear();
  for (Adoption& a : adopted) Discard(a.slot);
  adopted.clear();
  for (Slot& slot : to_discard) Discard(slot);
  to_discard.clear();
  for (auto& pp : pools) {
    Pool& p = *pp;
    DropRunsOf(p, nullptr);
    std::vector<std::unique_ptr<Zygote>> all = std::move(p.retiring);
    if (p.current) all.push_back(std::move(p.current));
    for (auto& z : all) {
      isolation::KillRun(z->launched);
      (void)isolation::Reap(z->launched);
    }
    p.state = 0;
  }
}

WarmPool::WarmPool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WarmPool::~WarmPool() {
  impl_->stop = true;
  impl_->ready_cv.notify_all();
  impl_->Wake();
  if (impl_->thread.joinable()) impl_->thread.join();
}

StatusOr<std::unique_ptr<WarmPool>> WarmPool::Start(const isolation::HostSetup& host, PoolOptions options) {
  if (host.cgroups.version == isolation::CgroupVersion::kNone) {
    return Unavailable("the warm pool needs cgroups (each warm run gets its own); runs go cold");
  }
  auto impl = std::make_unique<Impl>();
  impl->host = host;
  impl->options = std::move(options);
  impl->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->wake) return ErrnoError("eventfd");
  const std::string binary = impl->options.zygote_binary.empty() ? "/proc/self/exe" : impl->options.zygote_binary;
  impl->self_exe.reset(::open(binary.c_str(), O_RDONLY | O_CLOEXEC));
  if (!impl->self_exe) return ErrnoError("open(" + binary + ") for the zygote");
  // A host that forbids executing memfds (vm.memfd_noexec = 2) keeps the file:
  // the zygote then shows its host path, which the log says.
  auto noexec = ReadFile("/proc/sys/vm/memfd_noexec");
  if (noexec.ok() && !noexec->empty() && (*noexec)[0] == '2') {
    log::Warn("warm pool: vm.memfd_noexec = 2, so the zygotes exec " + binary + " itself and its path shows in warm runs");
  } else if (auto mem = SealedExecCopy(impl->self_exe.get()); mem.ok()) {
    impl->self_exe = std::move(*mem);
  } else {
    log::Warn("warm pool: " + mem.status().ToString() + "; the zygotes exec " + binary +
              " itself and its path shows in warm runs");
  }
  for (const PoolProfile& pp : impl->options.profiles) {
    auto p = std::make_unique<Pool>();
    p->profile = pp;
    impl->pools.push_back(std::move(p));
  }
  Impl* raw = impl.get();
  for (int i = 0; i < Impl::kAdopters; ++i) impl->adopters.emplace_back([raw] { raw->AdopterLoop(); });
  impl->thread = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<WarmPool>(new WarmPool(std::move(impl)));
}

bool WarmPool::Serves(const std::string& profile) const {
  for (const auto& p : impl_->pools) {
    if (p->profile.name == profile) return true;
  }
  return false;
}

// Takes a ready run of `profile`, applies spec.limits and writes `request`;
// false (and *why_not) when none could be had.
bool WarmPool::Impl::Claim(const std::string& profile, const isolation::Spec& spec, std::string_view request,
                           bool may_wait, Slot* claimed, std::string* why_not, bool fresh_only) {
  Impl* impl_ = this;
  std::string& out_why = *why_not;
  Pool* p = nullptr;
  for (const auto& pp : impl_->pools) {
    if (pp->profile.name == profile) p = pp.get();
  }
  if (p == nullptr) {
    out_why = "profile has no warm pool";
    return false;
  }
  if (spec.limits.disk_bytes != p->profile.limits.disk_bytes || spec.limits.open_files != p->profile.limits.open_files) {
    out_why = "the request's disk limit differs from the warm runs'";
    return false;
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(impl_->mu);
      auto usable = [&] {
        return std::find_if(p->ready.begin(), p->ready.end(),
                            [&](const Slot& s) { return !fresh_only || !s.zygote->retired.load(); });
      };
      // None ready but the zygote is up and making more: a warm run is a few
      // milliseconds away, a cold one tens to hundreds. Wait for it, bounded.
      if (usable() == p->ready.end() && !may_wait) {
        out_why = "no warm run was ready";
        return false;  // the caller may try again where it can wait
      }
      if (usable() == p->ready.end() && p->state.load() == 2 && impl_->options.max_wait_ms > 0) {
        impl_->Wake();
        impl_->ready_cv.wait_for(lock, std::chrono::milliseconds(impl_->options.max_wait_ms), [&] {
          return usable() != p->ready.end() || p->state.load() != 2 || impl_->stop.load();
        });
      }
      auto it = usable();
      if (it == p->ready.end()) {
        if (fresh_only && !p->ready.empty()) out_why = "the ready runs are a replaced zygote's";
        break;
      }
      slot = std::move(*it);
      p->ready.erase(it);
    }
    impl_->Wake();  // refill
    if (Readable(slot.run.pidfd.get())) {  // died while waiting (its zygote, most likely)
      impl_->DiscardLater(std::move(slot));
      continue;
    }
    // The request's limits, the CPU quota last: a run throttled to a small
    // share would read a large request slowly, holding up the caller (the
    // single launcher thread) and every launch behind it. It runs the code
    // only once it has read the whole request, so the quota is in force a
    // write() later; memory and pids are lowered before it can run anything.
    isolation::Limits first = spec.limits;
    first.cpus = p->profile.limits.cpus;
    if (slot.run.cgroup) {
      if (Status s = slot.run.cgroup->ChangeLimits(p->profile.limits, first); !s.ok()) {
        log::Warn("warm pool " + profile + ": " + s.ToString());
        impl_->DiscardLater(std::move(slot));
        continue;
      }
    }
    std::string message(8, '\0');
    uint64_t size = request.size();
    for (int i = 0; i < 8; ++i) message[static_cast<size_t>(i)] = static_cast<char>((size >> (8 * i)) & 0xFF);
    message.append(request);
    size_t sent = 0;
    while (sent < message.size()) {
      ssize_t n = ::send(slot.control.get(), message.data() + sent, message.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    if (sent < message.size()) {
      impl_->DiscardLater(std::move(slot));
      continue;
    }
    if (slot.run.cgroup) {
      if (Status s = slot.run.cgroup->ChangeLimits(first, spec.limits); !s.ok()) {
        log::Warn("warm pool " + profile + ": " + s.ToString());
        impl_->DiscardLater(std::move(slot));  // it has the code: it must not run unrestricted
        continue;
      }
    }
    p->handoffs++;
    slot.zygote->handoffs++;
    *claimed = std::move(slot);
    return true;
  }
  if (out_why.empty()) out_why = "no warm run was ready";
  return false;
}

HandOff WarmPool::TakeRun(const std::string& profile, const isolation::Spec& spec, const RunOptions& options,
                          std::string_view request, bool may_wait) {
  HandOff out;
  Slot slot;
  if (!impl_->Claim(profile, spec, request, may_wait, &slot, &out.why_not)) return out;
  slot.control.reset();
  out.events_read = std::move(slot.events);
  out.execution = Execution::Adopt(std::move(slot.run), spec, options, std::move(slot.zygote));
  return out;
}

SessionHandOff WarmPool::TakeSession(const std::string& profile, const isolation::Spec& spec,
                                     std::string_view request) {
  SessionHandOff out;
  Slot slot;
  // A session lives for hours: from the current zygote only, so that it never
  // keeps a replaced one alive (issue 23.4).
  if (!impl_->Claim(profile, spec, request, /*may_wait=*/true, &slot, &out.why_not, /*fresh_only=*/true)) return out;
  out.run = std::move(slot.run);
  out.events_read = std::move(slot.events);
  out.control = std::move(slot.control);
  out.zygote = std::move(slot.zygote);
  return out;
}

void WarmPool::CountColdFallback(const std::string& profile) {
  for (const auto& p : impl_->pools) {
    if (p->profile.name == profile) p->cold_fallbacks++;
  }
}

std::vector<PoolStatus> WarmPool::Snapshot() const {
  std::vector<PoolStatus> out;
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& p : impl_->pools) {
    PoolStatus s;
    s.profile = p->profile.name;
    s.ready = static_cast<int>(p->ready.size());
    s.target = impl_->options.size;
    int st = p->state.load();
    s.zygote = st == 2 ? "up" : st == 1 ? "starting" : "down";
    s.detail = p->detail;
    s.handoffs = p->handoffs.load();
    s.refills = p->refills.load();
    s.cold_fallbacks = p->cold_fallbacks.load();
    s.restarts = p->restarts.load();
    s.state = p->degraded.empty() ? "ok" : "degraded";
    s.reason = p->degraded;
    s.failures = p->failures;
    s.recycles = p->recycles.load();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace airlock::exec
