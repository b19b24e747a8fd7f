// The E2B-compatible listener's door (docs/api.md, "E2B-compatible
// endpoint"): what the official E2B SDKs call in debug mode (E2B_DEBUG=true)
// on localhost:49999 (the code interpreter) and localhost:49983 (envd),
// mapped onto sessions: the E2B ports' route table, its handlers, and the
// contexts. Both ports serve every route (their paths do not collide), except
// GET /health: "OK" (200) on the interpreter port, 204 on envd's, as E2B.
//
//   POST   /execute                  {code, context_id?, language?, env_vars?} -> NDJSON lines (driver)
//                                    language: python, javascript (js), typescript (ts), r, java, bash
//   POST   /contexts                 {language?, cwd?} -> {id, language, cwd}: a new      (driver)
//                                    interpreter in the default sandbox
//   GET    /contexts[?limit&cursor]  [{id, language, cwd}] (X-Next-Cursor on a page)     (loop)
//   POST   /contexts/{id}/restart    a fresh interpreter (files kept)                    (driver)
//   DELETE /contexts/{id}                                                                (driver)
//   GET    /files?path=P             the file's bytes, streamed (sandbox bytes)          (driver)
//   POST   /files?path=P             multipart/form-data field "file" (or a raw
//                                    application/octet-stream body), streamed to the
//                                    files as it arrives -> [{path, name, type}]         (driver, upload)
//
// Each owner (token name, "" without tokens) gets a default sandbox: a
// session of --e2b-profile, made on first use, whose interpreters of python
// (the session's own; the context id is the session's) and javascript are its
// default contexts, and whose other languages' default interpreters serve
// runCode({language}). A context made with POST /contexts is a new
// interpreter of that sandbox (the session's contexts, docs/api.md:
// "<session id>-<context id>"), so every context, /files and envd's calls
// share one /home/user, as E2B's share one sandbox. Making a context waits for a
// warm run (retried from the loop while none is ready: no thread sleeps, no
// lock is held); the calls are session calls fed from the loop.
#pragma once

#include <cstdint>
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
  // A context is a session's interpreter of one language: a Python context
  // is a session of its own (its id is the session's); a context of another
  // language is the owner's default session's interpreter of that language
  // (id "<session id>-<language>"), so that it shares that sandbox's
  // /home/user with the default Python context and /files, as E2B's contexts
  // share one sandbox.
  struct Context {
    std::string owner;
    std::string session;
    std::string language = "python";
    std::string cwd = "/home/user";
    uint64_t seq = 0;  // creation order: lists are in it, as E2B lists contexts
    // E2B's default contexts (python and javascript of the default sandbox),
    // listed first: E2B's exist from the sandbox's start, before any made.
    bool is_default = false;
    // A context made by POST /contexts: its interpreter in the default
    // sandbox (SessionManager's context id); "": the session's own
    // interpreter of `language` (the default contexts).
    std::string context;
  };
  using Made = std::function<void(std::optional<std::string> id, model::ApiError error)>;

  explicit E2bContexts(ServerState& s) : s_(s) {}

  static std::vector<Route> Table();
  // Phase 5's owner check of OwnerRule::kContext.
  std::optional<model::ApiError> Owner(const std::string& id, const std::string& owner) const;

  // The owner's default context (made when it has none or it ended): `done`
  // on the loop, with its session's id. Requests of one owner that come while
  // it is being made wait for that one. Made with it: the default contexts of
  // E2B, python (the session) and javascript.
  void Default(const std::string& owner, Made done);
  // The owner's context of `language` in its default session (made when it
  // has none): `done` with the context's id.
  void OfLanguage(const std::string& owner, const std::string& language, Made done);
  // A context made by POST /contexts: interpreter `context` of `session`.
  void AddContext(const std::string& id, const std::string& owner, const std::string& session,
                  const std::string& language, const std::string& cwd, const std::string& context);
  // Its session context id ("" for a default context, or none).
  std::string ContextIdOf(const std::string& id) const;
  const Context* Find(const std::string& id) const;
  void Forget(const std::string& id);
  // Every context of a session that ended.
  void ForgetSession(const std::string& session);
  // Drops the contexts whose sessions ended (through /v1/sessions, expiry,
  // their death): they were never pruned before.
  void Prune();
  // The owner's contexts, oldest first.
  std::vector<std::pair<std::string, Context>> Of(const std::string& owner) const;
  size_t size() const { return contexts_.size(); }

 private:
  void Put(const std::string& id, Context c) {
    c.seq = ++seq_;
    contexts_[id] = std::move(c);
  }

  ServerState& s_;
  uint64_t seq_ = 0;
  std::map<std::string, Context> contexts_;                 // by id
  std::map<std::string, std::string> defaults_;              // owner -> context id
  std::map<std::string, std::vector<Made>> making_;          // owner -> waiting for its default
};

}  // namespace airlock::api
