// sandbox_files: host-side file access beneath a sandbox root, attacked the way
// sandboxed code can attack its own directory. Runs as root on a plain temp dir
// standing in for the sandbox's working directory; each attack asserts that no
// host byte comes back and nothing is written outside.
#include "isolation/sandbox_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/unique_fd.h"
#include "tests/helpers/must_work.h"
#include "tests/helpers/sandbox_root.h"

namespace airlock::isolation {
namespace {

using ::airlock::test::MustWork;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using ::airlock::test::Put;

class SandboxFilesTest : public ::airlock::test::SandboxRootTest {
 protected:
  // Nothing outside changed: the host secret is intact and alone.
  void ExpectOutsideUntouched() {
    EXPECT_EQ(Slurp(outside_ + "/secret"), "HOST-SECRET");
    EXPECT_EQ(Slurp("/etc/passwd").find("sandbox-wrote"), std::string::npos);
  }
  StatusOr<std::string> Read(const std::string& p, int64_t cap = 1 << 20) {
    int64_t total = -1;
    return ReadSandboxFile(root_.get(), p, cap, 0, -1, &total);
  }
};

TEST_F(SandboxFilesTest, WriteReadListRemoveRoundTrip) {
  std::string data("a,b\n1,2\n\0\xff", 10);
  ASSERT_TRUE(WriteSandboxFile(root_.get(), "data/in.csv", data, true).ok());
  auto got = Read("data/in.csv");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  EXPECT_EQ(Slurp(In("data/in.csv")), data);
  // Replace.
  ASSERT_TRUE(WriteSandboxFile(root_.get(), "data/in.csv", "new", false).ok());
  EXPECT_EQ(Read("data/in.csv").value(), "new");
  // Ranges.
  int64_t total = 0;
  auto part = ReadSandboxFile(root_.get(), "data/in.csv", 100, 1, 1, &total);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(*part, "e");
  EXPECT_EQ(total, 3);
  EXPECT_EQ(ReadSandboxFile(root_.get(), "data/in.csv", 100, 3, -1, &total).value(), "");
  EXPECT_EQ(ReadSandboxFile(root_.get(), "data/in.csv", 100, 4, -1, &total).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(ReadSandboxFile(root_.get(), "data/in.csv", 2, 0, -1, &total).status().code(),
            ErrorCode::kResourceExhausted);
  EXPECT_TRUE(ReadSandboxFile(root_.get(), "data/in.csv", 2, 1, -1, &total).ok());
  // List.
  bool trunc = true;
  auto ls = ListSandboxDir(root_.get(), "", 100, 8, &trunc);
  ASSERT_TRUE(ls.ok()) << ls.status().ToString();
  EXPECT_FALSE(trunc);
  ASSERT_EQ(ls->size(), 2u);
  EXPECT_EQ((*ls)[0].path, "data");
  EXPECT_EQ((*ls)[0].type, "directory");
  EXPECT_EQ((*ls)[1].path, "data/in.csv");
  EXPECT_EQ((*ls)[1].type, "file");
  EXPECT_EQ((*ls)[1].size, 3);
  EXPECT_GT((*ls)[1].modified_ms, int64_t{1600000000000});
  auto sub = ListSandboxDir(root_.get(), "data", 100, 0, &trunc);
  ASSERT_TRUE(sub.ok());
  ASSERT_EQ(sub->size(), 1u);
  EXPECT_EQ((*sub)[0].path, "data/in.csv");
  // Remove: a non-empty directory is refused, then file and directory go.
  EXPECT_EQ(RemoveSandboxPath(root_.get(), "data").code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(RemoveSandboxPath(root_.get(), "data/in.csv").ok());
  EXPECT_EQ(RemoveSandboxPath(root_.get(), "data/in.csv").code(), ErrorCode::kNotFound);
  EXPECT_TRUE(RemoveSandboxPath(root_.get(), "data").ok());
  EXPECT_EQ(Read("data/in.csv").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(WriteSandboxFile(root_.get(), "nope/x", "x", false).code(), ErrorCode::kNotFound);
}

TEST_F(SandboxFilesTest, WrittenFilesBelongToTheRootsOwner) {
  ASSERT_TRUE(WriteSandboxFile(root_.get(), "a/b/c.txt", "x", true).ok());
  for (const char* p : {"a", "a/b", "a/b/c.txt"}) {
    struct stat st;
    ASSERT_EQ(::lstat(In(p).c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, 12345u) << p;
    EXPECT_EQ(st.st_gid, 23456u) << p;
    EXPECT_EQ(st.st_mode & 0777, S_ISDIR(st.st_mode) ? 0755u : 0644u) << p;
  }
  // No temporary file is left behind.
  bool trunc = false;
  auto ls = ListSandboxDir(root_.get(), "", 100, 8, &trunc);
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ(ls->size(), 3u);
}

TEST_F(SandboxFilesTest, SymlinkToShadowIsNeverFollowed) {
  ASSERT_EQ(::symlink("/etc/shadow", In("shadow").c_str()), 0);
  ASSERT_EQ(::symlink((outside_ + "/secret").c_str(), In("secret").c_str()), 0);
  for (const char* p : {"shadow", "secret"}) {
    auto r = Read(p);
    EXPECT_EQ(r.status().code(), ErrorCode::kFailedPrecondition) << p;
    EXPECT_NE(r.status().message().find(p), std::string::npos);
  }
  // Writes only through the link to the decoy (a regression must not touch /etc/shadow).
  EXPECT_EQ(WriteSandboxFile(root_.get(), "secret", "sandbox-wrote", false).code(), ErrorCode::kFailedPrecondition);
  bool trunc = false;
  auto ls = ListSandboxDir(root_.get(), "", 100, 8, &trunc);
  ASSERT_TRUE(ls.ok());
  EXPECT_TRUE(ls->empty());  // symlinks are not listed
  // Removing the link removes the link, not its target.
  EXPECT_TRUE(RemoveSandboxPath(root_.get(), "secret").ok());
  ExpectOutsideUntouched();
  struct stat st;
  EXPECT_EQ(::stat("/etc/shadow", &st), 0);
}

// Attacks that would write or remove go at decoys outside the root (a copy
// standing for /etc), never at the host's real files: a regression must not
// damage the machine the tests run on.
TEST_F(SandboxFilesTest, SymlinkToADirectoryOutsideAndInTheMiddle) {
  ASSERT_EQ(::symlink(outside_.c_str(), In("out").c_str()), 0);
  ASSERT_EQ(::mkdir((outside_ + "/etc").c_str(), 0755), 0);
  Put(outside_ + "/etc/passwd", "HOST-PASSWD");
  ASSERT_EQ(::symlink((outside_ + "/etc").c_str(), In("etc").c_str()), 0);
  ASSERT_EQ(::mkdir(In("real").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("../../outside", In("real/up").c_str()), 0);
  for (const char* p : {"out/secret", "etc/passwd", "real/up/secret"}) {
    EXPECT_EQ(Read(p).status().code(), ErrorCode::kFailedPrecondition) << p;
    EXPECT_FALSE(WriteSandboxFile(root_.get(), p, "sandbox-wrote", false).ok()) << p;
    EXPECT_FALSE(WriteSandboxFile(root_.get(), std::string(p) + "2", "sandbox-wrote", true).ok()) << p;
    EXPECT_FALSE(RemoveSandboxPath(root_.get(), p).ok()) << p;
  }
  bool trunc = false;
  EXPECT_FALSE(ListSandboxDir(root_.get(), "out", 100, 8, &trunc).ok());
  EXPECT_FALSE(ListSandboxDir(root_.get(), "real/up", 100, 8, &trunc).ok());
  auto ls = ListSandboxDir(root_.get(), "", 100, 8, &trunc);
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(ls->size(), 1u);
  EXPECT_EQ((*ls)[0].path, "real");
  ExpectOutsideUntouched();
  EXPECT_EQ(Slurp(outside_ + "/etc/passwd"), "HOST-PASSWD");
  EXPECT_FALSE(std::ifstream(outside_ + "/secret2").good());
  EXPECT_FALSE(std::ifstream(outside_ + "/etc/passwd2").good());
}

TEST_F(SandboxFilesTest, DotDotAbsoluteAndOddNamesAreRefusedBeforeAnyAccess) {
  for (std::string p : {std::string("../outside/secret"), std::string("a/../../outside/secret"),
                        std::string("/etc/passwd"), std::string(outside_ + "/secret"), std::string("a\0b", 3),
                        std::string(""), std::string("./x"), std::string("a//b")}) {
    EXPECT_EQ(Read(p).status().code(), ErrorCode::kInvalidArgument) << EscapeSandboxPath(p);
    if (p == "/etc/passwd") continue;  // writes and removals aim at decoys only
    EXPECT_EQ(WriteSandboxFile(root_.get(), p, "sandbox-wrote", true).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(RemoveSandboxPath(root_.get(), p).code(), ErrorCode::kInvalidArgument);
  }
  bool trunc = false;
  EXPECT_EQ(ListSandboxDir(root_.get(), "..", 10, 1, &trunc).status().code(), ErrorCode::kInvalidArgument);
  ExpectOutsideUntouched();
}

TEST_F(SandboxFilesTest, ProcMagicLinksAreNotFollowed) {
  ASSERT_EQ(::symlink("/proc/self/root/etc/passwd", In("pw").c_str()), 0);
  ASSERT_EQ(::symlink("/proc/self/root", In("hostroot").c_str()), 0);
  ASSERT_EQ(::symlink("/proc/1/root", In("initroot").c_str()), 0);
  for (const char* p : {"pw", "hostroot/etc/passwd", "initroot/etc/passwd"}) {
    auto r = Read(p);
    EXPECT_FALSE(r.ok()) << p;
    EXPECT_EQ(r.status().code(), ErrorCode::kFailedPrecondition) << p;
  }
  // Writes aim at the decoy directory through the host's root.
  std::string via_root = "hostroot" + outside_;
  EXPECT_FALSE(WriteSandboxFile(root_.get(), via_root + "/sandbox-wrote", "x", true).ok());
  EXPECT_FALSE(WriteSandboxFile(root_.get(), via_root + "/secret", "sandbox-wrote", false).ok());
  EXPECT_FALSE(RemoveSandboxPath(root_.get(), via_root + "/secret").ok());
  EXPECT_FALSE(std::ifstream(outside_ + "/sandbox-wrote").good());
  ExpectOutsideUntouched();
}

TEST_F(SandboxFilesTest, HardLinkInsideIsTheSandboxsOwnButAWriteCutsIt) {
  Put(In("orig"), "original");
  ASSERT_EQ(::link(In("orig").c_str(), In("alias").c_str()), 0);
  auto r = Read("alias");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "original");
  // A write replaces the entry: the other name keeps its bytes.
  ASSERT_TRUE(WriteSandboxFile(root_.get(), "alias", "replaced", false).ok());
  EXPECT_EQ(Slurp(In("alias")), "replaced");
  EXPECT_EQ(Slurp(In("orig")), "original");
}

// Returning at all is the verdict: a FIFO opened for reading or writing with
// nobody at the other end blocks forever, so a call that answers
// kFailedPrecondition refused it before opening (no clock needed).
TEST_F(SandboxFilesTest, FifoReadAndWriteReturnPromptly) {
  ASSERT_EQ(::mkfifo(In("fifo").c_str(), 0666), 0);
  EXPECT_EQ(Read("fifo").status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(WriteSandboxFile(root_.get(), "fifo", "x", false).code(), ErrorCode::kFailedPrecondition);
  bool trunc = false;
  auto ls = ListSandboxDir(root_.get(), "", 10, 1, &trunc);
  ASSERT_TRUE(ls.ok());
  EXPECT_TRUE(ls->empty());
  struct stat st;
  ASSERT_EQ(::lstat(In("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));  // still the FIFO: not replaced, not written
  EXPECT_TRUE(RemoveSandboxPath(root_.get(), "fifo").ok());
}

TEST_F(SandboxFilesTest, SocketAndDeviceAreRefused) {
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(s);
  struct sockaddr_un a = {};
  a.sun_family = AF_UNIX;
  std::string sp = In("sock");
  ASSERT_LT(sp.size(), sizeof a.sun_path);
  std::strcpy(a.sun_path, sp.c_str());
  ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(s.get(), 1), 0);
  EXPECT_EQ(Read("sock").status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(WriteSandboxFile(root_.get(), "sock", "x", false).code(), ErrorCode::kFailedPrecondition);
  // A device node (root can make one here; a real sandbox cannot): /dev/zero's.
  ASSERT_EQ(::mknod(In("zero").c_str(), S_IFCHR | 0666, makedev(1, 5)), 0);
  auto r = Read("zero");
  EXPECT_EQ(r.status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("character device"), std::string::npos);
  EXPECT_EQ(WriteSandboxFile(root_.get(), "zero", "x", false).code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(RemoveSandboxPath(root_.get(), "sock").ok());
  EXPECT_TRUE(RemoveSandboxPath(root_.get(), "zero").ok());
}

TEST_F(SandboxFilesTest, SparseTerabyteFileIsNotReadPastTheCap) {
  UniqueFd f(::open(In("sparse").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(f);
  const int64_t tb = int64_t{1} << 40;
  if (::ftruncate(f.get(), tb) != 0) {
    if (MustWork()) FAIL() << "ftruncate to 1 TB: " << strerror(errno);
    GTEST_SKIP() << "this file system cannot hold a 1 TB sparse file";
  }
  int64_t total = 0;
  // What was read, from the kernel's count of this process's read bytes
  // (/proc/self/io rchar): not a clock, so a busy host cannot fail it.
  auto read_bytes = [] {
    std::ifstream io("/proc/self/io");
    std::string key;
    int64_t value = 0;
    while (io >> key >> value) {
      if (key == "rchar:") return value;
    }
    return int64_t{-1};
  };
  const int64_t read_before = read_bytes();
  auto r = ReadSandboxFile(root_.get(), "sparse", 1 << 20, 0, -1, &total);
  EXPECT_EQ(r.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(total, tb);
  // A range within the cap reads only that range.
  auto part = ReadSandboxFile(root_.get(), "sparse", 1 << 20, tb - 10, -1, &total);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(*part, std::string(10, '\0'));
  EXPECT_EQ(ReadSandboxFile(root_.get(), "sparse", 1 << 20, 0, 2 << 20, &total).status().code(),
            ErrorCode::kResourceExhausted);
  // Up to the cap (1 MiB) per call at most, never the terabyte.
  const int64_t read = read_bytes() - read_before;
  ASSERT_GE(read_before, 0) << "/proc/self/io has no rchar";
  EXPECT_LT(read, int64_t{16} << 20) << "bytes read by the three calls";
  bool trunc = false;
  auto ls = ListSandboxDir(root_.get(), "", 10, 1, &trunc);
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(ls->size(), 1u);
  EXPECT_EQ((*ls)[0].size, tb);  // reported, not read
}

TEST_F(SandboxFilesTest, NewlineInvalidUtf8AndLongNames) {
  std::string odd = std::string("line\nbreak\xff\xfe", 12);
  ASSERT_TRUE(WriteSandboxFile(root_.get(), odd, "odd", false).ok());
  EXPECT_EQ(Read(odd).value(), "odd");
  Put(In("x\xc3\x28"), "bad utf8");
  bool trunc = false;
  auto ls = ListSandboxDir(root_.get(), "", 10, 1, &trunc);
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(ls->size(), 2u);
  EXPECT_EQ((*ls)[0].path, odd);
  // Errors escape what they name.
  auto missing = Read(std::string("nope\n\xff", 6));
  EXPECT_NE(missing.status().message().find("nope\\x0a\\xff"), std::string::npos) << missing.status().message();
  // 255-byte components, deep paths.
  std::string name(255, 'n');
  ASSERT_TRUE(WriteSandboxFile(root_.get(), name, "long", false).ok());
  EXPECT_EQ(WriteSandboxFile(root_.get(), std::string(256, 'n'), "x", false).code(), ErrorCode::kInvalidArgument);
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "d/";
  deep += "leaf";
  ASSERT_TRUE(WriteSandboxFile(root_.get(), deep, "deep", true).ok());
  EXPECT_EQ(Read(deep).value(), "deep");
  auto all = ListSandboxDir(root_.get(), "", 10000, 1000, &trunc);
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(trunc);  // depth ceiling: the walk stops entering, it does not fail
  std::string deeper;
  while (deeper.size() < 4100) deeper += std::string(100, 'e') + "/";
  EXPECT_EQ(WriteSandboxFile(root_.get(), deeper + "x", "x", true).code(), ErrorCode::kInvalidArgument);
}

TEST_F(SandboxFilesTest, ListIsBoundedAndSorted) {
  for (int i = 0; i < 50; ++i) Put(In("f" + std::to_string(100 + i)), "x");
  for (int i = 0; i < 1000; ++i) ::symlink("/etc/passwd", In("l" + std::to_string(i)).c_str());
  bool trunc = false;
  auto ls = ListSandboxDir(root_.get(), "", 10, 1, &trunc);
  ASSERT_TRUE(ls.ok());
  EXPECT_TRUE(trunc);
  EXPECT_EQ(ls->size(), 10u);
  for (size_t i = 1; i < ls->size(); ++i) EXPECT_LT((*ls)[i - 1].path, (*ls)[i].path);
  auto more = ListSandboxDir(root_.get(), "", 100, 1, &trunc);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(trunc);
  EXPECT_EQ(more->size(), 50u);  // all the files; the symlinks are skipped
  // Entries looked at are bounded too: a directory of many skipped entries
  // ends the walk (truncated) instead of scanning on.
  for (int i = 1000; i < 6000; ++i) ::symlink("/etc/passwd", In("l" + std::to_string(i)).c_str());
  auto bounded = ListSandboxDir(root_.get(), "", 100, 1, &trunc);
  ASSERT_TRUE(bounded.ok());
  EXPECT_TRUE(trunc);
  EXPECT_LE(bounded->size(), 50u);
}

TEST_F(SandboxFilesTest, MountCrossingIsRefused) {
  ASSERT_EQ(::mkdir(In("mnt").c_str(), 0755), 0);
  if (::mount(outside_.c_str(), In("mnt").c_str(), nullptr, MS_BIND, nullptr) != 0) {
    if (MustWork()) FAIL() << "bind mount: " << strerror(errno);
    GTEST_SKIP() << "cannot bind-mount here: " << strerror(errno);
  }
  mounts_.push_back(In("mnt"));
  EXPECT_EQ(Read("mnt/secret").status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_FALSE(WriteSandboxFile(root_.get(), "mnt/secret", "sandbox-wrote", false).ok());
  EXPECT_FALSE(WriteSandboxFile(root_.get(), "mnt/new", "sandbox-wrote", true).ok());
  EXPECT_FALSE(RemoveSandboxPath(root_.get(), "mnt/secret").ok());
  EXPECT_FALSE(RemoveSandboxPath(root_.get(), "mnt").ok());
  bool trunc = false;
  EXPECT_FALSE(ListSandboxDir(root_.get(), "mnt", 10, 1, &trunc).ok());
  auto ls = ListSandboxDir(root_.get(), "", 10, 4, &trunc);
  ASSERT_TRUE(ls.ok());
  EXPECT_TRUE(ls->empty());  // the mount point is skipped, its contents never listed
  ExpectOutsideUntouched();
  EXPECT_FALSE(std::ifstream(outside_ + "/new").good());
}

TEST_F(SandboxFilesTest, FullTmpfsIsResourceExhaustedAndLeavesNoTemp) {
  std::string small = base_ + "/small";
  ASSERT_EQ(::mkdir(small.c_str(), 0755), 0);
  if (::mount("tmpfs", small.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") != 0) {
    if (MustWork()) FAIL() << "mount tmpfs: " << strerror(errno);
    GTEST_SKIP() << "cannot mount a tmpfs here: " << strerror(errno);
  }
  mounts_.push_back(small);
  UniqueFd r(::open(small.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(r);
  Status s = WriteSandboxFile(r.get(), "big", std::string(1 << 20, 'x'), false);
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("big"), std::string::npos);
  bool trunc = false;
  auto ls = ListSandboxDir(r.get(), "", 10, 1, &trunc);
  ASSERT_TRUE(ls.ok());
  EXPECT_TRUE(ls->empty()) << ls->front().path;  // the temporary file was removed
  EXPECT_TRUE(WriteSandboxFile(r.get(), "small", "fits", false).ok());
}

// An upload streamed as it arrives (issue 21): nothing is under its name until
// it is committed, a writer dropped half-way leaves nothing, and its target is
// checked before a byte is written.
TEST_F(SandboxFilesTest, WriterStreamsCommitsOrLeavesNothing) {
  auto w = SandboxFileWriter::Open(root_.get(), "up/load.bin", /*make_parents=*/true);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (int i = 0; i < 64; ++i) ASSERT_TRUE((*w)->Write(std::string(4096, static_cast<char>('a' + i % 26))).ok());
  EXPECT_EQ((*w)->size(), 64 * 4096);
  EXPECT_FALSE(Read("up/load.bin").ok());  // not there before the commit
  ASSERT_TRUE((*w)->Commit().ok());
  auto got = Read("up/load.bin");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 64u * 4096);
  EXPECT_EQ((*got)[4096], 'b');
  struct stat st;
  ASSERT_EQ(::stat(In("up/load.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);  // the sandbox's, as WriteSandboxFile's

  // Dropped before its commit: no trace, and what was there stays.
  {
    auto half = SandboxFileWriter::Open(root_.get(), "up/load.bin", false);
    ASSERT_TRUE(half.ok());
    ASSERT_TRUE((*half)->Write("partial").ok());
  }
  bool trunc = false;
  auto ls = ListSandboxDir(root_.get(), "up", 10, 0, &trunc);
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(ls->size(), 1u);
  EXPECT_EQ(ls->front().path, "up/load.bin");
  EXPECT_EQ(Read("up/load.bin")->size(), 64u * 4096);

  // A planted link or a directory is refused at Open.
  ASSERT_EQ(::symlink((outside_ + "/secret").c_str(), In("link").c_str()), 0);
  EXPECT_EQ(SandboxFileWriter::Open(root_.get(), "link", false).status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(SandboxFileWriter::Open(root_.get(), "up", false).status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(SandboxFileWriter::Open(root_.get(), "../x", false).status().code(), ErrorCode::kInvalidArgument);
  ExpectOutsideUntouched();

  // Read in pieces: OpenSandboxFile gives the checked fd and the size.
  auto f = OpenSandboxFile(root_.get(), "up/load.bin");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->size, 64 * 4096);
  char c = 0;
  EXPECT_EQ(::pread(f->fd.get(), &c, 1, 4096 * 2), 1);
  EXPECT_EQ(c, 'c');
  EXPECT_EQ(OpenSandboxFile(root_.get(), "link").status().code(), ErrorCode::kFailedPrecondition);
}

TEST(OpenRunDirTest, OpensThroughProcThenNotFoundOnceGone) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (;;) ::pause();
  }
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  ASSERT_TRUE(pidfd) << strerror(errno);
  auto d = OpenRunDir(pid, pidfd.get(), "/tmp");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  struct stat a, b;
  ASSERT_EQ(::fstat(d->get(), &a), 0);
  ASSERT_EQ(::stat("/tmp", &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_dev, b.st_dev);
  EXPECT_TRUE(OpenRunDir(pid, pidfd.get(), "/").ok());
  EXPECT_EQ(OpenRunDir(pid, pidfd.get(), "/no-such-dir").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(OpenRunDir(pid, pidfd.get(), "tmp").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(OpenRunDir(pid, pidfd.get(), "/tmp/../etc").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(OpenRunDir(pid + 1, pidfd.get(), "/tmp").status().code(), ErrorCode::kNotFound);  // not its pid
  ::kill(pid, SIGKILL);
  // Dead but not reaped: already gone.
  for (int i = 0; i < 200; ++i) {
    if (!OpenRunDir(pid, pidfd.get(), "/tmp").ok()) break;
    ::usleep(5000);
  }
  EXPECT_EQ(OpenRunDir(pid, pidfd.get(), "/tmp").status().code(), ErrorCode::kNotFound);
  int st;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_EQ(OpenRunDir(pid, pidfd.get(), "/tmp").status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace airlock::isolation
