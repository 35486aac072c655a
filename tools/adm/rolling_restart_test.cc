#include "tools/adm/rolling_restart.h"

#include <gtest/gtest.h>

#include "ops/test_views.h"

namespace dugong::adm {
namespace {

using namespace std::chrono_literals;

// The simulator once restarted a peer that had become primary between two steps of a
// rolling restart, as the standby it had been planned as. Planned: primary a, sync b,
// async c.
TEST(RollingRestart, APeerThatBecamePrimaryBetweenTwoStepsIsNotRestartedAsAStandby) {
  const ClusterState planned = testing::threePeers();
  ClusterState now = planned;
  EXPECT_FALSE(roleChangedSince(planned, now, "c", "async"));
  EXPECT_FALSE(roleChangedSince(planned, now, "b", "sync"));
  EXPECT_FALSE(roleChangedSince(planned, now, "a", "primary"));

  // b took over: b primary, c sync, a deposed.
  now.generation = 2;
  now.primary = testing::peer("b");
  now.sync = testing::peer("c");
  now.async.clear();
  now.deposed = {testing::peer("a")};
  auto changed = roleChangedSince(planned, now, "b", "sync");
  ASSERT_TRUE(changed);
  EXPECT_NE(changed->find("b was sync (generation 1) and is primary now (generation 2)"), std::string::npos)
      << *changed;
  EXPECT_NE(changed->find("nothing more restarted"), std::string::npos) << *changed;
  EXPECT_TRUE(roleChangedSince(planned, now, "c", "async"));
  EXPECT_TRUE(roleChangedSince(planned, now, "a", "primary"));
}

// A standby that kept its role under another primary is not restarted either: what it
// replays before its restart was read from the old primary.
TEST(RollingRestart, AnotherPrimaryStopsTheRestartEvenWhereTheRoleIsTheSame) {
  ClusterState planned = testing::threePeers({"c", "d"});
  ClusterState now = planned;
  now.generation = 2;
  now.primary = testing::peer("b");
  now.sync = testing::peer("a");
  auto changed = roleChangedSince(planned, now, "d", "async");
  ASSERT_TRUE(changed);
  EXPECT_NE(changed->find("the primary changed since this restart began: a (generation 1) is now b (generation 2)"),
            std::string::npos)
      << *changed;
  // Asyncs that swapped places are still asyncs of the same primary; a sync that the
  // primary replaced by an async is still a standby.
  now = planned;
  now.async = {testing::peer("d"), testing::peer("c")};
  EXPECT_FALSE(roleChangedSince(planned, now, "c", "async"));
  now = planned;
  now.generation = 2;
  now.sync = testing::peer("c");
  now.async = {testing::peer("d"), testing::peer("b")};
  EXPECT_FALSE(roleChangedSince(planned, now, "b", "sync"));
  EXPECT_FALSE(roleChangedSince(planned, now, "c", "async"));
  // One that is deposed, or gone from the state, is not restarted.
  now.async = {testing::peer("d")};
  EXPECT_NE(roleChangedSince(planned, now, "b", "sync").value_or("").find("b was sync (generation 1) and is in no role now"),
            std::string::npos);
}

// `restart --rolling --wait N`: a standby that has not replayed the primary's WAL within
// N seconds stops the restart, and the message says which, where it is, that nothing
// more was restarted and what to do.
TEST(RollingRestart, TheReplayBoundSaysWhoWhereAndWhatNext) {
  const std::string text = replayBoundPassed("c", "async", WalPosition(0x5000000), WalPosition(0x4000100), 30s);
  EXPECT_EQ(text,
            "async c has not replayed the primary's WAL up to 0/05000000 within 30 s (--wait; it is at 0/04000100): "
            "not restarted, nor the peers after it. Its replay may be paused or held back by a query on it "
            "(max_standby_streaming_delay): `dugong-adm verify`, then run `dugong-adm restart --rolling` again");
  EXPECT_NE(replayBoundPassed("b", "sync", WalPosition(0x5000000), std::nullopt, 300s)
                .find("within 300 s (--wait; it is at an unknown position)"),
            std::string::npos);
}

}  // namespace
}  // namespace dugong::adm
