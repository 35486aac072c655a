#include "driver/sync_ack_watch.h"

#include <gtest/gtest.h>

namespace dugong::driver {
namespace {

constexpr int64_t kAfter = 1500;
constexpr int64_t kGrace = 10000;

SyncReplicationSample streaming(uint64_t flushed, int waiting) { return {true, WalPosition(flushed), waiting}; }
SyncReplicationSample noWalsender(int waiting) { return {false, std::nullopt, waiting}; }

// A watch whose sync "s" was seen streaming at t = 0.
SyncAckWatch watching() {
  SyncAckWatch w(kAfter, kGrace);
  w.reset("s", 0);
  w.observe(0, streaming(100, 0));
  return w;
}

TEST(SyncAckWatch, CommitsWaitingOnASyncWithoutWalsenderForTheBoundIsAStall) {
  SyncAckWatch w = watching();
  EXPECT_FALSE(w.observe(250, noWalsender(3)));
  EXPECT_FALSE(w.observe(1500, noWalsender(3)));  // 1250 ms stuck
  auto news = w.observe(1750, noWalsender(4));
  ASSERT_TRUE(news);
  EXPECT_EQ(news->syncId, "s");
  EXPECT_FALSE(news->acknowledging);
  EXPECT_EQ(news->detail, "4 commits waited 1500 ms with no streaming walsender of s");
  EXPECT_TRUE(w.stalled());
  EXPECT_FALSE(w.observe(2000, noWalsender(4)));  // said once
}

TEST(SyncAckWatch, AFlushPositionThatDoesNotMoveWhileCommitsWaitIsAStall) {
  SyncAckWatch w = watching();
  EXPECT_FALSE(w.observe(100, streaming(200, 1)));  // moved
  EXPECT_FALSE(w.observe(200, streaming(200, 1)));  // stuck from here
  EXPECT_FALSE(w.observe(1600, streaming(200, 1)));
  auto news = w.observe(1700, streaming(200, 1));
  ASSERT_TRUE(news);
  EXPECT_EQ(news->detail, "1 commit waited 1500 ms while its flush position stayed at " +
                              WalPosition(200).toString());
}

TEST(SyncAckWatch, ASlowSyncThatMovesIsNoStall) {
  SyncAckWatch w = watching();
  for (int64_t t = 100; t < 20000; t += 100) {
    EXPECT_FALSE(w.observe(t, streaming(100 + static_cast<uint64_t>(t), 50))) << t;
  }
  EXPECT_FALSE(w.stalled());
}

TEST(SyncAckWatch, NoCommitWaitingOnAStreamingSyncIsNoStallWhateverItsPosition) {
  SyncAckWatch w = watching();
  for (int64_t t = 100; t < 20000; t += 100) EXPECT_FALSE(w.observe(t, streaming(100, 0))) << t;
  // The clock starts with the first waiting commit.
  EXPECT_FALSE(w.observe(20000, streaming(100, 1)));
  EXPECT_FALSE(w.observe(21000, streaming(100, 1)));
  EXPECT_TRUE(w.observe(21500, streaming(100, 1)));
}

TEST(SyncAckWatch, ASyncThatDoesNotStreamForTheGraceIsAStallWithNoCommitWaiting) {
  SyncAckWatch w = watching();  // last streamed at 0
  for (int64_t t = 100; t < kGrace; t += 100) EXPECT_FALSE(w.observe(t, noWalsender(0))) << t;
  auto news = w.observe(kGrace, noWalsender(0));
  ASSERT_TRUE(news);
  EXPECT_FALSE(news->acknowledging);
  EXPECT_EQ(news->detail, "no streaming walsender of s for 10000 ms (since it last streamed; no commit waiting)");
  EXPECT_FALSE(w.observe(kGrace + 100, noWalsender(0)));  // said once
  // It acknowledges again only once it streams.
  auto back = w.observe(kGrace + 200, streaming(100, 0));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->acknowledging);
  // A walsender that comes and goes restarts the grace each time it streams.
  EXPECT_FALSE(w.observe(kGrace + 5000, noWalsender(0)));
  EXPECT_FALSE(w.observe(kGrace + 9000, streaming(100, 0)));
  EXPECT_FALSE(w.observe(2 * kGrace + 8999, noWalsender(0)));
  EXPECT_TRUE(w.observe(2 * kGrace + 9000, noWalsender(0)));
}

TEST(SyncAckWatch, ASyncThatNeverStreamsUnderAReadOnlyPrimaryIsAStallAfterTheGrace) {
  // A new primary stays read-only until its sync caught up: nothing ever waits on a sync
  // that cannot stream (dead, or on another history).
  SyncAckWatch w(kAfter, kGrace);
  w.reset("n", 1000);
  EXPECT_FALSE(w.observe(10999, noWalsender(0)));
  auto news = w.observe(11000, noWalsender(0));
  ASSERT_TRUE(news);
  EXPECT_EQ(news->detail,
            "no streaming walsender of n for 10000 ms (not seen streaming since it became the sync; no commit waiting)");
}

TEST(SyncAckWatch, AStalledSyncThatMovesAgainAcknowledges) {
  SyncAckWatch w = watching();
  w.observe(100, noWalsender(2));
  ASSERT_TRUE(w.observe(1600, noWalsender(2)));
  auto news = w.observe(1700, streaming(300, 2));
  ASSERT_TRUE(news);
  EXPECT_TRUE(news->acknowledging);
  EXPECT_FALSE(w.stalled());
  // And the bound starts again.
  EXPECT_FALSE(w.observe(1800, streaming(300, 2)));
  EXPECT_FALSE(w.observe(3200, streaming(300, 2)));
  EXPECT_TRUE(w.observe(3300, streaming(300, 2)));
}

TEST(SyncAckWatch, ANewSyncNotYetStreamingHasTheConnectionGrace) {
  SyncAckWatch w(kAfter, kGrace);
  w.reset("n", 1000);
  EXPECT_FALSE(w.observe(1100, noWalsender(5)));
  EXPECT_FALSE(w.observe(10999, noWalsender(5)));
  auto news = w.observe(11000, noWalsender(5));
  ASSERT_TRUE(news);
  EXPECT_EQ(news->detail,
            "no streaming walsender of n for 10000 ms (not seen streaming since it became the sync; 5 commits waiting)");
  // Once seen streaming, the grace is over: a stall is the bound again.
  w.reset("n", 20000);
  EXPECT_FALSE(w.observe(20100, streaming(100, 0)));
  EXPECT_FALSE(w.observe(20200, noWalsender(1)));
  EXPECT_TRUE(w.observe(21700, noWalsender(1)));
}

TEST(SyncAckWatch, ResetForgetsAStallAndNothingIsSaidWithoutASync) {
  SyncAckWatch none(kAfter, kGrace);
  EXPECT_FALSE(none.observe(5000, noWalsender(1)));
  EXPECT_FALSE(none.observe(50000, noWalsender(1)));
  SyncAckWatch w = watching();
  w.observe(100, noWalsender(2));
  ASSERT_TRUE(w.observe(1600, noWalsender(2)));
  w.reset("t", 2000);
  EXPECT_FALSE(w.stalled());
  EXPECT_EQ(w.syncId(), "t");
  EXPECT_FALSE(w.observe(2100, streaming(100, 1)));  // first position seen: moved
}

}  // namespace
}  // namespace dugong::driver
