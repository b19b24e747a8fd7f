// exec::Execution: one running sandboxed program and its supervision (output
// capture with per-stream caps enforced as bytes arrive, wall-clock and CPU
// deadlines, cgroup events turned into kill reasons).
//
// It owns no thread: a loop feeds it. RunToCompletion() is the simple blocking
// loop (the CLI); a server drives many Executions from one event loop.
//
//   ASSIGN_OR_RETURN(auto ex, Execution::Start(host, spec, options));
//   while (!ex->Exited()) { poll(ex->fds()...); ex->OnReadable(fd); ex->OnTick(); }
//   RunResult r = ex->Finish();
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "exec/run_result.h"
#include "isolation/sandbox.h"

namespace airlock::exec {

enum class Stream { kStdout = 1, kStderr = 2 };

struct RunOptions {
  double timeout_s = 10.0;            // wall clock, from the start of the launch
  int64_t output_cap = 1 << 20;       // bytes kept per stream
  // Called with each piece of kept output as it arrives (may be empty-handed if unset).
  std::function<void(Stream, std::string_view)> on_output;
  // RunToCompletion and service::Service::Supervise only: when this fd becomes
  // readable (a signalfd, say), the run is killed with kill_reason
  // "cancelled". -1: none.
  int cancel_fd = -1;
};

// Shared by the warm pool and the runs one zygote made (the pool counts the
// runs still going by its use count). A zygote's runs die with it.
struct ZygoteLife {
  UniqueFd pidfd;  // the zygote process itself (readable once it has exited)
  pid_t pid = -1;  // the same, in the server's pid namespace
  // Replaced by a newer zygote (recycled, or built from files the host has
  // replaced since): it lives on only for the runs it made (sessions, mostly),
  // and costs its own memory until they end.
  std::atomic<bool> retired{false};
  // Its private memory (RssAnon of /proc/PID/status, bytes): what it costs
  // beyond the page cache it shares with its successor. 0 once it is gone.
  int64_t PrivateMemoryBytes() const;
  // Whether the zygote has exited, waiting up to wait_ms for it to be so.
  bool Died(int wait_ms) const;
  // The same, or it is exiting now: its runs die in its exit, before its pidfd
  // is readable (tearing a large zygote down takes a while, much longer under
  // ASan).
  bool DiedOrDying(int wait_ms) const;
};

class Execution {
 public:
  static StatusOr<std::unique_ptr<Execution>> Start(const isolation::HostSetup& host, const isolation::Spec& spec,
                                                    RunOptions options);
  // A run that already exists (a warm pool's hand-off): `run` is adopted
  // (run.adopted), spec gives the limits it was handed with (for kill
  // details), the clocks start now. `zygote`, when set, is kept until Finish
  // and turns an unexplained death into kill_reason "lost".
  static std::unique_ptr<Execution> Adopt(isolation::Launched run, const isolation::Spec& spec, RunOptions options,
                                          std::shared_ptr<const ZygoteLife> zygote);
  ~Execution();

  // The fds to wait on for readability: stdout, stderr and the "pidfd": the
  // run's end (its init's pidfd; for an adopted run, the status pipe, readable
  // once init reported or died). -1 for streams already at EOF.
  int stdout_fd() const;
  int stderr_fd() const;
  int pidfd() const;

  void OnReadable(int fd);
  // Checks deadlines and cgroup events; returns milliseconds until it wants to be
  // called again.
  int OnTick();
  // Kills the run now (client gone, server draining); the result says so.
  void Cancel(KillReason reason, std::string detail);
  bool Exited() const { return exited_; }
  // A warm pool's run: Finish() does not block (no wait4).
  bool adopted() const { return run_.adopted; }
  // Reaps and drains what is left of the output. The run's cgroup is removed
  // when the Execution is destroyed (a server does that after replying).
  RunResult Finish();
  // Whether FinishOnEnd may be called: an adopted run, still going for all we
  // know, not being killed, stdout and stderr at end of file, and nothing of
  // it left but its init and the program: no other task in its cgroup
  // (pids.current <= 2: a child, a thread or a zombie not yet reaped counts)
  // and no child of init but the program (orphans). Otherwise the run ends on
  // its init's report, after init has killed and reaped the rest, so that no
  // process of the run outlives the answer (children killed when the program
  // exits close its stdout before they are reaped).
  bool CanFinishOnEnd() const;
  // When CanFinishOnEnd() and the program said it ended (the runner's end
  // event, model::ParseProgramEnd, with the channel at end of file too): the
  // result now, without waiting for the program's teardown (milliseconds for a
  // fork of a numpy-sized interpreter) and its init's report. What is left of
  // the run is killed when the Execution is destroyed (a server does that
  // after replying). The exit code is the program's word for it: a program
  // can only misreport its own run.
  RunResult FinishOnEnd(int exit_code, int64_t max_rss_kb);

 private:
  Execution() = default;
  // final: the run is gone; an empty pipe means end of stream.
  void ReadStream(Stream s, bool final);
  void Kill(KillReason reason, std::string detail);
  // What Finish and FinishOnEnd share once the program's end is known.
  RunResult Conclude(const isolation::ExitInfo& e, const isolation::CgroupStats& st);

  isolation::Launched run_;
  isolation::Spec spec_;
  std::shared_ptr<const ZygoteLife> zygote_;
  uint64_t cpu_baseline_ns_ = 0;  // CPU the cgroup had used before the hand-off
  RunOptions options_;
  Clock::time_point start_, deadline_, next_stats_;
  bool exited_ = false;
  bool out_eof_ = false, err_eof_ = false;
  RunResult result_;
  bool finished_ = false;
  bool finished_on_end_ = false;  // the run may still be there: kill it at the end
};

// Runs one program to its end (blocking) and returns its result.
StatusOr<RunResult> RunToCompletion(const isolation::HostSetup& host, const isolation::Spec& spec,
                                    RunOptions options);

}  // namespace airlock::exec
