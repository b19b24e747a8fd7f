// service::Service: the verdicts of Prepare (no process started) and, where the host can
// run sandboxes, the whole path through RunBlocking.
#include "service/service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "base/fs.h"
#include "profile/loader.h"
#include "service/embedded_runner.h"
#include "service/language_runtime.h"
#include "tests/helpers/must_work.h"

namespace airlock::service {
namespace {

// A language whose runtime the host lacks: what is missing and the Debian
// package that brings it (a session of it answers 400 with this).
TEST(HostLanguagesTest, MissingNamesTheBinaryAndThePackage) {
  HostLanguages none;
  struct Case {
    profile::Language language;
    const char* binary;
    const char* package;
  } cases[] = {
      {profile::Language::kJavaScript, "/usr/bin/node", "nodejs"},
      {profile::Language::kTypeScript, "/usr/share/nodejs/typescript", "node-typescript"},
      {profile::Language::kR, "/usr/bin/Rscript", "r-base-core"},
      {profile::Language::kJava, "/usr/bin/jshell", "default-jdk-headless"},
      {profile::Language::kBash, "/usr/bin/bash", "bash"},
  };
  for (const Case& c : cases) {
    const std::string why = none.Missing(c.language);
    EXPECT_NE(why.find(c.binary), std::string::npos) << why;
    EXPECT_NE(why.find(c.package), std::string::npos) << why;
    EXPECT_EQ(why.rfind(std::string(profile::LanguageName(c.language)) + " needs", 0), 0u) << why;
  }
  EXPECT_EQ(none.Missing(profile::Language::kPython), "");  // the runner is Python
  HostLanguages all;
  all.javascript = all.typescript = all.r = all.java = all.bash = true;
  for (const Case& c : cases) EXPECT_EQ(all.Missing(c.language), "");
}

constexpr const char* kStrict = R"(name: strict
description: test
imports:
  allowed: [math]
blocklist: [[math, factorial]]
resources: {memory: 64Mi, timeout_max: 5, timeout_default: 2, pids: 16}
scan_stages: {pre: [ast_scan, blocklist_audit], post: []}
)";
constexpr const char* kWatch = R"(name: watch
description: observe only
imports:
  allowed: [math]
resources: {timeout_max: 5, timeout_default: 2}
audit: {mode: {ast_scan: observe, runtime_imports: observe}}
)";

// Small file caps (named so that it is not the default profile).
constexpr const char* kFiles = R"(name: zfiles
description: small file caps
imports:
  allowed: [math]
resources: {timeout_max: 5, timeout_default: 2}
files: {max_in_bytes: 10, max_out_bytes: 6, max_out_files: 2}
)";

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto set = profile::ParseProfiles({{"strict.yaml", kStrict}, {"watch.yaml", kWatch}, {"zfiles.yaml", kFiles}});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ServiceOptions o;
    o.profiles = std::move(*set);
    o.host = &host_;
    auto s = Service::Create(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    svc_ = std::move(*s);
  }

  Prepared Prep(const std::string& code, std::optional<double> timeout = std::nullopt,
                std::optional<std::string> profile = std::nullopt) {
    model::ExecuteRequest r;
    r.code = code;
    r.timeout_s = timeout;
    r.profile = profile;
    return svc_->Prepare(r, "req_test");
  }

  isolation::HostSetup host_;
  std::unique_ptr<Service> svc_;
};

