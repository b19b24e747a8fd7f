// Prometheus metrics of the HTTP service, rendered in the text exposition
// format 0.0.4 by GET /metrics. Hand-written (no prometheus-cpp in Debian);
// thread-safe. Label values come from small fixed sets (routes, outcomes,
// analyzer rule ids), never from requests.
//
//   airlock_http_requests_total{route,code}           counter
//   airlock_executions_total{outcome}                 counter  ok|error|timeout|memory|pids|output|signal|cancelled|failed
//   airlock_execution_duration_seconds                histogram (runs that started)
//   airlock_executions_in_flight                      gauge
//   airlock_execution_queue_depth                     gauge
//   airlock_requests_rejected_total{reason}           counter  policy|invalid|too_large|overloaded|unauthorized|unavailable
//   airlock_policy_rejections_total{rule}             counter  one per rejecting finding
//   airlock_ready                                     gauge    1 once the self-test passed
//   airlock_audit_records_dropped_total               counter
//   airlock_pool_ready{profile}                       gauge    warm runs ready (RenderPoolMetrics)
//   airlock_pool_target{profile}                      gauge
//   airlock_pool_up{profile}                          gauge    1 while the profile's zygote is up
//   airlock_pool_handoffs_total{profile}              counter  runs served warm
//   airlock_pool_refills_total{profile}               counter  warm runs made ready
//   airlock_pool_cold_fallbacks_total{profile}        counter  runs of a pooled profile that went cold
//   airlock_zygote_restarts_total{profile}            counter  zygotes that died and were restarted
//   airlock_pool_degraded{profile,reason}             gauge    1 while the pool cannot make ready runs
//   airlock_pool_failures_total{profile,reason}       counter  failures to make a ready run, by reason
//   airlock_zygote_recycles_total{profile}            counter  zygotes replaced after N runs or S seconds
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "model/execute.h"

namespace airlock::api {

class Metrics {
 public:
  Metrics();
  void CountHttp(const std::string& route, int status);
  void CountExecution(const std::string& outcome, double seconds);
  void CountRejected(const std::string& reason);
  void CountPolicyRule(const std::string& rule);
  void SetInFlight(int64_t n);
  void SetQueueDepth(int64_t n);
  void SetReady(bool ready);
  void SetAuditDropped(uint64_t n);
  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> http_;
  std::map<std::string, uint64_t> executions_;
  std::map<std::string, uint64_t> rejected_;
  std::map<std::string, uint64_t> rules_;
  std::vector<double> bounds_;
  std::vector<uint64_t> buckets_;  // cumulative counts are computed when rendering
  uint64_t duration_count_ = 0;
  double duration_sum_ = 0;
  int64_t in_flight_ = 0, queue_depth_ = 0;
  bool ready_ = false;
  uint64_t audit_dropped_ = 0;
};

// The warm pools' lines (profile names come from the server's own profile files).
std::string RenderPoolMetrics(const std::vector<model::PoolView>& pools);

}  // namespace airlock::api
