#include "profile/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace airlock::profile {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kFile[] = "profiles/t.yaml";

Profile Parse(std::string_view yaml) {
  StatusOr<Profile> p = ParseProfileYaml(yaml, kFile);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? p.value() : Profile{};
}

// The error message of a profile that must not load.
std::string Error(std::string_view yaml, std::string file = kFile) {
  StatusOr<Profile> p = ParseProfileYaml(yaml, std::move(file));
  EXPECT_FALSE(p.ok()) << "loaded:\n" << yaml;
  if (p.ok()) return "";
  EXPECT_EQ(p.status().code(), ErrorCode::kInvalidArgument);
  return p.status().message();
}

StatusOr<ProfileSet> ParseSet(std::vector<ProfileSource> sources) { return ParseProfiles(sources); }

std::string SetError(std::vector<ProfileSource> sources) {
  StatusOr<ProfileSet> s = ParseProfiles(sources);
  EXPECT_FALSE(s.ok());
  return s.ok() ? "" : s.status().message();
}

constexpr char kRoot[] = R"(name: base
description: the root
imports:
  allowed: [math, json]
blocklist:
  - [json, loads]
preimport: [json]
resources:
  memory: 256Mi
  cpu: 500m
  timeout_max: 30
  pids: 32
scan_stages:
  pre: [ast_scan]
)";

// --- a root profile -------------------------------------------------------

TEST(ParseProfileYamlTest, EmptyMappingTakesTheDefaults) {
  Profile p = Parse("name: t\n");
  EXPECT_EQ(p.name, "t");
  EXPECT_EQ(p.source, kFile);
  EXPECT_TRUE(p.allowed_imports.empty());
  EXPECT_FALSE(p.any_import);
  EXPECT_FALSE(p.AllowsImport("math"));
  EXPECT_EQ(p.resources.memory_bytes, 256 << 20);
  EXPECT_DOUBLE_EQ(p.resources.cpu_cores, 0.5);
  EXPECT_DOUBLE_EQ(p.resources.timeout_max_s, 30);
  EXPECT_DOUBLE_EQ(p.resources.timeout_default_s, 10);
  EXPECT_EQ(p.resources.pids, 32);
  EXPECT_EQ(p.resources.output_bytes, 51200);
  EXPECT_FALSE(p.resources.cpu_time_s.has_value());
  EXPECT_THAT(p.scan_stages.pre, ElementsAre(ScanStage::kAstScan));
  EXPECT_EQ(p.audit.runtime_imports, AuditMode::kEnforce);
  EXPECT_THAT(p.languages, ElementsAre(Language::kPython));
  EXPECT_FALSE(p.matplotlib);
}

TEST(ParseProfileYamlTest, NameDefaultsToTheFileStem) {
  EXPECT_EQ(Parse("description: x\n").name, "t");
}

TEST(ParseProfileYamlTest, EveryKey) {
  Profile p = Parse(R"(
name: t
description: |
  two
  lines
imports:
  allowed: [re, math, json, math, os.path]
blocklist: [[json, loads], [os.path, join]]
preimport: [json]
resources:
  memory: 1Gi
  cpu: 1.5
  timeout_max: 60.5
  timeout_default: 2.5
  pids: 7
  disk: 128Mi
  output: 1Mi
  cpu_time: 20
scan_stages:
  pre: [audit_patterns, ast_scan, blocklist_audit]
  post: []
audit:
  mode:
    ast_scan: observe
    blocklist_audit: "off"
    audit_patterns: enforce
    runtime_imports: observe
language: python
network: none
files:
  max_in_bytes: 1Mi
  max_out_bytes: 2000000
  max_out_files: 3
matplotlib: false
)");
  EXPECT_EQ(p.description, "two\nlines\n");
  // Sorted and without duplicates, like the peer's GET /profile.
  EXPECT_THAT(p.allowed_imports, ElementsAre("json", "math", "os.path", "re"));
  EXPECT_THAT(p.blocklist,
              ElementsAre(BlocklistEntry{"json", "loads"}, BlocklistEntry{"os.path", "join"}));
  EXPECT_THAT(p.preimport, ElementsAre("json"));
  EXPECT_EQ(p.resources.memory_bytes, int64_t{1} << 30);
  EXPECT_DOUBLE_EQ(p.resources.cpu_cores, 1.5);
  EXPECT_DOUBLE_EQ(p.resources.timeout_max_s, 60.5);
  EXPECT_DOUBLE_EQ(p.resources.timeout_default_s, 2.5);
  EXPECT_EQ(p.resources.pids, 7);
  EXPECT_EQ(p.resources.disk_bytes, 128 << 20);
  EXPECT_EQ(p.resources.output_bytes, 1 << 20);
  ASSERT_TRUE(p.resources.cpu_time_s.has_value());
  EXPECT_DOUBLE_EQ(*p.resources.cpu_time_s, 20);
  EXPECT_THAT(p.scan_stages.pre, ElementsAre(ScanStage::kAuditPatterns, ScanStage::kAstScan,
                                             ScanStage::kBlocklistAudit));
  EXPECT_TRUE(p.scan_stages.post.empty());
  EXPECT_EQ(p.audit.ast_scan, AuditMode::kObserve);
  EXPECT_EQ(p.audit.blocklist_audit, AuditMode::kOff);
  EXPECT_EQ(p.audit.audit_patterns, AuditMode::kEnforce);
  EXPECT_EQ(p.audit.runtime_imports, AuditMode::kObserve);
  EXPECT_EQ(p.ModeOf(ScanStage::kAstScan), AuditMode::kObserve);
  EXPECT_EQ(p.files.max_in_bytes, 1 << 20);
  EXPECT_EQ(p.files.max_out_bytes, 2000000);
  EXPECT_EQ(p.files.max_out_files, 3);
}

