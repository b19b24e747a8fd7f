// The subcommands of the airlock binary; main.cc parses flags and dispatches.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "isolation/host_ids.h"

namespace airlock::cli {

struct RunFlags {
  std::string file;  // path or "-" for stdin
  double timeout_s = 10;
  double cpu_time_s = 0;
  std::string memory = "256M";
  int64_t pids = 64;
  std::string disk = "64M";
  std::string output = "1M";
  double cpus = 1.0;
  bool json = false;
  std::vector<std::string> allow_degraded;  // "cgroup", "landlock"
  std::string uid_range;  // "START:COUNT"; "": the default range
  // Through a profile (the service's path, as /v1/execute runs code) when any
  // of these is given: the profile's analyzer, runner, languages and limits.
  std::string profile;                // --profile ("": the /v1 door's default, general)
  std::string language;               // --language ("": the profile's first)
  std::vector<std::string> inputs;    // --input LOCAL[=NAME]: files put in the working directory
  std::string profiles_dir;           // --profiles ("": profile::DefaultProfilesDir())
  // The limit flags given on the command line (their long names): through a
  // profile, only those become the request's limits (clamped to its ceilings).
  std::vector<std::string> given;
  bool ThroughProfile() const { return !profile.empty() || !language.empty() || !inputs.empty(); }
};

int RunCommand(const RunFlags& flags);

struct CheckFlags {
  std::vector<std::string> allow_degraded;
  std::string uid_range;
  bool json = false;
};

int CheckCommand(const CheckFlags& flags);

struct ServeFlags {
  std::string listen = "127.0.0.1:8000";
  std::string profiles_dir;     // "": profile::DefaultProfilesDir()
  std::string default_profile;  // every door's default profile; "": each door's own (below)
  // One door's default profile ("": --default-profile, else the door's own:
  // minimal for /execute, general for the rest when loaded; ProfileSet).
  std::string execute_profile;  // POST /execute, GET /profile
  std::string api_profile;      // /v1/execute, /v1/sessions, the console
  std::string mcp_profile;      // /mcp
  std::string tokens_file;      // plus AIRLOCK_TOKENS from the environment
  bool insecure = false;
  std::vector<std::string> allowed_hosts;    // Host names besides loopback and the listen address
  std::vector<std::string> allowed_origins;  // web origins that may call cross-origin
  std::string audit_log = "-";  // "-": stdout, "": none, else a file
  int64_t max_concurrent = 8;
  int64_t max_queue = 64;
  int64_t max_pending_approvals = 64;
  std::string max_body = "2M";
  std::string max_code = "1M";
  double drain_grace_s = 10;
  double stream_keepalive_s = 5;      // streamed responses: a keepalive event after this long silent
  std::string stream_buffer = "1M";   // streamed responses: output bytes queued per connection
  std::vector<std::string> allow_degraded;
  std::string uid_range;
  int64_t pool_size = 4;         // warm runs kept ready per profile; 0: warm path off
  int64_t pool_recycle = 5000;   // runs after which a zygote is replaced; 0: never
  double pool_recycle_s = 600;   // seconds after which a zygote is replaced; 0: never
  bool netns_per_run = false;    // a network namespace per warm run even where runs could share the zygote's
  // Sessions (docs/api.md, "Sessions").
  int64_t max_sessions = 32;
  std::string session_memory = "8G";   // sum of live sessions' memory limits (and their retired zygotes')
  int max_retired_zygotes = 8;         // replaced zygotes live sessions may keep alive
  double session_idle_timeout_s = 600;
  double session_max_idle_timeout_s = 3600;
  double session_ttl_s = 3600;
  double session_max_ttl_s = 86400;
  double session_interrupt_grace_s = 2;
  std::string max_file = "32M";        // one session file upload or download
  // Quotas and budgets (docs/api.md, "Quotas"); 0 for a per-owner quota: its default share.
  int64_t max_connections = 1024;
  int64_t max_connections_per_address = 128;
  int64_t max_sessions_per_owner = 0;           // half of max_sessions
  int64_t max_mcp_sessions = 256;
  int64_t max_mcp_sessions_per_owner = 0;       // a quarter of max_mcp_sessions
  int64_t max_pending_approvals_per_owner = 0;  // half of max_pending_approvals
  int64_t max_uploads_per_owner = 4;
  std::string max_body_buffer;            // "": 64M, or 4 x --max-body when that is more
  std::string max_body_buffer_per_owner;  // "": 16M, or --max-body when that is more
  // The E2B-compatible listener (docs/api.md, "E2B-compatible endpoint").
  bool e2b = false;                    // listen on e2b_listen's ports
  std::string e2b_listen;              // HOST[:CODE_PORT[,ENVD_PORT]]; implies e2b
  std::string e2b_profile;             // the E2B door's default profile (as execute_profile)
};

int ServeCommand(const ServeFlags& flags);

struct McpFlags {
  std::string profiles_dir;
  std::string default_profile;
  std::vector<std::string> allow_degraded;
  std::string uid_range;
  int64_t pool_size = 1;  // one agent host, one call at a time: a ready run per profile is enough
  double wait_ready_s = 0;  // wait up to this long for every warm pool before serving
};

int McpCommand(const McpFlags& flags);

// "256M", "1G", "64Mi", "1048576" -> bytes; -1 when malformed.
int64_t ParseSize(const std::string& text);
// --allow-degraded values -> isolation::Degradable bits; error text on unknown names.
bool ParseDegradable(const std::vector<std::string>& names, uint32_t* bits, std::string* error);
// --uid-range START:COUNT -> options->id_range ("" leaves the default); error text.
bool ParseUidRange(const std::string& text, std::optional<isolation::HostIdRange>* range, std::string* error);

}  // namespace airlock::cli
