// Internal to isolation/: the part of a run's init that serves the control
// channel (init_control.h): it turns the run into a sandbox on the server's
// word, then starts and signals processes in it, as envd does inside an E2B
// VM. Used by init_loop.cc, in both inits (the warm one, a static program of
// its own, and the cold one, a copy of the server).
//
// Each process it starts is a fork of init that, before its execve, puts
// itself under exactly what a run's program gets, by the same code
// (restrict.h): no_new_privs and the lock filter (its listener sent back to
// init, which answers its lock requests as it does the program's), its own
// session, the requested fds and nothing else, the run's rlimits, then the
// lock-down (securebits, bounding set, ambient set, capabilities, Landlock,
// seccomp). It is in every namespace and the cgroup of the run (init's), so
// the sandbox's limits are shared by all its processes, and nothing outlives
// init: when init ends, the kernel ends its pid namespace.
//
// Why a listener per started process, not one for the sandbox: a seccomp
// filter is shared only by the processes that inherit it, and init cannot be
// the one that installs a filter for all of them (it would be under the
// filter itself, and it performs the locks its listener asks for). Each
// process's filter, and so its listener, covers that process and its
// children; init polls every listener, bounded by kMaxStartedProcesses.
//
//   SpawnService svc;
//   InitSpawnService(&svc, control_fd, program, workdir);
//   loop: n = SpawnPollFds(&svc, fds, max); poll(...); SpawnOnPoll(&svc, fds, n);
//         a reaped child: SpawnOnReaped(&svc, pid, status) (the program: SpawnOnProgramExit)
//         SpawnShouldEnd(&svc): end the run
//
// Rules: C and kernel headers only, system calls only; memory for a sandbox
// (buffers, the process table, the lock supervisors) is one anonymous mapping
// made when the first control message arrives, so one-shot runs never map it.
#pragma once

#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "isolation/restrict.h"

namespace airlock::isolation::internal {

struct SpawnArena;
struct LockSupervisor;

struct SpawnService {
  int control = -1;
  bool watch_control = true;  // a one-shot run whose server end closed: no longer polled
  bool sandbox = false;       // kCtlSandbox received: the run outlives its program
  bool end = false;           // the sandbox is over (the server's end closed, lifetime out)
  int64_t end_at_ms = 0;      // CLOCK_MONOTONIC, 0: none
  const char* workdir = nullptr;
  pid_t program = 0;
  LockSupervisor* program_locks = nullptr;  // the program's (init_loop.cc's)
  bool program_exit_unsent = false;  // kCtlProgramExit still to send (the socket was full)
  int32_t program_status = 0;
  RestrictPlan plan;
  SpawnArena* arena = nullptr;
};

// The most fds SpawnPollFds asks for.
constexpr int kSpawnPollMax = 1 + 2 * 64;

void InitSpawnService(SpawnService* svc, int control, pid_t program, const char* workdir,
                      LockSupervisor* program_locks);
// Fills fds with what it wants polled (at most `max`); returns how many.
int SpawnPollFds(SpawnService* svc, struct pollfd* fds, int max);
// After poll(): the same fds, revents set.
void SpawnOnPoll(SpawnService* svc, const struct pollfd* fds, int n);
// Milliseconds until it wants SpawnShouldEnd or a retry again; -1: none.
int SpawnTimeoutMs(const SpawnService& svc);
// A child of init was reaped: true when it was a process the service started
// (its status is then reported on its status pipe).
bool SpawnOnReaped(SpawnService* svc, pid_t pid, int status);
// The run's program ended in a sandbox: reported to the server.
void SpawnOnProgramExit(SpawnService* svc, int status);
// Whether the sandbox must end now.
bool SpawnShouldEnd(SpawnService* svc);

}  // namespace airlock::isolation::internal
