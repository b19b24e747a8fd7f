#include "base/status.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status UseHalf(int x, int* out) {
  ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(StatusTest, ErrnoMessageNamesTheCallAndTheError) {
  Status s = ErrnoError("open(/nope)", ENOENT);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.sys_errno(), ENOENT);
  EXPECT_EQ(s.ToString(), "open(/nope): No such file or directory");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int v = 0;
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
  Status s = UseHalf(3, &v);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

}  // namespace
}  // namespace airlock