TEST_F(ServiceTest, RunVerdictBuildsTheSpec) {
  Prepared p = Prep("import math\nprint(math.pi)", 1.5);
  ASSERT_EQ(p.verdict, Verdict::kRun) << p.error.message;
  EXPECT_EQ(p.profile_name, "strict");  // the default: first by name without "minimal"
  EXPECT_EQ(p.code_sha256.size(), 64u);
  const Plan& plan = *p.plan;
  EXPECT_EQ(plan.limits.timeout_s, 1.5);
  EXPECT_EQ(plan.options.timeout_s, 1.5);
  EXPECT_EQ(plan.spec.limits.memory_bytes, 64 << 20);
  EXPECT_EQ(plan.spec.limits.pids, 16);
  EXPECT_EQ(plan.spec.argv.back(), "/sandbox/config.json");
  // The runner, the code, the config; then, where the build compiled the
  // runner, its bytecode and the script that loads it (the run's main script);
  // then the runner's helper modules.
  const bool bytecode = !EmbeddedRunnerBytecode().empty();
  const size_t helpers = EmbeddedRunnerHelpers().size();
  ASSERT_EQ(helpers, 2u);
  ASSERT_EQ(plan.spec.files.size(), (bytecode ? 5u : 3u) + helpers);
  EXPECT_EQ(plan.spec.files[plan.spec.files.size() - 2].path, "/sandbox/airlock_charts.py");
  EXPECT_EQ(plan.spec.files.back().path, "/sandbox/airlock_display.py");
  EXPECT_NE(plan.spec.files.back().content.find("def display("), std::string::npos);
  EXPECT_NE(plan.spec.files[0].content.find("def "), std::string::npos);  // the embedded runner
  EXPECT_EQ(plan.spec.files[1].content, "import math\nprint(math.pi)");
  EXPECT_NE(plan.spec.files[2].content.find(R"("allowed_imports":["math"])"), std::string::npos);
  const std::string main_script = plan.spec.argv[plan.spec.argv.size() - 2];
  if (bytecode) {
    EXPECT_EQ(plan.spec.files[3].path, "/sandbox/airlock_runner.bytecode");
    EXPECT_EQ(plan.spec.files[3].content, std::string(EmbeddedRunnerBytecode()));
    EXPECT_EQ(plan.spec.files[4].path, main_script);
    EXPECT_EQ(main_script, "/sandbox/airlock_boot.py");
  } else {
    EXPECT_EQ(main_script, "/sandbox/airlock_runner.py");
  }
  EXPECT_EQ(plan.spec.extra_fd, -1);  // the channel is made at Start()
  for (const std::string& e : plan.spec.env) EXPECT_EQ(e.find("AIRLOCK"), std::string::npos) << e;
}

// The boot script of a cold run, run by the python3 the sandboxes run (no
// sandbox needed: it only loads the runner). The runner proves it ran by its
// own error for a config that does not exist.
TEST_F(ServiceTest, ColdRunsLoadTheRunnerFromItsBytecodeOrElseItsSource) {
  if (EmbeddedRunnerBytecode().empty() || ::access("/usr/bin/python3", X_OK) != 0) {
    if (test::MustWork()) FAIL() << "no runner bytecode in this build, or no /usr/bin/python3";
    GTEST_SKIP() << "no runner bytecode in this build, or no /usr/bin/python3";
  }
  Prepared p = Prep("print(1)");
  ASSERT_EQ(p.verdict, Verdict::kRun) << p.error.message;
  char dir_template[] = "/tmp/airlock-boot-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  auto write = [&](const std::string& name, const std::string& content) {
    FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(content.data(), 1, content.size(), f), content.size());
    std::fclose(f);
  };
  std::string boot, runner, bytecode;
  std::vector<std::pair<std::string, std::string>> helpers;  // file name, source
  for (const isolation::FileEntry& f : p.plan->spec.files) {
    if (f.path == "/sandbox/airlock_boot.py") boot = f.content;
    if (f.path == "/sandbox/airlock_runner.py") runner = f.content;
    if (f.path == "/sandbox/airlock_runner.bytecode") bytecode = f.content;
    if (f.path == "/sandbox/airlock_display.py" || f.path == "/sandbox/airlock_charts.py") {
      helpers.emplace_back(f.path.substr(9), f.content);
    }
  }
  ASSERT_FALSE(boot.empty());
  ASSERT_FALSE(runner.empty());
  ASSERT_GT(bytecode.size(), 4u);
  ASSERT_EQ(helpers.size(), 2u);
  // Exit code and stderr of the boot script given a config path that does not exist.
  auto run = [&]() {
    const std::string out = dir + "/stderr";
    std::string cmd = "/usr/bin/python3 -I -B -S " + dir + "/airlock_boot.py " + dir + "/no-config.json 2>" + out;
    int rc = std::system(cmd.c_str());
    StatusOr<std::string> err = ReadFile(out);
    return std::make_pair(rc, err.ok() ? *err : std::string());
  };
  write("airlock_boot.py", boot);

  // The bytecode is what runs, the helpers' too: the sources beside it do not
  // even parse.
  write("airlock_runner.bytecode", bytecode);
  write("airlock_runner.py", "this is not python (\n");
  for (const auto& [name, source] : helpers) write(name, "this is not python either (\n");
  auto [rc1, err1] = run();
  EXPECT_NE(rc1, 0);
  EXPECT_NE(err1.find("cannot read config"), std::string::npos) << err1;

  // Another python's magic: the sources are compiled instead, and run the same.
  std::string foreign = bytecode;
  foreign[0] = static_cast<char>(foreign[0] ^ 0x5a);
  write("airlock_runner.bytecode", foreign);
  write("airlock_runner.py", runner);
  for (const auto& [name, source] : helpers) write(name, source);
  auto [rc2, err2] = run();
  EXPECT_EQ(rc2, rc1);
  EXPECT_NE(err2.find("cannot read config"), std::string::npos) << err2;

  // And a foreign magic with a broken source fails loudly (the source was used).
  write("airlock_runner.py", "this is not python (\n");
  auto [rc3, err3] = run();
  EXPECT_NE(err3.find("SyntaxError"), std::string::npos) << err3;

  for (const char* name : {"airlock_boot.py", "airlock_runner.py", "airlock_runner.bytecode", "airlock_display.py",
                           "airlock_charts.py", "stderr"}) {
    ::unlink((dir + "/" + name).c_str());
  }
  ::rmdir(dir.c_str());
}

