// The scripted source of a simulated standby cluster (sim_source.h): what it acknowledges
// survives its failover, switchover and sync replacement, and its state says who streams
// from whom.
#include "sim/world/sim_source.h"
#include "sim/world/trace_lines.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dugong::simworld {
namespace sim_source_test {

using Lines = TraceLines;

struct Fixture {
  Fixture() : fleet(q, rng, rng, lines, PgModel{}), source(fleet, rng, lines, SourceModel{{1, 3}, {500, 500}, {1000, 1000}}) {
    fleet.searchOtherHosts();
    q.every(10, [this] {  // a replication tick: the fleet streams, the source writes
      fleet.stream();
      source.tick();
      return int64_t{10};
    });
  }
  void run(int64_t ms) {
    const int64_t end = q.now() + ms;
    while (!q.empty() && q.nextAt() <= end) q.runNext();
  }
  // Every acknowledged commit is in `wal`.
  bool holdsEveryAck(const Wal& wal) const {
    for (const WalMark& m : source.acknowledged()) {
      if (!wal.contains(m)) return false;
    }
    return true;
  }
  const Wal& walOf(const std::string& id) const { return source.server(id).wal; }

  EventQueue q;
  Rng rng{83};
  Lines lines;
  PgFleet fleet;
  SimSource source;
};

TEST(SimSource, ItsSyncHoldsWhatItAcknowledgesAndItsAsyncCascades) {
  Fixture f;
  f.run(2000);
  ASSERT_FALSE(f.source.acknowledged().empty());
  EXPECT_EQ(f.source.state().primary.id, "src1");
  EXPECT_EQ(f.source.state().sync->id, "src2");
  EXPECT_TRUE(f.holdsEveryAck(f.walOf("src2")));
  EXPECT_FALSE(f.walOf("src3").divergedFrom(f.walOf("src1")));
  EXPECT_LE(f.walOf("src3").size(), f.walOf("src2").size());
  EXPECT_TRUE(f.source.present("src1"));
}

TEST(SimSource, AFailoverPromotesTheSyncOnANewTimelineAndKeepsEveryAcknowledgedCommit) {
  Fixture f;
  f.run(2000);
  ASSERT_TRUE(f.source.failover());
  EXPECT_FALSE(f.source.present("src1"));
  EXPECT_FALSE(f.source.failover());  // one at a time
  f.run(600);                         // the drawn delay (500 ms) passed
  EXPECT_EQ(f.source.state().generation, 2);
  EXPECT_EQ(f.source.state().primary.id, "src2");
  EXPECT_EQ(f.source.state().sync->id, "src3");
  EXPECT_GT(f.walOf("src2").timeline(), 1);
  EXPECT_TRUE(f.holdsEveryAck(f.walOf("src2")));
  EXPECT_TRUE(f.holdsEveryAck(f.source.history()));
  f.run(1500);  // the old primary's host is back as the async, rewound onto the new history
  EXPECT_TRUE(f.source.present("src1"));
  EXPECT_EQ(f.source.state().async.front().id, "src1");
  EXPECT_FALSE(f.walOf("src1").divergedFrom(f.walOf("src2")));
  EXPECT_TRUE(f.source.lastFailoverInWindow(10000));  // its sync had changed at 0 ms, 2 s before
  EXPECT_FALSE(f.source.lastFailoverInWindow(1000));
}

TEST(SimSource, ASwitchoverAndASyncReplacementLoseNothingAndForkNothing) {
  Fixture f;
  f.run(1000);
  ASSERT_TRUE(f.source.switchover());
  EXPECT_EQ(f.source.state().primary.id, "src2");
  EXPECT_EQ(f.source.state().sync->id, "src3");
  EXPECT_EQ(f.source.state().async.front().id, "src1");
  EXPECT_TRUE(f.holdsEveryAck(f.walOf("src2")));
  f.run(1000);
  ASSERT_TRUE(f.source.replaceSync());
  EXPECT_EQ(f.source.state().sync->id, "src1");
  EXPECT_EQ(f.source.state().async.front().id, "src3");
  f.run(1000);
  EXPECT_TRUE(f.holdsEveryAck(f.walOf("src2")));
  EXPECT_TRUE(f.holdsEveryAck(f.walOf("src1")));
  EXPECT_FALSE(f.walOf("src3").divergedFrom(f.walOf("src2")));
  EXPECT_EQ(f.source.state().generation, 3);
  EXPECT_EQ(f.source.stateNode().version(), 2);
}

TEST(SimSource, ACutSourceIsReportedAndAGoneOneWritesNoMore) {
  Fixture f;
  f.run(500);
  f.source.cut();
  EXPECT_TRUE(f.source.isCut());
  f.source.heal();
  EXPECT_FALSE(f.source.isCut());
  f.source.stopForGood();
  const size_t acked = f.source.acknowledged().size();
  f.run(500);
  EXPECT_TRUE(f.source.gone());
  EXPECT_EQ(f.source.acknowledged().size(), acked);
  EXPECT_FALSE(f.source.present("src1"));
  EXPECT_FALSE(f.source.failover());
}

}  // namespace sim_source_test
}  // namespace dugong::simworld
