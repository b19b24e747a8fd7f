// Internal to isolation/: the life of a run's init (pid 1 of its pid
// namespace) once its program exists. Used by the cold path's init (a fork of
// the server, contain.cc) and by the warm path's init, a small static program
// of its own (init/main.cc, embedded as init_image.h) that a zygote starts
// for each run instead of a copy of itself (issue 11).
//
// Rules: system calls only, no allocation, nothing from outside this file and
// the lock supervisor (lock_supervisor.cc, record_locks.cc: the init program
// links just these), and C and kernel
// headers only: the init program is built against musl where it is installed
// (src/isolation/CMakeLists.txt says why).
#pragma once

#include <stdint.h>
#include <sys/types.h>

namespace airlock::isolation::internal {

// The kernel's struct rusage as getrusage(2) fills it on 64-bit Linux: two
// timevals, then ru_maxrss ... ru_nivcsw. The status is written by the init
// program, which may be built against musl, and read by the server (glibc):
// musl's struct rusage carries 16 reserved longs more than glibc's, so the wire
// uses the kernel's layout, never a libc's.
struct KernelRusage {
  int64_t utime_sec, utime_usec, stime_sec, stime_usec;
  int64_t rest[14];
};
static_assert(sizeof(KernelRusage) == 144, "the kernel's struct rusage on 64-bit Linux");

// What init writes to its status fd when the program has ended: its wait
// status and the resources used by everything the run reaped (init's
// RUSAGE_CHILDREN).
struct ProgramStatus {
  int32_t wait_status;
  int32_t reserved;
  KernelRusage usage;
};

// Waits for the program (init's child `program`) to end, reaping every orphan
// of the run meanwhile and, when lock_sock >= 0, answering the program's lock
// requests (the listener arrives on lock_sock: lock_supervisor.h). When the
// program has ended: kills and reaps everything else in the pid namespace,
// then writes a ProgramStatus to status_fd and exits 0.
// status_fd is also the run's control channel (init_control.h): once the
// server has made the run a sandbox there, the run ends not with its program
// but when the sandbox does, and init starts processes in it meanwhile.
// join_cgroup_namespace: the warm init, which joins the program's cgroup
// namespace (made once the run is in its cgroup) for the processes it starts;
// the cold init made it before forking the program.
// Exits 127 if it finds no child before the program ended (cannot happen).
[[noreturn]] void RunInitLoop(int status_fd, pid_t program, int lock_sock, const char* workdir,
                              bool join_cgroup_namespace);

}  // namespace airlock::isolation::internal
