#include "service/service.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "analyzer/analyzer.h"
#include "analyzer/cell.h"
#include "analyzer/rule_catalog.h"
#include "base/log.h"
#include "model/approval.h"
#include "model/base64.h"
#include "model/runner_protocol.h"
#include "profile/units.h"
#include "service/embedded_runner.h"
#include "service/language_runtime.h"
#include "service/policy_check.h"
#include "service/sha256.h"

namespace airlock::service {
namespace {

constexpr const char* kRunnerPath = "/sandbox/airlock_runner.py";
constexpr const char* kConfigPath = "/sandbox/config.json";
constexpr const char* kBytecodePath = "/sandbox/airlock_runner.bytecode";
constexpr const char* kBootPath = "/sandbox/airlock_boot.py";

// A cold Python run's main script when the runner's bytecode is embedded
// (EmbeddedRunnerBytecode): when its magic is this python3's, registers the
// runner's helpers from it in sys.modules and runs the runner from it, as
// __main__; otherwise runs the runner from the source beside it (which then
// compiles its helpers from theirs). The modules' frames keep the sources'
// names either way (compile_runner.py), and the sources stay there for
// tracebacks. Reads its files from its own directory (/sandbox) and imports
// nothing a bare `python3 -S` has not loaded.
constexpr const char* kBoot = R"py(def _runner_code():
    from _frozen_importlib_external import MAGIC_NUMBER
    here = __file__.rpartition("/")[0]
    try:
        with open(here + "/airlock_runner.bytecode", "rb") as f:
            data = f.read()
        if data[:4] == MAGIC_NUMBER:
            import marshal
            import sys
            modules = marshal.loads(memoryview(data)[4:])
            for name, code in modules[:-1]:
                module = type(sys)(name)
                module.__file__ = code.co_filename
                exec(code, module.__dict__)
                sys.modules[name] = module
            return modules[-1][1]
    except (OSError, ValueError, EOFError, TypeError):
        pass
    with open(here + "/airlock_runner.py", "rb") as f:
        return compile(f.read(), here + "/airlock_runner.py", "exec")


exec(_runner_code())
)py";

std::string LanguageList(const std::vector<profile::Language>& languages) {
  std::string out;
  for (profile::Language l : languages) out += (out.empty() ? "" : ", ") + std::string(profile::LanguageName(l));
  return out;
}

bool IsBlank(std::string_view code) {
  return std::all_of(code.begin(), code.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

analyzer::Policy PolicyFor(const profile::Profile& p, size_t max_code_bytes) {
  analyzer::Policy policy;
  if (!p.any_import) policy.allowed_imports = p.allowed_imports;
  auto has = [&](profile::ScanStage s) {
    return std::find(p.scan_stages.pre.begin(), p.scan_stages.pre.end(), s) != p.scan_stages.pre.end() &&
           p.ModeOf(s) != profile::AuditMode::kOff;
  };
  if (has(profile::ScanStage::kBlocklistAudit)) {
    for (const auto& e : p.blocklist) policy.blocklist.emplace_back(e.module, e.attr);
  }
  policy.python_guardrails = has(profile::ScanStage::kAstScan);
  policy.audit_patterns = has(profile::ScanStage::kAuditPatterns);
  policy.max_code_bytes = std::max(max_code_bytes, policy.max_code_bytes);
  return policy;
}

model::ResourcesView ToResourcesView(const profile::Resources& r) {
  model::ResourcesView v;
  v.memory_bytes = r.memory_bytes;
  v.cpu_cores = r.cpu_cores;
  v.timeout_max_s = r.timeout_max_s;
  v.timeout_default_s = r.timeout_default_s;
  v.pids = r.pids;
  v.disk_bytes = r.disk_bytes;
  v.output_bytes = r.output_bytes;
  v.cpu_time_s = r.cpu_time_s;
  return v;
}

model::ApiError Invalid(std::string field, std::string message) {
  return model::ApiError{model::ErrorKind::kUnprocessable, std::move(message), std::move(field)};
}

// A size of the request's `limits` in the profile's unit syntax.
bool ParseRequestSize(const std::optional<std::string>& text, const char* field, std::optional<int64_t>* out,
                      model::ApiError* error) {
  if (!text) return true;
  auto bytes = profile::ParseSize(*text);
  if (!bytes.ok() || *bytes <= 0) {
    *error = Invalid(std::string("limits.") + field,
                     std::string("limits.") + field + ": '" + *text + "' is not a positive size (e.g. 134217728, 128Mi, 1Gi)");
    return false;
  }
  *out = *bytes;
  return true;
}

// The sandbox's limits for a profile's effective ones. Requests and warm pools
// both go through here, so a request that asks for nothing gets exactly the
// limits a pool's ready runs were made with.
isolation::Limits ToSandboxLimits(const profile::EffectiveLimits& e) {
  isolation::Limits l;
  l.memory_bytes = e.memory_bytes;
  l.pids = e.pids;
  l.cpus = e.cpu_cores;
  l.cpu_time_ms = static_cast<int64_t>(std::ceil(e.cpu_time_s * 1000));
  l.disk_bytes = e.disk_bytes;
  return l;
}

}  // namespace

model::EffectiveLimitsView ToView(const profile::EffectiveLimits& e) {
  model::EffectiveLimitsView v;
  v.profile = e.profile;
  v.timeout_s = e.timeout_s;
  v.memory_bytes = e.memory_bytes;
  v.cpu_cores = e.cpu_cores;
  v.cpu_time_s = e.cpu_time_s;
  v.pids = e.pids;
  v.disk_bytes = e.disk_bytes;
  v.output_bytes = e.output_bytes;
  v.clamped = e.clamped;
  return v;
}

bool ChannelBuffer::ReadFrom(int fd) {
  char buf[65536];
  // Bounded work per call, so one chatty run cannot starve the event loop.
  for (int i = 0; i < 16; ++i) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN;
    }
    if (n == 0) return false;
    if (!overflow_.empty()) continue;  // a flood being killed: drop the rest
    size_t room = data_.size() < cap_ ? cap_ - data_.size() : 0;
    size_t keep = std::min(room, static_cast<size_t>(n));
    data_.append(buf, keep);
    lines_ += static_cast<size_t>(std::count(buf, buf + keep, '\n'));
    if (keep < static_cast<size_t>(n)) {
      truncated_ = true;
      overflow_ = "the result channel got more than " + std::to_string(cap_) +
                  " bytes (the runner writes at most its results, an error and an end event)";
    } else if (lines_ > max_lines_) {
      truncated_ = true;
      overflow_ = "the result channel got more than " + std::to_string(max_lines_) +
                  " lines (the runner writes at most its results, an error and an end event)";
    }
  }
  return true;
}

