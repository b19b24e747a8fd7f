// sandbox_xattrs: E2B's file metadata as user.e2b.* attributes. Written by
// SandboxFileWriter before the rename, gone when a file is replaced without
// any, checked (no key leaves the user.e2b. namespace), and read back bounded
// whatever the sandbox set itself. On a tmpfs (a sandbox's /home/user is
// one): a kernel whose tmpfs keeps no user.* attributes (before 6.6) skips,
// unless AIRLOCK_MUST_WORK=1.
#include "isolation/sandbox_xattrs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "base/unique_fd.h"
#include "isolation/sandbox_files.h"
#include "tests/helpers/must_work.h"

namespace airlock::isolation {
namespace {

class SandboxXattrsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/dev/shm/airlock-xattrs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    root_.reset(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_);
    const std::string probe = dir_ + "/probe";
    UniqueFd fd(::open(probe.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd);
    if (::fsetxattr(fd.get(), "user.probe", "1", 1, 0) != 0) {
      const int err = errno;
      if (err == EOPNOTSUPP && !test::MustWork()) GTEST_SKIP() << "this kernel's tmpfs keeps no user.* attributes";
      FAIL() << "fsetxattr on /dev/shm: " << std::strerror(err);
    }
    ::unlink(probe.c_str());
  }
  void TearDown() override {
    root_.reset();
    std::string cmd = "rm -rf '" + dir_ + "'";
    (void)std::system(cmd.c_str());
  }
  SandboxMetadata ReadOf(const std::string& rel, bool* truncated = nullptr) {
    UniqueFd fd(::open((dir_ + "/" + rel).c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    EXPECT_TRUE(fd);
    auto m = ReadSandboxMetadata(fd.get(), truncated);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : SandboxMetadata{};
  }
  std::string Raw(const std::string& rel, const std::string& name) {
    char buf[256];
    ssize_t n = ::getxattr((dir_ + "/" + rel).c_str(), name.c_str(), buf, sizeof buf);
    return n < 0 ? "<none>" : std::string(buf, static_cast<size_t>(n));
  }

  std::string dir_;
  UniqueFd root_;
};

TEST_F(SandboxXattrsTest, WrittenBeforeTheRenameAndGoneWhenReplacedWithout) {
  const SandboxMetadata m = {{"author", "mish"}, {"purpose", "upload"}};
  ASSERT_TRUE(CheckSandboxMetadata(m).ok());
  ASSERT_TRUE(WriteSandboxFile(root_.get(), "a/f.txt", "one", true, nullptr, m).ok());
  EXPECT_EQ(Raw("a/f.txt", "user.e2b.author"), "mish");
  EXPECT_EQ(ReadOf("a/f.txt"), m);
  // The writer sets them on its temporary file: a failed commit leaves no file at all.
  auto w = SandboxFileWriter::Open(root_.get(), "a/g.txt", false);
  ASSERT_TRUE(w.ok());
  (*w)->SetMetadata(m);
  ASSERT_TRUE((*w)->Write("x").ok());
  (*w)->Abort();
  EXPECT_NE(::access((dir_ + "/a/g.txt").c_str(), F_OK), 0);
  // Replaced without metadata: a new inode, nothing stale.
  ASSERT_TRUE(WriteSandboxFile(root_.get(), "a/f.txt", "two", false).ok());
  EXPECT_TRUE(ReadOf("a/f.txt").empty());
  // Replaced with other metadata: only that.
  ASSERT_TRUE(WriteSandboxFile(root_.get(), "a/f.txt", "3", false, nullptr, {{"stage", "x"}}).ok());
  EXPECT_EQ(ReadOf("a/f.txt"), (SandboxMetadata{{"stage", "x"}}));
  // A directory can carry them too (set by the sandbox); other attributes are not metadata.
  ASSERT_EQ(::setxattr((dir_ + "/a").c_str(), "user.e2b.k", "v", 1, 0), 0);
  ASSERT_EQ(::setxattr((dir_ + "/a").c_str(), "user.other", "v", 1, 0), 0);
  EXPECT_EQ(ReadOf("a"), (SandboxMetadata{{"k", "v"}}));
}

TEST_F(SandboxXattrsTest, KeysThatWouldLeaveTheNamespaceAreRefused) {
  for (const std::string& key : {std::string("../x"), std::string("a/b"), std::string("x\0y", 3), std::string(""),
                                 std::string("with space"), std::string("nl\n"), std::string("\xc3\xa9"),
                                 std::string(247, 'k')}) {
    Status st = CheckSandboxMetadata({{key, "v"}});
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << "key of " << key.size() << " bytes";
  }
  for (const std::string& value : {std::string("a\nb"), std::string("nul\0", 4), std::string("\x7f"),
                                   std::string("\xc3\xa9")}) {
    EXPECT_EQ(CheckSandboxMetadata({{"k", value}}).code(), ErrorCode::kInvalidArgument);
  }
  // Token characters are allowed, and stay beneath user.e2b. on the file:
  // "trusted.x" is user.e2b.trusted.x, never trusted.x.
  const SandboxMetadata odd = {{"trusted.x", "1"}, {"security.selinux", "2"}, {"..", "3"}};
  ASSERT_TRUE(CheckSandboxMetadata(odd).ok());
  ASSERT_TRUE(WriteSandboxFile(root_.get(), "odd", "x", false, nullptr, odd).ok());
  EXPECT_EQ(Raw("odd", "user.e2b.trusted.x"), "1");
  EXPECT_EQ(Raw("odd", "trusted.x"), "<none>");
  EXPECT_EQ(ReadOf("odd"), odd);
}

TEST_F(SandboxXattrsTest, SizeAndCountBounds) {
  EXPECT_TRUE(CheckSandboxMetadata({{std::string(246, 'k'), "v"}}).ok());
  // 4096 bytes in all, a prefix counted per key.
  EXPECT_TRUE(CheckSandboxMetadata({{"k", std::string(4096 - 10, 'v')}}).ok());
  EXPECT_EQ(CheckSandboxMetadata({{"k", std::string(4096 - 9, 'v')}}).code(), ErrorCode::kInvalidArgument);
  SandboxMetadata many;
  for (int i = 0; i < 65; ++i) many["k" + std::to_string(i)] = "";
  EXPECT_EQ(CheckSandboxMetadata(many).code(), ErrorCode::kInvalidArgument);
}

TEST_F(SandboxXattrsTest, WhatTheSandboxSetItselfIsReadBounded) {
  ASSERT_TRUE(WriteSandboxFile(root_.get(), "big", "x", false).ok());
  const std::string path = dir_ + "/big";
  // More keys than read, and a value larger than the whole budget.
  for (int i = 0; i < 100; ++i) {
    std::string name = "user.e2b.k" + std::to_string(100 + i);
    ASSERT_EQ(::setxattr(path.c_str(), name.c_str(), "v", 1, 0), 0);
  }
  std::string huge(8000, 'h');
  ASSERT_EQ(::setxattr(path.c_str(), "user.e2b.huge", huge.data(), huge.size(), 0), 0);
  bool truncated = false;
  SandboxMetadata m = ReadOf("big", &truncated);
  EXPECT_TRUE(truncated);
  EXPECT_LE(m.size(), kMaxMetadataKeys);
  EXPECT_EQ(m.count("huge"), 0u);
  size_t total = 0;
  for (const auto& [k, v] : m) total += 9 + k.size() + v.size();
  EXPECT_LE(total, kMaxMetadataBytes);
  // A symlink has none, and reading through an O_PATH fd of one never follows it.
  ASSERT_EQ(::symlink(path.c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_TRUE(ReadOf("link").empty());
}

}  // namespace
}  // namespace airlock::isolation
