// The last audit records of runs and decisions, kept in memory for the
// console's "recent runs" (GET /v1/runs): the same server-side data as the
// audit trail, whether or not an audit log is written. Event-loop thread
// only; bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "model/approval.h"
#include "model/execute.h"

namespace airlock::api {

class RecentRuns {
 public:
  static constexpr size_t kKept = 200;

  void Add(const model::AuditRecord& a) {
    // Refusals on the headers (no or a wrong token, a foreign Host or Origin)
    // say nothing about runs, and would let anyone without a token push the
    // real records out; requests that ran no code are not runs.
    if (a.verdict == "unauthorized" || a.verdict == "refused" || a.type == "request") return;
    records_.push_front({++seq_, a.token_name, model::AuditRecordToJson(a)});
    if (records_.size() > kKept) records_.pop_back();
  }

  // {"runs":[...], newest first, `limit` of them after `cursor` ("": the
  // newest)}; `only_token`: that token's records alone. *next: the cursor of
  // the next page (nullopt on the last).
  std::string ToJson(const std::string* only_token, size_t limit, const std::string& cursor,
                     std::optional<std::string>* next) const {
    // The cursor is the sequence number of the last record of the page before.
    const uint64_t before = cursor.empty() ? UINT64_MAX : std::strtoull(cursor.c_str(), nullptr, 10);
    std::vector<std::string> lines;
    uint64_t last = 0;
    next->reset();
    for (const Record& r : records_) {
      if (r.seq >= before || (only_token != nullptr && r.token != *only_token)) continue;
      if (lines.size() == limit) {
        *next = std::to_string(last);
        break;
      }
      lines.push_back(r.line);
      last = r.seq;
    }
    return model::RecentRunsToJson(lines);
  }

 private:
  struct Record {
    uint64_t seq;
    std::string token;
    std::string line;  // JSON
  };
  std::deque<Record> records_;  // newest first
  uint64_t seq_ = 0;
};

}  // namespace airlock::api