TEST(ParseProfileYamlTest, AllowsImportCoversSubmodulesOnly) {
  Profile p = Parse("imports:\n  allowed: [numpy, os.path]\n");
  EXPECT_TRUE(p.AllowsImport("numpy"));
  EXPECT_TRUE(p.AllowsImport("numpy.linalg"));
  EXPECT_FALSE(p.AllowsImport("numpyx"));
  EXPECT_FALSE(p.AllowsImport("num"));
  EXPECT_TRUE(p.AllowsImport("os.path"));
  EXPECT_FALSE(p.AllowsImport("os"));
  EXPECT_FALSE(p.AllowsImport("os.pathx"));
}

TEST(ParseProfileYamlTest, AnyImportBothSpellings) {
  for (const char* yaml : {"imports: any\n", "imports:\n  allowed: \"*\"\n"}) {
    Profile p = Parse(yaml);
    EXPECT_TRUE(p.any_import) << yaml;
    EXPECT_TRUE(p.allowed_imports.empty());
    EXPECT_TRUE(p.AllowsImport("subprocess"));
  }
}

TEST(ParseProfileYamlTest, TimeoutDefaultNeverAboveAnUnsetCeiling) {
  // No timeout_default written: 10 s, but not above timeout_max.
  EXPECT_DOUBLE_EQ(Parse("resources:\n  timeout_max: 5\n").resources.timeout_default_s, 5);
  EXPECT_DOUBLE_EQ(Parse("resources:\n  timeout_max: 50\n").resources.timeout_default_s, 10);
}

TEST(ParseProfileYamlTest, NullListsAndMappingsAreEmpty) {
  Profile p = Parse("blocklist:\npreimport:\nresources:\nscan_stages:\n  pre:\n");
  EXPECT_TRUE(p.blocklist.empty());
  EXPECT_TRUE(p.scan_stages.pre.empty());
}

TEST(ParseProfileYamlTest, AnchorsAndAliasesWork) {
  Profile p = Parse("imports:\n  allowed: &mods [math, json]\npreimport: *mods\n");
  EXPECT_THAT(p.preimport, ElementsAre("math", "json"));
}

// --- error messages -------------------------------------------------------

TEST(ProfileErrorTest, BadSizeNamesFileLineKeyAndForms) {
  EXPECT_EQ(Error("name: t\nresources:\n  cpu: 1\n  memory: 12Qi\n"),
            "profiles/t.yaml:4: resources.memory: '12Qi' is not a size (use 256Mi, 1Gi, or bytes)");
  EXPECT_EQ(Error("resources:\n  memory: 1Mi\n"),
            "profiles/t.yaml:2: resources.memory: '1Mi' is below the minimum 16Mi");
  EXPECT_EQ(
      Error("resources:\n  disk: [1]\n"),
      "profiles/t.yaml:2: resources.disk: expected a size (256Mi, 1Gi, or bytes), got a list");
}

TEST(ProfileErrorTest, UnknownKeyListsTheValidOnes) {
  EXPECT_EQ(
      Error("name: t\nimport:\n  allowed: [math]\n"),
      "profiles/t.yaml:2: import: unknown key (valid keys: name, description, extends, imports, "
      "blocklist, preimport, resources, scan_stages, audit, language, languages, language_resources, network, files, "
      "sessions, matplotlib, approval)");
  EXPECT_EQ(Error("sessions:\n  ttl: 0\n"),
            "profiles/t.yaml:2: sessions.ttl: '0' is out of range (more than 0, at most 31622400 seconds)");
  EXPECT_EQ(Error("sessions:\n  idle: 10m\n"),
            "profiles/t.yaml:2: sessions.idle: unknown key (valid keys: idle_timeout, max_idle_timeout, ttl, "
            "max_ttl)");
  EXPECT_EQ(
      Error("resources:\n  memory: 1Gi\n  memroy: 1Gi\n"),
      "profiles/t.yaml:3: resources.memroy: unknown key (valid keys: memory, cpu, timeout_max, "
      "timeout_default, pids, disk, output, cpu_time)");
  EXPECT_EQ(
      Error("audit:\n  mode:\n    ast: observe\n"),
      "profiles/t.yaml:3: audit.mode.ast: unknown key (valid keys: ast_scan, blocklist_audit, "
      "audit_patterns, runtime_imports)");
  EXPECT_THAT(Error("files: {max_in: 1}\n"),
              HasSubstr("files.max_in: unknown key (valid keys: "
                        "max_in_bytes, max_out_bytes, max_out_files)"));
  // An odd unknown key is quoted, bounded and printable in the message.
  EXPECT_EQ(Error("resources:\n  \"bad\\tkey " + std::string(100, 'k') + "\": 1\n"),
            "profiles/t.yaml:2: resources.'bad?key " + std::string(52, 'k') +
                "...': unknown key (valid keys: memory, cpu, timeout_max, timeout_default, pids, "
                "disk, output, cpu_time)");
  // The peer's key has a hint of its own.
  EXPECT_THAT(Error("resources:\n  subprocess_memory_mb: 800\n"),
              HasSubstr("t.yaml:2: resources.subprocess_memory_mb: not used by airlock"));
}

