// The E2B-compatible listener's door (docs/api.md, "E2B-compatible
// endpoint"): what the official E2B SDKs call in debug mode (E2B_DEBUG=true)
// on localhost:49999 (the code interpreter) and localhost:49983 (envd),
// mapped onto sessions: the E2B ports' route table, its handlers, and the
// contexts. Both ports serve every route (their paths do not collide), except
// GET /health: "OK" (200) on the interpreter port, 204 on envd's, as E2B.
//
//   POST   /execute                  {code, context_id?, language?, env_vars?} -> NDJSON lines (driver)
//   POST   /contexts                 {language?, cwd?} -> {id, language, cwd}           (driver)
//   GET    /contexts[?limit&cursor]  [{id, language, cwd}] (X-Next-Cursor on a page)     (loop)
//   POST   /contexts/{id}/restart    a fresh interpreter (its files are dropped)         (worker)
//   DELETE /contexts/{id}                                                                (driver)
//   GET    /files?path=P             the file's bytes, streamed (sandbox bytes)          (driver)
//   POST   /files?path=P             multipart/form-data field "file" (or a raw
//                                    application/octet-stream body), streamed to the
//                                    files as it arrives -> [{path, name, type}]         (driver, upload)
//
// A context is a session of --e2b-profile; its id is the session's id. Each
// owner (token name, "" without tokens) gets a default context, made on first
// use; /files reads and writes the default context's working directory (/tmp
// in the sandbox), which E2B calls /home/user. Making a context waits for a
// warm run (retried from the loop while none is ready: no thread sleeps, no
// lock is held); the calls are session calls fed from the loop.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/route.h"
#include "model/execute.h"

namespace airlock::api {

class ServerState;

// The contexts, on the event loop (no lock).
class E2bContexts {
 public:
  struct Context {
    std::string owner;
    std::string language = "python";
    std::string cwd = "/home/user";
  };
  using Made = std::function<void(std::optional<std::string> id, model::ApiError error)>;

  explicit E2bContexts(ServerState& s) : s_(s) {}

  static std::vector<Route> Table();
  // Phase 5's owner check of OwnerRule::kContext.
  std::optional<model::ApiError> Owner(const std::string& id, const std::string& owner) const;

  // The owner's default context (made when it has none or it ended): `done`
  // on the loop. Requests of one owner that come while it is being made wait
  // for that one.
  void Default(const std::string& owner, Made done);
  void Add(const std::string& id, const std::string& owner) { contexts_[id] = Context{owner}; }
  void Forget(const std::string& id);
  // Drops the contexts whose sessions ended (through /v1/sessions, expiry,
  // their death): they were never pruned before.
  void Prune();
  std::vector<std::pair<std::string, Context>> Of(const std::string& owner) const;
  size_t size() const { return contexts_.size(); }

 private:
  ServerState& s_;
  std::map<std::string, Context> contexts_;                 // by id (= session id)
  std::map<std::string, std::string> defaults_;              // owner -> context id
  std::map<std::string, std::vector<Made>> making_;          // owner -> waiting for its default
};

}  // namespace airlock::api
