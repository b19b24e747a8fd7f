// The mount plans (isolation/mounts.cc): a zygote's plan builds its runs'
// template, and a warm run's plan from the template detaches the zygote's root
// before it mounts anything of its own there, and mounts nothing the template
// already holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "isolation/child_plan.h"
#include "isolation/spec.h"

namespace airlock::isolation::internal {
namespace {

bool StartsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

size_t IndexOf(const std::vector<MountOp>& ops, MountOp::Kind kind, const std::string& target) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == kind && ops[i].target == target) return i;
  }
  return ops.size();
}

TEST(MountPlan, AZygotesPlanBuildsItsRunsTemplateAndOnlyAZygotes) {
  Spec run;
  std::vector<MountOp> plain = PlanMounts(run);
  EXPECT_TRUE(std::none_of(plain.begin(), plain.end(),
                           [](const MountOp& op) { return StartsWith(op.target, kRunTemplate); }));

  Spec zygote;
  zygote.nested_sandbox_host = true;
  std::vector<MountOp> ops = PlanMounts(zygote);
  const std::string tpl = kRunTemplate;
  // The template's system trees are read-only binds, its /dev is made read-only
  // after its devices are bound, and it has the mount points a run needs.
  EXPECT_LT(IndexOf(ops, MountOp::kBindRo, tpl + "/usr"), ops.size());
  const size_t dev_ro = IndexOf(ops, MountOp::kRemountRo, tpl + "/dev");
  ASSERT_LT(dev_ro, ops.size());
  EXPECT_LT(IndexOf(ops, MountOp::kBindFile, tpl + "/dev/null"), dev_ro);
  for (const char* dir : {"/proc", "/home/user", "/tmp", "/dev/shm"}) {
    EXPECT_LT(IndexOf(ops, MountOp::kDir, tpl + dir), dev_ro) << dir;
  }
  // Nothing in it is writable by a run: no tmpfs but /dev's, no writable bind.
  for (const MountOp& op : ops) {
    if (!StartsWith(op.target, tpl)) continue;
    EXPECT_NE(op.kind, MountOp::kBind) << op.target;
    if (op.kind == MountOp::kTmpfs) {
      EXPECT_EQ(op.target, tpl + "/dev");
    }
  }
}

TEST(MountPlan, ARunFromTheTemplateDetachesItsZygotesRootBeforeItsWorkspace) {
  Spec spec;
  std::vector<MountOp> ops = PlanRunFromTemplate(spec);
  const size_t proc = IndexOf(ops, MountOp::kProc, "/proc");
  const size_t detach = IndexOf(ops, MountOp::kUnmount, "/home/user");
  const size_t home = IndexOf(ops, MountOp::kBind, "/home/user");
  ASSERT_LT(proc, ops.size());
  ASSERT_LT(detach, ops.size());
  ASSERT_LT(home, ops.size());
  EXPECT_LT(proc, detach);  // proc needs the zygote's (unmasked) one in the namespace
  EXPECT_LT(detach, home);
  for (size_t i = 0; i < detach; ++i) {
    EXPECT_TRUE(StartsWith(ops[i].target, "/proc")) << "before the zygote's root is gone: " << ops[i].target;
  }
  // Only the run's own places are mounted: no bind from outside its new root.
  for (const MountOp& op : ops) {
    EXPECT_NE(op.kind, MountOp::kBindRo) << op.target;
    EXPECT_NE(op.kind, MountOp::kFile) << op.target;
    EXPECT_NE(op.kind, MountOp::kSymlink) << op.target;
    if (op.kind == MountOp::kBind) {
      EXPECT_TRUE(StartsWith(op.source, "/dev/shm/")) << op.source;
    }
  }
  EXPECT_EQ(ops.back().kind, MountOp::kTmpfs);
  EXPECT_EQ(ops.back().target, "/dev/shm");
}

TEST(MountPlan, ATemplateIsOnlyUsedWhenNothingOfTheSpecIsARunsOwnPlace) {
  Spec spec;
  EXPECT_TRUE(RunTemplateFits(spec));
  spec.ro_binds = {"/opt/data"};
  EXPECT_TRUE(RunTemplateFits(spec));
  for (const char* bind : {"/home/user/data", "/tmp/x", "/dev/shm", "/proc/x", "/home", "/", "/dev"}) {
    spec.ro_binds = {bind};
    EXPECT_FALSE(RunTemplateFits(spec)) << bind;
  }
  spec.ro_binds = {"/homework"};  // a prefix of a name is not a parent
  EXPECT_TRUE(RunTemplateFits(spec));
  spec.ro_binds.clear();
  spec.files.push_back(FileEntry{"/home/user/in.txt", "x", 0644});
  EXPECT_FALSE(RunTemplateFits(spec));
}

}  // namespace
}  // namespace airlock::isolation::internal
