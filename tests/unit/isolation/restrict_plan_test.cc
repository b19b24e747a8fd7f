// The restrictions a sandbox's init applies to each process it starts
// (isolation/restrict.h) travel as bytes from the server: the round trip is
// exact, and bytes that are not a plan are refused, never read past.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "isolation/child_plan.h"
#include "isolation/restrict.h"
#include "isolation/restrict_blob.h"
#include "isolation/sandbox.h"

namespace airlock::isolation::internal {
namespace {

struct Planned {
  SeccompProgram seccomp;
  ChildPlan plan;
  RestrictPlan view{};
};

// The plan a program of a default spec gets here, as a sandbox's init is sent it.
void Plan(Planned* p) {
  auto seccomp = CompileSeccompPolicy({});
  ASSERT_TRUE(seccomp.ok()) << seccomp.status().ToString();
  p->seccomp = std::move(*seccomp);
  Spec spec;
  FillChildPlan(&p->plan, spec, /*landlock_abi=*/6, &p->seccomp);
  p->plan.rlimits = PlanRlimits(spec.limits, /*have_cgroup=*/true);
  ASSERT_TRUE(RestrictPlanOf(p->plan, &p->view));
}

// An 8-aligned copy, as init's buffer is.
std::vector<uint64_t> Aligned(const std::string& bytes) {
  std::vector<uint64_t> out((bytes.size() + 7) / 8 + 1);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

TEST(RestrictPlan, RoundTripsExactly) {
  Planned p;
  Plan(&p);
  const std::string bytes = SerializeRestrictPlan(p.view);
  std::vector<uint64_t> buf = Aligned(bytes);
  RestrictPlan back;
  ASSERT_TRUE(ParseRestrictPlan(reinterpret_cast<const char*>(buf.data()), bytes.size(), &back));
  ASSERT_EQ(back.n_rlimits, p.view.n_rlimits);
  for (int i = 0; i < back.n_rlimits; ++i) {
    EXPECT_EQ(back.rlimits[i].resource, p.view.rlimits[i].resource);
    EXPECT_EQ(back.rlimits[i].cur, p.view.rlimits[i].cur);
    EXPECT_EQ(back.rlimits[i].max, p.view.rlimits[i].max);
  }
  EXPECT_EQ(back.landlock_abi, 6);
  EXPECT_EQ(back.handled_fs, p.view.handled_fs);
  EXPECT_EQ(back.handled_net, p.view.handled_net);
  EXPECT_EQ(back.scoped, p.view.scoped);
  ASSERT_EQ(back.n_rules, p.view.n_rules);
  std::vector<std::string> paths;
  for (int i = 0; i < back.n_rules; ++i) {
    EXPECT_STREQ(back.rules[i].path, p.view.rules[i].path);
    EXPECT_EQ(back.rules[i].access, p.view.rules[i].access);
    paths.push_back(back.rules[i].path);
  }
  // The workspace is writable, as /tmp and /dev/shm; the rest read-only.
  for (const char* path : {"/", "/home/user", "/tmp", "/dev/shm", "/dev/null"}) {
    EXPECT_NE(std::find(paths.begin(), paths.end(), path), paths.end()) << path;
  }
  ASSERT_EQ(back.filter_len, p.seccomp.filter.size());
  EXPECT_EQ(std::memcmp(back.filter, p.seccomp.filter.data(), back.filter_len * sizeof(sock_filter)), 0);
  ASSERT_EQ(back.lock_filter_len, p.seccomp.lock_filter.size());
  EXPECT_EQ(std::memcmp(back.lock_filter, p.seccomp.lock_filter.data(), back.lock_filter_len * sizeof(sock_filter)), 0);
}

TEST(RestrictPlan, AnythingElseIsRefused) {
  Planned p;
  Plan(&p);
  const std::string bytes = SerializeRestrictPlan(p.view);
  RestrictPlan out;
  // Every truncation and every extension by a byte.
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint64_t> buf = Aligned(bytes);
    EXPECT_FALSE(ParseRestrictPlan(reinterpret_cast<const char*>(buf.data()), n, &out)) << n;
  }
  {
    std::vector<uint64_t> buf = Aligned(bytes + "x");
    EXPECT_FALSE(ParseRestrictPlan(reinterpret_cast<const char*>(buf.data()), bytes.size() + 1, &out));
  }
  // A byte changed anywhere: refused or still a plan, never read past the end (ASan).
  for (size_t i = 0; i < bytes.size(); i += 3) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    std::vector<uint64_t> buf = Aligned(bad);
    (void)ParseRestrictPlan(reinterpret_cast<const char*>(buf.data()), bad.size(), &out);
  }
  // Counts past the bounds, a rule path that is not absolute or not terminated, no filter.
  auto patched = [&](size_t offset, uint32_t value) {
    std::string bad = bytes;
    std::memcpy(bad.data() + offset, &value, sizeof value);
    std::vector<uint64_t> buf = Aligned(bad);
    return ParseRestrictPlan(reinterpret_cast<const char*>(buf.data()), bad.size(), &out);
  };
  EXPECT_FALSE(patched(0, 0x12345678));                           // magic
  EXPECT_FALSE(patched(4, RestrictPlan::kMaxRlimits + 1));        // rlimits
  const size_t landlock = 8 + static_cast<size_t>(p.view.n_rlimits) * 24;
  EXPECT_FALSE(patched(landlock + 4, RestrictPlan::kMaxRules + 1));  // rules
  const size_t first_rule = landlock + 8 + 24;
  EXPECT_FALSE(patched(first_rule + 8, 100000));                  // a path longer than the rest
  {
    std::string bad = bytes;
    bad[first_rule + 12] = 'x';  // "/" -> "x": not absolute
    std::vector<uint64_t> buf = Aligned(bad);
    EXPECT_FALSE(ParseRestrictPlan(reinterpret_cast<const char*>(buf.data()), bad.size(), &out));
  }
  // Misaligned: the filters are read in place.
  std::vector<uint64_t> buf = Aligned(" " + bytes);
  EXPECT_FALSE(ParseRestrictPlan(reinterpret_cast<const char*>(buf.data()) + 1, bytes.size(), &out));
}

}  // namespace
}  // namespace airlock::isolation::internal
