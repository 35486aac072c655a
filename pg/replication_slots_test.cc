#include "pg/replication_slots.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

TEST(ReplicationSlotsTest, NamesAreValidAndDistinct) {
  EXPECT_EQ(slotNameFor("peer_1"), "dugong_peer_1");
  const std::string a = slotNameFor("a.b"), b = slotNameFor("a_b"), c = slotNameFor("A_b");
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_NE(a, c);
  const std::string longName = slotNameFor("10.0.0.5:5432-" + std::string(80, 'x'));
  EXPECT_LE(longName.size(), 63u);
  for (const std::string& n : {a, b, c, longName}) {
    EXPECT_TRUE(isDugongSlot(n));
    for (char ch : n) EXPECT_TRUE((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_') << n;
  }
  EXPECT_FALSE(isDugongSlot("other_slot"));
}

}  // namespace
}  // namespace dugong::pg
