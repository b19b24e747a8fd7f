// exec::WarmPool: the server's side of the warm path (DESIGN §3). Per profile
// it runs one zygote (zygote_main.h: our own binary, exec'd fresh with a clean
// environment inside a base sandbox, CPython embedded, the profile's modules
// imported) and keeps `size` runs forked ahead of demand: each is already in
// its own namespaces and cgroup with every layer in force, waiting for code.
// A request's critical path is then a hand-off: adjust the cgroup limits,
// write the code, adopt the run (Execution::Adopt).
//
//   ASSIGN_OR_RETURN(auto pool, WarmPool::Start(host, options));  // its own thread
//   HandOff h = pool->TakeRun("data-science", spec, run_options, request_json);
//   if (!h.execution) { ... cold path, h.why_not says why ... }
//
// Robustness: a zygote that dies is restarted with a backoff (its runs in
// flight end with kill_reason "lost"); one is replaced after `recycle_after`
// hand-offs or `recycle_after_s` seconds (a fork server's runs share its
// memory layout and secrets: docs/security.md) once its runs have ended; a
// ready run that died is skipped; one whose new runs fail their setup (e.g. a
// bind source the host replaced since it started) is replaced, with a
// backoff, its ready runs still used. Until a run is ready again the pool says
// "degraded" and why (Snapshot()). The
// thread that calls Start() must outlive the pool (the zygotes die with it:
// PR_SET_PDEATHSIG).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "exec/execution.h"
#include "isolation/sandbox.h"
#include "isolation/spec.h"

namespace airlock::exec {

struct PoolProfile {
  std::string name;
  std::vector<std::string> preimport;
  // Every ready run is made with these (the profile's ceilings); a request may
  // lower memory, pids and cpus (rewritten in its cgroup at hand-off) and the
  // CPU time (watched by Execution); a different disk size goes cold.
  isolation::Limits limits;
};

struct PoolOptions {
  std::vector<PoolProfile> profiles;
  int size = 4;                // runs kept ready per profile
  // When none is ready but the zygote is making more, a request waits this
  // long for one before it takes the cold path; 0: never waits.
  int max_wait_ms = 1000;
  int64_t recycle_after = 0;   // hand-offs after which a zygote is replaced; 0: never
  double recycle_after_s = 0;  // seconds (from when it came up) after which a zygote is replaced; 0: never
  std::vector<std::string> zygote_env;  // the zygote's whole environment ("K=V")
  isolation::Limits zygote_limits;      // the zygote's own cgroup and rlimits (runs stay below)
  double startup_timeout_s = 120;       // imports of a cold disk cache can be slow
  // Extra host paths bound read-only into the zygotes and their runs (tests).
  std::vector<std::string> ro_binds;
  // Every warm run in a network namespace of its own, even where runs could
  // share their zygote's (isolation::WarmRunsCanShareNetwork): --netns-per-run.
  bool network_per_run = false;
  // The airlock binary that has the zygote (`airlock __zygote`); "" = this process's own.
  std::string zygote_binary;
};

struct PoolStatus {
  std::string profile;
  int ready = 0;
  int target = 0;
  std::string zygote;  // "up", "starting", "down"
  std::string detail;  // why down, import failures
  uint64_t handoffs = 0, refills = 0, cold_fallbacks = 0, restarts = 0;
  // "degraded" from a failure to make a ready run (start a zygote, set up a
  // run) until the next run is ready; "ok" otherwise. `reason` is one of
  // zygote_start, zygote_died, run_setup, run_prepare, run_timeout.
  std::string state = "ok";
  std::string reason;
  std::map<std::string, uint64_t> failures;  // reason -> count, since start
  uint64_t recycles = 0;  // zygotes replaced on purpose (run count or age)
};

struct HandOff {
  std::unique_ptr<Execution> execution;  // null: take the cold path
  UniqueFd events_read;                   // the run's result channel (non-blocking)
  std::string why_not;                    // when execution is null
};

// A ready run handed over for good: a session (src/session) drives it itself.
struct SessionHandOff {
  isolation::Launched run;                // its init's pidfd empty: none was ready (why_not)
  UniqueFd events_read;                   // the result channel (non-blocking)
  UniqueFd control;                       // the run's control socket (calls, interrupts)
  std::shared_ptr<const ZygoteLife> zygote;
  std::string why_not;
  bool ok() const { return static_cast<bool>(run.pidfd); }
};

class WarmPool {
 public:
  static StatusOr<std::unique_ptr<WarmPool>> Start(const isolation::HostSetup& host, PoolOptions options);
  ~WarmPool();  // stops the thread, kills the zygotes and every ready run

  // Thread-safe and fast (no fork): a ready run of `profile`, given `request`
  // (the runner's config JSON with the code inline), with spec.limits applied.
  // Writing a request larger than a socket buffer (~200 KiB) blocks until the
  // run has read it (bounded: 2 s).
  // may_wait: when none is ready, wait up to PoolOptions::max_wait_ms for one
  // (false: return at once; for an event loop's thread).
  HandOff TakeRun(const std::string& profile, const isolation::Spec& spec, const RunOptions& options,
                  std::string_view request, bool may_wait = true);
  // The same hand-off (waiting as TakeRun does), but the run and its control
  // socket are the caller's from now on: a session's first request ("session":
  // true) makes the run serve calls on that socket (airlock_runner.py). Only a
  // run of the profile's current zygote: a session never keeps a replaced
  // (retired) zygote alive from its start.
  SessionHandOff TakeSession(const std::string& profile, const isolation::Spec& spec, std::string_view request);
  // The caller took the cold path for a run of `profile` after all (counted
  // in /metrics); a hand-off that is tried again later is not a fallback yet.
  void CountColdFallback(const std::string& profile);
  // Whether `profile` has a pool at all (a profile without one always runs cold).
  bool Serves(const std::string& profile) const;
  std::vector<PoolStatus> Snapshot() const;

  struct Impl;

 private:
  explicit WarmPool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace airlock::exec
