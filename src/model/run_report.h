// model::RunReport: the wire shape of one run's result (the CLI's --json and the
// core of the HTTP responses). Plain data; JSON lives in json_codec.cc only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace airlock::model {

struct LayerReport {
  std::string name;
  bool enforced = false;
  std::string detail;
};

struct RunReport {
  int exit_code = 0;
  int signal = 0;  // 0: the program exited (rendered as null)
  bool timed_out = false;
  std::optional<std::string> kill_reason;  // "timeout", "memory", "pids", "output", "signal", "cancelled", "channel"
  std::string kill_detail;
  std::string stdout_text, stderr_text;  // raw bytes; invalid UTF-8 is replaced when rendered
  bool stdout_truncated = false, stderr_truncated = false;
  double duration_ms = 0;
  int64_t cpu_ms = 0;
  int64_t max_rss_kb = 0;
  std::vector<LayerReport> layers;
  int landlock_abi = 0;
  std::string cgroup_version;
  std::string mode = "cold";  // "warm": handed to a pre-forked run of a zygote
  int64_t host_uid = -1;      // the run's own host uid and gid; -1: none of its own (null)
};

// One JSON object (UTF-8; invalid bytes in the output become U+FFFD).
std::string RunReportToJson(const RunReport& report, bool pretty = false);
// {"name","ok","required","detail"} for `airlock check --json`.
std::string LayerToJson(const LayerReport& layer, bool required);

}  // namespace airlock::model