model::RunReport ToRunReport(const exec::RunResult& r) {
  model::RunReport m;
  m.exit_code = r.exit_code;
  m.signal = r.signal;
  m.timed_out = r.timed_out;
  if (const char* reason = exec::KillReasonName(r.kill_reason)) m.kill_reason = reason;
  m.kill_detail = r.kill_detail;
  m.stdout_text = r.out.data;
  m.stderr_text = r.err.data;
  m.stdout_truncated = r.out.truncated;
  m.stderr_truncated = r.err.truncated;
  m.duration_ms = r.duration_ms;
  m.cpu_ms = r.cpu_ms;
  m.max_rss_kb = r.max_rss_kb;
  for (const auto& l : r.isolation.layers) m.layers.push_back({l.name, l.enforced, l.detail});
  m.landlock_abi = r.isolation.landlock_abi;
  m.cgroup_version = r.isolation.cgroup_version;
  m.mode = r.isolation.mode;
  m.host_uid = r.isolation.host_uid;
  return m;
}

StatusOr<std::unique_ptr<Service>> Service::Create(ServiceOptions options) {
  if (options.host == nullptr) return InvalidArgument("Service::Create: no HostSetup given");
  if (options.profiles.empty()) return InvalidArgument("Service::Create: no profiles loaded");
  // A misspelt rule id would make the approval policy hold nothing, silently.
  for (const profile::Profile& p : options.profiles.profiles()) {
    for (const std::string& rule : p.approval.rules) {
      if (analyzer::FindRule(rule) != nullptr || rule == "no_static_check") continue;
      std::string known;
      for (const analyzer::RuleInfo& r : analyzer::RuleCatalog()) {
        known += (known.empty() ? "" : ", ") + std::string(r.id);
      }
      return InvalidArgument("profile '" + p.name + "' (" + p.source + "): approval.rules: '" + rule +
                             "' is not a rule of the analyzer (the rules: " + known +
                             ", no_static_check; docs/api.md \"Analyzer rules\")");
    }
  }
  // Returned files travel on the channel as base64 (4/3) with their paths
  // (at most ~24 KiB each once escaped): room for the largest profile's.
  size_t need = 0;
  for (const profile::Profile& p : options.profiles.profiles()) {
    auto out_bytes = static_cast<size_t>(std::max<int64_t>(p.files.max_out_bytes, 0));
    auto out_files = static_cast<size_t>(std::clamp<int64_t>(p.files.max_out_files, 0, model::kMaxFileEvents));
    need = std::max(need, (out_bytes + 2) / 3 * 4 + out_files * (24 << 10));
  }
  options.max_event_bytes += need;
  std::unique_ptr<Service> s(new Service(std::move(options)));
  std::vector<profile::Language> wanted;
  for (const profile::Profile& p : s->options_.profiles.profiles()) {
    for (profile::Language l : p.languages) {
      if (l != profile::Language::kPython && std::find(wanted.begin(), wanted.end(), l) == wanted.end()) {
        wanted.push_back(l);
      }
    }
  }
  s->languages_ = ProbeHostLanguages(wanted);
  for (profile::Language language : wanted) {
    if (std::string missing = s->languages_.Missing(language); !missing.empty()) {
      log::Warn("a profile allows " + std::string(profile::LanguageName(language)) + ", but " + missing +
                ": its requests will be refused (422)");
    }
  }
  for (const profile::Profile& p : s->options_.profiles.profiles()) {
    s->analyzers_.emplace(p.name, analyzer::Analyzer(PolicyFor(p, s->options_.max_code_bytes)));
  }
  return s;
}

