// service::Service: the one facade every surface (HTTP, CLI, MCP) goes through
// to run code: resolve the profile → validate and clamp the limits → analyze →
// build the Spec → run → assemble the response. It owns no thread and no event
// loop: the caller drives the run (api/ does it asynchronously; RunBlocking
// does it with poll()).
//
//   ASSIGN_OR_RETURN(auto svc, Service::Create({std::move(profiles), &host}));
//   Prepared p = svc->Prepare(request, "req_1");
//   switch (p.verdict) {
//     case Verdict::kInvalid:  reply(p.error);                 // 400/413/422
//     case Verdict::kRejected: reply400(p.violations);         // policy
//     case Verdict::kRun: {
//       auto ex = svc->Start(*p.plan);                        // blocking: a worker thread
//       ... feed ex (stdout_fd/stderr_fd/pidfd) and p.plan->events_read into a ChannelBuffer ...
//       model::ExecuteResponse r = svc->Complete(*p.plan, ex->Finish(), channel);
//     }
//   }
//
// Every method is const and thread-safe: one Service serves all requests.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "exec/execution.h"
#include "exec/warm_pool.h"
#include "isolation/sandbox.h"
#include "isolation/spec.h"
#include "model/execute.h"
#include "model/runner_protocol.h"
#include "profile/limits.h"
#include "profile/profile.h"
#include "service/language_runtime.h"

namespace airlock::service {

struct ServiceOptions {
  profile::ProfileSet profiles;
  const isolation::HostSetup* host = nullptr;  // outlives the Service
  size_t max_code_bytes = size_t{1} << 20;
  // Bytes of result events kept per run (the channel is untrusted: bounded).
  // Create() raises it to carry the largest profile's returned files
  // (files.max_out_bytes as base64, plus their paths) on top of this.
  size_t max_event_bytes = size_t{8} << 20;
  // Bytes of display results (figures, reprs) the runner may send per run.
  int64_t max_result_bytes = int64_t{4} << 20;
  // The warm path (exec/warm_pool.h); null: every run is cold. Outlives the Service.
  exec::WarmPool* pool = nullptr;
};

// What a warm pool needs to know of each profile (the limits its runs are made
// with are the profile's, as a request that asks for nothing gets them).
std::vector<exec::PoolProfile> WarmPoolProfiles(const profile::ProfileSet& profiles);
// The whole environment of a run (and of a zygote): a short fixed list.
std::vector<std::string> RunEnvironment();
// Why a request may not set environment variable `name` (ExecuteRequest::env),
// or "" when it may: the variables of RunEnvironment() are the sandbox's own,
// and LD_*, PYTHON*, LC_*, AIRLOCK_*, GLIBC_TUNABLES, GCONV_PATH, MALLOC_*,
// NODE_OPTIONS, BASH_ENV and ENV change how a program is loaded or started.
std::string ReservedEnvName(std::string_view name);
// The limits a run got, as responses show them.
model::EffectiveLimitsView ToView(const profile::EffectiveLimits& limits);

// A request that passed every check, ready to start.
struct Plan {
  std::string request_id;
  std::string profile_name;
  profile::Language language = profile::Language::kPython;
  profile::EffectiveLimits limits;
  std::vector<model::Violation> warnings;  // findings that did not reject the code
  isolation::Spec spec;
  exec::RunOptions options;
  // The result channel (fd 3 in the run), made by Start(): the non-blocking
  // read end, and the write end Start() closes once the run holds it.
  UniqueFd events_read;
  UniqueFd events_write;
  // The code as it runs: a Python cell's common indentation removed
  // (analyzer/cell.h), other languages' as sent. A session call sends this.
  std::string code;
  // The warm path's request (runner config with the code inline); empty when
  // the profile has no warm pool. warm_config is what it was made from: a
  // session's first frame is made from it, and a session call's frame (the
  // code is kept only for a session call).
  std::string warm_request;
  model::RunnerConfig warm_config;
  // The profile's caps on files returned (Complete enforces them again on
  // what the untrusted channel says).
  int64_t max_out_files = 0;
  int64_t max_out_bytes = 0;
};

// kNeedsApproval: the request passed (or only listed findings held it) and
// the profile's approval policy makes it wait for a person: `plan` is ready
// to start as is once approved, `violations` are the findings shown to the
// person, `error` says why (surfaces that cannot hold a request refuse with it).
enum class Verdict { kRun, kRejected, kInvalid, kNeedsApproval };

struct Prepared {
  Verdict verdict = Verdict::kInvalid;
  std::unique_ptr<Plan> plan;                // kRun, kNeedsApproval
  model::ApiError error;                     // kInvalid (and the message of kRejected)
  std::vector<model::Violation> violations;  // kRejected: the findings that rejected the code; kNeedsApproval: every finding
  // For the audit record, whatever the verdict.
  std::string profile_name;
  std::string code_sha256;
  int64_t code_bytes = 0;
  std::string code;                     // kNeedsApproval only: the code, to show the person deciding
  std::vector<model::InputFile> files;  // kNeedsApproval only: the input files, likewise
  // kNeedsApproval only: each input file's SHA-256 and the request's
  // (model::RequestDigestJson), computed here, on the caller's thread (a
  // worker for a large request), so that holding it never hashes megabytes on
  // the server's event loop. The approvals book takes them as they are.
  std::vector<std::string> file_sha256;
  std::string request_sha256;
};

// The result channel of one run, kept up to a cap. The runner protocol bounds
// what an honest run writes (model::kMaxChannelLines lines, well under the
// byte cap); a run past either is a flood: overflowed() turns true, nothing
// more is kept, and the caller kills the run (exec::KillReason::kChannel).
// What comes after is read and dropped (so the run never blocks on a full
// pipe before it dies).
class ChannelBuffer {
 public:
  explicit ChannelBuffer(size_t cap, size_t max_lines = model::kMaxChannelLines) : cap_(cap), max_lines_(max_lines) {}
  // Reads what `fd` (non-blocking) has now. Returns false once it reached EOF
  // or failed, true while more may come.
  bool ReadFrom(int fd);
  const std::string& data() const { return data_; }
  bool truncated() const { return truncated_; }
  // The run wrote more than the protocol allows; the detail says what.
  bool overflowed() const { return !overflow_.empty(); }
  const std::string& overflow_detail() const { return overflow_; }

