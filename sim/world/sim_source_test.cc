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

// A demoted source (the planned switch, 0083 5.2/5.3): its sync holds everything its
// primary wrote, the shutdown checkpoint at `demotedAt` included; nothing is writable or
// written after; its state is a standby state toward the named cluster.
TEST(SimSource, ADemotedSourceHandsItsLastRecordToItsSyncAndWritesNoMore) {
  Fixture f;
  f.run(1000);
  ASSERT_TRUE(f.source.writablePrimary().has_value());
  EXPECT_EQ(*f.source.writablePrimary(), "src1");
  StandbySource toward = SimSource::standbySource();
  toward.cluster = "standby";
  toward.root = "/dugong/standby";
  const size_t written = f.walOf("src1").size();
  ASSERT_TRUE(f.source.demote(toward));
  EXPECT_FALSE(f.source.writablePrimary().has_value());
  ASSERT_TRUE(f.source.demotedAt().has_value());
  EXPECT_EQ(f.source.demotedAt()->wal, WalPosition(written * f.walOf("src1").recordBytes()));
  EXPECT_EQ(f.walOf("src1").size(), written + 1);           // its shutdown checkpoint
  EXPECT_EQ(f.walOf("src2").size(), f.walOf("src1").size());  // the sync received it
  EXPECT_TRUE(f.holdsEveryAck(f.walOf("src2")));
  ASSERT_TRUE(f.source.state().standby.has_value());
  EXPECT_EQ(f.source.state().standby->source, toward);
  EXPECT_EQ(f.source.state().standby->demotedAt, f.source.demotedAt());
  EXPECT_EQ(f.source.state().generation, 2);
  const size_t acked = f.source.acknowledged().size();
  f.run(1000);
  EXPECT_EQ(f.source.acknowledged().size(), acked);
  EXPECT_EQ(f.walOf("src1").size(), written + 1);
  EXPECT_TRUE(f.source.server("src1").running);
  EXPECT_FALSE(f.source.writablePrimary().has_value());
  EXPECT_FALSE(f.source.failover());
  EXPECT_FALSE(f.source.demote(toward));
}

}  // namespace sim_source_test
}  // namespace dugong::simworld