Service::~Service() = default;

Prepared Service::Prepare(const model::ExecuteRequest& req, const std::string& request_id) const {
  Prepared out;
  out.code_bytes = static_cast<int64_t>(req.code.size());
  out.code_sha256 = Sha256Hex(req.code);

  // 1. The profile.
  const profile::Profile* p = req.profile ? options_.profiles.Find(*req.profile) : &options_.profiles.Default();
  if (p == nullptr) {
    std::string names;
    for (const std::string& n : options_.profiles.Names()) names += (names.empty() ? "" : ", ") + n;
    out.error = Invalid("profile", "profile: '" + *req.profile + "' is not a profile of this server (available: " +
                                       names + ")");
    return out;
  }
  out.profile_name = p->name;

  // The language: the profile's first unless the request names one it allows.
  profile::Language language = p->languages.front();
  if (!req.language.empty()) {
    std::optional<profile::Language> asked = profile::LanguageFromName(req.language);
    if (!asked || !p->AllowsLanguage(*asked)) {
      std::string others;
      for (const profile::Profile& q : options_.profiles.profiles()) {
        if (asked && q.AllowsLanguage(*asked)) others += (others.empty() ? "" : ", ") + q.name;
      }
      out.error = Invalid("language", "language: '" + req.language.substr(0, 64) + "' is not allowed by profile " +
                                          p->name + " (it allows: " + LanguageList(p->languages) + "); " +
                                          (!asked ? std::string("the languages are python, javascript, typescript, r, java and bash")
                                           : others.empty() ? "no profile of this server allows it"
                                                            : "profiles that allow it: " + others));
      return out;
    }
    language = *asked;
  }
  if (std::string missing = languages_.Missing(language); !missing.empty()) {
    out.error = Invalid("language", "language: " + missing);
    return out;
  }
  if ((language == profile::Language::kTypeScript || language == profile::Language::kR ||
       language == profile::Language::kJava) &&
      !req.session_call) {
    const std::string name(profile::LanguageName(language));
    out.error = Invalid("language", "language: " + name +
                                        " runs in a session (POST /v1/sessions with {\"language\": \"" + name +
                                        "\"}, or a call of any session with it); a one-shot run takes python, "
                                        "javascript or bash");
    return out;
  }
  const bool python = language == profile::Language::kPython;
  // A language with limits of its own (language_resources): they replace the
  // profile's for this request, ceilings and defaults alike.
  std::optional<profile::Profile> language_limited;
  if (&p->ResourcesFor(language) != &p->resources) {
    language_limited = *p;
    language_limited->resources = p->ResourcesFor(language);
    p = &*language_limited;
  }

  // 2. The limits: an out-of-range timeout is the caller's mistake (422, as
  // on the fips sidecar); the other limits are clamped to the ceilings and
  // the clamping echoed.
  profile::RequestedLimits asked;
  asked.timeout_s = req.timeout_s;
  if (Status st = profile::Validate(*p, asked); !st.ok()) {
    out.error = Invalid("timeout", st.message());
    return out;
  }
  if (!ParseRequestSize(req.limits.memory, "memory", &asked.memory_bytes, &out.error) ||
      !ParseRequestSize(req.limits.disk, "disk", &asked.disk_bytes, &out.error) ||
      !ParseRequestSize(req.limits.output, "output", &asked.output_bytes, &out.error)) {
    return out;
  }
  asked.cpu_cores = req.limits.cpu;
  asked.cpu_time_s = req.limits.cpu_time;
  asked.pids = req.limits.pids;
  profile::EffectiveLimits limits = profile::Clamp(*p, asked);

  // 3. Input files: the profile's byte cap, and they must fit the working directory.
  int64_t in_bytes = 0;
  for (const model::InputFile& f : req.files) in_bytes += static_cast<int64_t>(f.content.size());
  if (in_bytes > p->files.max_in_bytes || in_bytes > limits.disk_bytes) {
    bool disk = in_bytes <= p->files.max_in_bytes;
    out.error = model::ApiError{
        model::ErrorKind::kPayloadTooLarge,
        "files: " + std::to_string(in_bytes) + " bytes in all, more than " +
            (disk ? "the working directory's size (limits.disk, " + std::to_string(limits.disk_bytes) + " bytes)"
                  : "profile " + p->name + "'s files.max_in_bytes (" + std::to_string(p->files.max_in_bytes) +
                        " bytes)") +
            ": send fewer or smaller files",
        "files"};
    return out;
  }

  // 4. Empty code: the fips sidecar's 400.
  if (IsBlank(req.code)) {
    out.error = model::ApiError{model::ErrorKind::kBadRequest, "No code provided", ""};
    return out;
  }
  // The environment a request may give its code.
  for (const auto& [name, value] : req.env) {
    if (std::string why = ReservedEnvName(name); !why.empty()) {
      out.error = Invalid("env", "env: " + name + ": " + why);
      return out;
    }
  }
  // A Python cell runs as Jupyter runs it: indented as a whole (as notebooks
  // and E2B's SDK send cells), it loses that indentation before it is analyzed
  // and run, so the analyzer reads what the runner runs.
  std::string dedented;
  analyzer::CellIndent indent;
  const std::string& code = python && analyzer::RemoveCellIndent(req.code, &dedented, &indent) ? dedented : req.code;

  // 5. Static analysis under the profile's modes.
  PolicyFindings findings;
  std::optional<model::Violation> syntax_error;
  auto an = analyzers_.find(p->name);
  if (!python) {
    // The analyzer reads Python only: say so rather than let silence pass for a clean check.
    model::Violation v;
    v.rule = "no_static_check";
    v.message = "no static check ran: the analyzer reads Python, not " + std::string(profile::LanguageName(language)) +
                "; the kernel layers (namespaces, seccomp, Landlock, cgroups) are this run's only boundary";
    v.severity = "info";
    v.stage = "ast_scan";
    v.compat = v.rule + ": " + v.message;
    findings.warnings.push_back(std::move(v));
    // What is shown is not what runs, in any language: reported all the same.
    for (model::Violation& w : InvisibleCharacterWarnings(req.code)) findings.warnings.push_back(std::move(w));
  } else if (an != analyzers_.end()) {
    findings = CheckPolicy(an->second, *p, code);
    // Where the client sees each finding: the column in the cell as sent.
    for (auto* list : {&findings.rejecting, &findings.warnings}) {
      for (model::Violation& v : *list) v.col = indent.OriginalColumn(v.line, v.col);
    }
    // A syntax error: Python's own report of it, as a run's error, whatever
    // the profile (the code is compiled in the sandbox and never run).
    syntax_error = TakeSyntaxError(&findings);
  }
  std::vector<model::Violation>& rejecting = findings.rejecting;
  std::vector<model::Violation>& warnings = findings.warnings;
  // Approval: rejecting findings of rules the profile lists hold the request
  // for a person instead; any other rejecting finding still rejects it. Code
  // that only has its syntax checked runs nothing: never held.
  const profile::Approval& approval = p->approval;
  bool held = approval.policy == profile::ApprovalPolicy::kAlways && !syntax_error;
  bool all_held = !rejecting.empty();
  for (const model::Violation& v : rejecting) all_held = all_held && approval.Holds(v.rule);
  if (all_held) held = true;
  if (approval.policy == profile::ApprovalPolicy::kOnFindings && !syntax_error) {
    for (const model::Violation& v : warnings) held = held || approval.Holds(v.rule);
    // Code the analyzer cannot read cannot be shown free of the listed
    // findings: a person decides (fail closed).
    held = held || !python;
  }
  if (!rejecting.empty() && !all_held) {
    out.verdict = Verdict::kRejected;
    out.error = model::ApiError{model::ErrorKind::kPolicy, "Code validation failed", ""};
    NameAllowingProfiles(analyzers_, options_.profiles, p->name, code, &rejecting);
    out.violations = std::move(rejecting);
    return out;
  }

  // 6. The Spec.
  auto plan = std::make_unique<Plan>();
  plan->request_id = request_id;
  plan->profile_name = p->name;
  plan->language = language;
  plan->code = code;
  if (held) {
    // The person sees every finding, the held rejecting ones first.
    out.violations = rejecting;
    out.violations.insert(out.violations.end(), warnings.begin(), warnings.end());
    warnings = out.violations;
  }
  plan->warnings = std::move(warnings);

  const LanguageRuntime runtime = RuntimeOf(language, languages_);
  model::RunnerConfig cfg;
  cfg.code_path = runtime.code_path;
  cfg.filename = runtime.filename;
  cfg.program = runtime.program;
  cfg.any_import = p->any_import;
  cfg.allowed_imports = p->allowed_imports;
  cfg.runtime_imports_mode = p->audit.runtime_imports == profile::AuditMode::kObserve ? "observe" : "enforce";
  for (const auto& e : p->blocklist) cfg.blocklist.emplace_back(e.module, e.attr);
  // preimport is for the warm interpreter (zygote); on this cold path every
  // run would pay for it (numpy + pandas + scipy: ~1 s). Library-internal
  // imports are allowed by the runner's hook anyway, so nothing changes for
  // user code.
  cfg.capture_figures = p->matplotlib;
  cfg.stream = req.stream_output;
  if (syntax_error) cfg.syntax_check = syntax_error->message;
  cfg.result_fd = 3;
  cfg.max_result_bytes = options_.max_result_bytes;
  cfg.max_result_values = static_cast<int64_t>(model::kMaxResultValues);
  cfg.env = req.env;
  cfg.files = req.files;
  cfg.max_out_files = std::clamp<int64_t>(p->files.max_out_files, 0, model::kMaxFileEvents);
  cfg.max_out_bytes = std::max<int64_t>(p->files.max_out_bytes, 0);
  plan->max_out_files = cfg.max_out_files;
  plan->max_out_bytes = cfg.max_out_bytes;

  // Only Python has a warm path (a zygote is a warm CPython). The config with
  // the code inline is also what a session's run is made from, warm or cold.
  if (python) {
    model::RunnerConfig warm = cfg;
    warm.code = code;
    warm.code_path.clear();
    warm.preimport = p->preimport;  // imported in the zygote already: a no-op
    if (!req.session_call && options_.pool != nullptr && options_.pool->Serves(p->name)) {
      plan->warm_request = model::RunnerConfigToJson(warm);
    }
    // Outside a session call the code is in warm_request (and the cold path's
    // file) already; nothing reads it here again (a session's first frame
    // clears it): a plan queued for a run slot or held for a person does not
    // keep one more copy of up to --max-code bytes. A session call's frame is
    // made from warm_config, code included.
    if (!req.session_call) warm.code.reset();
    plan->warm_config = std::move(warm);
  }

  isolation::Spec& spec = plan->spec;
  // A session call runs in the session's own run: no program, files or
  // environment of a cold run to prepare (the runner's source alone is ~70 KB).
  if (!req.session_call) {
    // -S: the runner completes what site would do (airlock_runner.complete_site).
    // The runner loaded from its build-time bytecode where there is some
    // (kBoot): compiling its source is a quarter of a cold run's CPU.
    const std::string_view bytecode = EmbeddedRunnerBytecode();
    // -X utf8: UTF-8 mode, as the zygote's interpreter has it (warm and cold runs alike).
    spec.argv = {"/usr/bin/python3", "-I", "-B", "-S", "-X", "utf8",
                 bytecode.empty() ? kRunnerPath : kBootPath, kConfigPath};
    spec.env = RunEnvironment();
    spec.files.push_back({kRunnerPath, std::string(EmbeddedRunner()), 0444});
    spec.files.push_back({runtime.code_path, code, 0444});
    spec.files.push_back({kConfigPath, model::RunnerConfigToJson(cfg), 0444});
    if (!bytecode.empty()) {
      spec.files.push_back({kBytecodePath, std::string(bytecode), 0444});
      spec.files.push_back({kBootPath, kBoot, 0444});
    }
    for (const exec::PythonModule& m : EmbeddedRunnerHelpers()) {
      spec.files.push_back({"/sandbox/" + std::string(m.name) + ".py", std::string(m.source), 0444});
    }
  }
  spec.limits = ToSandboxLimits(limits);
  spec.degradable = options_.host->degradable;

  plan->options.timeout_s = limits.timeout_s;
  plan->options.output_cap = limits.output_bytes;
  plan->limits = std::move(limits);
  out.verdict = Verdict::kRun;
  if (held) {
    out.verdict = Verdict::kNeedsApproval;
    out.code = req.code;  // as sent: what the person is shown
    out.files = req.files;
    model::ApprovalView digest;  // what request_sha256 binds (docs/api.md, Approvals)
    digest.code = out.code;
    digest.language = std::string(profile::LanguageName(plan->language));
    digest.profile = p->name;
    digest.limits = ToView(plan->limits);
    for (const model::InputFile& f : out.files) {
      out.file_sha256.push_back(Sha256Hex(f.content));
      digest.files.push_back({f.path, static_cast<int64_t>(f.content.size()), out.file_sha256.back()});
    }
    out.request_sha256 = Sha256Hex(model::RequestDigestJson(digest));
    out.error = model::ApiError{model::ErrorKind::kForbidden,
                                "profile " + p->name + " needs a person's approval for this code (approval policy " +
                                    std::string(profile::ApprovalPolicyName(approval.policy)) +
                                    "); send it to POST /v1/execute of airlock serve, which holds it for approval",
                                ""};
  }
  out.plan = std::move(plan);
  return out;
}

