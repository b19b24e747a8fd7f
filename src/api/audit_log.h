// The audit trail: one JSON line per execute request (and per refused
// authentication), to a file or to standard output, separate from the
// operator log (stderr). Records are built from server-side data only
// (model::AuditRecord) and serialized with every control character escaped,
// so nothing a run prints can forge or split a record.
//
// Writes happen on a thread of their own: a slow disk or a full stdout pipe
// never stalls the event loop. When the backlog passes kMaxBacklog records,
// new ones are dropped and counted (metrics: airlock_audit_records_dropped_total).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "model/execute.h"

namespace airlock::api {

class AuditLog {
 public:
  static constexpr size_t kMaxBacklog = 10000;

  // target: "-" for standard output, "" for no audit trail, else a file path
  // (opened for appending, created 0600).
  static StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& target);
  // Writes what is queued (waiting at most a few seconds for a blocked sink).
  ~AuditLog();

  void Write(const model::AuditRecord& record);
  uint64_t dropped() const;
  bool enabled() const { return state_ != nullptr; }

 private:
  struct State;  // shared with the writer thread, which may outlive us when the sink blocks
  AuditLog() = default;
  std::shared_ptr<State> state_;
};

// RFC 3339 UTC with milliseconds: "2026-11-21T23:20:00.123Z".
std::string NowRfc3339();

}  // namespace airlock::api