TEST(ProfileErrorTest, RepeatedKey) {
  EXPECT_EQ(Error("name: t\nresources:\n  memory: 1Gi\n  memory: 2Gi\n"),
            "profiles/t.yaml:4: resources.memory: the key is given twice; keep one");
}

TEST(ProfileErrorTest, UnknownStage) {
  EXPECT_EQ(Error("scan_stages:\n  pre:\n    - ast_scan\n    - bandit\n"),
            "profiles/t.yaml:4: scan_stages.pre[1]: unknown stage 'bandit' (stages: ast_scan, "
            "blocklist_audit, audit_patterns)");
  EXPECT_EQ(Error("scan_stages:\n  post: [ast_scan]\n"),
            "profiles/t.yaml:2: scan_stages.post[0]: unknown stage 'ast_scan' (no post-execution "
            "stage exists yet; write post: [])");
  EXPECT_THAT(Error("scan_stages:\n  pre: [ast_scan, ast_scan]\n"),
              HasSubstr("'ast_scan' is listed twice"));
}

TEST(ProfileErrorTest, NetworkOtherThanNone) {
  EXPECT_EQ(
      Error("name: t\nnetwork: host\n"),
      "profiles/t.yaml:2: network: only 'none' is supported, got 'host' (a run gets a loopback "
      "interface and nothing else)");
  EXPECT_THAT(Error("network:\n"), HasSubstr("network: only 'none' is supported"));
  EXPECT_THAT(Error("network: [none]\n"), HasSubstr("network: only 'none' is supported"));
}

TEST(ProfileErrorTest, UnknownLanguagesAndBothKeys) {
  EXPECT_EQ(Error("language: ruby\n"),
            "profiles/t.yaml:1: language: 'ruby' is not supported (supported: python, javascript, typescript, r, java, bash)");
  EXPECT_THAT(Error("languages: [python, cobol]\n"),
              HasSubstr("languages[1]: 'cobol' is not supported (supported: python, javascript, typescript, r, java, bash)"));
  EXPECT_THAT(Error("languages: []\n"), HasSubstr("languages: at least one language is needed"));
  EXPECT_THAT(Error("language: python\nlanguages: [bash]\n"),
              HasSubstr("`language` and `languages` are one setting"));
}

