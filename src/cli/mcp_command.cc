// `airlock mcp`: an MCP server over stdio (docs/agents.md). The agent host
// starts it as a subprocess; stdout carries protocol messages only, every log
// line goes to stderr.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "base/log.h"
#include "base/unique_fd.h"
#include "cli/commands.h"
#include "cli/runtime_setup.h"
#include "mcp/mcp_server.h"
#include "mcp/stdio_transport.h"
#include "session/session_manager.h"

namespace airlock::cli {

int McpCommand(const McpFlags& flags) {
  ::signal(SIGPIPE, SIG_IGN);
  if (const char* level = std::getenv("AIRLOCK_LOG"); level && std::string(level) == "debug") {
    log::SetLevel(log::Level::kDebug);
  }
  // SIGTERM/SIGINT end the loop between messages (a call in progress finishes).
  sigset_t stop;
  ::sigemptyset(&stop);
  ::sigaddset(&stop, SIGTERM);
  ::sigaddset(&stop, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  UniqueFd stop_fd(::signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK));

  RuntimeFlags rf;
  rf.profiles_dir = flags.profiles_dir;
  rf.default_profile = flags.default_profile;
  rf.allow_degraded = flags.allow_degraded;
  rf.uid_range = flags.uid_range;
  rf.pool_size = flags.pool_size;
  int exit_code = 0;
  std::unique_ptr<Runtime> rt = BuildRuntime(rf, &exit_code);
  if (!rt) return exit_code;

  // Optionally let the zygotes come up first, so that the first calls are
  // warm (a cold matplotlib figure builds its font list: seconds).
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(flags.wait_ready_s);
       std::chrono::steady_clock::now() < deadline;) {
    bool all = true;
    for (const model::PoolView& p : rt->service->Pools()) all = all && (p.ready > 0 || p.zygote == "down");
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Sessions (create_session, execute_python with session_id, files): the
  // same manager `airlock serve` builds, with its default caps and lifetimes.
  // Destroyed before the runtime: it ends every session it still holds.
  session::SessionManager sessions(*rt->service, session::SessionOptions());
  mcp::McpOptions options;
  options.version = AIRLOCK_VERSION;
  mcp::McpServer server(*rt->service, &sessions, options);
  log::Info("mcp: serving on stdio");
  Status st = mcp::ServeStdio(server, STDIN_FILENO, STDOUT_FILENO, stop_fd.get());
  if (!st.ok()) {
    std::cerr << "airlock: mcp: " << st.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace airlock::cli
