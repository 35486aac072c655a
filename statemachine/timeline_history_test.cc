#include "statemachine/timeline_history.h"

#include <gtest/gtest.h>

namespace dugong {
namespace {

TimelineHistory promotedTwice() {
  // Timeline 1 up to 0/100, timeline 2 from there up to 0/200, timeline 3 since.
  return TimelineHistory{3, {{1, WalPosition(0x100)}, {2, WalPosition(0x200)}}};
}

TEST(TimelineHistory, TheEmptyPrefixHasNoTimeline) {
  EXPECT_EQ(promotedTwice().timelineAt(WalPosition(0)), 0);
  EXPECT_EQ((TimelineHistory{1, {}}.timelineAt(WalPosition(0))), 0);
}

TEST(TimelineHistory, APrefixEndingAtASwitchIsOnTheTimelineThatEndedThere) {
  const auto h = promotedTwice();
  EXPECT_EQ(h.timelineAt(WalPosition(1)), 1);
  EXPECT_EQ(h.timelineAt(WalPosition(0x100)), 1);
  EXPECT_EQ(h.timelineAt(WalPosition(0x101)), 2);
  EXPECT_EQ(h.timelineAt(WalPosition(0x200)), 2);
  EXPECT_EQ(h.timelineAt(WalPosition(0x201)), 3);
  EXPECT_EQ(h.timelineAt(WalPosition(0x900)), 3);
}

TEST(TimelineHistory, ANeverPromotedWalIsOnItsOneTimeline) {
  EXPECT_EQ((TimelineHistory{1, {}}.timelineAt(WalPosition(0x5000))), 1);
}

TEST(TimelineHistory, DescribesNewestFirst) {
  EXPECT_EQ(promotedTwice().describe(), "timeline 3 (from 2 at 0/00000200, from 1 at 0/00000100)");
  EXPECT_EQ((TimelineHistory{1, {}}.describe()), "timeline 1");
}

}  // namespace
}  // namespace dugong