std::unique_ptr<exec::Execution> Service::TryStartWarmNow(Plan& plan) const {
  // Below a socket buffer the request is written without blocking.
  constexpr size_t kInlineRequestBytes = 64 << 10;
  if (plan.warm_request.empty() || plan.warm_request.size() > kInlineRequestBytes) return nullptr;
  exec::HandOff h = options_.pool->TakeRun(plan.profile_name, plan.spec, plan.options, plan.warm_request,
                                           /*may_wait=*/false);
  if (!h.execution) return nullptr;
  plan.events_read = std::move(h.events_read);
  return std::move(h.execution);
}

StatusOr<std::unique_ptr<exec::Execution>> Service::Start(Plan& plan) const {
  if (!plan.warm_request.empty()) {
    exec::HandOff h = options_.pool->TakeRun(plan.profile_name, plan.spec, plan.options, plan.warm_request);
    if (h.execution) {
      plan.events_read = std::move(h.events_read);
      return std::move(h.execution);
    }
    options_.pool->CountColdFallback(plan.profile_name);
    log::Debug("request " + plan.request_id + ": cold path: " + h.why_not);
  }
  // The channel is made here, right before the launch, not when the request
  // was prepared: every run launched while a write end exists in this process
  // inherits a copy of it, which would hold the channel open past the run.
  std::lock_guard<std::mutex> lock(launch_mu_);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe2 (result channel)");
  plan.events_read.reset(fds[0]);
  plan.events_write.reset(fds[1]);
  if (::fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) return ErrnoError("fcntl(O_NONBLOCK) on the result channel");
  plan.spec.extra_fd = fds[1];
  auto ex = exec::Execution::Start(*options_.host, plan.spec, plan.options);
  // The run holds its own copy now (or never will): ours must go, or the
  // channel would never reach EOF.
  plan.events_write.reset();
  plan.spec.extra_fd = -1;
  return ex;
}

