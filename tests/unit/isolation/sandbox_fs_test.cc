// sandbox_fs and sandbox_watch: envd's file system calls and watches beneath
// a sandbox root, attacked the way sandboxed code can attack its own
// directory (planted symlinks, deep trees, floods). Runs as root on a plain
// temp dir standing in for the sandbox's /home/user, owned by a non-root uid.
#include "isolation/sandbox_fs.h"
#include "isolation/sandbox_xattrs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "isolation/sandbox_watch.h"
#include "tests/helpers/sandbox_root.h"

namespace airlock::isolation {
namespace {

using ::airlock::test::Put;

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

class SandboxFsTest : public ::airlock::test::SandboxRootTest {
 protected:
  // As the sandbox's code would make it: owned by the sandbox's user.
  void Mkdir(const std::string& rel) {
    ASSERT_EQ(::mkdir(In(rel).c_str(), 0755), 0) << rel;
    ASSERT_EQ(::chown(In(rel).c_str(), kUid, kGid), 0) << rel;
  }
  void Link(const std::string& target, const std::string& rel) {
    ASSERT_EQ(::symlink(target.c_str(), In(rel).c_str()), 0) << rel;
  }
  std::vector<std::string> Paths(const StatusOr<std::vector<FsEntry>>& list) {
    std::vector<std::string> out;
    if (list.ok()) {
      for (const auto& e : *list) out.push_back(e.path);
    }
    return out;
  }
};

TEST(PermissionString, IsGosFileModeString) {
  EXPECT_EQ(PermissionString(S_IFREG | 0644), "-rw-r--r--");
  EXPECT_EQ(PermissionString(S_IFDIR | 0755), "drwxr-xr-x");
  EXPECT_EQ(PermissionString(S_IFLNK | 0777), "Lrwxrwxrwx");
  EXPECT_EQ(PermissionString(S_IFDIR | S_ISVTX | 0777), "dtrwxrwxrwx");
}

TEST(JoinSymlinkTarget, ResolvesByNameOnly) {
  EXPECT_EQ(JoinSymlinkTarget("/home/user/a", "b.txt"), "/home/user/a/b.txt");
  EXPECT_EQ(JoinSymlinkTarget("/home/user/a", "../../../../etc"), "/etc");
  EXPECT_EQ(JoinSymlinkTarget("/home/user", "/etc/passwd"), "/etc/passwd");
  EXPECT_EQ(JoinSymlinkTarget("/home/user", "./x//y/."), "/home/user/x/y");
  EXPECT_EQ(JoinSymlinkTarget("/", ".."), "/");
}

TEST_F(SandboxFsTest, StatReportsFilesDirectoriesAndSymlinksAsThemselves) {
  Mkdir("d");
  Put(In("d/f.txt"), "12345");
  ASSERT_EQ(::chown(In("d/f.txt").c_str(), kUid, kGid), 0);
  ASSERT_EQ(::chmod(In("d/f.txt").c_str(), 0644), 0);
  Link(outside_ + "/secret", "d/link");
  auto f = StatSandboxEntry(root_.get(), "d/f.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->type, FsType::kFile);
  EXPECT_EQ(f->name, "f.txt");
  EXPECT_EQ(f->size, 5);
  EXPECT_EQ(f->owner, "user");
  EXPECT_EQ(f->group, "user");
  EXPECT_EQ(PermissionString(f->st_mode), "-rw-r--r--");
  ASSERT_EQ(::chown(In("d").c_str(), 0, 0), 0);
  auto d = StatSandboxEntry(root_.get(), "d");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->type, FsType::kDirectory);
  EXPECT_EQ(d->owner, "root") << "not the sandbox's user: named as such";
  auto l = StatSandboxEntry(root_.get(), "d/link");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->type, FsType::kSymlink);
  EXPECT_EQ(l->symlink_target, outside_ + "/secret");
  EXPECT_EQ(l->size, static_cast<int64_t>((outside_ + "/secret").size())) << "the link's own size, not the target's";
  auto root = StatSandboxEntry(root_.get(), "");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->type, FsType::kDirectory);
  EXPECT_EQ(StatSandboxEntry(root_.get(), "none").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(StatSandboxEntry(root_.get(), "../outside/secret").status().code(), ErrorCode::kInvalidArgument);
  ASSERT_EQ(::mkfifo(In("fifo").c_str(), 0644), 0);
  EXPECT_EQ(StatSandboxEntry(root_.get(), "fifo").status().code(), ErrorCode::kFailedPrecondition);
}

TEST_F(SandboxFsTest, NothingIsReachedThroughAPlantedSymlink) {
  Link(outside_, "out");
  Link("..", "up");
  EXPECT_EQ(StatSandboxEntry(root_.get(), "out/secret").status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(StatSandboxEntry(root_.get(), "up/outside").status().code(), ErrorCode::kFailedPrecondition);
  bool created = false;
  EXPECT_EQ(MakeSandboxDir(root_.get(), "out/made", &created).code(), ErrorCode::kFailedPrecondition);
  EXPECT_FALSE(Exists(outside_ + "/made"));
  EXPECT_EQ(MoveSandboxEntry(root_.get(), "out/secret", "stolen").status().code(), ErrorCode::kFailedPrecondition);
  Put(In("mine"), "x");
  EXPECT_EQ(MoveSandboxEntry(root_.get(), "mine", "out/planted").status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_FALSE(Exists(outside_ + "/planted"));
  EXPECT_EQ(RemoveSandboxTree(root_.get(), "out/secret", 100).code(), ErrorCode::kFailedPrecondition);
  auto list = ListSandboxEntries(root_.get(), "out", 1, 100);
  EXPECT_EQ(list.status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(list.status().message().find("symbolic link"), std::string::npos) << list.status().ToString();
  EXPECT_EQ(DirWatch::Open(root_.get(), "out", false, 8).status().code(), ErrorCode::kFailedPrecondition);
  // A tree holding links is removed with the links, never what they name.
  Mkdir("tree");
  Link(outside_, "tree/out");
  Link(outside_ + "/secret", "tree/secret");
  ASSERT_TRUE(RemoveSandboxTree(root_.get(), "tree", 100).ok());
  EXPECT_FALSE(Exists(In("tree")));
  EXPECT_TRUE(Exists(outside_ + "/secret"));
  Mkdir("dir");
  EXPECT_EQ(MoveSandboxEntry(root_.get(), "dir", "dir/inside").status().code(), ErrorCode::kInvalidArgument);
  // A link moved is moved as a link.
  auto moved = MoveSandboxEntry(root_.get(), "out", "moved/out");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->type, FsType::kSymlink);
  EXPECT_TRUE(Exists(outside_ + "/secret"));
}

TEST_F(SandboxFsTest, MakeDirMakesParentsAsTheSandboxUserAndSaysWhenItExisted) {
  bool created = false;
  ASSERT_TRUE(MakeSandboxDir(root_.get(), "a/b/c", &created).ok());
  EXPECT_TRUE(created);
  struct stat st;
  ASSERT_EQ(::stat(In("a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);
  ASSERT_EQ(::stat(In("a/b/c").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_TRUE(MakeSandboxDir(root_.get(), "a/b/c", &created).ok());
  EXPECT_FALSE(created);
  Put(In("a/file"), "x");
  EXPECT_EQ(MakeSandboxDir(root_.get(), "a/file", &created).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(MakeSandboxDir(root_.get(), "a/file/sub", &created).code(), ErrorCode::kFailedPrecondition);
}

TEST_F(SandboxFsTest, ListWalksToItsDepthSortedAndBounded) {
  Mkdir("p");
  Mkdir("p/s1");
  Mkdir("p/s1/deep");
  Mkdir("p/s2");
  Put(In("p/f.txt"), "x");
  Link("s1", "p/link");
  ASSERT_EQ(::mkfifo(In("p/fifo").c_str(), 0644), 0);
  EXPECT_EQ(Paths(ListSandboxEntries(root_.get(), "p", 1, 100)),
            (std::vector<std::string>{"p/f.txt", "p/link", "p/s1", "p/s2"}));
  EXPECT_EQ(Paths(ListSandboxEntries(root_.get(), "p", 2, 100)),
            (std::vector<std::string>{"p/f.txt", "p/link", "p/s1", "p/s1/deep", "p/s2"}))
      << "the link is listed, never entered; the FIFO is left out";
  EXPECT_EQ(Paths(ListSandboxEntries(root_.get(), "", 1, 100)), (std::vector<std::string>{"p"}));
  EXPECT_EQ(ListSandboxEntries(root_.get(), "p", 0, 100).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ListSandboxEntries(root_.get(), "p", 10000, 100).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ListSandboxEntries(root_.get(), "p", 2, 3).status().code(), ErrorCode::kResourceExhausted)
      << "more entries than allowed is said, never cut silently";
  EXPECT_EQ(ListSandboxEntries(root_.get(), "p/f.txt", 1, 100).status().code(), ErrorCode::kFailedPrecondition);
}

TEST_F(SandboxFsTest, MetadataIsTheE2bXattrsWithThePrefixStripped) {
  Put(In("m.txt"), "x");
  if (::setxattr(In("m.txt").c_str(), "user.e2b.author", "me", 2, 0) != 0) {
    GTEST_SKIP() << "this file system has no user xattrs";
  }
  ASSERT_EQ(::setxattr(In("m.txt").c_str(), "user.other", "no", 2, 0), 0);
  // A value past the bound is left out (where the file system can hold one).
  std::string big(kMaxMetadataBytes + 1, 'x');
  (void)::setxattr(In("m.txt").c_str(), "user.e2b.big", big.data(), big.size(), 0);
  auto e = StatSandboxEntry(root_.get(), "m.txt");
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e->metadata.size(), 1u) << "only user.e2b.*, and no value past the bound";
  EXPECT_EQ(e->metadata[0].first, "author");
  EXPECT_EQ(e->metadata[0].second, "me");
}

TEST_F(SandboxFsTest, RemoveTakesWholeTreesWithinItsBounds) {
  std::string deep = "n";
  Mkdir(deep);
  for (int i = 0; i < 70; ++i) {
    deep += "/n";
    Mkdir(deep);
  }
  EXPECT_EQ(RemoveSandboxTree(root_.get(), "n", 1000).code(), ErrorCode::kResourceExhausted);
  Mkdir("wide");
  for (int i = 0; i < 50; ++i) Put(In("wide/f" + std::to_string(i)), "x");
  EXPECT_EQ(RemoveSandboxTree(root_.get(), "wide", 10).code(), ErrorCode::kResourceExhausted);
  EXPECT_TRUE(RemoveSandboxTree(root_.get(), "wide", 1000).ok());
  EXPECT_FALSE(Exists(In("wide")));
  EXPECT_EQ(RemoveSandboxTree(root_.get(), "", 1000).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(RemoveSandboxTree(root_.get(), "none", 1000).code(), ErrorCode::kNotFound);
  // A mount inside is never entered nor removed.
  Mkdir("m");
  Mkdir("m/mnt");
  if (::mount("tmpfs", In("m/mnt").c_str(), "tmpfs", 0, "size=1m") != 0) GTEST_SKIP() << "cannot mount here";
  mounts_.push_back(In("m/mnt"));
  Put(In("m/mnt/kept"), "x");
  EXPECT_EQ(RemoveSandboxTree(root_.get(), "m", 1000).code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(Exists(In("m/mnt/kept")));
}

// The events a watch has after `n` polls that find something (or none left).
std::vector<std::string> Drain(DirWatch& w) {
  std::vector<std::string> out;
  for (int i = 0; i < 20; ++i) {
    struct pollfd p = {w.fd(), POLLIN, 0};
    if (::poll(&p, 1, i == 0 ? 1000 : 50) <= 0) break;
    bool lost = false;
    for (const auto& e : w.Read(&lost)) {
      static const char* kNames[] = {"create", "write", "remove", "rename", "chmod"};
      out.push_back(std::string(kNames[static_cast<int>(e.type)]) + " " + e.name);
    }
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST_F(SandboxFsTest, WatchReportsChangesRecursivelyAndHidesUploadTemporaries) {
  Mkdir("w");
  Mkdir("w/sub");
  auto w = DirWatch::Open(root_.get(), "w", /*recursive=*/true, 8);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  Put(In("w/sub/a.txt"), "x");
  Mkdir("w/new");
  auto ev = Drain(**w);
  EXPECT_TRUE(Has(ev, "create sub/a.txt")) << ::testing::PrintToString(ev);
  EXPECT_TRUE(Has(ev, "write sub/a.txt"));
  EXPECT_TRUE(Has(ev, "create new"));
  Mkdir("w/late");
  Put(In("w/late/early.txt"), "x");  // made before its directory's watch is in place
  Put(In("w/new/b.txt"), "x");  // in a directory made after the start
  Put(In("w/.airlock-upload-0123"), "x");
  ASSERT_EQ(::rename(In("w/.airlock-upload-0123").c_str(), In("w/up.txt").c_str()), 0);
  ASSERT_EQ(::unlink(In("w/sub/a.txt").c_str()), 0);
  ev = Drain(**w);
  EXPECT_TRUE(Has(ev, "write new/b.txt")) << ::testing::PrintToString(ev);
  EXPECT_TRUE(Has(ev, "create late/early.txt")) << "what a new directory held when its watch came is reported";
  EXPECT_TRUE(Has(ev, "create up.txt"));
  EXPECT_TRUE(Has(ev, "write up.txt")) << "a file renamed over a name is a write of that name";
  EXPECT_TRUE(Has(ev, "remove sub/a.txt"));
  for (const auto& e : ev) EXPECT_EQ(e.find("airlock-upload"), std::string::npos) << e;
  std::string cmd = "rm -rf '" + In("w") + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Drain(**w);
  EXPECT_TRUE((*w)->ended());
}

TEST_F(SandboxFsTest, WatchIsBoundedInDirectoriesAndRefusesWhatIsNotThere) {
  Mkdir("big");
  for (int i = 0; i < 10; ++i) Mkdir("big/d" + std::to_string(i));
  EXPECT_EQ(DirWatch::Open(root_.get(), "big", true, 5).status().code(), ErrorCode::kResourceExhausted);
  auto w = DirWatch::Open(root_.get(), "big", true, 12);
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 5; ++i) Mkdir("big/more" + std::to_string(i));
  Drain(**w);
  EXPECT_EQ((*w)->unwatched(), 4u) << "one more fits, the rest are counted as unwatched";
  EXPECT_EQ(DirWatch::Open(root_.get(), "none", false, 8).status().code(), ErrorCode::kNotFound);
  Put(In("file"), "x");
  EXPECT_EQ(DirWatch::Open(root_.get(), "file", false, 8).status().code(), ErrorCode::kFailedPrecondition);
}

}  // namespace
}  // namespace airlock::isolation
