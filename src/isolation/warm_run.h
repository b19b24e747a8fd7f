// Runs created from inside a warm pool's zygote (DESIGN §3). The zygote is a
// single-threaded process that already holds a warm interpreter. For each run
// it starts the run's first process in new user, pid, mount, ipc and uts
// namespaces (mapped to the run's own host id) and a network namespace of its
// own, or the zygote's where runs may share it (WarmRunsCanShareNetwork), with
// CLONE_VM | CLONE_VFORK: that process forks the program (the run's one copy
// of the zygote, taken while the zygote waits) and then becomes the run's
// init by executing the small init program (init_loop.h, init_image.h), so
// that a run holds one copy of the interpreter, not two (issue 11). The
// program waits for the server to put the run in its cgroup, builds the run's
// filesystem and applies every layer a cold run gets (sandbox.h) before it
// calls back into the zygote's code to run the user's cell.
//
//   In the zygote, once:
//     ASSIGN_OR_RETURN(auto factory, WarmRunFactory::Create(spec, LandlockAbi(), share_network));
//   Per run:
//     WarmRunFactory::Fds fds{control, status_w, stdout_w, stderr_w, events_w};
//     ASSIGN_OR_RETURN(pid_t init, factory->Clone(fds, &ProgramMain, arg));
//     // in the run's program, restricted: ProgramMain(arg, control) (never returns)
//
// The handshake on the control socket (a SOCK_STREAM pair; the other end goes
// to the server): the server writes kWarmGo once the run's init and program
// are in its cgroup; the program writes kWarmReady (WarmRunReady) once every
// layer is in force and it is ready for the request, or a setup failure
// (DescribeWarmSetupFailure() reads it).
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "isolation/seccomp_policy.h"
#include "isolation/spec.h"

namespace airlock::isolation {

inline constexpr char kWarmGo = 'g';
inline constexpr char kWarmReady = 'R';
// Bytes of a setup failure on the control socket (its first byte is never kWarmReady).
size_t WarmSetupFailureSize();
// "sandbox setup failed at step 'mount' (errno ...)" from those bytes.
Status DescribeWarmSetupFailure(const char* bytes, size_t size);

// In a warm run's program: tells the server it may send the request (exits on failure).
void WarmRunReady(int control);

namespace internal {
struct ChildPlan;
}

// Whether the runs of one zygote may share its network namespace instead of
// each making its own (issue 11; docs/security.md, "Shared network namespace").
// Only where nothing in it is reachable from a run: the zygote's namespace has
// no interface but a down loopback and a run holds no capability over it;
// seccomp lets a run make AF_UNIX sockets alone (always, every profile); path
// sockets live in the run's own tmpfs and mount namespace; and Landlock scopes
// (ABI >= 6) refuse a run abstract unix sockets and signals of anything outside
// its own domain. Without those scopes every run keeps a namespace of its own.
bool WarmRunsCanShareNetwork(int landlock_abi);

class WarmRunFactory {
 public:
  // Plans the run's filesystem from the calling process's own root, plus
  // Landlock, seccomp and rlimits (cgroup present: the server adds it).
  // spec.argv/env/files are unused: a warm run never execs.
  // share_network: runs stay in the caller's network namespace (which must be
  // one made for the zygote, not the host's); refused unless
  // WarmRunsCanShareNetwork(landlock_abi).
  static StatusOr<std::unique_ptr<WarmRunFactory>> Create(const Spec& spec, int landlock_abi,
                                                          bool share_network = false);
  ~WarmRunFactory();

  struct Fds {
    int control = -1;   // the run's end of the control socket
    int status_w = -1;  // init writes the program's status here
    int stdout_w = -1, stderr_w = -1;
    int events_w = -1;  // the result channel: fd 3 of the program
  };

  // The run's program, every layer in force, fds 0-3 in place: control is the
  // control socket (moved to a high number). Must not return (it _exit()s).
  using ProgramMain = void (*)(void* arg, int control);

  // Starts one run. In the calling process: the run's init pid (the caller
  // closes its copies of fds and reaps the init). The program calls
  // WarmRunReady(control) when it can take the request. The caller must be
  // single-threaded.
  // host_id >= 0: the run's own host id (host_ids.h), mapped as itself in the
  // caller's user namespace, which must hold CAP_SETUID and CAP_SETGID there:
  // the run's user namespace is created and owned by that id (so every
  // per-user count the kernel keeps per namespace level is per run) and its
  // uid/gid 1000 is that id. -1: the caller's own ids, as before.
  StatusOr<pid_t> Clone(const Fds& fds, ProgramMain program_main, void* arg, int64_t host_id = -1);

  const Spec& spec() const { return spec_; }
  bool shares_network() const { return (clone_flags_ & CLONE_NEWNET) == 0; }

 private:
  WarmRunFactory() = default;
  Spec spec_;
  int clone_flags_ = 0;
  SeccompProgram seccomp_;
  std::unique_ptr<internal::ChildPlan> plan_;
  UniqueFd init_fd_;              // a sealed memfd of the init program
  char* stack_ = nullptr;         // the first process's stack, and so the program's
  size_t stack_bytes_ = 0;        // mapped, guard page included
};

}  // namespace airlock::isolation
