// WarmRunFactory's choice of network namespace (issue 11): runs share their
// zygote's only where Landlock scopes keep them apart in it; the report says which.
#include <gtest/gtest.h>

#include <string>

#include "isolation/sandbox.h"
#include "isolation/warm_run.h"

namespace airlock::isolation {
namespace {

TEST(WarmRunNetwork, SharingNeedsLandlockScopes) {
  for (int abi : {0, 1, 4, 5}) EXPECT_FALSE(WarmRunsCanShareNetwork(abi)) << abi;
  for (int abi : {6, 7, 8}) EXPECT_TRUE(WarmRunsCanShareNetwork(abi)) << abi;
}

TEST(WarmRunNetwork, AFactoryRefusesToShareWithoutScopesAndSaysWhatToChange) {
  Spec spec;
  auto refused = WarmRunFactory::Create(spec, 5, /*share_network=*/true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("--netns-per-run"), std::string::npos) << refused.status().ToString();

  auto own = WarmRunFactory::Create(spec, 5, /*share_network=*/false);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_FALSE((*own)->shares_network());
  auto shared = WarmRunFactory::Create(spec, 6, /*share_network=*/true);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  EXPECT_TRUE((*shared)->shares_network());
}

TEST(WarmRunNetwork, TheReportSaysWhetherTheNamespaceIsShared) {
  HostSetup host;
  host.landlock_abi = 7;
  auto detail = [](const IsolationReport& r) {
    for (const LayerState& l : r.layers) {
      if (l.name == "network_namespace") return l.enforced ? l.detail : "not enforced";
    }
    return std::string("missing");
  };
  EXPECT_EQ(detail(MakeIsolationReport(host, true, -1, false)).rfind("its own", 0), 0u);
  EXPECT_EQ(detail(MakeIsolationReport(host, true, -1, true)).rfind("shared with the other runs", 0), 0u);
}

TEST(WarmRunUts, TheReportSaysAWarmRunsUtsNamespaceIsItsZygotes) {
  HostSetup host;
  host.landlock_abi = 7;
  auto detail = [](const IsolationReport& r) {
    for (const LayerState& l : r.layers) {
      if (l.name == "uts_namespace") return l.enforced ? l.detail : "not enforced";
    }
    return std::string("missing");
  };
  EXPECT_EQ(detail(MakeIsolationReport(host, true, -1, false, false)), "its own: hostname sandbox");
  EXPECT_EQ(detail(MakeIsolationReport(host, true, -1, true, true)).rfind("hostname sandbox; shared with the other runs", 0),
            0u);
}

}  // namespace
}  // namespace airlock::isolation
