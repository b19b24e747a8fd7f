// A fixture for tests of host-side access beneath a sandbox's directory
// (isolation/sandbox_files, sandbox_fs): a temp dir standing in for the
// sandbox's working directory, owned by a non-root uid as in a real run, and
// beside it an "outside" directory holding a host secret that no call may
// reach. Root only (chown, mounts).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace airlock::test {

inline void Put(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
}

class SandboxRootTest : public ::testing::Test {
 protected:
  static constexpr uid_t kUid = 12345;
  static constexpr gid_t kGid = 23456;
  void SetUp() override {
    char tmpl[] = "/tmp/airlock-sbroot-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    dir_ = base_ + "/root";
    ASSERT_EQ(::mkdir(dir_.c_str(), 0755), 0);
    // The sandbox's uid stands for the owner: not root, as in a real run.
    ASSERT_EQ(::chown(dir_.c_str(), kUid, kGid), 0);
    outside_ = base_ + "/outside";
    ASSERT_EQ(::mkdir(outside_.c_str(), 0755), 0);
    Put(outside_ + "/secret", "HOST-SECRET");
    root_.reset(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_);
  }
  void TearDown() override {
    root_.reset();
    for (const auto& m : mounts_) ::umount2(m.c_str(), MNT_DETACH);
    std::string cmd = "rm -rf '" + base_ + "'";
    (void)std::system(cmd.c_str());
  }
  std::string In(const std::string& rel) const { return dir_ + "/" + rel; }

  std::string base_, dir_, outside_;
  UniqueFd root_;
  std::vector<std::string> mounts_;  // unmounted at the end
};

}  // namespace airlock::test