 private:
  size_t cap_;
  size_t max_lines_;
  size_t lines_ = 0;
  std::string data_;
  bool truncated_ = false;
  std::string overflow_;
};

class Service {
 public:
  static StatusOr<std::unique_ptr<Service>> Create(ServiceOptions options);
  ~Service();

  // Fast (no process is started): profile, limits, analysis, Spec. Safe to
  // call from any thread.
  Prepared Prepare(const model::ExecuteRequest& request, const std::string& request_id) const;

  // Launches the run (clone + namespace setup: 5-20 ms, blocking). Call it
  // from ONE thread for the whole process (a server's launcher thread): a run
  // launched concurrently would inherit the other run's channel write end and
  // hold it open. That thread must live as long as the runs (the run's init
  // dies with the thread that launched it: PR_SET_PDEATHSIG).
  StatusOr<std::unique_ptr<exec::Execution>> Start(Plan& plan) const;
  // The warm hand-off alone, without blocking (for an event loop's thread):
  // null when the plan has no warm pool, its request is large, or no run is
  // ready right now (then call Start() where blocking is fine).
  std::unique_ptr<exec::Execution> TryStartWarmNow(Plan& plan) const;
  // A session's run on the cold path (cold_session.cc): a fresh sandbox whose
  // runner serves the session's calls, for when no warm run can be had (no
  // pool: --pool-size 0, or none ready). `plan` is a Python request's
  // (Prepare with any code); its limits and layers are the session's. The
  // run's fd 3 is a socket: calls go in, result events come out
  // (events_read and control are the server's end of it). Blocking (a launch:
  // 10-50 ms), on any thread: launches are serialized with Start()'s.
  StatusOr<exec::SessionHandOff> StartColdSession(const Plan& plan) const;

  // The response of a finished run.
  model::ExecuteResponse Complete(const Plan& plan, const exec::RunResult& result,
                                  const ChannelBuffer& channel) const;

  // The whole path on the calling thread, blocking (the startup self-test,
  // tests, a one-shot CLI). Errors: the request's (as kInvalid/kRejected
  // Prepared outcomes turned into Status) or the launch's.
  StatusOr<model::ExecuteResponse> RunBlocking(const model::ExecuteRequest& request,
                                               const std::string& request_id) const;

  // The rest of RunBlocking for a run Start() launched (possibly on another
  // thread): supervises it to its end on the calling thread (its output,
  // deadlines, result channel) and returns its response. Blocking. With a
  // `dispose`, a warm run is answered from its end event (as the server's
  // event loop does) and the Execution, whose destruction tears the run down
  // (kill what is left, remove the cgroup: milliseconds to seconds), is handed
  // to it instead of being destroyed here before the answer.
  using Disposer = std::function<void(std::unique_ptr<exec::Execution>)>;
  StatusOr<model::ExecuteResponse> Supervise(Plan& plan, std::unique_ptr<exec::Execution> execution,
                                             const Disposer& dispose = {}) const;

  const profile::ProfileSet& profiles() const { return options_.profiles; }
  // `default` in the view: whether it is `door`'s default profile.
  model::ProfileView View(const profile::Profile& profile, profile::Door door = profile::Door::kExecute) const;
  // The warm pools (empty without one).
  std::vector<model::PoolView> Pools() const;
  // Every rule the analyzer reports (GET /v1/rules).
  static std::vector<model::RuleView> Rules();
  // Each door's default profile, by DoorName ("execute": "minimal", ...).
  std::vector<std::pair<std::string, std::string>> DoorDefaults() const;
  // The warm pool (null without one): sessions take their runs from it.
  exec::WarmPool* pool() const { return options_.pool; }
  const isolation::HostSetup* host() const { return options_.host; }
  // What this host can run besides Python (probed for the profiles' languages).
  const HostLanguages& languages() const { return languages_; }
  size_t max_event_bytes() const { return options_.max_event_bytes; }

 private:
  explicit Service(ServiceOptions options) : options_(std::move(options)) {}

  ServiceOptions options_;
  // Held while a cold run's fds exist here and it is launched (Start,
  // StartColdSession): a run cloned meanwhile would inherit the other's
  // channel until its init closes what it inherited.
  mutable std::mutex launch_mu_;
  std::map<std::string, analyzer::Analyzer, std::less<>> analyzers_;  // by profile name (policy_check.h's AnalyzerMap)
  HostLanguages languages_;  // what this host can run besides Python
};

// The `result`, `results`, `error` parts come from the runner; everything
// else from the process status. Exposed for tests.
model::RunReport ToRunReport(const exec::RunResult& result);

}  // namespace airlock::service