TEST(ProfileLanguagesTest, LanguageResourcesOverTheProfilesAndInherited) {
  StatusOr<ProfileSet> parsed = ParseSet(
      {{"p/base.yaml", "imports: any\nlanguages: [python, javascript, bash]\nresources:\n  memory: 512Mi\n  timeout_max: 30\n"
                       "language_resources:\n  javascript:\n    memory: 1Gi\n    timeout_default: 20\n"},
       {"p/child.yaml", "extends: base\nresources:\n  pids: 40\nlanguage_resources:\n  javascript:\n"
                        "    pids: 80\n  bash:\n    timeout_max: 5\n"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Profile* base = parsed->Find("base");
  EXPECT_EQ(base->ResourcesFor(Language::kPython).memory_bytes, 512ll << 20);  // no block: the profile's
  EXPECT_EQ(&base->ResourcesFor(Language::kPython), &base->resources);
  EXPECT_EQ(base->ResourcesFor(Language::kJavaScript).memory_bytes, 1ll << 30);
  EXPECT_DOUBLE_EQ(base->ResourcesFor(Language::kJavaScript).timeout_default_s, 20);
  EXPECT_DOUBLE_EQ(base->ResourcesFor(Language::kJavaScript).timeout_max_s, 30);  // the profile's
  const Profile* child = parsed->Find("child");
  const Resources& js = child->ResourcesFor(Language::kJavaScript);
  EXPECT_EQ(js.memory_bytes, 1ll << 30);  // inherited block
  EXPECT_EQ(js.pids, 80);                 // the child's key over it
  EXPECT_EQ(child->resources.pids, 40);
  const Resources& sh = child->ResourcesFor(Language::kBash);
  EXPECT_DOUBLE_EQ(sh.timeout_max_s, 5);
  EXPECT_DOUBLE_EQ(sh.timeout_default_s, 5);  // the default follows a lower ceiling
  EXPECT_EQ(sh.pids, 40);
  // Errors name the key path.
  EXPECT_THAT(Error("language_resources:\n  ruby:\n    memory: 1Gi\n"),
              HasSubstr("language_resources.ruby: unknown key (valid keys: python, javascript, bash)"));
  EXPECT_THAT(Error("language_resources:\n  bash:\n    memory: 12Qi\n"),
              HasSubstr("language_resources.bash.memory:"));
  EXPECT_THAT(Error("language_resources:\n  bash:\n    timeout_max: 5\n    timeout_default: 9\n"),
              HasSubstr("language_resources.bash.timeout_default: 9 is above the timeout_max 5"));
}

// Issue 23.3: an import allowlist or a blocklist binds Python only; next to bash or
// javascript (which run any program) the profile would promise what it does not enforce.
TEST(ProfileLanguagesTest, ImportRulesNextToAnotherLanguageAreRefused) {
  EXPECT_EQ(Error("imports:\n  allowed: [math]\nlanguages: [python, bash]\n"),
            "profiles/t.yaml:3: languages: the profile allows bash and has an import allowlist (1 module), "
            "which bind Python code only: bash can run any program (bash runs `python3 -c 'import ctypes, "
            "subprocess'`), so the profile would promise what it does not enforce. Either keep this profile "
            "Python-only (`languages: [python]`) and serve bash from a profile with `imports: any` and no "
            "blocklist (as `general` does, extending it if you like), or give this profile `imports: any` and no "
            "blocklist, so that the kernel layers are all it claims");
  // No imports key at all is an allowlist of nothing.
  EXPECT_THAT(Error("languages: [javascript]\n"),
              HasSubstr("languages: the profile allows javascript and has an import allowlist that allows no "
                        "module (no `imports: any`)"));
  EXPECT_THAT(Error("imports: any\nblocklist:\n  - [pandas, read_pickle]\nlanguages: [python, javascript, bash]\n"),
              HasSubstr("profiles/t.yaml:4: languages: the profile allows javascript, bash and has a blocklist (1 "
                        "entry)"));
  // Inherited: the error is at the key this profile wrote, naming the profile.
  StatusOr<ProfileSet> child_langs = ParseSet({{"p/base.yaml", "imports:\n  allowed: [math, json]\n"},
                                               {"p/child.yaml", "extends: base\nlanguages: [python, bash]\n"}});
  ASSERT_FALSE(child_langs.ok());
  EXPECT_THAT(child_langs.status().message(),
              HasSubstr("p/child.yaml:2: languages: the profile allows bash and has an import allowlist (2 modules)"));
  StatusOr<ProfileSet> child_blocks =
      ParseSet({{"p/base.yaml", "imports: any\nlanguages: [python, bash]\n"},
                {"p/child.yaml", "extends: base\nblocklist:\n  - [os, system]\n"}});
  ASSERT_FALSE(child_blocks.ok());
  EXPECT_THAT(child_blocks.status().message(),
              HasSubstr("p/child.yaml:3: blocklist: the profile allows bash and has a blocklist (1 entry)"));
  // What is accepted: any import and no blocklist, or Python alone.
  EXPECT_TRUE(ParseSet({{"p/ok.yaml", "imports: any\nlanguages: [python, javascript, bash]\n"},
                        {"p/py.yaml", "imports:\n  allowed: [math]\nblocklist:\n  - [os, system]\n"}})
                  .ok());
}

TEST(ProfileLanguagesTest, ListOrderAliasesAndInheritance) {
  StatusOr<ProfileSet> parsed = ParseSet({{"p/base.yaml", "imports: any\nlanguages: [bash, js, python, bash]\n"},
                                          {"p/child.yaml", "extends: base\n"},
                                          {"p/narrow.yaml", "extends: base\nlanguage: python3\n"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const ProfileSet& set = *parsed;
  const Profile* base = set.Find("base");
  ASSERT_NE(base, nullptr);
  // Written order kept (the first is the default), aliases folded, duplicates dropped.
  EXPECT_THAT(base->languages, ElementsAre(Language::kBash, Language::kJavaScript, Language::kPython));
  EXPECT_TRUE(base->AllowsLanguage(Language::kJavaScript));
  EXPECT_THAT(set.Find("child")->languages, ElementsAre(Language::kBash, Language::kJavaScript, Language::kPython));
  EXPECT_THAT(set.Find("narrow")->languages, ElementsAre(Language::kPython));
  EXPECT_FALSE(set.Find("narrow")->AllowsLanguage(Language::kBash));
}

TEST(ProfileErrorTest, InvalidYamlReportsTheLine) {
  std::string e = Error("name: t\nimports:\n  allowed: [math, json\nresources: {}\n");
  EXPECT_THAT(e, HasSubstr("profiles/t.yaml:"));
  EXPECT_THAT(e, HasSubstr("invalid YAML: "));
  e = Error("name: t\ndescription: ok\n  bad: indentation\n");
  EXPECT_THAT(e, testing::StartsWith("profiles/t.yaml:3: invalid YAML: "));
  EXPECT_THAT(e, HasSubstr("(column "));
}

TEST(ProfileErrorTest, WrongTypes) {
  EXPECT_EQ(Error("imports:\n  allowed: numpy\n"),
            "profiles/t.yaml:2: imports.allowed: expected a list of module names, got 'numpy' "
            "(write [numpy, pandas] or one '- numpy' line per module)");
  EXPECT_EQ(Error("blocklist: numpy\n"),
            "profiles/t.yaml:1: blocklist: expected a list of [module, attribute], e.g. [pandas, "
            "read_pickle], got 'numpy'");
  EXPECT_EQ(Error("blocklist:\n  - [numpy]\n"),
            "profiles/t.yaml:2: blocklist[0]: expected [module, attribute], e.g. [pandas, "
            "read_pickle], got a list");
  EXPECT_EQ(Error("resources: 1Gi\n"),
            "profiles/t.yaml:1: resources: expected a mapping (memory, cpu, timeout_max, "
            "timeout_default, pids, disk, output, cpu_time), got '1Gi'");
  EXPECT_EQ(Error("imports:\n  allowed:\n    - [math]\n"),
            "profiles/t.yaml:3: imports.allowed[0]: expected a module name, got a list");
  EXPECT_EQ(
      Error("- name: t\n"),
      "profiles/t.yaml:1: a profile is a mapping of keys (name: ..., imports: ...), got a list");
  EXPECT_EQ(Error("matplotlib: yes\n"),
            "profiles/t.yaml:1: matplotlib: expected true or false, got 'yes'");
  EXPECT_EQ(Error("resources:\n  pids: 2.5\n"),
            "profiles/t.yaml:2: resources.pids: '2.5' is not a whole number");
  EXPECT_EQ(Error("imports: everything\n"),
            "profiles/t.yaml:1: imports: expected 'any' or a mapping (allowed: [...] in a root "
            "profile, additional: [...] in one that extends another), got 'everything'");
}

TEST(ProfileErrorTest, BadNames) {
  EXPECT_THAT(Error("imports:\n  allowed: [\"os; rm\"]\n"),
              HasSubstr("t.yaml:2: imports.allowed[0]: 'os; rm' is not a module name"));
  EXPECT_THAT(Error("blocklist: [[numpy, \"a.b\"]]\n"),
              HasSubstr("'a.b' is not an attribute name"));
  EXPECT_THAT(Error("name: Bad Name\n"),
              HasSubstr("t.yaml:1: name: 'Bad Name' is not a profile name"));
  EXPECT_EQ(Error("name: other\n"),
            "profiles/t.yaml:1: name: 'other' differs from the file name 't.yaml'; a profile is "
            "named after its file: rename one of them");
  EXPECT_THAT(Error("description: x\n", "profiles/Bad Name.yaml"), HasSubstr("add name:"));
}

TEST(ProfileErrorTest, OutOfRangeValues) {
  EXPECT_EQ(Error("resources:\n  timeout_max: 0\n"),
            "profiles/t.yaml:2: resources.timeout_max: '0' is out of range (more than 0, at most "
            "86400 seconds)");
  EXPECT_THAT(Error("resources:\n  cpu: 0m\n"),
              HasSubstr("t.yaml:2: resources.cpu: '0m' is out of range"));
  EXPECT_THAT(Error("resources:\n  pids: 0\n"),
              HasSubstr("resources.pids: '0' is out of range (1 to 4194304)"));
  EXPECT_THAT(
      Error("audit:\n  mode:\n    ast_scan: strict\n"),
      HasSubstr(
          "t.yaml:3: audit.mode.ast_scan: 'strict' is not a mode (use enforce, observe or off)"));
  EXPECT_THAT(Error("audit:\n  mode:\n    runtime_imports: 'off'\n"),
              HasSubstr("'off' is not a mode (use enforce or observe)"));
}

TEST(ProfileErrorTest, RulesAcrossKeys) {
  EXPECT_EQ(Error("resources:\n  timeout_max: 30\n  timeout_default: 40\n"),
            "profiles/t.yaml:3: resources.timeout_default: 40 is above resources.timeout_max (30); "
            "the default must be allowed");
  EXPECT_EQ(
      Error("imports:\n  allowed: [math]\npreimport: [math, numpy]\n"),
      "profiles/t.yaml:3: preimport: 'numpy' is not an allowed import of this profile; add it "
      "to imports");
  EXPECT_EQ(Error("matplotlib: true\n"),
            "profiles/t.yaml:1: matplotlib: true, but matplotlib is not an allowed import of this "
            "profile; add it to imports");
  EXPECT_EQ(Error("resources:\n  disk: 8Mi\nfiles:\n  max_in_bytes: 10Mi\n"),
            "profiles/t.yaml:4: files.max_in_bytes: 10Mi is more than resources.disk (8Mi): the "
            "files would not fit the working directory");
  // Returned files ride the bounded result channel: the loader keeps profiles inside it.
  EXPECT_THAT(Error("files:\n  max_out_files: 129\n"), HasSubstr("files.max_out_files: '129' is out of range (0 to 128)"));
  EXPECT_THAT(Error("files:\n  max_out_bytes: 65Mi\n"), HasSubstr("files.max_out_bytes: 65Mi is more than 64Mi"));
  EXPECT_THAT(
      Error("imports:\n  additional: [math]\n"),
      HasSubstr("t.yaml:2: imports.additional: only a profile that extends another adds imports"));
  EXPECT_THAT(Error("imports:\n  allowed: [math]\n  additional: [json]\n"),
              HasSubstr("give either imports.allowed"));
}

TEST(ProfileErrorTest, ExtendsNeedsTheDirectory) {
  EXPECT_THAT(Error("extends: minimal\n"),
              HasSubstr("t.yaml:1: extends: 'minimal' cannot be resolved in a single profile"));
}

TEST(ProfileErrorTest, BoundsOnTheInput) {
  EXPECT_THAT(Error(std::string(kMaxProfileFileBytes + 1, '#')),
              HasSubstr("more than the 1048576 a profile may have"));
  EXPECT_THAT(Error(std::string("name: t\0x", 9)), HasSubstr("a NUL byte at offset 7"));
  EXPECT_THAT(Error(""), HasSubstr("the profile is empty"));
  EXPECT_THAT(Error("# only a comment\n"), HasSubstr("the profile is empty"));
  EXPECT_EQ(Error("name: t\n---\nname: u\n"),
            "profiles/t.yaml:2: a second YAML document starts here; a profile is one document "
            "(remove the ---)");
  // yaml-cpp 0.7's LoadAll loops forever on these (jbeder/yaml-cpp#1040).
  EXPECT_THAT(Error(",\n"), HasSubstr("t.yaml:1: invalid YAML: unexpected character (column 1)"));
  EXPECT_THAT(Error("# a comment\n,name: t\n"),
              HasSubstr("t.yaml:2: invalid YAML: unexpected character"));
  EXPECT_THAT(Error("description: caf\xe9\n"),
              HasSubstr("description: the value is not valid UTF-8"));
}

TEST(ProfileErrorTest, DeepNestingFailsCleanly) {
  // yaml-cpp bounds its recursion; this must be an error, not a crash.
  std::string deep = "description: " + std::string(100000, '[') + "\n";
  EXPECT_THAT(Error(deep), HasSubstr("profiles/t.yaml:2: invalid YAML: nested more than"));
  std::string deep_map;
  for (int i = 0; i < 3000; ++i) deep_map += "{a: ";
  EXPECT_THAT(Error(deep_map), HasSubstr("invalid YAML: nested more than"));
}

// --- inheritance ----------------------------------------------------------

TEST(ParseProfilesTest, ChildInheritsAndExtends) {
  StatusOr<ProfileSet> set = ParseSet({
      {"p/base.yaml", kRoot},
      {"p/child.yaml", R"(extends: base
imports:
  additional: [re, math]
blocklist:
  - [re, compile]
preimport: [re, json]
resources:
  memory: 512Mi
  timeout_default: 20
scan_stages:
  pre: [ast_scan, blocklist_audit]
audit:
  mode:
    audit_patterns: observe
)"},
  });
  ASSERT_TRUE(set.ok()) << set.status().message();
  const Profile* c = set->Find("child");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->extends, "base");
  EXPECT_EQ(c->source, "p/child.yaml");
  EXPECT_EQ(c->description, "the root");  // inherited
  EXPECT_THAT(c->allowed_imports, ElementsAre("json", "math", "re"));
  EXPECT_THAT(c->blocklist,
              ElementsAre(BlocklistEntry{"json", "loads"}, BlocklistEntry{"re", "compile"}));
  EXPECT_THAT(c->preimport, ElementsAre("json", "re"));
  // resources: per key.
  EXPECT_EQ(c->resources.memory_bytes, 512 << 20);
  EXPECT_DOUBLE_EQ(c->resources.cpu_cores, 0.5);
  EXPECT_DOUBLE_EQ(c->resources.timeout_max_s, 30);
  EXPECT_DOUBLE_EQ(c->resources.timeout_default_s, 20);
  EXPECT_EQ(c->resources.pids, 32);
  EXPECT_THAT(c->scan_stages.pre, ElementsAre(ScanStage::kAstScan, ScanStage::kBlocklistAudit));
  EXPECT_EQ(c->audit.audit_patterns, AuditMode::kObserve);
  EXPECT_EQ(c->audit.ast_scan, AuditMode::kEnforce);
  // The parent is unchanged.
  const Profile* b = set->Find("base");
  ASSERT_NE(b, nullptr);
  EXPECT_THAT(b->allowed_imports, ElementsAre("json", "math"));
  EXPECT_EQ(b->blocklist.size(), 1u);
  EXPECT_EQ(b->resources.memory_bytes, 256 << 20);
  EXPECT_EQ(set->Find("nope"), nullptr);
  EXPECT_THAT(set->Names(), ElementsAre("base", "child"));
}

TEST(ParseProfilesTest, GrandchildAndOrderIndependence) {
  // A child listed before its parent resolves the same.
  StatusOr<ProfileSet> set = ParseSet({
      {"c.yaml", "extends: b\nimports:\n  additional: [c]\nblocklist: [[c, x]]\n"},
      {"b.yaml", "extends: a\nimports:\n  additional: [b]\nblocklist: [[b, x]]\n"},
      {"a.yaml", "imports:\n  allowed: [a]\nblocklist: [[a, x]]\nresources:\n  timeout_max: 5\n"},
  });
  ASSERT_TRUE(set.ok()) << set.status().message();
  const Profile* c = set->Find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_THAT(c->allowed_imports, ElementsAre("a", "b", "c"));
  EXPECT_THAT(c->blocklist, ElementsAre(BlocklistEntry{"a", "x"}, BlocklistEntry{"b", "x"},
                                        BlocklistEntry{"c", "x"}));
  EXPECT_DOUBLE_EQ(c->resources.timeout_default_s, 5);
  EXPECT_EQ(set->default_name(), "a");  // no "minimal": the first by name
}

TEST(ParseProfilesTest, ChildMayOpenImportsToAny) {
  StatusOr<ProfileSet> set =
      ParseSet({{"base.yaml", kRoot}, {"open.yaml", "extends: base\nimports: any\n"}});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_TRUE(set->Find("open")->any_import);
  EXPECT_TRUE(set->Find("open")->allowed_imports.empty());
}

TEST(ParseProfilesTest, ExtendsCycle) {
  EXPECT_EQ(
      SetError({{"p/a.yaml", "name: a\nextends: b\n"}, {"p/b.yaml", "name: b\nextends: a\n"}}),
      "p/b.yaml:2: extends: a cycle (a -> b -> a); a profile cannot inherit from itself");
  EXPECT_EQ(SetError({{"p/a.yaml", "extends: a\n"}}),
            "p/a.yaml:1: extends: a cycle (a -> a); a profile cannot inherit from itself");
}

TEST(ParseProfilesTest, UnknownParent) {
  EXPECT_EQ(SetError({{"p/a.yaml", "name: a\n"}, {"p/b.yaml", "# b\nextends: minimal\n"}}),
            "p/b.yaml:2: extends: no profile named 'minimal' (profiles: a, b)");
}

TEST(ParseProfilesTest, TooDeep) {
  std::vector<ProfileSource> chain = {{"p0.yaml", "name: p0\n"}};
  for (int i = 1; i <= 20; ++i) {
    chain.push_back(
        {"p" + std::to_string(i) + ".yaml", "extends: p" + std::to_string(i - 1) + "\n"});
  }
  EXPECT_EQ(SetError(chain), "p17.yaml:1: extends: more than 16 levels of extends");
  chain.resize(17);  // p16 is 16 levels below p0: allowed
  EXPECT_TRUE(ParseProfiles(chain).ok());
}

TEST(ParseProfilesTest, DuplicateNames) {
  EXPECT_EQ(SetError({{"a/x.yaml", "name: x\n"}, {"b/x.yaml", "name: x\n"}}),
            "b/x.yaml:1: name: 'x' is already the name of a/x.yaml");
}

TEST(ParseProfilesTest, ErrorsInInheritedValuesNameTheFileThatSetThem) {
  // The parent's timeout_default is fine for the parent and too high for
  // the child's ceiling: the message points at the parent's line and says
  // which child inherited it.
  EXPECT_EQ(SetError({{"p/a.yaml", "resources:\n  timeout_default: 20\n"},
                      {"p/b.yaml", "extends: a\nresources:\n  timeout_max: 15\n"}}),
            "p/a.yaml:2: resources.timeout_default: 20 is above resources.timeout_max (15); the "
            "default must be allowed (in profile 'b', which inherits it)");
  EXPECT_THAT(SetError({{"p/base.yaml", kRoot},
                        {"p/b.yaml", "extends: base\nimports:\n  allowed: [re]\n"}}),
              HasSubstr("p/b.yaml:3: imports.allowed: a profile that extends another adds imports "
                        "with imports.additional"));
  EXPECT_THAT(
      SetError({{"p/a.yaml", "imports: any\n"},
                {"p/b.yaml", "extends: a\nimports:\n  additional: [re]\n"}}),
      HasSubstr("p/b.yaml:3: imports.additional: the parent 'a' allows any import already"));
}

TEST(ParseProfilesTest, ParseErrorInOneFileStopsTheSet) {
  EXPECT_EQ(
      SetError({{"p/a.yaml", "name: a\n"}, {"p/b.yaml", "name: b\nresources:\n  memory: lots\n"}}),
      "p/b.yaml:3: resources.memory: 'lots' is not a size (use 256Mi, 1Gi, or bytes)");
}

TEST(ProfileSetTest, DefaultIsMinimalAndSettable) {
  StatusOr<ProfileSet> set =
      ParseSet({{"z.yaml", "name: z\n"}, {"minimal.yaml", "name: minimal\n"}});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->Default().name, "minimal");
  EXPECT_TRUE(set->SetDefault("z").ok());
  EXPECT_EQ(set->Default().name, "z");
  Status st = set->SetDefault("nope");
  EXPECT_EQ(st.code(), ErrorCode::kNotFound);
  EXPECT_EQ(st.message(), "default profile 'nope' is not loaded (profiles: minimal, z)");
  EXPECT_EQ(set->Default().name, "z");
}

// /execute keeps the fips sidecar's default (minimal); the agent doors get
// general where it is loaded; --default-profile sets every door, a door's
// own flag that door alone.
TEST(ProfileSetTest, EachDoorHasItsDefault) {
  StatusOr<ProfileSet> set = ParseSet(
      {{"z.yaml", "name: z\n"}, {"minimal.yaml", "name: minimal\n"}, {"general.yaml", "name: general\nimports: any\n"}});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->DefaultFor(Door::kExecute).name, "minimal");
  EXPECT_EQ(set->Default().name, "minimal");
  for (Door d : {Door::kApi, Door::kMcp, Door::kE2b}) EXPECT_EQ(set->DefaultFor(d).name, "general") << DoorName(d);
  ASSERT_TRUE(set->SetDefaultFor(Door::kMcp, "z").ok());
  EXPECT_EQ(set->DefaultFor(Door::kMcp).name, "z");
  EXPECT_EQ(set->DefaultFor(Door::kApi).name, "general");
  ASSERT_TRUE(set->SetDefault("z").ok());
  for (Door d : kDoors) EXPECT_EQ(set->DefaultFor(d).name, "z") << DoorName(d);
  ASSERT_TRUE(set->SetDefaultFor(Door::kExecute, "minimal").ok());
  EXPECT_EQ(set->Default().name, "minimal");
  EXPECT_EQ(set->DefaultFor(Door::kE2b).name, "z");
  EXPECT_EQ(set->SetDefaultFor(Door::kApi, "nope").code(), ErrorCode::kNotFound);
  // Without a general profile every door has /execute's default.
  StatusOr<ProfileSet> plain = ParseSet({{"z.yaml", "name: z\n"}, {"minimal.yaml", "name: minimal\n"}});
  ASSERT_TRUE(plain.ok());
  for (Door d : kDoors) EXPECT_EQ(plain->DefaultFor(d).name, "minimal") << DoorName(d);
}

// --- the file system ------------------------------------------------------

class LoadProfilesTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/airlock-profile-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string dir_;
};

TEST_F(LoadProfilesTest, LoadsYamlFilesOnlyAndFollowsSymlinks) {
  Write("minimal.yaml", "imports:\n  allowed: [math]\n");
  Write("notes.txt", "not: a profile\n");
  Write(".hidden.yaml", "garbage: [\n");
  Write("x.yml", "garbage: [\n");
  std::filesystem::create_directory(dir_ + "/sub.yaml");
  std::filesystem::create_directory(dir_ + "/..data");
  Write("..data/linked.yaml", "extends: minimal\n");
  std::filesystem::create_symlink("..data/linked.yaml", dir_ + "/linked.yaml");
  StatusOr<ProfileSet> set = LoadProfiles(dir_);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_THAT(set->Names(), ElementsAre("linked", "minimal"));
  EXPECT_EQ(set->Find("minimal")->source, dir_ + "/minimal.yaml");
  EXPECT_EQ(set->Default().name, "minimal");
  EXPECT_TRUE(set->Find("linked")->AllowsImport("math"));
}

TEST_F(LoadProfilesTest, ErrorsNameThePath) {
  Write("minimal.yaml", "name: minimal\nresources:\n  memory: 12Qi\n");
  StatusOr<ProfileSet> set = LoadProfiles(dir_ + "/");
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(
      set.status().message(),
      dir_ + "/minimal.yaml:3: resources.memory: '12Qi' is not a size (use 256Mi, 1Gi, or bytes)");
}

TEST_F(LoadProfilesTest, EmptyMissingAndOversized) {
  StatusOr<ProfileSet> empty = LoadProfiles(dir_);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "no profiles (*.yaml files) in '" + dir_ + "'");

  StatusOr<ProfileSet> missing = LoadProfiles(dir_ + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().sys_errno(), ENOENT);
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot read the profiles directory"));

  Write("big.yaml", "# " + std::string(kMaxProfileFileBytes, 'x') + "\n");
  StatusOr<ProfileSet> big = LoadProfiles(dir_);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr(dir_ + "/big.yaml: the file is 1048579 bytes"));
}

