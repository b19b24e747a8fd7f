// `airlock serve`: the HTTP service (docs/api.md).
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <iostream>

#include "api/audit_log.h"
#include "api/auth.h"
#include "api/request_gate.h"
#include "api/server.h"
#include "base/crash_report.h"
#include "base/log.h"
#include "cli/commands.h"
#include "cli/runtime_setup.h"
#include "exec/warm_pool.h"
#include "isolation/sandbox.h"
#include "profile/loader.h"
#include "service/service.h"

namespace airlock::cli {
namespace {

constexpr int kExitAirlockError = 125;

// "127.0.0.1:8000", "[::1]:8000", "0.0.0.0:80", ":8000" (loopback), "8000".
bool ParseListen(const std::string& text, std::string* host, uint16_t* port, std::string* error) {
  std::string h, p;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      *error = "--listen '" + text + "': write an IPv6 address as [::1]:8000";
      return false;
    }
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else if (size_t colon = text.rfind(':'); colon != std::string::npos) {
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  } else {
    p = text;
  }
  if (h.empty()) h = "127.0.0.1";
  char* end = nullptr;
  long v = p.empty() ? -1 : std::strtol(p.c_str(), &end, 10);
  if (p.empty() || *end != '\0' || v < 0 || v > 65535) {
    *error = "--listen '" + text + "': the port must be a number from 0 to 65535 (e.g. 127.0.0.1:8000)";
    return false;
  }
  *host = h;
  *port = static_cast<uint16_t>(v);
  return true;
}

// --e2b-listen: "" (localhost:49999,49983), "HOST", "HOST:CODE,ENVD",
// "[v6]:CODE,ENVD". The SDKs' debug mode only calls localhost:49999 and
// :49983; other ports are for tests and proxies.
bool ParseE2bListen(const std::string& text, api::ServerOptions* o, std::string* error) {
  o->e2b_host = "localhost";
  if (text.empty()) return true;
  std::string host = text, ports;
  if (text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) {
      *error = "--e2b-listen '" + text + "': write an IPv6 address as [::1]:49999,49983";
      return false;
    }
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') {
        *error = "--e2b-listen '" + text + "': write an IPv6 address as [::1]:49999,49983";
        return false;
      }
      ports = text.substr(close + 2);
    }
  } else if (size_t colon = text.find(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    ports = text.substr(colon + 1);
  }
  if (!host.empty()) o->e2b_host = host;
  if (ports.empty()) return true;
  size_t comma = ports.find(',');
  auto port = [&](const std::string& p, uint16_t* out) {
    char* end = nullptr;
    long v = p.empty() ? -1 : std::strtol(p.c_str(), &end, 10);
    if (p.empty() || *end != '\0' || v < 0 || v > 65535) return false;
    *out = static_cast<uint16_t>(v);
    return true;
  };
  if (comma == std::string::npos || !port(ports.substr(0, comma), &o->e2b_port) ||
      !port(ports.substr(comma + 1), &o->e2b_envd_port)) {
    *error = "--e2b-listen '" + text + "': give both ports, code interpreter then envd (e.g. localhost:49999,49983)";
    return false;
  }
  return true;
}

}  // namespace

