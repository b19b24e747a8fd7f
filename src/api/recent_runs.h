// The last audit records, kept in memory for the console's "recent runs"
// (GET /v1/runs): the same server-side data as the audit trail, whether or
// not an audit log is written. Event-loop thread only; bounded.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <utility>
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
    // real records out.
    if (a.verdict == "unauthorized" || a.verdict == "refused") return;
    records_.emplace_front(a.token_name, model::AuditRecordToJson(a));
    if (records_.size() > kKept) records_.pop_back();
  }

  // {"runs":[...]} newest first; `only_token`: that token's records alone.
  std::string ToJson(const std::string* only_token) const {
    std::vector<std::string> lines;
    for (const auto& [token, line] : records_) {
      if (only_token == nullptr || token == *only_token) lines.push_back(line);
    }
    return model::RecentRunsToJson(lines);
  }

 private:
  std::deque<std::pair<std::string, std::string>> records_;  // token name, JSON line
};

}  // namespace airlock::api
