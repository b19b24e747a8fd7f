// airlock: run untrusted code in a kernel sandbox. Subcommands: run, check.
#include <CLI/CLI.hpp>

#include <cstring>

#include "cli/commands.h"
#include "exec/zygote_main.h"
#include "service/embedded_runner.h"

namespace {
constexpr const char* kUidRangeHelp =
    "Host ids reserved for runs, START:COUNT: each run's uid and gid is one of its own (root only; default "
    "1879048192:65536, systemd's unused range; airlock processes sharing it take blocks of 1024)";
}  // namespace

int main(int argc, char** argv) {
  // The warm pool's zygote (exec/zygote_main.h): started by `serve` itself,
  // not a command for people, so not listed in --help.
  if (argc >= 2 && std::strcmp(argv[1], airlock::exec::kZygoteSubcommand) == 0) {
    return airlock::exec::ZygoteMain(argc, argv, airlock::service::EmbeddedRunner(),
                                     airlock::service::EmbeddedRunnerHelpers());
  }
  CLI::App app{"airlock: runs untrusted (LLM-written) code in a kernel sandbox"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "airlock 0.1.0");

  airlock::cli::RunFlags run;
  CLI::App* run_cmd = app.add_subcommand("run", "Run one Python program in a fresh sandbox; exit with its exit code");
  run_cmd->add_option("file", run.file, "Python file to run, or - for standard input")->required();
  run_cmd->add_option("--timeout", run.timeout_s, "Wall-clock limit in seconds")->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  run_cmd->add_option("--cpu-time", run.cpu_time_s, "CPU time limit in seconds across all processes (0: none)")
      ->check(CLI::Range(0.0, 86400.0));
  run_cmd->add_option("--memory", run.memory, "Memory limit (e.g. 256M, 1G)")->capture_default_str();
  run_cmd->add_option("--pids", run.pids, "Maximum number of processes and threads")->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  run_cmd->add_option("--disk", run.disk, "Size of the writable working directory")->capture_default_str();
  run_cmd->add_option("--output", run.output, "Bytes kept per output stream")->capture_default_str();
  run_cmd->add_option("--cpus", run.cpus, "CPU bandwidth in cores")->capture_default_str()
      ->check(CLI::Range(0.01, 1024.0));
  run_cmd->add_option("--uid-range", run.uid_range, kUidRangeHelp);
  run_cmd->add_flag("--json", run.json, "Print one JSON run result instead of the program's output");
  run_cmd->add_option("--allow-degraded", run.allow_degraded,
                      "Layers this host may lack: cgroup, landlock (default: none, fail closed)")
      ->delimiter(',');
  run_cmd->add_option("--profile", run.profile,
                      "Run through this profile, as POST /v1/execute does: its analyzer, runner, languages and "
                      "limits (the limit flags given ask for less; default with --language or --input: general)");
  run_cmd->add_option("--language", run.language, "python, javascript or bash (through a profile that allows it)");
  run_cmd->add_option("--input", run.inputs,
                      "LOCAL[=NAME]: a file put in the run's working directory (as NAME, default its base name); "
                      "repeatable; runs through a profile");
  run_cmd->add_option("--profiles", run.profiles_dir, "Directory of profile YAML files (with --profile)");

  airlock::cli::CheckFlags check;
  CLI::App* check_cmd = app.add_subcommand("check", "Probe which isolation layers this host supports");
  check_cmd->add_option("--allow-degraded", check.allow_degraded, "Layers that may be missing: cgroup, landlock")
      ->delimiter(',');
  check_cmd->add_option("--uid-range", check.uid_range, kUidRangeHelp);
  check_cmd->add_flag("--json", check.json, "Print the probe as JSON");

  airlock::cli::ServeFlags serve;
  CLI::App* serve_cmd = app.add_subcommand("serve", "Serve the HTTP API (docs/api.md)");
  serve_cmd->add_option("--listen", serve.listen, "Address and port (port 0: any free port)")->capture_default_str();
  serve_cmd->add_option("--profiles", serve.profiles_dir, "Directory of profile YAML files");
  serve_cmd->add_option("--default-profile", serve.default_profile,
                        "Profile of requests that name none, at every door (default: minimal for /execute, "
                        "general for /v1, /mcp and the E2B listener)");
  serve_cmd->add_option("--execute-profile", serve.execute_profile,
                        "Profile of POST /execute requests that name none (default: --default-profile, else minimal)");
  serve_cmd->add_option("--api-profile", serve.api_profile,
                        "Profile of /v1/execute requests and /v1/sessions that name none (default: "
                        "--default-profile, else general)");
  serve_cmd->add_option("--mcp-profile", serve.mcp_profile,
                        "Profile of /mcp calls that name none (default: --default-profile, else general)");
  serve_cmd->add_option("--tokens-file", serve.tokens_file, "File of bearer tokens, one 'name:token' a line");
  serve_cmd->add_flag("--insecure", serve.insecure, "Allow a non-loopback address without tokens");
  serve_cmd->add_option("--allowed-host", serve.allowed_hosts,
                        "A Host name (or address) clients may use besides loopback and the listen address; "
                        "repeatable; '*' allows any (behind a proxy that checks it)");
  serve_cmd->add_option("--allowed-origin", serve.allowed_origins,
                        "A web origin (scheme://host[:port]) whose pages may call this server; repeatable");
  serve_cmd->add_option("--audit-log", serve.audit_log, "Audit records: a file, - for stdout, '' for none")
      ->capture_default_str();
  serve_cmd->add_option("--max-concurrent", serve.max_concurrent, "Runs at once")->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  serve_cmd->add_option("--max-queue", serve.max_queue, "Requests waiting for a run slot (then 429)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{100000}));
  serve_cmd->add_option("--max-pending-approvals", serve.max_pending_approvals,
                        "Requests held for a person's approval at once (then 429)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{100000}));
  serve_cmd->add_option("--max-body", serve.max_body, "Largest request body (then 413)")->capture_default_str();
  serve_cmd->add_option("--max-code", serve.max_code, "Largest `code` (then 413)")->capture_default_str();
  serve_cmd->add_option("--drain-grace", serve.drain_grace_s, "Seconds runs may go on after SIGTERM")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  serve_cmd->add_option("--stream-keepalive", serve.stream_keepalive_s,
                        "Streamed responses: seconds without an event before a keepalive event")
      ->capture_default_str()->check(CLI::Range(0.05, 3600.0));
  serve_cmd->add_option("--stream-buffer", serve.stream_buffer,
                        "Streamed responses: output bytes one connection may have waiting to be sent "
                        "(past it output events are dropped; the final event has all of it)")
      ->capture_default_str();
  serve_cmd->add_option("--allow-degraded", serve.allow_degraded, "Layers that may be missing: cgroup, landlock")
      ->delimiter(',');
  serve_cmd->add_option("--uid-range", serve.uid_range, kUidRangeHelp);
  serve_cmd->add_option("--pool-size", serve.pool_size,
                        "Warm runs kept ready per profile (a zygote per profile forks them); 0: every run cold, and "
                        "every session a cold run of its own (same layers, slower to start)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{256}));
  serve_cmd->add_option("--pool-recycle", serve.pool_recycle, "Runs after which a zygote is replaced (0: never)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  serve_cmd->add_option("--pool-recycle-seconds", serve.pool_recycle_s,
                        "Seconds after which a zygote is replaced (0: never); its runs share its memory layout")
      ->capture_default_str()->check(CLI::Range(0.0, 1e9));
  serve_cmd->add_flag("--netns-per-run", serve.netns_per_run,
                      "A network namespace per warm run; by default the runs of a zygote share its own (empty) one "
                      "where Landlock scopes make that safe (docs/security.md)");

  serve_cmd->add_option("--max-sessions", serve.max_sessions, "Live sessions at once (then 429)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{100000}));
  serve_cmd->add_option("--session-memory", serve.session_memory,
                        "Sum of the live sessions' memory limits and of the replaced zygotes they keep alive (then 429)")
      ->capture_default_str();
  serve_cmd->add_option("--max-retired-zygotes", serve.max_retired_zygotes,
                        "Replaced zygotes that live sessions may keep alive; at it, new sessions get 429 until older "
                        "ones end or restart (-1: no cap)")
      ->capture_default_str()->check(CLI::Range(-1, 1000000));
  serve_cmd->add_option("--session-idle-timeout", serve.session_idle_timeout_s,
                        "Seconds a session may sit idle (default; a request may ask for up to the max)")
      ->capture_default_str()->check(CLI::Range(1.0, 366.0 * 86400));
  serve_cmd->add_option("--session-max-idle-timeout", serve.session_max_idle_timeout_s,
                        "Largest idle_timeout a session may ask for")
      ->capture_default_str()->check(CLI::Range(1.0, 366.0 * 86400));
  serve_cmd->add_option("--session-ttl", serve.session_ttl_s, "Seconds a session lives at most (default)")
      ->capture_default_str()->check(CLI::Range(1.0, 366.0 * 86400));
  serve_cmd->add_option("--session-max-ttl", serve.session_max_ttl_s, "Largest ttl a session may ask for")
      ->capture_default_str()->check(CLI::Range(1.0, 366.0 * 86400));
  serve_cmd->add_option("--session-interrupt-grace", serve.session_interrupt_grace_s,
                        "Seconds a timed-out call has to stop after its KeyboardInterrupt before its session is killed")
      ->capture_default_str()->check(CLI::Range(0.1, 600.0));
  serve_cmd->add_option("--max-file", serve.max_file, "Largest session file upload or download (then 413)")
      ->capture_default_str();
  // Quotas and budgets (docs/api.md, "Quotas"): past any, 429 naming it. The
  // per-owner ones apply when tokens are configured.
  serve_cmd->add_option("--max-connections", serve.max_connections,
                        "Open connections (past it the oldest waiting one is closed; with none waiting, refused)")
      ->capture_default_str()->check(CLI::Range(int64_t{16}, int64_t{1} << 20));
  serve_cmd->add_option("--max-connections-per-address", serve.max_connections_per_address,
                        "Connections one client address may keep waiting (a header not complete, or idle)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  serve_cmd->add_option("--max-sessions-per-owner", serve.max_sessions_per_owner,
                        "Live sessions of one token (0: half of --max-sessions)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{100000}));
  serve_cmd->add_option("--max-mcp-sessions", serve.max_mcp_sessions, "MCP sessions open at once (then 429)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{100000}));
  serve_cmd->add_option("--max-mcp-sessions-per-owner", serve.max_mcp_sessions_per_owner,
                        "MCP sessions of one token (0: a quarter of --max-mcp-sessions)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{100000}));
  serve_cmd->add_option("--max-pending-approvals-per-owner", serve.max_pending_approvals_per_owner,
                        "Requests one token may have held for approval (0: half of --max-pending-approvals)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{100000}));
  serve_cmd->add_option("--max-uploads-per-owner", serve.max_uploads_per_owner,
                        "File uploads of one token under way at once")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{10000}));
  serve_cmd->add_option("--max-body-buffer", serve.max_body_buffer,
                        "Bytes of request bodies the server holds at once, server-wide (then 429; default 64M, or "
                        "4 x --max-body when that is more)");
  serve_cmd->add_option("--max-body-buffer-per-owner", serve.max_body_buffer_per_owner,
                        "Bytes of request bodies one token may have held at once (then 429; default 16M, or "
                        "--max-body when that is more)");
  serve_cmd->add_flag("--e2b", serve.e2b,
                      "Also serve the E2B SDKs' debug-mode API on localhost:49999 (code interpreter) and :49983 (envd)");
  serve_cmd->add_option("--e2b-listen", serve.e2b_listen,
                        "The E2B listener's address, HOST or HOST:CODE_PORT,ENVD_PORT (implies --e2b; default "
                        "localhost:49999,49983)");
  serve_cmd->add_option("--e2b-profile", serve.e2b_profile,
                        "Profile of E2B contexts (default: --default-profile, else general)");

  airlock::cli::McpFlags mcp;
  CLI::App* mcp_cmd = app.add_subcommand("mcp", "Serve MCP over stdio (for an agent host; docs/agents.md)");
  mcp_cmd->add_option("--profiles", mcp.profiles_dir, "Directory of profile YAML files");
  mcp_cmd->add_option("--default-profile", mcp.default_profile, "Profile of calls that name none (default: general)");
  mcp_cmd->add_option("--allow-degraded", mcp.allow_degraded, "Layers that may be missing: cgroup, landlock")
      ->delimiter(',');
  mcp_cmd->add_option("--uid-range", mcp.uid_range, kUidRangeHelp);
  mcp_cmd->add_option("--pool-size", mcp.pool_size,
                      "Warm runs kept ready per profile; 0: every run and session cold")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{64}));
  mcp_cmd->add_option("--wait-ready", mcp.wait_ready_s,
                      "Seconds to wait for every profile's warm pool before answering (first calls warm)")
      ->capture_default_str()->check(CLI::Range(0.0, 600.0));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // airlock run's own failures are 125, never an exit code its program could have.
    return rc != 0 && run_cmd->parsed() ? 125 : rc;
  }
  for (const char* name : {"timeout", "cpu-time", "memory", "pids", "disk", "output", "cpus"}) {
    if (run_cmd->count(std::string("--") + name) > 0) run.given.emplace_back(name);
  }
  if (mcp_cmd->parsed()) return airlock::cli::McpCommand(mcp);
  if (serve_cmd->parsed()) return airlock::cli::ServeCommand(serve);
  if (run_cmd->parsed()) return airlock::cli::RunCommand(run);
  if (check_cmd->parsed()) return airlock::cli::CheckCommand(check);
  return 2;
}
