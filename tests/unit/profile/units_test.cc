#include "profile/units.h"

#include <gtest/gtest.h>

namespace airlock::profile {
namespace {

int64_t Size(std::string_view s) {
  StatusOr<int64_t> v = ParseSize(s);
  EXPECT_TRUE(v.ok()) << s << ": " << v.status().message();
  return v.ok() ? *v : -1;
}

double Cpu(std::string_view s) {
  StatusOr<double> v = ParseCpu(s);
  EXPECT_TRUE(v.ok()) << s << ": " << v.status().message();
  return v.ok() ? *v : -1;
}

TEST(ParseSizeTest, BinaryDecimalAndPlainBytes) {
  EXPECT_EQ(Size("256Mi"), 268435456);
  EXPECT_EQ(Size("1Gi"), 1073741824);
  EXPECT_EQ(Size("1G"), 1000000000);
  EXPECT_EQ(Size("512M"), 512000000);
  EXPECT_EQ(Size("4Ki"), 4096);
  EXPECT_EQ(Size("2k"), 2000);
  EXPECT_EQ(Size("2K"), 2000);
  EXPECT_EQ(Size("1Ti"), int64_t{1} << 40);
  EXPECT_EQ(Size("51200"), 51200);
  EXPECT_EQ(Size("0"), 0);
}

TEST(ParseSizeTest, FractionsRoundDownToBytes) {
  EXPECT_EQ(Size("0.5Gi"), 536870912);
  EXPECT_EQ(Size("1.5Mi"), 1572864);
  EXPECT_EQ(Size("1.0001Ki"), 1024);  // 1024.1024 bytes
}

TEST(ParseSizeTest, RejectsWhatIsNotASize) {
  for (const char* bad : {"12Qi", "", "-1", "Mi", "1 Mi", "1.5.5", "1.", ".5Gi", "1mi", "1MB",
                          "0x10", "1e3", "1.0000000001Gi"}) {
    StatusOr<int64_t> v = ParseSize(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().message(),
              "'" + std::string(bad) + "' is not a size (use 256Mi, 1Gi, or bytes)");
    EXPECT_EQ(v.status().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(ParseSizeTest, RejectsOverflowInsteadOfWrapping) {
  for (const char* big : {"99999999999999999999", "9223372036854775808", "8388608Ti"}) {
    StatusOr<int64_t> v = ParseSize(big);
    ASSERT_FALSE(v.ok()) << big;
    EXPECT_NE(v.status().message().find("is too large"), std::string::npos) << v.status().message();
  }
  EXPECT_EQ(Size("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(Size("8388607Ti"), int64_t{8388607} << 40);
}

TEST(ParseCpuTest, MillicoresAndCores) {
  EXPECT_DOUBLE_EQ(Cpu("500m"), 0.5);
  EXPECT_DOUBLE_EQ(Cpu("2"), 2.0);
  EXPECT_DOUBLE_EQ(Cpu("1.5"), 1.5);
  EXPECT_DOUBLE_EQ(Cpu("1m"), 0.001);
  EXPECT_DOUBLE_EQ(Cpu("1024"), 1024.0);
}

TEST(ParseCpuTest, RejectsBadAmountsAndRange) {
  StatusOr<double> v = ParseCpu("half");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(),
            "'half' is not a CPU amount (use 500m for half a core, or 1.5, or 2)");
  for (const char* bad : {"", "1.5m", "-1", "1 m", "2cores", "m"}) {
    EXPECT_FALSE(ParseCpu(bad).ok()) << bad;
  }
  for (const char* out : {"0", "0m", "0.0001", "1025", "2000000m", "99999999999999999999999m"}) {
    StatusOr<double> r = ParseCpu(out);
    ASSERT_FALSE(r.ok()) << out;
    EXPECT_NE(r.status().message().find("out of range (1m to 1024 cores)"), std::string::npos)
        << r.status().message();
  }
}

TEST(ParseSecondsTest, PlainNonNegativeNumbers) {
  EXPECT_DOUBLE_EQ(ParseSeconds("30").value(), 30.0);
  EXPECT_DOUBLE_EQ(ParseSeconds("30.0").value(), 30.0);
  EXPECT_DOUBLE_EQ(ParseSeconds("2.5").value(), 2.5);
  for (const char* bad : {"", "-1", "inf", "nan", "infinity", "30s", "abc", "1e400", "0x1p3"}) {
    StatusOr<double> v = ParseSeconds(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find("is not a number of seconds"), std::string::npos);
  }
}

TEST(FormatTest, ShortestExactForm) {
  EXPECT_EQ(FormatSize(268435456), "256Mi");
  EXPECT_EQ(FormatSize(1073741824), "1Gi");
  EXPECT_EQ(FormatSize(51200), "50Ki");
  EXPECT_EQ(FormatSize(1000), "1000");
  EXPECT_EQ(FormatSize(0), "0");
  EXPECT_EQ(FormatNumber(30.0), "30");
  EXPECT_EQ(FormatNumber(0.5), "0.5");
}

TEST(QuoteForMessageTest, BoundedPrintableUtf8) {
  EXPECT_EQ(QuoteForMessage("12Qi"), "'12Qi'");
  EXPECT_EQ(QuoteForMessage("a\nb\x7f"), "'a?b?'");
  EXPECT_EQ(QuoteForMessage("caf\xc3\xa9"), "'caf\xc3\xa9'");  // valid UTF-8 kept
  EXPECT_EQ(QuoteForMessage("caf\xe9"), "'caf?'");             // invalid: replaced
  EXPECT_EQ(QuoteForMessage(std::string(100, 'x')), "'" + std::string(60, 'x') + "...'");
  // 59 ASCII bytes then a 2-byte character: it is kept whole, not cut.
  std::string s = std::string(59, 'x') + "\xc3\xa9" + "yyy";
  EXPECT_EQ(QuoteForMessage(s), "'" + std::string(59, 'x') + "\xc3\xa9...'");
  EXPECT_TRUE(IsValidUtf8(QuoteForMessage(s)));
}

TEST(IsValidUtf8Test, RejectsOverlongSurrogatesAndTruncation) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("\xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xff"));
}

}  // namespace
}  // namespace airlock::profile
