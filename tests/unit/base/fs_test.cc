#include "base/fs.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

namespace airlock {
namespace {

TEST(FsTest, ReadFileCapsSize) {
  char dir[] = "/tmp/airlock-fs-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/f";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("0123456789", f);
  fclose(f);
  auto all = ReadFile(path);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, "0123456789");
  EXPECT_FALSE(ReadFile(path, 4).ok());
  EXPECT_FALSE(ReadFile(path + ".missing").ok());
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace airlock