TEST_F(ServiceTest, FilesAreCappedInAndOut) {
  model::ExecuteRequest r;
  r.code = "print(1)";
  r.profile = "zfiles";
  r.files = {{"a.txt", "12345"}, {"d/b.bin", "678901"}};  // 11 bytes > max_in_bytes 10
  Prepared over = svc_->Prepare(r, "req_files");
  ASSERT_EQ(over.verdict, Verdict::kInvalid);
  EXPECT_EQ(over.error.kind, model::ErrorKind::kPayloadTooLarge);
  EXPECT_EQ(over.error.field, "files");
  EXPECT_NE(over.error.message.find("max_in_bytes"), std::string::npos) << over.error.message;
  r.files.pop_back();
  Prepared p = svc_->Prepare(r, "req_files");
  ASSERT_EQ(p.verdict, Verdict::kRun) << p.error.message;
  const std::string& cfg = p.plan->spec.files[2].content;
  EXPECT_NE(cfg.find(R"("files":[{"content":"MTIzNDU=","path":"a.txt"}])"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find(R"("max_out_files":2)"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find(R"("max_out_bytes":6)"), std::string::npos) << cfg;
  // The channel may carry the profiles' file budgets on top of the 8 MiB.
  EXPECT_GT(svc_->max_event_bytes(), size_t{8} << 20);

  // What the (untrusted) channel claims is capped again: 3 well-formed file
  // events of 3 bytes each, the profile allows 2 files and 6 bytes.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string events;
  for (const char* name : {"f1", "f2", "f3"}) {
    events += std::string(R"({"type":"file","path":")") + name + R"(","size":3,"content":"YWJj","truncated":false})" "\n";
  }
  events += R"({"type":"end","exit_code":0})" "\n";
  ASSERT_EQ(::write(fds[1], events.data(), events.size()), static_cast<ssize_t>(events.size()));
  ::close(fds[1]);
  ChannelBuffer channel(svc_->max_event_bytes());
  while (channel.ReadFrom(fds[0])) {
  }
  ::close(fds[0]);
  exec::RunResult result;
  model::ExecuteResponse resp = svc_->Complete(*p.plan, result, channel);
  ASSERT_EQ(resp.files.size(), 2u);
  EXPECT_EQ(resp.files[0].path, "f1");
  EXPECT_EQ(resp.files[1].path, "f2");
  EXPECT_TRUE(resp.files_truncated);
}

TEST_F(ServiceTest, DefaultTimeoutAndRange) {
  Prepared p = Prep("print(1)");
  ASSERT_EQ(p.verdict, Verdict::kRun);
  EXPECT_EQ(p.plan->limits.timeout_s, 2);
  for (double bad : {0.0, -1.0, 5.01, 60.0}) {
    p = Prep("print(1)", bad);
    EXPECT_EQ(p.verdict, Verdict::kInvalid) << bad;
    EXPECT_EQ(p.error.kind, model::ErrorKind::kUnprocessable);
    EXPECT_EQ(p.error.field, "timeout");
  }
}

TEST_F(ServiceTest, EmptyCodeAndUnknownProfile) {
  Prepared p = Prep(" \n\t");
  EXPECT_EQ(p.verdict, Verdict::kInvalid);
  EXPECT_EQ(p.error.kind, model::ErrorKind::kBadRequest);
  EXPECT_EQ(p.error.message, "No code provided");
  p = Prep("print(1)", std::nullopt, "nope");
  EXPECT_EQ(p.error.kind, model::ErrorKind::kUnprocessable);
  EXPECT_EQ(p.error.field, "profile");
  EXPECT_NE(p.error.message.find("strict, watch"), std::string::npos) << p.error.message;
}

TEST_F(ServiceTest, EnforceRejectsObserveWarns) {
  Prepared p = Prep("import os\nimport math\nmath.factorial(3)");
  ASSERT_EQ(p.verdict, Verdict::kRejected);
  ASSERT_GE(p.violations.size(), 2u);
  EXPECT_EQ(p.violations[0].rule, "import-not-allowed");
  // The refusal names where the code's finding would not refuse it: watch only observes.
  EXPECT_EQ(p.violations[0].compat,
            "Line 1: import of 'os' is not allowed (not in allowed imports) in profile 'strict'; allowed in: watch");
  ASSERT_TRUE(p.violations[0].allowed_in.has_value());
  EXPECT_EQ(*p.violations[0].allowed_in, std::vector<std::string>{"watch"});
  bool blocklist = false;
  for (const auto& v : p.violations) blocklist = blocklist || v.stage == "blocklist_audit";
  EXPECT_TRUE(blocklist);

  p = Prep("import os\nprint(os.getcwd())", std::nullopt, "watch");
  ASSERT_EQ(p.verdict, Verdict::kRun);
  ASSERT_FALSE(p.plan->warnings.empty());
  EXPECT_EQ(p.plan->warnings[0].rule, "import-not-allowed");
  EXPECT_NE(p.plan->spec.files[2].content.find(R"("runtime_imports_mode":"observe")"), std::string::npos);
}

// A Python cell indented as a whole (a notebook's, E2B's) runs as Jupyter runs
// it: the analyzer reads and the runner gets it without that indentation, and
// findings point at the cell as it was sent.
TEST_F(ServiceTest, IndentedCellsAreAnalyzedAndRunDedented) {
  Prepared p = Prep("\n    import math\n    if math.pi:\n        math.e\n    ");
  ASSERT_EQ(p.verdict, Verdict::kRun) << p.error.message;
  EXPECT_EQ(p.plan->code, "\nimport math\nif math.pi:\n    math.e\n");
  EXPECT_EQ(p.plan->spec.files[1].content, p.plan->code);
  EXPECT_TRUE(p.plan->warnings.empty());
  EXPECT_EQ(p.code_sha256.size(), 64u);  // of the code as sent (the audit's)

  p = Prep("\n    import math\n    import os\n");
  ASSERT_EQ(p.verdict, Verdict::kRejected);
  ASSERT_EQ(p.violations[0].rule, "import-not-allowed");
  EXPECT_EQ(p.violations[0].line, 3);
  EXPECT_EQ(p.violations[0].col, 12);  // "os", counted in the line as sent
}

TEST_F(ServiceTest, EnvGoesToTheRunnerUnlessTheSandboxReservesTheName) {
  model::ExecuteRequest r;
  r.code = "print(1)";
  r.env = {{"MODE", "test"}, {"ENVIRONMENT", "x"}, {"LDX", "ok"}};
  Prepared p = svc_->Prepare(r, "req_env");
  ASSERT_EQ(p.verdict, Verdict::kRun) << p.error.message;
  EXPECT_NE(p.plan->spec.files[2].content.find(R"("env":{"ENVIRONMENT":"x","LDX":"ok","MODE":"test"})"),
            std::string::npos)
      << p.plan->spec.files[2].content;
  // Never in the sandbox's own environment: the runner sets them for the code.
  for (const std::string& e : p.plan->spec.env) EXPECT_EQ(e.find("MODE="), std::string::npos) << e;
  for (const char* name : {"PATH", "HOME", "TMPDIR", "LANG", "MPLCONFIGDIR", "OMP_NUM_THREADS", "LD_PRELOAD",
                           "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP", "LC_ALL", "LC_CTYPE", "AIRLOCK_TOKENS",
                           "GLIBC_TUNABLES", "GCONV_PATH", "MALLOC_ARENA_MAX", "NODE_OPTIONS", "BASH_ENV", "ENV"}) {
    r.env = {{"MODE", "x"}, {name, "/tmp/evil"}};
    p = svc_->Prepare(r, "req_env");
    EXPECT_EQ(p.verdict, Verdict::kInvalid) << name;
    EXPECT_EQ(p.error.field, "env") << name;
    EXPECT_EQ(p.error.message.rfind(std::string("env: ") + name + ": ", 0), 0u) << p.error.message;
    EXPECT_FALSE(ReservedEnvName(name).empty()) << name;
  }
  for (const char* name : {"MODE", "PATHS", "HOMEDIR", "LANGUAGE_X", "ENVIRONMENT", "L", "NODE_ENV"}) {
    EXPECT_EQ(ReservedEnvName(name), "") << name;
  }
}

// Every refusal says which of the server's profiles would run the finding,
// or that none would; only refusing findings carry the list.
TEST_F(ServiceTest, RefusalsNameTheProfilesThatAllowEachFinding) {
  Prepared p = Prep("import math\nmath.factorial(3)\nimport os\n");
  ASSERT_EQ(p.verdict, Verdict::kRejected);
  ASSERT_EQ(p.violations.size(), 2u);
  EXPECT_EQ(p.violations[0].rule, "blocklist");  // strict's blocklist: watch and zfiles have none
  EXPECT_EQ(*p.violations[0].allowed_in, (std::vector<std::string>{"watch", "zfiles"}));
  EXPECT_NE(p.violations[0].message.find("in profile 'strict'; allowed in: watch, zfiles"), std::string::npos)
      << p.violations[0].message;
  EXPECT_EQ(p.violations[1].rule, "import-not-allowed");
  EXPECT_EQ(*p.violations[1].allowed_in, std::vector<std::string>{"watch"});  // zfiles enforces its allowlist
  // A finding no profile lets through.
  p = Prep("import os\n", std::nullopt, "zfiles");
  ASSERT_EQ(p.verdict, Verdict::kRejected);
  EXPECT_EQ(*p.violations[0].allowed_in, std::vector<std::string>{"watch"});
  p = Prep("eval('1')\n", std::nullopt, "zfiles");
  ASSERT_EQ(p.verdict, Verdict::kRejected);
  ASSERT_EQ(p.violations[0].rule, "blocked-call");
  EXPECT_EQ(*p.violations[0].allowed_in, std::vector<std::string>{"watch"});
  // Warnings carry none.
  p = Prep("import os\n", std::nullopt, "watch");
  ASSERT_EQ(p.verdict, Verdict::kRun);
  EXPECT_FALSE(p.plan->warnings[0].allowed_in.has_value());
}

// A syntax error is Python's to report, whatever the profile: the code runs
// with syntax_check set (compiled, never run), its other findings reported.
TEST_F(ServiceTest, SyntaxErrorsRunAsASyntaxCheck) {
  Prepared p = Prep("import os\nprint((1\n");
  ASSERT_EQ(p.verdict, Verdict::kRun) << p.error.message;
  ASSERT_TRUE(p.plan->warm_config.syntax_check.has_value());
  EXPECT_NE(p.plan->warm_config.syntax_check->find("'(' was never closed"), std::string::npos);
  EXPECT_NE(p.plan->spec.files[2].content.find(R"("syntax_check":"SyntaxError: )"), std::string::npos);
  ASSERT_EQ(p.plan->warnings.size(), 1u);  // the refused import, still reported
  EXPECT_EQ(p.plan->warnings[0].rule, "import-not-allowed");
  // Code that parses is analyzed and refused as before.
  p = Prep("import os\nprint((1))\n");
  EXPECT_EQ(p.verdict, Verdict::kRejected);
  // A profile that holds every request does not hold code that only has its syntax checked.
  auto set = profile::ParseProfiles({{"gated.yaml", "name: gated\nimports: {allowed: [math]}\napproval: {policy: always}\n"}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ServiceOptions o;
  o.profiles = std::move(*set);
  o.host = &host_;
  auto gated = Service::Create(std::move(o));
  ASSERT_TRUE(gated.ok());
  model::ExecuteRequest r;
  r.code = "print((1\n";
  EXPECT_EQ((*gated)->Prepare(r, "req").verdict, Verdict::kRun);
  r.code = "print(1)\n";
  EXPECT_EQ((*gated)->Prepare(r, "req").verdict, Verdict::kNeedsApproval);
}

// A misspelt approval rule would hold nothing: the server refuses to start and lists the rules.
TEST(ServiceCreateTest, ApprovalRulesMustBeRulesOfTheAnalyzer) {
  isolation::HostSetup host;
  for (const char* rule : {"blocked_call", "blocked-call"}) {
    auto set = profile::ParseProfiles({{"held.yaml", std::string("name: held\napproval:\n  policy: on_findings\n"
                                                                 "  rules: [") + rule + "]\n"}});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ServiceOptions o;
    o.profiles = std::move(*set);
    o.host = &host;
    auto s = Service::Create(std::move(o));
    if (std::string(rule) == "blocked-call") {
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      continue;
    }
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("profile 'held' (held.yaml): approval.rules: 'blocked_call' is not a rule of "
                                        "the analyzer (the rules: syntax, encoding,"),
              std::string::npos)
        << s.status().message();
  }
}

TEST(ChannelBuffer, CapsAndEof) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::string chunk(1000, 'x');
  for (int i = 0; i < 5; ++i) ASSERT_EQ(write(fds[1], chunk.data(), chunk.size()), 1000);
  close(fds[1]);
  ChannelBuffer b(2500);
  EXPECT_FALSE(b.ReadFrom(fds[0]));  // all read, then EOF
  EXPECT_EQ(b.data().size(), 2500u);
  EXPECT_TRUE(b.truncated());
  EXPECT_TRUE(b.overflowed());  // past the byte cap: the caller kills the run
  close(fds[0]);
}

TEST(ChannelBuffer, AFloodOverflows) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::string lines;
  for (int i = 0; i < 20; ++i) lines += "{}\n";
  ASSERT_EQ(write(fds[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  close(fds[1]);
  ChannelBuffer b(1 << 20, /*max_lines=*/10);
  EXPECT_FALSE(b.ReadFrom(fds[0]));
  EXPECT_TRUE(b.overflowed());
  EXPECT_NE(b.overflow_detail().find("10 lines"), std::string::npos);
  close(fds[0]);

  // Within both caps: not a flood.
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], lines.data(), 30), 30);
  close(fds[1]);
  ChannelBuffer ok(1 << 20, 10);
  EXPECT_FALSE(ok.ReadFrom(fds[0]));
  EXPECT_FALSE(ok.overflowed());
  EXPECT_FALSE(ok.truncated());
  close(fds[0]);
}

TEST(ServiceRun, WholePath) {
  isolation::HostOptions ho;
  auto host = isolation::PrepareHost(ho);
  if (!host.ok()) {
    if (!::airlock::test::MustWork()) GTEST_SKIP() << "this host cannot run sandboxes: " << host.status().ToString();
    FAIL() << host.status().ToString();
  }
  // kStrict with room for a cold run on a loaded host: here one took over 5 s
  // (the profile's ceiling) while other builds and tests ran.
  std::string strict = kStrict;
  strict.replace(strict.find("timeout_max: 5"), 14, "timeout_max: 60");
  auto set = profile::ParseProfiles({{"strict.yaml", strict}});
  ASSERT_TRUE(set.ok());
  ServiceOptions o;
  o.profiles = std::move(*set);
  o.host = &*host;
  auto svc = Service::Create(std::move(o));
  ASSERT_TRUE(svc.ok());
  model::ExecuteRequest req;
  req.code = "import math\nprint('hi')\nx = 3\n\ndef f():\n    return 1 / 0\nprint(x)\nmath.sqrt(16)\n";
  req.timeout_s = 60;
  auto r = (*svc)->RunBlocking(req, "req_1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::cout << "[ host    ] a cold run through the service took " << r->run.duration_ms << " ms\n";
  EXPECT_EQ(r->run.stdout_text, "hi\n3\n");
  EXPECT_EQ(r->result, "4.0");
  EXPECT_FALSE(r->error.has_value());
  EXPECT_EQ(r->run.exit_code, 0) << r->run.kill_reason.value_or("not killed") << ": " << r->run.kill_detail << " after "
                                 << r->run.duration_ms << " ms";

  req.code = "x = 1\n\ndef f():\n    return 1 / 0\n\nf()\n";
  r = (*svc)->RunBlocking(req, "req_2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->run.exit_code, 1);
  ASSERT_TRUE(r->error.has_value());
  EXPECT_EQ(r->error->name, "ZeroDivisionError");
  EXPECT_NE(r->error->traceback.find("File \"main.py\", line 4"), std::string::npos) << r->error->traceback;
  EXPECT_EQ(r->error->traceback.find("/sandbox"), std::string::npos);
}

}  // namespace
}  // namespace airlock::service
