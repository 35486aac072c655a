#include "statemachine/data_state.h"

#include <gtest/gtest.h>

namespace dugong {
namespace {

PeerDataState data(int64_t timeline, uint64_t wal) { return {true, "7312", timeline, WalPosition(wal), std::nullopt}; }
// With its history: the timelines it came from and where each ended.
PeerDataState data(int64_t timeline, uint64_t wal, std::vector<TimelineHistory::Ancestor> ancestors) {
  PeerDataState d = data(timeline, wal);
  d.ancestors = std::move(ancestors);
  return d;
}

TEST(PeerDataState, RoundTripsThroughJson) {
  for (const PeerDataState& d : {PeerDataState{}, data(2, 0x3000060), data(3, 0x5000000, {{1, WalPosition(0x100)},
                                                                                       {2, WalPosition(0x4000000)}}),
                                 data(1, 0x900, {})}) {
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
                           R"({"setUp": true, "systemId": "1", "timeline": 1, "wal": "x"})",
                           R"({"setUp": true, "systemId": "1", "timeline": 2, "wal": "0/9", "history": {}})",
                           R"({"setUp": true, "systemId": "1", "timeline": 2, "wal": "0/9", "history": [[1]]})",
                           R"({"setUp": true, "systemId": "1", "timeline": 2, "wal": "0/9", "history": [[0, "0/1"]]})",
                           R"({"setUp": true, "systemId": "1", "timeline": 2, "wal": "0/9", "history": [[1, 5]]})",
                           R"({"setUp": true, "systemId": "1", "timeline": 2, "wal": "0/9", "history": [[1, "y"]]})"}) {
    EXPECT_FALSE(PeerDataState::fromJson(nlohmann::json::parse(text))) << text;
  }
}

TEST(PeerDataState, ALaterTimelineIsAheadWhateverItsPosition) {
  EXPECT_TRUE(data(2, 0x100).aheadOf(data(1, 0x900)));
  EXPECT_TRUE(data(1, 0x900).aheadOf(data(1, 0x100)));
  EXPECT_FALSE(data(1, 0x100).aheadOf(data(1, 0x100)));
}

// A setup keeps what every holder's history holds that the cluster may need: its WAL is
// a prefix, or it went on past the fork where the chosen one's timeline began.
TEST(PeerDataState, KeepsComparesHistoriesNotTimelineNumbers) {
  const PeerDataState promoted = data(2, 0x800, {{1, WalPosition(0x500)}});
  // The deposed primary past the fork on timeline 1: its WAL after 0x500 no later
  // generation kept.
  EXPECT_TRUE(promoted.keeps(data(1, 0x900, {})));
  // A standby that stopped before the fork: a prefix.
  EXPECT_TRUE(promoted.keeps(data(1, 0x400, {})));
  EXPECT_TRUE(promoted.keeps(data(1, 0x500, {})));
  // The same history, behind.
  EXPECT_TRUE(promoted.keeps(data(2, 0x700, {{1, WalPosition(0x500)}})));
  EXPECT_FALSE(data(2, 0x700, {{1, WalPosition(0x500)}}).keeps(promoted));
  // Timeline 2 of another promotion (a fork at another position): diverged.
  EXPECT_FALSE(promoted.keeps(data(2, 0x600, {{1, WalPosition(0x300)}})));
  // A timeline that forked off elsewhere (3 from 1), although numbered higher.
  EXPECT_FALSE(promoted.keeps(data(3, 0x900, {{1, WalPosition(0x200)}})));
  EXPECT_FALSE(data(3, 0x900, {{1, WalPosition(0x200)}}).keeps(promoted));
  // Further along: 3 from 2 from 1 keeps 2's and 1's.
  const PeerDataState later = data(3, 0xa00, {{1, WalPosition(0x500)}, {2, WalPosition(0x900)}});
  EXPECT_TRUE(later.keeps(promoted));
  EXPECT_TRUE(later.keeps(data(1, 0x600, {})));
  // Unknown histories, empty directories and empty WAL: nothing to compare.
  EXPECT_TRUE(promoted.keeps(data(3, 0x100)));
  EXPECT_TRUE(data(1, 0x100).keeps(promoted));
  EXPECT_TRUE(promoted.keeps(PeerDataState{}));
  EXPECT_TRUE(promoted.keeps(data(1, 0, {})));
}

}  // namespace
}  // namespace dugong
