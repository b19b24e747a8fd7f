// model::GzipInflater: what E2B's gzip uploads go through (api/upload.h's
// GzipSink). A whole body, one fed a byte at a time, several members, and the
// attacks: a bomb stops at the cap with nothing past it passed on, corrupt and
// truncated streams and trailing garbage are refused.
#include "model/gzip_inflate.h"

#include <gtest/gtest.h>

#include <string>

namespace airlock::model {
namespace {

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

// gzip.compress(b"hello, world\n", mtime=0)
const std::string kHello = Unhex("1f8b0800000000000203cb48cdc9c9d75128cf2fca49e10200537424f40d000000");
// gzip.compress(b"\0" * 300000, 9, mtime=0): 325 bytes that claim 300000.
const std::string kZeros = Unhex("1f8b0800000000000203edc1010d000000c2a0f74f6d0f07140000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000fc18fbe2b2f6e0930400");

struct Collect {
  std::string out;
  size_t calls = 0;
  GzipInflater::Output fn() {
    return [this](std::string_view b) {
      out.append(b);
      ++calls;
      return Status::Ok();
    };
  }
};

TEST(GzipInflateTest, WholeBody) {
  GzipInflater in(1 << 20);
  Collect c;
  ASSERT_TRUE(in.Feed(kHello, c.fn()).ok());
  ASSERT_TRUE(in.Finish().ok());
  EXPECT_EQ(c.out, "hello, world\n");
  EXPECT_EQ(in.output_bytes(), 13);
}

TEST(GzipInflateTest, ByteAtATimeAndSeveralMembers) {
  GzipInflater in(1 << 20);
  Collect c;
  const std::string body = kHello + kHello;
  for (char ch : body) ASSERT_TRUE(in.Feed(std::string_view(&ch, 1), c.fn()).ok());
  ASSERT_TRUE(in.Finish().ok());
  EXPECT_EQ(c.out, "hello, world\nhello, world\n");
}

TEST(GzipInflateTest, BombStopsAtTheCapAndNothingPastItIsPassedOn) {
  GzipInflater in(100000, "--max-file");
  Collect c;
  Status st = in.Feed(kZeros, c.fn());
  EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted) << st.ToString();
  EXPECT_NE(st.message().find("--max-file"), std::string::npos);
  EXPECT_LE(c.out.size(), 100000u);
  EXPECT_LE(in.output_bytes(), 100000);
  // Stopped for good: more input is refused the same way.
  EXPECT_EQ(in.Feed(kHello, c.fn()).code(), ErrorCode::kResourceExhausted);
  EXPECT_FALSE(in.Finish().ok());
}

TEST(GzipInflateTest, AtTheCapExactlyIsAllowed) {
  GzipInflater in(300000);
  Collect c;
  ASSERT_TRUE(in.Feed(kZeros, c.fn()).ok());
  ASSERT_TRUE(in.Finish().ok());
  EXPECT_EQ(c.out.size(), 300000u);
  // Pieces are bounded (64 KiB), however much one input piece expands to.
  EXPECT_GE(c.calls, 300000u / (64 * 1024));
}

TEST(GzipInflateTest, TruncatedIsRefusedAtFinish) {
  GzipInflater in(1 << 20);
  Collect c;
  ASSERT_TRUE(in.Feed(std::string_view(kHello).substr(0, 20), c.fn()).ok());
  Status st = in.Finish();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("truncated"), std::string::npos);
}

TEST(GzipInflateTest, CorruptDataAndTrailingGarbageAreRefused) {
  for (const std::string& bad : {std::string("not gzip at all"), kHello.substr(0, 12) + std::string(21, '\xff'),
                                 kHello + "garbage", std::string("\x1f\x8b\x08\x00", 4) + std::string(40, 'x')}) {
    GzipInflater in(1 << 20);
    Collect c;
    Status st = in.Feed(bad, c.fn());
    if (st.ok()) st = in.Finish();
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.ToString();
  }
  // A zlib stream (not gzip) is not Content-Encoding: gzip.
  GzipInflater in(1 << 20);
  Collect c;
  EXPECT_FALSE(in.Feed(Unhex("789ccb48cdc9c90700062c0215"), c.fn()).ok());
}

TEST(GzipInflateTest, EmptyBodyIsNotGzip) {
  GzipInflater in(1 << 20);
  EXPECT_EQ(in.Finish().code(), ErrorCode::kInvalidArgument);
}

TEST(GzipInflateTest, ASinkErrorStopsIt) {
  GzipInflater in(1 << 20);
  Status st = in.Feed(kHello, [](std::string_view) { return Status(ErrorCode::kResourceExhausted, "disk full"); });
  EXPECT_EQ(st.message(), "disk full");
}

}  // namespace
}  // namespace airlock::model
