// airlock-init: pid 1 of a warm run (isolation/init_loop.h). A zygote starts
// one per run with execveat() from a memfd of this program (embedded in the
// airlock binary: isolation/init_image.h) instead of keeping a copy of its own
// address space as the run's init (issue 11). Not meant for people.
//
//   environment: AIRLOCK_INIT_PROGRAM=PID (the program, our child)
//                AIRLOCK_INIT_WORKDIR=PATH (the run's working directory)
//   fd 3: the run's status socket, where the program's ProgramStatus goes,
//   also its control channel should the run become a sandbox
//   (init_control.h); fd 4 (optional): the socket the program sends its lock
//   filter's listener on (lock_supervisor.h).
//   argv: one empty string (the run can read /proc/1/cmdline, not environ).
//
// Static, and only init_loop.cc, the lock supervisor, the spawn service and
// the restrictions it applies (CMakeLists.txt): its start costs an
// execve of a small file, no dynamic loader. Built against musl where it is
// installed, whose start-up, unlike glibc's, runs no CPUID (a trap to the
// hypervisor on a VM): src/isolation/CMakeLists.txt.
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "isolation/init_loop.h"

namespace {

const char* Env(char** envp, const char* name) {
  const size_t n = strlen(name);
  for (char** e = envp; *e != nullptr; ++e) {
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return nullptr;
}

}  // namespace

int main(int, char**, char** envp) {
  // /proc/1 of the run stays unreadable to the program (and not traceable).
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  const char* pid_text = Env(envp, "AIRLOCK_INIT_PROGRAM");
  const char* workdir = Env(envp, "AIRLOCK_INIT_WORKDIR");
  if (pid_text == nullptr || workdir == nullptr || *pid_text == '\0') return 2;
  long program = 0;
  for (const char* p = pid_text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9' || program > 1000000000L) return 2;
    program = program * 10 + (*p - '0');
  }
  if (program <= 1) return 2;
  const int lock_sock = ::fcntl(4, F_GETFD) >= 0 ? 4 : -1;
  airlock::isolation::internal::RunInitLoop(3, static_cast<pid_t>(program), lock_sock, workdir,
                                            /*join_cgroup_namespace=*/true);
}