TEST(DefaultProfilesDirTest, BuildTreeFallsBackToTheSourceTree) {
  // The test binary is not installed: there is no ../share/airlock/profiles
  // next to it, so the source tree's directory is used.
  EXPECT_EQ(DefaultProfilesDir(), AIRLOCK_TEST_PROFILES_DIR);
}

// --- approval (docs/api.md, Approvals) ---------------------------------------

TEST(ApprovalProfileTest, DefaultsToNever) {
  Profile p = Parse("name: t\n");
  EXPECT_EQ(p.approval.policy, ApprovalPolicy::kNever);
  EXPECT_FALSE(p.approval.Holds("import-not-allowed"));  // never holds anything
}

TEST(ApprovalProfileTest, ParsesAndInherits) {
  Profile p = Parse(
      "name: t\napproval:\n  policy: on_findings\n  rules: [dunder, blocked-call, dunder]\n"
      "  expires: 90\n  self_approve: true\n");
  EXPECT_EQ(p.approval.policy, ApprovalPolicy::kOnFindings);
  EXPECT_EQ(p.approval.rules, (std::vector<std::string>{"blocked-call", "dunder"}));
  EXPECT_DOUBLE_EQ(p.approval.expires_s, 90);
  EXPECT_TRUE(p.approval.self_approve);
  EXPECT_TRUE(p.approval.Holds("dunder"));
  EXPECT_FALSE(p.approval.Holds("import-not-allowed"));
  StatusOr<ProfileSet> set = ParseSet(
      {{"base.yaml", kRoot}, {"gated.yaml", "extends: base\napproval:\n  policy: always\n"},
       {"child.yaml", "extends: gated\n"}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->Find("child")->approval.policy, ApprovalPolicy::kAlways);
  EXPECT_EQ(set->Find("base")->approval.policy, ApprovalPolicy::kNever);
}

// Holding "import-not-allowed" for a person while the runtime import hook
// refuses the same imports would have people approve code that then fails:
// refused at load, saying why; allowed where the hook only observes, or where
// there is no allowlist.
TEST(ApprovalProfileTest, HoldingImportsTheHookRefusesIsAnError) {
  EXPECT_EQ(Error("name: t\nimports:\n  allowed: [math]\napproval:\n  policy: on_findings\n"
                  "  rules: [import-not-allowed]\n"),
            "profiles/t.yaml:6: approval.rules: 'import-not-allowed' holds code for a person's approval, but this "
            "profile's runtime import hook (audit.mode.runtime_imports: enforce) refuses those same imports when the "
            "code runs, so approved code would fail at its first such import; remove the rule, add the modules to "
            "the profile's imports, or set audit.mode.runtime_imports: observe (the approval is then the check)");
  Profile observed = Parse("name: t\nimports:\n  allowed: [math]\naudit:\n  mode:\n    runtime_imports: observe\n"
                           "approval:\n  policy: on_findings\n  rules: [import-not-allowed]\n");
  EXPECT_TRUE(observed.approval.Holds("import-not-allowed"));
  Profile any = Parse("name: t\nimports: any\napproval:\n  policy: on_findings\n  rules: [import-not-allowed]\n");
  EXPECT_TRUE(any.approval.Holds("import-not-allowed"));
  // Inherited: the child that holds what its parent's hook refuses is the one refused.
  EXPECT_THAT(SetError({{"p/base.yaml", "imports:\n  allowed: [math]\n"},
                        {"p/held.yaml", "extends: base\napproval:\n  policy: always\n  rules: [import-not-allowed]\n"}}),
              HasSubstr("p/held.yaml:4: approval.rules: 'import-not-allowed' holds code"));
}

TEST(ApprovalProfileTest, BadValuesAreErrors) {
  EXPECT_NE(Error("name: t\napproval:\n  policy: sometimes\n").find("is not a policy"), std::string::npos);
  EXPECT_NE(Error("name: t\napproval:\n  rules: [\"Bad Rule\"]\n").find("is not a rule id"), std::string::npos);
  EXPECT_NE(Error("name: t\napproval:\n  expires: 0\n").find("approval.expires"), std::string::npos);
  EXPECT_NE(Error("name: t\napproval:\n  who: me\n").find("unknown key"), std::string::npos);
}

}  // namespace
}  // namespace airlock::profile