model::ExecuteResponse Service::Complete(const Plan& plan, const exec::RunResult& result,
                                         const ChannelBuffer& channel) const {
  model::ExecuteResponse r;
  r.request_id = plan.request_id;
  r.run = ToRunReport(result);
  r.limits = ToView(plan.limits);
  r.warnings = plan.warnings;
  model::RunnerEvents ev = model::ParseRunnerEvents(channel.data(), channel.truncated());
  if (ev.malformed_lines > 0) {
    log::Debug("request " + plan.request_id + ": " + std::to_string(ev.malformed_lines) +
               " malformed line(s) on the result channel");
  }
  r.results = std::move(ev.displays);
  if (ev.main_result) {
    r.result = ev.main_result->text_plain;
    r.results.push_back(std::move(*ev.main_result));
  }
  r.results_truncated = ev.truncated;
  r.error = std::move(ev.error);
  // The channel is untrusted (user code can write to it): the profile's caps
  // again, on what the events claim.
  r.files_truncated = ev.files_truncated;
  int64_t out_bytes = 0;
  for (model::OutputFile& f : ev.files) {
    auto n = static_cast<int64_t>(model::Base64DecodedSize(f.content_base64));
    if (static_cast<int64_t>(r.files.size()) >= plan.max_out_files || out_bytes + n > plan.max_out_bytes) {
      r.files_truncated = true;
      continue;
    }
    out_bytes += n;
    r.files.push_back(std::move(f));
  }
  if (r.error && (r.error->name == "AirlockConfigError" || r.error->name == "AirlockRunnerError") &&
      ev.end_exit_code == 2) {
    // The runner's own failure, not the user's: something here is wrong.
    log::Error("request " + plan.request_id + ": the in-sandbox runner failed: " + r.error->value);
  }
  return r;
}