int ServeCommand(const ServeFlags& flags) {
  // A client that hangs up must not kill the server with SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  base::InstallCrashReport();
  if (const char* level = std::getenv("AIRLOCK_LOG"); level && std::string(level) == "debug") {
    log::SetLevel(log::Level::kDebug);
  }

  api::ServerOptions options;
  std::string error;
  if (!ParseListen(flags.listen, &options.host, &options.port, &error)) {
    std::cerr << "airlock: " << error << "\n";
    return 2;
  }
  options.insecure = flags.insecure;
  options.allowed_hosts = flags.allowed_hosts;
  options.allowed_origins = flags.allowed_origins;
  // Checked again with the listen addresses once bound; here so that a bad
  // flag stops the server before anything starts.
  if (auto gate = api::RequestGate::Create({flags.allowed_hosts, flags.allowed_origins}, {}); !gate.ok()) {
    std::cerr << "airlock: " << gate.status().message() << "\n";
    return 2;
  }
  options.max_concurrent = static_cast<size_t>(flags.max_concurrent);
  options.max_queue = static_cast<size_t>(flags.max_queue);
  options.max_pending_approvals = static_cast<size_t>(flags.max_pending_approvals);
  options.drain_grace_s = flags.drain_grace_s;
  int64_t max_body = ParseSize(flags.max_body);
  if (max_body < 1024) {
    std::cerr << "airlock: --max-body '" << flags.max_body << "' is not a size of at least 1K (e.g. 2M)\n";
    return 2;
  }
  options.max_body_bytes = static_cast<size_t>(max_body);
  int64_t max_code = ParseSize(flags.max_code);
  if (max_code < 1) {
    std::cerr << "airlock: --max-code '" << flags.max_code << "' is not a size (e.g. 1M)\n";
    return 2;
  }
  options.max_code_bytes = static_cast<size_t>(max_code);
  options.sessions.max_sessions = static_cast<size_t>(flags.max_sessions);
  int64_t session_memory = ParseSize(flags.session_memory);
  if (session_memory < 0) {
    std::cerr << "airlock: --session-memory '" << flags.session_memory << "' is not a size (e.g. 8G)\n";
    return 2;
  }
  options.sessions.max_memory_bytes = session_memory;
  options.sessions.max_retired_zygotes = flags.max_retired_zygotes;
  options.sessions.idle_timeout_s = flags.session_idle_timeout_s;
  options.sessions.max_idle_timeout_s = std::max(flags.session_max_idle_timeout_s, flags.session_idle_timeout_s);
  options.sessions.ttl_s = flags.session_ttl_s;
  options.sessions.max_ttl_s = std::max(flags.session_max_ttl_s, flags.session_ttl_s);
  options.sessions.interrupt_grace_s = flags.session_interrupt_grace_s;
  int64_t max_file = ParseSize(flags.max_file);
  if (max_file < 1) {
    std::cerr << "airlock: --max-file '" << flags.max_file << "' is not a size (e.g. 32M)\n";
    return 2;
  }
  options.max_file_bytes = max_file;
  options.session_threads = std::clamp<size_t>(options.sessions.max_sessions, 4, 64);
  options.stream_keepalive_s = flags.stream_keepalive_s;
  int64_t stream_buffer = ParseSize(flags.stream_buffer);
  if (stream_buffer < 1024) {
    std::cerr << "airlock: --stream-buffer '" << flags.stream_buffer << "' is not a size of at least 1K (e.g. 1M)\n";
    return 2;
  }
  options.stream_queue_bytes = static_cast<size_t>(stream_buffer);
  // Quotas: a per-owner quota of 0 takes its share of the server-wide cap,
  // at least 1, so one token can hold at most that share.
  auto share = [](int64_t given, int64_t total, int64_t part) {
    return static_cast<size_t>(given > 0 ? given : std::max<int64_t>(1, total / part));
  };
  options.max_connections = static_cast<size_t>(flags.max_connections);
  options.max_connections_per_address = static_cast<size_t>(flags.max_connections_per_address);
  options.sessions.max_per_owner = share(flags.max_sessions_per_owner, flags.max_sessions, 2);
  options.max_mcp_sessions = static_cast<size_t>(flags.max_mcp_sessions);
  options.max_mcp_sessions_per_owner = share(flags.max_mcp_sessions_per_owner, flags.max_mcp_sessions, 4);
  options.max_pending_approvals_per_owner =
      share(flags.max_pending_approvals_per_owner, flags.max_pending_approvals, 2);
  options.max_uploads_per_owner = static_cast<size_t>(flags.max_uploads_per_owner);
  // Unset, the body budgets follow --max-body (one request always fits).
  int64_t body_buffer = flags.max_body_buffer.empty() ? std::max<int64_t>(int64_t{64} << 20, 4 * max_body)
                                                      : ParseSize(flags.max_body_buffer);
  int64_t body_buffer_owner = flags.max_body_buffer_per_owner.empty()
                                  ? std::max<int64_t>(int64_t{16} << 20, max_body)
                                  : ParseSize(flags.max_body_buffer_per_owner);
  if (body_buffer < max_body || body_buffer_owner < max_body) {
    std::cerr << "airlock: --max-body-buffer (" << body_buffer << " bytes) and --max-body-buffer-per-owner ("
              << body_buffer_owner << " bytes) must be sizes of at least --max-body (" << max_body
              << " bytes): one request must fit\n";
    return 2;
  }
  options.max_body_buffer = static_cast<uint64_t>(body_buffer);
  options.max_body_buffer_per_owner = static_cast<uint64_t>(body_buffer_owner);
  if (flags.e2b || !flags.e2b_listen.empty()) {
    if (!ParseE2bListen(flags.e2b_listen, &options, &error)) {
      std::cerr << "airlock: " << error << "\n";
      return 2;
    }
  }

  isolation::HostOptions host_options;
  host_options.sweep_stale_cgroups = true;  // a long-lived server: clear what a killed one left
  if (!ParseDegradable(flags.allow_degraded, &host_options.degradable, &error) ||
      !ParseUidRange(flags.uid_range, &host_options.id_range, &error)) {
    std::cerr << "airlock: " << error << "\n";
    return 2;
  }

  const std::string dir = flags.profiles_dir.empty() ? profile::DefaultProfilesDir() : flags.profiles_dir;
  auto profiles = profile::LoadProfiles(dir);
  if (!profiles.ok()) {
    std::cerr << "airlock: cannot load the profiles from " << dir << ": " << profiles.status().ToString() << "\n";
    return 2;
  }
  if (!flags.default_profile.empty()) {
    if (Status st = profiles->SetDefault(flags.default_profile); !st.ok()) {
      std::cerr << "airlock: --default-profile: " << st.ToString() << "\n";
      return 2;
    }
  }
  const std::pair<profile::Door, const std::string*> door_flags[] = {{profile::Door::kExecute, &flags.execute_profile},
                                                                     {profile::Door::kApi, &flags.api_profile},
                                                                     {profile::Door::kMcp, &flags.mcp_profile},
                                                                     {profile::Door::kE2b, &flags.e2b_profile}};
  for (const auto& [door, name] : door_flags) {
    if (name->empty()) continue;
    if (Status st = profiles->SetDefaultFor(door, *name); !st.ok()) {
      std::cerr << "airlock: --" << profile::DoorName(door) << "-profile: " << st.ToString() << "\n";
      return 2;
    }
  }

  options.e2b_profile = profiles->DefaultFor(profile::Door::kE2b).name;

  auto auth = api::Authenticator::Load(flags.tokens_file, std::getenv("AIRLOCK_TOKENS"));
  if (!auth.ok()) {
    std::cerr << "airlock: " << auth.status().ToString() << "\n";
    return 2;
  }
  if (!auth->enabled() && !api::IsLoopback(options.host) && !options.insecure) {
    std::cerr << "airlock: --listen " << flags.listen
              << " is reachable from other machines and no token is configured: anyone who can reach it could "
                 "run code. Give tokens (--tokens-file FILE or AIRLOCK_TOKENS=name:token), or add --insecure if a "
                 "proxy in front of airlock authenticates.\n";
    return 2;
  }

  auto host = isolation::PrepareHost(host_options);
  if (!host.ok()) {
    std::cerr << "airlock: this host cannot run sandboxes: " << host.status().ToString()
              << "\n(`airlock check` lists every layer; --allow-degraded=cgroup,landlock runs without those)\n";
    return kExitAirlockError;
  }

  auto audit = api::AuditLog::Open(flags.audit_log);
  if (!audit.ok()) {
    std::cerr << "airlock: " << audit.status().ToString() << "\n";
    return 2;
  }

  // The warm path: a zygote per profile, started by the pool's own thread
  // (which outlives them). Without it every run takes the cold path.
  std::unique_ptr<exec::WarmPool> pool;
  if (flags.pool_size > 0) {
    RuntimeFlags rf;
    rf.pool_size = flags.pool_size;
    rf.pool_recycle = flags.pool_recycle;
    rf.pool_recycle_s = flags.pool_recycle_s;
    rf.netns_per_run = flags.netns_per_run;
    exec::PoolOptions popts = PoolOptionsFor(*profiles, rf);
    auto started = exec::WarmPool::Start(*host, std::move(popts));
    if (started.ok()) {
      pool = std::move(*started);
    } else {
      log::Warn("warm pool off, every run takes the cold path: " + started.status().ToString());
    }
  }

  service::ServiceOptions sopts;
  sopts.pool = pool.get();
  sopts.profiles = std::move(*profiles);
  sopts.host = &*host;
  sopts.max_code_bytes = options.max_code_bytes;
  auto svc = service::Service::Create(std::move(sopts));
  if (!svc.ok()) {
    std::cerr << "airlock: " << svc.status().ToString() << "\n";
    return kExitAirlockError;
  }

  Status st;
  {
    api::Server server(options, **svc, std::move(*auth), std::move(*audit));
    st = server.Run();
  }
  if (!st.ok()) {
    std::cerr << "airlock: " << st.ToString() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace airlock::cli
