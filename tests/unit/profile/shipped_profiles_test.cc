// The profiles in profiles/ as shipped: they load, and they say what the
// fips-agents sidecar's profiles say (same allowlists, same blocklist, same
// stages), so its clients see the same GET /profile.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "profile/limits.h"
#include "profile/loader.h"

namespace airlock::profile {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

const std::vector<std::string> kMinimalImports = {
    "collections", "csv",    "datetime", "decimal",  "fractions", "functools",
    "itertools",   "json",   "math",     "operator", "random",    "re",
    "statistics",  "string", "textwrap", "typing"};

class ShippedProfilesTest : public testing::Test {
 protected:
  // Loaded once, in SetUp rather than SetUpTestSuite: a suite-level ASSERT
  // marks the tests skipped (ctest counts them as not failed), so shipped
  // profiles that do not load would go unnoticed.
  void SetUp() override {
    if (set_ != nullptr) return;
    StatusOr<ProfileSet> s = LoadProfiles(AIRLOCK_TEST_PROFILES_DIR);
    ASSERT_TRUE(s.ok()) << s.status().message();
    set_ = new ProfileSet(std::move(s).value());
  }
  static void TearDownTestSuite() { delete set_; }
  const Profile& Get(const char* name) {
    const Profile* p = set_->Find(name);
    EXPECT_NE(p, nullptr) << name;
    static const Profile kEmpty;
    return p ? *p : kEmpty;
  }
  static ProfileSet* set_;
};
ProfileSet* ShippedProfilesTest::set_ = nullptr;

TEST_F(ShippedProfilesTest, AllLoadAndMinimalIsTheDefault) {
  EXPECT_THAT(set_->Names(), ElementsAre("data-science", "general", "minimal", "visualization"));
  EXPECT_EQ(set_->Default().name, "minimal");
  for (const Profile& p : set_->profiles()) {
    EXPECT_EQ(p.source, std::string(AIRLOCK_TEST_PROFILES_DIR) + "/" + p.name + ".yaml");
    EXPECT_FALSE(p.description.empty()) << p.name;
    EXPECT_EQ(p.network, Network::kNone);
    // Python first (the default language) everywhere; the others only where
    // the kernel is the boundary anyway (general: no import allowlist).
    EXPECT_EQ(p.languages.front(), Language::kPython) << p.name;
    if (p.name == "general") {
      EXPECT_THAT(p.languages, ElementsAre(Language::kPython, Language::kJavaScript, Language::kBash, Language::kTypeScript,
                                               Language::kR, Language::kJava));
    } else {
      EXPECT_THAT(p.languages, ElementsAre(Language::kPython)) << p.name;
    }
    EXPECT_TRUE(p.scan_stages.post.empty());
  }
}

// minimal.yaml is the commented reference of the profile format: every
// top-level key the loader takes is there, set or in a comment (issue 25:
// `approval` was in none).
TEST_F(ShippedProfilesTest, MinimalCommentsEveryKey) {
  std::ifstream f(std::string(AIRLOCK_TEST_PROFILES_DIR) + "/minimal.yaml");
  ASSERT_TRUE(f);
  std::stringstream text;
  text << "\n" << f.rdbuf();
  for (const char* key : {"name", "description", "imports", "blocklist", "preimport", "resources", "scan_stages",
                          "audit", "languages", "language_resources", "network", "files", "sessions", "matplotlib",
                          "approval"}) {
    const std::string k = key;
    EXPECT_TRUE(text.str().find("\n" + k + ":") != std::string::npos ||
                text.str().find("\n#   " + k + ":") != std::string::npos ||
                text.str().find("\n# " + k + ":") != std::string::npos)
        << "profiles/minimal.yaml does not show the key " << k;
  }
  // And its approval block says where the rule ids are listed.
  EXPECT_NE(text.str().find("GET /v1/rules"), std::string::npos);
}

TEST_F(ShippedProfilesTest, MinimalMatchesThePeer) {
  const Profile& p = Get("minimal");
  EXPECT_EQ(p.description,
            "Safe computation with standard library modules only. No filesystem, network, or "
            "subprocess access. Suitable for math, data formatting, and string manipulation "
            "tasks.\n");
  EXPECT_EQ(p.extends, "");
  EXPECT_EQ(p.allowed_imports, kMinimalImports);
  EXPECT_EQ(p.allowed_imports.size(), 16u);
  EXPECT_TRUE(p.blocklist.empty());
  EXPECT_TRUE(p.preimport.empty());
  EXPECT_THAT(p.scan_stages.pre, ElementsAre(ScanStage::kAstScan));
  EXPECT_EQ(p.resources.memory_bytes, 256ll << 20);
  EXPECT_DOUBLE_EQ(p.resources.cpu_cores, 0.5);
  EXPECT_DOUBLE_EQ(p.resources.timeout_max_s, 30);
  EXPECT_DOUBLE_EQ(p.resources.timeout_default_s, 10);
  EXPECT_EQ(p.resources.pids, 32);
  EXPECT_EQ(p.resources.disk_bytes, 64ll << 20);
  EXPECT_EQ(p.resources.output_bytes, 51200);
  EXPECT_EQ(p.audit.ast_scan, AuditMode::kEnforce);
  EXPECT_EQ(p.audit.runtime_imports, AuditMode::kEnforce);
  EXPECT_FALSE(p.matplotlib);
  EXPECT_FALSE(p.AllowsImport("os"));
}

TEST_F(ShippedProfilesTest, DataScienceMatchesThePeer) {
  const Profile& p = Get("data-science");
  EXPECT_EQ(p.extends, "minimal");
  std::vector<std::string> imports = kMinimalImports;
  imports.insert(imports.end(), {"numpy", "pandas", "scipy"});
  std::sort(imports.begin(), imports.end());
  EXPECT_EQ(p.allowed_imports, imports);
  EXPECT_EQ(p.allowed_imports.size(), 19u);
  ASSERT_EQ(p.blocklist.size(), 22u);
  std::vector<BlocklistEntry> expected = {
      {"numpy", "ctypeslib"},   {"numpy", "frompyfunc"},      {"pandas", "read_pickle"},
      {"pandas", "read_sql"},   {"pandas", "read_sql_query"}, {"pandas", "read_sql_table"},
      {"pandas", "read_html"},  {"pandas", "read_fwf"},       {"pandas", "read_clipboard"},
      {"pandas", "read_excel"}, {"pandas", "read_feather"},   {"pandas", "read_parquet"},
      {"pandas", "read_orc"},   {"pandas", "read_sas"},       {"pandas", "read_spss"},
      {"pandas", "read_stata"}, {"pandas", "read_gbq"},       {"pandas", "read_hdf"},
      {"scipy.io", "loadmat"},  {"scipy.io", "savemat"},      {"scipy.io", "mmread"},
      {"scipy.io", "mmwrite"}};
  EXPECT_EQ(p.blocklist, expected);
  EXPECT_THAT(p.preimport, ElementsAre("numpy", "pandas", "scipy"));
  EXPECT_THAT(p.scan_stages.pre, ElementsAre(ScanStage::kAstScan, ScanStage::kBlocklistAudit));
  EXPECT_EQ(p.resources.memory_bytes, 512ll << 20);
  // Inherited from minimal.
  EXPECT_DOUBLE_EQ(p.resources.cpu_cores, 0.5);
  EXPECT_DOUBLE_EQ(p.resources.timeout_max_s, 30);
  EXPECT_EQ(p.resources.pids, 32);
  EXPECT_EQ(p.resources.output_bytes, 51200);
}

TEST_F(ShippedProfilesTest, VisualizationAddsMatplotlib) {
  const Profile& p = Get("visualization");
  EXPECT_EQ(p.extends, "data-science");
  EXPECT_EQ(p.allowed_imports.size(), 20u);
  EXPECT_TRUE(p.AllowsImport("matplotlib.pyplot"));
  EXPECT_TRUE(p.AllowsImport("numpy"));
  EXPECT_EQ(p.blocklist, Get("data-science").blocklist);
  EXPECT_THAT(p.preimport, ElementsAre("numpy", "pandas", "scipy", "matplotlib"));
  EXPECT_TRUE(p.matplotlib);
  EXPECT_EQ(p.resources.memory_bytes, 768ll << 20);
  EXPECT_THAT(p.scan_stages.pre, ElementsAre(ScanStage::kAstScan, ScanStage::kBlocklistAudit));
}

TEST_F(ShippedProfilesTest, GeneralHasNoAllowlistAndOnlyObserves) {
  const Profile& p = Get("general");
  EXPECT_EQ(p.extends, "");
  EXPECT_TRUE(p.any_import);
  EXPECT_TRUE(p.allowed_imports.empty());
  EXPECT_TRUE(p.AllowsImport("os"));
  EXPECT_TRUE(p.AllowsImport("subprocess"));
  EXPECT_TRUE(p.blocklist.empty());
  EXPECT_EQ(p.audit.ast_scan, AuditMode::kObserve);
  EXPECT_EQ(p.audit.audit_patterns, AuditMode::kObserve);
  EXPECT_EQ(p.audit.runtime_imports, AuditMode::kObserve);
  EXPECT_THAT(p.scan_stages.pre, ElementsAre(ScanStage::kAstScan, ScanStage::kAuditPatterns));
  EXPECT_EQ(p.resources.memory_bytes, 512ll << 20);
  EXPECT_EQ(p.resources.pids, 64);
  EXPECT_DOUBLE_EQ(p.resources.timeout_max_s, 60);
  EXPECT_TRUE(p.matplotlib);
}

TEST_F(ShippedProfilesTest, PeerTimeoutSemantics) {
  // The peer accepts 0 < timeout <= 30 and defaults to 10.
  const Profile& p = Get("minimal");
  RequestedLimits r;
  EXPECT_DOUBLE_EQ(Clamp(p, r).timeout_s, 10);
  r.timeout_s = 30;
  EXPECT_TRUE(Validate(p, r).ok());
  r.timeout_s = 30.5;
  EXPECT_FALSE(Validate(p, r).ok());
  EXPECT_DOUBLE_EQ(Clamp(p, r).timeout_s, 30);
}

}  // namespace
}  // namespace airlock::profile
