#include "statemachine/wal_position.h"

#include <gtest/gtest.h>

namespace dugong {
namespace {

TEST(WalPosition, ParsesPostgresFormatInAnyCase) {
  auto w = WalPosition::parse("16/B374D848");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->value(), (uint64_t{0x16} << 32) | 0xB374D848u);
  EXPECT_EQ(WalPosition::parse("16/b374d848")->value(), w->value());
  EXPECT_EQ(WalPosition::parse("0/0")->value(), 0u);
}

TEST(WalPosition, FormatsWithEightLowDigits) {
  EXPECT_EQ(WalPosition(10).toString(), "0/0000000a");
  EXPECT_EQ(WalPosition((uint64_t{1} << 32) | 0xff0000).toString(), "1/00ff0000");
  EXPECT_EQ(WalPosition::parse(WalPosition(0xabcdef0123ull).toString())->value(), 0xabcdef0123ull);
}

TEST(WalPosition, RejectsMalformedText) {
  for (const char* bad : {"", "/", "0/", "/0", "00000000", "0/123456789", "123456789/0", "0/xyz", "0x1/2", "1/2/3",
                          " 0/1"}) {
    auto w = WalPosition::parse(bad);
    EXPECT_FALSE(w.ok()) << bad;
    if (!w.ok()) {
      EXPECT_NE(w.error().find("invalid WAL position"), std::string::npos);
    }
  }
}

TEST(WalPosition, ComparesAsSixtyFourBitNumbers) {
  EXPECT_LT(*WalPosition::parse("0/FFFFFFFF"), *WalPosition::parse("1/0"));
  EXPECT_LT(*WalPosition::parse("0/9"), *WalPosition::parse("0/A"));
  EXPECT_EQ(WalPosition(5).plus(10), WalPosition(15));
  EXPECT_GE(WalPosition(15), WalPosition(15));
}

}  // namespace
}  // namespace dugong
