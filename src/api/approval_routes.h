// The approvals door (docs/api.md, "Approvals"): its rows of the API's route
// table. The book itself (what is held, the decision, the run) is
// api/approvals.h; these only route to it, on the loop (the book lives there).
//
//   GET  /v1/approvals[?limit&cursor]   the pending requests, a page, without code   approve role
//   GET  /v1/approvals/{id}             one, with its code and result                its requester or an approver
//   POST /v1/approvals/{id}             decide: {"decision","reason"?,"code_sha256"?}  approve role
#pragma once

#include <vector>

#include "api/route.h"

namespace airlock::api {

class ApprovalRoutes {
 public:
  static std::vector<Route> Table();
};

}  // namespace airlock::api
