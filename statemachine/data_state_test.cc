#include "statemachine/data_state.h"

#include <gtest/gtest.h>

namespace dugong {
namespace {

PeerDataState data(int64_t timeline, uint64_t wal) { return {true, "7312", timeline, WalPosition(wal)}; }

TEST(PeerDataState, RoundTripsThroughJson) {
  for (const PeerDataState& d : {PeerDataState{}, data(2, 0x3000060)}) {
    auto back = PeerDataState::fromJson(d.toJson());
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(data(2, 0x3000060).describe(), "system 7312, timeline 2, WAL 0/03000060");
  EXPECT_EQ(PeerDataState{}.describe(), "empty");
}

TEST(PeerDataState, RejectsMalformedJson) {
  for (const char* text : {R"([])", R"({})", R"({"setUp": 1})", R"({"setUp": true})",
                           R"({"setUp": true, "systemId": "", "timeline": 1, "wal": "0/1"})",
                           R"({"setUp": true, "systemId": "1", "timeline": 0, "wal": "0/1"})",
                           R"({"setUp": true, "systemId": "1", "timeline": 1})",
                           R"({"setUp": true, "systemId": "1", "timeline": 1, "wal": "x"})"}) {
    EXPECT_FALSE(PeerDataState::fromJson(nlohmann::json::parse(text))) << text;
  }
}

TEST(PeerDataState, ALaterTimelineIsAheadWhateverItsPosition) {
  EXPECT_TRUE(data(2, 0x100).aheadOf(data(1, 0x900)));
  EXPECT_TRUE(data(1, 0x900).aheadOf(data(1, 0x100)));
  EXPECT_FALSE(data(1, 0x100).aheadOf(data(1, 0x100)));
}

}  // namespace
}  // namespace dugong
