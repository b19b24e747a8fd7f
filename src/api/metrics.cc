#include "api/metrics.h"

#include <cstdio>

#include "isolation/cgroup.h"

namespace airlock::api {
namespace {

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string Num(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.15g", v);  // 0.025, not 0.025000000000000001
  return buf;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

}  // namespace

Metrics::Metrics()
    : bounds_{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}, buckets_(bounds_.size(), 0) {
  // Known series start at 0 (Prometheus practice): rates work from the first scrape.
  for (const char* o : {"ok", "error", "timeout", "memory", "pids", "output", "signal", "cancelled", "channel", "failed"}) {
    executions_[o] = 0;
  }
  for (const char* r : {"policy", "invalid", "too_large", "overloaded", "unauthorized", "unavailable"}) rejected_[r] = 0;
}

void Metrics::CountHttp(const std::string& route, int status) {
  std::lock_guard<std::mutex> l(mu_);
  ++http_[{route, status}];
}

void Metrics::CountExecution(const std::string& outcome, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  ++executions_[outcome];
  if (outcome == "failed") return;  // never started: no duration
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (seconds <= bounds_[i]) {
      ++buckets_[i];
      break;
    }
  }
  ++duration_count_;
  duration_sum_ += seconds;
}

void Metrics::CountRejected(const std::string& reason) {
  std::lock_guard<std::mutex> l(mu_);
  ++rejected_[reason];
}

void Metrics::CountPolicyRule(const std::string& rule) {
  std::lock_guard<std::mutex> l(mu_);
  ++rules_[rule];
}

void Metrics::SetInFlight(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  in_flight_ = n;
}

void Metrics::SetQueueDepth(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  queue_depth_ = n;
}

void Metrics::SetReady(bool ready) {
  std::lock_guard<std::mutex> l(mu_);
  ready_ = ready;
}

void Metrics::SetAuditDropped(uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  audit_dropped_ = n;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  Header(out, "airlock_http_requests_total", "counter", "HTTP requests by route and status code.");
  for (const auto& [key, n] : http_) {
    out += "airlock_http_requests_total{route=\"" + Escape(key.first) + "\",code=\"" + std::to_string(key.second) +
           "\"} " + std::to_string(n) + "\n";
  }
  Header(out, "airlock_executions_total", "counter",
         "Executions by outcome (failed: the run could not be started).");
  for (const auto& [outcome, n] : executions_) {
    out += "airlock_executions_total{outcome=\"" + Escape(outcome) + "\"} " + std::to_string(n) + "\n";
  }
  Header(out, "airlock_execution_duration_seconds", "histogram", "Wall-clock duration of runs that started.");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i];
    out += "airlock_execution_duration_seconds_bucket{le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) +
           "\n";
  }
  out += "airlock_execution_duration_seconds_bucket{le=\"+Inf\"} " + std::to_string(duration_count_) + "\n";
  out += "airlock_execution_duration_seconds_sum " + Num(duration_sum_) + "\n";
  out += "airlock_execution_duration_seconds_count " + std::to_string(duration_count_) + "\n";
  Header(out, "airlock_executions_in_flight", "gauge", "Runs executing now.");
  out += "airlock_executions_in_flight " + std::to_string(in_flight_) + "\n";
  Header(out, "airlock_execution_queue_depth", "gauge", "Requests waiting for a free run slot.");
  out += "airlock_execution_queue_depth " + std::to_string(queue_depth_) + "\n";
  Header(out, "airlock_requests_rejected_total", "counter", "Execute requests refused before running, by reason.");
  for (const auto& [reason, n] : rejected_) {
    out += "airlock_requests_rejected_total{reason=\"" + Escape(reason) + "\"} " + std::to_string(n) + "\n";
  }
  Header(out, "airlock_policy_rejections_total", "counter", "Findings that rejected code, by analyzer rule.");
  for (const auto& [rule, n] : rules_) {
    out += "airlock_policy_rejections_total{rule=\"" + Escape(rule) + "\"} " + std::to_string(n) + "\n";
  }
  Header(out, "airlock_ready", "gauge", "1 when the startup self-test passed and the server is not draining.");
  out += std::string("airlock_ready ") + (ready_ ? "1" : "0") + "\n";
  Header(out, "airlock_audit_records_dropped_total", "counter", "Audit records dropped because the sink was too slow.");
  out += "airlock_audit_records_dropped_total " + std::to_string(audit_dropped_) + "\n";
  Header(out, "airlock_cgroups_leaked", "gauge",
         "Run cgroup directories that could not be removed (retried as runs end).");
  out += "airlock_cgroups_leaked " + std::to_string(isolation::RunCgroup::LeakedDirs()) + "\n";
  return out;
}

std::string RenderPoolMetrics(const std::vector<model::PoolView>& pools) {
  if (pools.empty()) return "";
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (const model::PoolView& p : pools) {
      out += std::string(name) + "{profile=\"" + p.profile + "\"} " + std::to_string(value(p)) + "\n";
    }
  };
  family("airlock_pool_ready", "gauge", "Warm runs ready to be handed a request.",
         [](const model::PoolView& p) { return static_cast<uint64_t>(p.ready); });
  family("airlock_pool_target", "gauge", "Warm runs the pool keeps ready.",
         [](const model::PoolView& p) { return static_cast<uint64_t>(p.target); });
  family("airlock_pool_up", "gauge", "1 while the profile's zygote is up.",
         [](const model::PoolView& p) { return static_cast<uint64_t>(p.zygote == "up"); });
  family("airlock_pool_handoffs_total", "counter", "Runs served by a warm run.",
         [](const model::PoolView& p) { return p.handoffs; });
  family("airlock_pool_refills_total", "counter", "Warm runs made ready.",
         [](const model::PoolView& p) { return p.refills; });
  family("airlock_pool_cold_fallbacks_total", "counter", "Runs of a pooled profile that took the cold path.",
         [](const model::PoolView& p) { return p.cold_fallbacks; });
  family("airlock_zygote_restarts_total", "counter", "Zygotes that died and were restarted.",
         [](const model::PoolView& p) { return p.restarts; });
  // One sample per profile; `reason` is a fixed word (PoolView::reason), "" when not degraded.
  out += "# HELP airlock_pool_degraded 1 while the profile's pool cannot make ready runs (runs go cold).\n"
         "# TYPE airlock_pool_degraded gauge\n";
  for (const model::PoolView& p : pools) {
    out += "airlock_pool_degraded{profile=\"" + p.profile + "\",reason=\"" + p.reason + "\"} " +
           (p.state == "degraded" ? "1" : "0") + "\n";
  }
  out += "# HELP airlock_pool_failures_total Failures to make a ready run, by reason.\n"
         "# TYPE airlock_pool_failures_total counter\n";
  for (const model::PoolView& p : pools) {
    for (const auto& [reason, count] : p.failures) {
      out += "airlock_pool_failures_total{profile=\"" + p.profile + "\",reason=\"" + reason + "\"} " +
             std::to_string(count) + "\n";
    }
  }
  family("airlock_zygote_recycles_total", "counter", "Zygotes replaced after their run count or age.",
         [](const model::PoolView& p) { return p.recycles; });
  return out;
}

}  // namespace airlock::api
