#include "profile/limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace airlock::profile {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// The shipped minimal profile's ceilings.
Profile Minimal() {
  Profile p;
  p.name = "minimal";
  p.resources.memory_bytes = 256ll << 20;
  p.resources.cpu_cores = 0.5;
  p.resources.timeout_max_s = 30;
  p.resources.timeout_default_s = 10;
  p.resources.pids = 32;
  p.resources.disk_bytes = 64ll << 20;
  p.resources.output_bytes = 51200;
  return p;
}

TEST(ClampTest, NothingAskedGetsTheDefaults) {
  EffectiveLimits e = Clamp(Minimal(), {});
  EXPECT_EQ(e.profile, "minimal");
  EXPECT_DOUBLE_EQ(e.timeout_s, 10);
  EXPECT_EQ(e.memory_bytes, 256ll << 20);
  EXPECT_DOUBLE_EQ(e.cpu_cores, 0.5);
  // No cpu_time in the profile: timeout x max(1, cpu).
  EXPECT_DOUBLE_EQ(e.cpu_time_s, 10);
  EXPECT_EQ(e.pids, 32);
  EXPECT_EQ(e.disk_bytes, 64ll << 20);
  EXPECT_EQ(e.output_bytes, 51200);
  EXPECT_THAT(e.clamped, IsEmpty());
}

TEST(ClampTest, LessThanTheCeilingIsGranted) {
  RequestedLimits r;
  r.timeout_s = 2.5;
  r.memory_bytes = 100ll << 20;
  r.cpu_cores = 0.25;
  r.pids = 4;
  r.disk_bytes = 2ll << 20;
  r.output_bytes = 1000;
  r.cpu_time_s = 1;
  EffectiveLimits e = Clamp(Minimal(), r);
  EXPECT_DOUBLE_EQ(e.timeout_s, 2.5);
  EXPECT_EQ(e.memory_bytes, 100ll << 20);
  EXPECT_DOUBLE_EQ(e.cpu_cores, 0.25);
  EXPECT_EQ(e.pids, 4);
  EXPECT_EQ(e.disk_bytes, 2ll << 20);
  EXPECT_EQ(e.output_bytes, 1000);
  EXPECT_DOUBLE_EQ(e.cpu_time_s, 1);
  EXPECT_THAT(e.clamped, IsEmpty());
}

TEST(ClampTest, MoreThanTheCeilingGetsTheCeiling) {
  RequestedLimits r;
  r.timeout_s = 60;
  r.memory_bytes = 1ll << 30;
  r.cpu_cores = 4;
  r.pids = 1000;
  r.disk_bytes = 1ll << 40;
  r.output_bytes = 1 << 30;
  EffectiveLimits e = Clamp(Minimal(), r);
  EXPECT_DOUBLE_EQ(e.timeout_s, 30);
  EXPECT_EQ(e.memory_bytes, 256ll << 20);
  EXPECT_DOUBLE_EQ(e.cpu_cores, 0.5);
  EXPECT_EQ(e.pids, 32);
  EXPECT_EQ(e.disk_bytes, 64ll << 20);
  EXPECT_EQ(e.output_bytes, 51200);
  EXPECT_DOUBLE_EQ(e.cpu_time_s, 30);  // follows the clamped timeout
  EXPECT_THAT(e.clamped, ElementsAre("timeout", "memory", "cpu", "pids", "disk", "output"));
}

TEST(ClampTest, UnusableRequestsFallBackNeverBelowAWorkingMinimum) {
  RequestedLimits r;
  r.timeout_s = std::nan("");
  r.memory_bytes = 1;  // raised to 16Mi
  r.cpu_cores = -1;    // absent
  r.pids = 0;          // absent
  r.disk_bytes = 10;   // raised to 1Mi
  r.cpu_time_s = -5;   // absent
  EffectiveLimits e = Clamp(Minimal(), r);
  EXPECT_DOUBLE_EQ(e.timeout_s, 10);
  EXPECT_EQ(e.memory_bytes, 16ll << 20);
  EXPECT_DOUBLE_EQ(e.cpu_cores, 0.5);
  EXPECT_EQ(e.pids, 32);
  EXPECT_EQ(e.disk_bytes, 1ll << 20);
  EXPECT_DOUBLE_EQ(e.cpu_time_s, 10);
  EXPECT_THAT(e.clamped, IsEmpty());
}

