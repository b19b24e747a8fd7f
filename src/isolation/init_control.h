// Internal to isolation/: the control channel between the server and a run's
// init, and its messages. The channel is the run's status socket (a
// SOCK_SEQPACKET pair made where the run is made: sandbox.cc for a cold run,
// the zygote for a warm one), init's end its fd 3 (the warm init) or
// plan.status_w (the cold init). Nothing else holds init's end: the program
// closes it before any user code, and so does every process init starts.
//
// A one-shot run uses it as before: init writes one ProgramStatus
// (init_loop.h) when the run ends, the server writes nothing. One-shot runs
// pay nothing for the rest (init only polls the socket).
//
// A sandbox (a session): the server sends kCtlSandbox once, with the
// restrictions every process init starts gets (restrict.h, serialized) and the
// sandbox's lifetime. From then on the run no longer ends with its program:
// init reports the program's end (kCtlProgramExit) and goes on, starting
// processes (kCtlStart) and signalling them (kCtlSignal) on request, each
// answered by a kCtlReply with the request's seq, until the server closes its
// end of the socket, the lifetime is over or init is killed; then it kills and
// reaps everything in the run and writes the final ProgramStatus, as a
// one-shot run's init does.
//
// Every message starts with a ControlHeader, except the final ProgramStatus,
// which the server tells apart by its size (sizeof(ProgramStatus); no other
// message of init's has it).
//
// C and kernel headers only: the init program is built against musl.
#pragma once

#include <stdint.h>

#include "isolation/init_loop.h"

namespace airlock::isolation::internal {

constexpr uint32_t kControlMagic = 0x54434c41;  // "ALCT"

enum ControlType : uint32_t {
  kCtlSandbox = 1,          // server -> init: SandboxRequest, then the plan's bytes
  kCtlStart = 2,            // server -> init: StartRequest, then its strings; fds (SCM_RIGHTS)
  kCtlSignal = 3,           // server -> init: SignalRequest
  kCtlReply = 0x100,        // init -> server: Reply to the request with the same seq
  kCtlProgramExit = 0x101,  // init -> server: ProgramExit (a sandbox only; seq 0)
};

struct ControlHeader {
  uint32_t magic;  // kControlMagic
  uint32_t type;   // ControlType
  uint32_t seq;    // the server's request number, echoed in the reply
  uint32_t size;   // the whole message, header included
};

struct SandboxRequest {
  ControlHeader h;
  uint64_t lifetime_ms;  // from receipt; 0: until the server ends it
  uint32_t plan_size;    // the serialized RestrictPlan that follows
  uint32_t reserved;
};

// Start one process. The strings follow: cwd, then argc arguments, then envc
// "KEY=value" entries, each NUL-terminated (strings_size bytes in all). The
// fds, in this order: the process's status pipe (init writes its
// ProcessStatus there when it ends, then closes it), stdin (unless
// kStartStdinNull), stdout, stderr, then n_extra fds that become fds 3, 4, ...
struct StartRequest {
  ControlHeader h;
  uint32_t flags;
  uint32_t n_extra;
  uint32_t argc;
  uint32_t envc;
  uint32_t strings_size;
  uint32_t reserved;
};
constexpr uint32_t kStartStdinNull = 1u << 0;  // stdin is /dev/null (no fd sent for it)

struct SignalRequest {
  ControlHeader h;
  int32_t pid;    // as init sees it: a process it started and has not reaped
  int32_t sig;
  uint32_t flags;
  uint32_t reserved;
};
constexpr uint32_t kSignalGroup = 1u << 0;  // the process's group (it leads one: setsid)

struct Reply {
  ControlHeader h;
  int32_t result;  // kCtlStart: the pid; else 0
  int32_t err;     // 0, or the errno of what failed
  int32_t step;    // kCtlStart: the setup step that failed (steps.h); else 0
  int32_t reserved;
};

struct ProgramExit {
  ControlHeader h;
  int32_t pid;
  int32_t wait_status;
};

// What init writes on a started process's status pipe when it has reaped it.
struct ProcessStatus {
  int32_t wait_status;
  int32_t reserved;
};

// Bounds init holds to; the server refuses more before asking.
constexpr uint32_t kMaxStartStrings = 128u << 10;  // bytes of cwd, argv and env
constexpr uint32_t kMaxStartArgs = 4096;           // argc + envc
constexpr uint32_t kMaxExtraFds = 4;
constexpr uint32_t kMaxPlanBytes = 32u << 10;
constexpr int kMaxStartedProcesses = 64;           // started and not yet reaped, at once

static_assert(sizeof(Reply) != sizeof(ProgramStatus) && sizeof(ProgramExit) != sizeof(ProgramStatus),
              "the server tells the final status apart by its size");

}  // namespace airlock::isolation::internal
