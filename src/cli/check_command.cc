// `airlock check`: which isolation layers this host supports, and a real
// sandboxed run as the last word.
#include <algorithm>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "exec/python_spec.h"
#include "exec/execution.h"
#include "isolation/host_probe.h"
#include "model/run_report.h"

namespace airlock::cli {
namespace {

// What the host id range is and what was checked of it (isolation/host_ids.h).
isolation::ProbeItem HostIdsItem(const isolation::HostOptions& options, const StatusOr<isolation::HostSetup>& host) {
  const isolation::HostIdRange range = options.id_range.value_or(isolation::kDefaultHostIdRange);
  isolation::ProbeItem item{"per-run host ids", false, true, ""};
  if (::geteuid() != 0) {
    item.required = false;
    item.detail = "degraded: not root, so every run's uid is your own and runs share its per-user kernel pools "
                  "(pipe buffers, descriptors in flight); as root each run gets an id of its own from --uid-range";
    return item;
  }
  isolation::HostIdCheck check = isolation::CheckHostIdRange(range);
  std::string read;
  for (const std::string& c : check.checked) read += (read.empty() ? "" : ", ") + c;
  if (!check.conflicts.empty()) {
    item.detail = "range " + range.ToString() + " is not free:";
    for (const std::string& c : check.conflicts) item.detail += " " + c + ";";
    item.detail += " choose another with --uid-range START:COUNT";
    return item;
  }
  if (!host.ok() || !host->host_ids) {
    item.detail = "range " + range.ToString() + ": no entry in " + read + "; no block of it taken: " +
                  (host.ok() ? std::string("no pool") : host.status().ToString());
    return item;
  }
  item.ok = true;
  item.detail = host->host_ids->Describe() + ": no entry in " + read +
                "; no running process has an id of the block (/proc/*/status Uid, Gid, Groups; blocks held by other "
                "airlock processes are theirs); files owned by ids of the range are not searched";
  return item;
}

}  // namespace

int CheckCommand(const CheckFlags& flags) {
  uint32_t degradable = 0;
  std::string error;
  isolation::HostOptions options;
  if (!ParseDegradable(flags.allow_degraded, &degradable, &error) ||
      !ParseUidRange(flags.uid_range, &options.id_range, &error)) {
    std::cerr << "airlock: " << error << "\n";
    return 2;
  }
  std::vector<isolation::ProbeItem> items = isolation::ProbeHost(degradable);

  // The end-to-end self-test: a real run with every required layer.
  options.degradable = degradable;
  auto host = isolation::PrepareHost(options);
  items.push_back(HostIdsItem(options, host));
  isolation::ProbeItem self{"sandbox self-test", false, true, ""};
  if (!host.ok()) {
    self.detail = host.status().ToString();
  } else {
    exec::RunOptions ro;
    ro.timeout_s = 10;
    auto r = exec::RunToCompletion(*host, exec::PythonSpec("import os\nprint(os.getuid(), os.getpid())\n", {}, false), ro);
    if (!r.ok()) {
      self.detail = r.status().ToString();
    } else if (r->exit_code != 0 || r->out.data != "1000 2\n") {
      self.detail = "python3 in the sandbox printed '" + r->out.data + "' and exited " +
                    std::to_string(r->exit_code) + ": " + r->err.data;
    } else {
      self.ok = true;
      char buf[128];
      snprintf(buf, sizeof buf, "python3 ran as uid 1000, pid 2, in %.1f ms", r->duration_ms);
      self.detail = buf;
      if (r->isolation.host_uid >= 0) self.detail += "; its host uid and gid were " + std::to_string(r->isolation.host_uid);
    }
  }
  items.push_back(self);

  bool fit = true;
  for (const auto& it : items) fit = fit && (it.ok || !it.required);
  if (flags.json) {
    std::cout << "[";
    for (size_t i = 0; i < items.size(); ++i) {
      model::LayerReport l{items[i].name, items[i].ok, items[i].detail};
      std::cout << (i ? "," : "") << model::LayerToJson(l, items[i].required);
    }
    std::cout << "]\n";
  } else {
    // The first column as wide as its longest name ("foreign ABI i386 (int $0x80)" filled a fixed 28).
    int width = 5;
    for (const auto& it : items) width = std::max(width, static_cast<int>(it.name.size()));
    std::printf("%-*s  %-9s %s\n", width, "layer", "status", "detail");
    for (const auto& it : items) {
      const char* status = it.ok ? "ok" : it.required ? "MISSING" : "degraded";
      if (it.name == "running as root" || it.name.rfind("foreign ABI", 0) == 0) status = "info";
      std::printf("%-*s  %-9s %s\n", width, it.name.c_str(), status, it.detail.c_str());
    }
    std::printf("\n%s\n", fit ? "This host can run airlock sandboxes with every required layer."
                              : "This host is missing a required layer (see above): airlock will refuse to run.");
  }
  return fit ? 0 : 1;
}

}  // namespace airlock::cli
