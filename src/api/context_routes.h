// A session's contexts (docs/api.md "Contexts", issue 22): interpreters in
// six languages in one session's sandbox, sharing its /home/user, its limits
// and every layer (session::SessionManager's context API). Rows of the API's
// route table; the pipeline has checked the token's run role and that the
// session {id} is the caller's (404 otherwise) before any of these runs.
//
//   POST   /v1/sessions/{id}/contexts                 {language?, cwd?, env?} -> 201 a context   worker
//   GET    /v1/sessions/{id}/contexts                 {"contexts":[...]}, the main one first      worker
//   GET    /v1/sessions/{id}/contexts/{ctx}           one                                         worker
//   DELETE /v1/sessions/{id}/contexts/{ctx}           ended and forgotten (not the main one)      worker
//   POST   /v1/sessions/{id}/contexts/{ctx}/restart   a fresh interpreter, files kept             worker
//   POST   /v1/sessions/{id}/contexts/{ctx}/execute   one call in it (JSON or events)             driver
#pragma once

#include <vector>

#include "api/route.h"

namespace airlock::api {

class ContextRoutes {
 public:
  static std::vector<Route> Table();
};

}  // namespace airlock::api