TEST(ClampTest, ProfileCpuTimeIsTheCeiling) {
  Profile p = Minimal();
  p.resources.cpu_time_s = 20;
  RequestedLimits r;
  EXPECT_DOUBLE_EQ(Clamp(p, r).cpu_time_s, 20);
  r.cpu_time_s = 25;
  EffectiveLimits e = Clamp(p, r);
  EXPECT_DOUBLE_EQ(e.cpu_time_s, 20);
  EXPECT_THAT(e.clamped, ElementsAre("cpu_time"));
  r.cpu_time_s = 5;
  EXPECT_DOUBLE_EQ(Clamp(p, r).cpu_time_s, 5);
}

TEST(ClampTest, DerivedCpuTimeScalesWithCores) {
  Profile p = Minimal();
  p.resources.cpu_cores = 2;
  RequestedLimits r;
  r.timeout_s = 3;
  EXPECT_DOUBLE_EQ(Clamp(p, r).cpu_time_s, 6);
}

TEST(ValidateTest, InRangeRequestsPass) {
  RequestedLimits r;
  EXPECT_TRUE(Validate(Minimal(), r).ok());
  r.timeout_s = 30;
  r.memory_bytes = 256ll << 20;
  r.cpu_cores = 0.5;
  r.pids = 32;
  r.disk_bytes = 64ll << 20;
  r.output_bytes = 51200;
  r.cpu_time_s = 30;
  Status st = Validate(Minimal(), r);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(ValidateTest, OutOfRangeNamesFieldValueAndRange) {
  auto message = [](RequestedLimits r) {
    Status st = Validate(Minimal(), r);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
    return st.message();
  };
  RequestedLimits r;
  r.timeout_s = 60;
  EXPECT_EQ(message(r),
            "timeout: 60 is out of range for profile 'minimal' (0 < timeout <= 30 seconds)");
  r.timeout_s = 0;
  EXPECT_EQ(message(r),
            "timeout: 0 is out of range for profile 'minimal' (0 < timeout <= 30 seconds)");
  r.timeout_s = -1;
  EXPECT_FALSE(Validate(Minimal(), r).ok());
  r.timeout_s = std::nan("");
  EXPECT_FALSE(Validate(Minimal(), r).ok());

  r = {};
  r.memory_bytes = 1ll << 30;
  EXPECT_EQ(message(r),
            "memory: 1073741824 bytes is out of range for profile 'minimal' (16777216 to 268435456 "
            "bytes = 256Mi)");
  r = {};
  r.cpu_cores = 1;
  EXPECT_EQ(message(r), "cpu: 1 is out of range for profile 'minimal' (0.001 to 0.5 cores)");
  r = {};
  r.pids = 0;
  EXPECT_EQ(message(r), "pids: 0 is out of range for profile 'minimal' (1 to 32)");
  r = {};
  r.output_bytes = 51201;
  EXPECT_EQ(message(r),
            "output: 51201 bytes is out of range for profile 'minimal' (1 to 51200 bytes = 50Ki)");
  r = {};
  r.disk_bytes = 1;
  EXPECT_EQ(
      message(r),
      "disk: 1 bytes is out of range for profile 'minimal' (1048576 to 67108864 bytes = 64Mi)");
  // cpu_time's ceiling follows the requested timeout when the profile sets none.
  r = {};
  r.timeout_s = 5;
  r.cpu_time_s = 6;
  EXPECT_EQ(message(r),
            "cpu_time: 6 is out of range for profile 'minimal' (0 < cpu_time <= 5 seconds)");
}

}  // namespace
}  // namespace airlock::profile