StatusOr<model::ExecuteResponse> Service::RunBlocking(const model::ExecuteRequest& request,
                                                      const std::string& request_id) const {
  Prepared p = Prepare(request, request_id);
  if (p.verdict == Verdict::kRejected) {
    std::string msg = "code validation failed:";
    for (const auto& v : p.violations) msg += " " + v.compat + ";";
    return InvalidArgument(msg);
  }
  if (p.verdict != Verdict::kRun) return InvalidArgument(p.error.message);
  Plan& plan = *p.plan;
  ASSIGN_OR_RETURN(std::unique_ptr<exec::Execution> ex, Start(plan));
  return Supervise(plan, std::move(ex));
}

StatusOr<model::ExecuteResponse> Service::Supervise(Plan& plan, std::unique_ptr<exec::Execution> ex,
                                                    const Disposer& dispose) const {
  ChannelBuffer channel(options_.max_event_bytes);
  bool channel_open = true;
  int cancel_fd = plan.options.cancel_fd;  // airlock run's Ctrl-C
  while (!ex->Exited()) {
    // A warm run's program said it ended and closed its streams: answer now,
    // as the server's event loop does (RunDriver::CheckExit), and leave the
    // teardown to `dispose` (without one, Finish waits for init's report).
    if (dispose && !channel_open) {
      std::optional<model::ProgramEnd> end = model::ParseProgramEnd(channel.data(), channel.truncated());
      if (end && ex->CanFinishOnEnd()) {
        exec::RunResult result = ex->FinishOnEnd(end->exit_code, end->max_rss_kb);
        model::ExecuteResponse response = Complete(plan, result, channel);
        dispose(std::move(ex));
        return response;
      }
    }
    int wait_ms = ex->OnTick();
    struct pollfd fds[5];
    nfds_t n = 0;
    for (int fd :
         {ex->stdout_fd(), ex->stderr_fd(), ex->pidfd(), channel_open ? plan.events_read.get() : -1, cancel_fd}) {
      if (fd >= 0) fds[n++] = {fd, POLLIN, 0};
    }
    int r = ::poll(fds, n, wait_ms);
    if (r < 0 && errno != EINTR) return ErrnoError("poll");
    for (nfds_t i = 0; i < n && r > 0; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == cancel_fd) {
        ex->Cancel(exec::KillReason::kCancelled, "the run was interrupted");
        cancel_fd = -1;  // once
      } else if (fds[i].fd == plan.events_read.get()) {
        channel_open = channel.ReadFrom(fds[i].fd);
        if (channel.overflowed()) ex->Cancel(exec::KillReason::kChannel, channel.overflow_detail());
      } else {
        ex->OnReadable(fds[i].fd);
      }
    }
  }
  // Every process of the run is gone: what is left in the channel is all there is.
  while (channel_open && channel.ReadFrom(plan.events_read.get())) {
    struct pollfd pfd = {plan.events_read.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) break;
  }
  exec::RunResult result = ex->Finish();
  model::ExecuteResponse response = Complete(plan, result, channel);
  if (dispose) dispose(std::move(ex));
  return response;
}

std::vector<model::PoolView> Service::Pools() const {
  std::vector<model::PoolView> out;
  if (options_.pool == nullptr) return out;
  for (const exec::PoolStatus& s : options_.pool->Snapshot()) {
    model::PoolView v;
    v.profile = s.profile;
    v.ready = s.ready;
    v.target = s.target;
    v.zygote = s.zygote;
    v.detail = s.detail;
    v.handoffs = s.handoffs;
    v.refills = s.refills;
    v.cold_fallbacks = s.cold_fallbacks;
    v.restarts = s.restarts;
    v.state = s.state;
    v.reason = s.reason;
    v.failures = s.failures;
    v.recycles = s.recycles;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<model::RuleView> Service::Rules() {
  std::vector<model::RuleView> out;
  for (const analyzer::RuleInfo& r : analyzer::RuleCatalog()) {
    out.push_back({std::string(r.id), std::string(r.family), std::string(r.stage), std::string(r.severity),
                   std::string(r.catches)});
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> Service::DoorDefaults() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (profile::Door d : profile::kDoors) {
    out.emplace_back(std::string(profile::DoorName(d)), options_.profiles.DefaultFor(d).name);
  }
  return out;
}

std::vector<std::string> RunEnvironment() {
  // The BLAS/OpenMP thread counts keep a zygote single-threaded (a fork copies
  // only the calling thread) and a run within its CPU share. The locale and
  // PYTHONUTF8 make text UTF-8 in every process of a run, whatever its
  // language (a python3 the program starts, bash, node).
  return {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/user",  "TMPDIR=/tmp",
          "LANG=C.UTF-8",                      "LC_ALL=C.UTF-8",   "USER=sandbox",
          "MPLBACKEND=Agg",                    "MPLCONFIGDIR=/tmp/.matplotlib",
          "PYTHONIOENCODING=utf-8",            "PYTHONUTF8=1",     "OPENBLAS_NUM_THREADS=1",
          "OMP_NUM_THREADS=1",                 "MKL_NUM_THREADS=1"};
}

std::string ReservedEnvName(std::string_view name) {
  for (const std::string& var : RunEnvironment()) {
    if (std::string_view(var).substr(0, var.find('=')) == name) {
      return "the sandbox sets this variable itself (" + std::string(var) + "); a request may not change it";
    }
  }
  static constexpr std::string_view kPrefixes[] = {"LD_", "PYTHON", "LC_", "AIRLOCK_", "MALLOC_"};
  for (std::string_view prefix : kPrefixes) {
    if (name.substr(0, prefix.size()) == prefix) {
      return "variables starting with " + std::string(prefix) +
             " change how programs are loaded or run in the sandbox; a request may not set them";
    }
  }
  static constexpr std::string_view kNames[] = {"GLIBC_TUNABLES", "GCONV_PATH", "NODE_OPTIONS", "BASH_ENV", "ENV"};
  for (std::string_view reserved : kNames) {
    if (name == reserved) {
      return "this variable changes how programs are loaded or started in the sandbox; a request may not set it";
    }
  }
  return "";
}

std::vector<exec::PoolProfile> WarmPoolProfiles(const profile::ProfileSet& profiles) {
  std::vector<exec::PoolProfile> out;
  for (const profile::Profile& p : profiles.profiles()) {
    if (!p.AllowsLanguage(profile::Language::kPython)) continue;
    exec::PoolProfile pp;
    pp.name = p.name;
    pp.preimport = p.preimport;
    // A pool's runs are Python runs: Python's own limits where the profile sets them.
    profile::Profile python = p;
    python.resources = p.ResourcesFor(profile::Language::kPython);
    pp.limits = ToSandboxLimits(profile::Clamp(python, profile::RequestedLimits{}));
    out.push_back(std::move(pp));
  }
  return out;
}

model::ProfileView Service::View(const profile::Profile& p, profile::Door door) const {
  model::ProfileView v;
  v.name = p.name;
  v.description = p.description;
  v.extends = p.extends;
  v.any_import = p.any_import;
  v.allowed_imports = p.allowed_imports;
  for (const auto& e : p.blocklist) v.blocklist.emplace_back(e.module, e.attr);
  v.preimport = p.preimport;
  for (auto s : p.scan_stages.pre) v.scan_pre.emplace_back(profile::ScanStageName(s));
  for (auto s : p.scan_stages.post) v.scan_post.emplace_back(profile::ScanStageName(s));
  v.audit_modes = {{"ast_scan", std::string(profile::AuditModeName(p.audit.ast_scan))},
                   {"blocklist_audit", std::string(profile::AuditModeName(p.audit.blocklist_audit))},
                   {"audit_patterns", std::string(profile::AuditModeName(p.audit.audit_patterns))},
                   {"runtime_imports", std::string(profile::AuditModeName(p.audit.runtime_imports))}};
  static_cast<model::ResourcesView&>(v) = ToResourcesView(p.resources);
  v.language = std::string(profile::LanguageName(p.languages.front()));
  for (profile::Language l : p.languages) {
    v.languages.emplace_back(profile::LanguageName(l));
    // What binds this language's code beyond the kernel: the analyzer, the
    // allowlist, the blocklist and the import hook read Python only (the
    // loader refuses a profile that pairs them with another language).
    model::LanguageLayers layers;
    layers.language = v.languages.back();
    if (l == profile::Language::kPython) {
      const auto& pre = p.scan_stages.pre;
      auto in_pre = [&pre](profile::ScanStage st) { return std::find(pre.begin(), pre.end(), st) != pre.end(); };
      const profile::AuditMode ast = in_pre(profile::ScanStage::kAstScan) ? p.audit.ast_scan : profile::AuditMode::kOff;
      layers.analyzer = std::string(profile::AuditModeName(ast));
      layers.import_allowlist = !p.any_import && ast != profile::AuditMode::kOff;
      layers.blocklist = !p.blocklist.empty() && in_pre(profile::ScanStage::kBlocklistAudit) &&
                         p.audit.blocklist_audit != profile::AuditMode::kOff;
      layers.runtime_import_hook = std::string(profile::AuditModeName(p.audit.runtime_imports));
    } else {
      layers.analyzer = "invisible-characters";
      layers.runtime_import_hook = "none";
    }
    v.layers.push_back(std::move(layers));
  }
  for (const auto& [l, r] : p.language_resources) {
    v.language_resources.emplace_back(std::string(profile::LanguageName(l)), ToResourcesView(r));
  }
  v.network = std::string(profile::NetworkName(p.network));
  v.matplotlib = p.matplotlib;
  v.is_default = p.name == options_.profiles.DefaultFor(door).name;
  v.approval_policy = std::string(profile::ApprovalPolicyName(p.approval.policy));
  v.approval_rules = p.approval.rules;
  v.approval_expires_s = p.approval.expires_s;
  v.approval_self = p.approval.self_approve;
  return v;
}

}  // namespace airlock::service
