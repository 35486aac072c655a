// The generation's history (initWal and initTimeline): which WAL may take over, what a
// primary's data must hold, and a new primary whose promotion forked its timeline before
// initWal (docs/state-machine.md "The initWal check compares histories").
#include <gtest/gtest.h>

#include "statemachine/peer.h"
#include "statemachine/peer_test_support.h"

namespace dugong {
namespace {
using namespace peer_test;

void startAsSyncOfGenerationFourOnTimelineThree(Harness& h, WalPosition initWal) {
  ClusterState s = cluster(4, "old", "me", {"a"});
  s.initWal = initWal;
  s.initTimeline = 3;
  h.start(s, {"me", "a"});
  h.applied(true);
}

// The sync's takeover with its WAL at `wal` on `history`: read, fence, read again; the
// writes of the last step.
std::vector<WriteClusterState> fencedTakeover(Harness& h, WalPosition wal, const TimelineHistory& history) {
  EXPECT_EQ(only<FencePg>(h.step(WalPositionRead{wal, "", 0, history})).size(), 1u);
  h.step(PgFenced{true, ""});
  return only<WriteClusterState>(h.step(WalPositionRead{wal, "", 0, history}));
}

// A sync whose WAL reaches initWal on another history than the generation's must not
// take over: it was rebuilt from an earlier primary and holds
// that primary's unacknowledged WAL past the point where the generation forked, and
// lacks what the generation's primary acknowledged there. Its position alone passes.
TEST(Peer, SyncOnAnotherHistoryThanTheGenerationsDoesNotTakeOver) {
  Harness h;
  // The generation's primary was on timeline 3 up to initWal.
  startAsSyncOfGenerationFourOnTimelineThree(h, WalPosition(0x8880));
  // Timeline 2 (from 1 at 0/100) up to 0/8a00: ahead of initWal, but on timeline 2
  // there, where the generation forked off at 0/7900.
  const TimelineHistory other{2, {{1, WalPosition(0x100)}}};
  auto actions = h.step(WalPositionRead{WalPosition(0x8a00), "", 0, other});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "its WAL is on timeline 2 at initWal 0/00008880, the generation's is on timeline 3"));
}

// Found on another history only after the fence: the fence is lifted, as for a sync
// that finds itself behind.
TEST(Peer, FencedSyncFoundOnAnotherHistoryStreamsAgain) {
  Harness h;
  startAsSyncOfGenerationFourOnTimelineThree(h, WalPosition(0x100));
  const TimelineHistory same{3, {{2, WalPosition(0x80)}}};
  ASSERT_EQ(only<FencePg>(h.step(WalPositionRead{WalPosition(0x100), "", 0, same})).size(), 1u);
  h.step(PgFenced{true, ""});
  auto actions = h.step(WalPositionRead{WalPosition(0x200), "", 0, TimelineHistory{2, {}}});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "its WAL is on timeline 2 at initWal"));
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kSync);
}

// A history that cannot be read where the generation has one is no proof either.
TEST(Peer, SyncWhoseHistoryIsUnknownDoesNotTakeOverAGenerationWithOne) {
  Harness h;
  startAsSyncOfGenerationFourOnTimelineThree(h, WalPosition(0x100));
  auto actions = h.step(WalPositionRead{WalPosition(0x200), ""});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(logged(actions, "the timelines of its WAL are not known"));
}

// On the generation's history (it followed the generation's primary past its promotion,
// or had not yet): takes over, and records its own timeline at its initWal.
TEST(Peer, SyncOnTheGenerationsHistoryTakesOverAndRecordsItsTimeline) {
  Harness h;
  startAsSyncOfGenerationFourOnTimelineThree(h, WalPosition(0x100));
  // Followed the primary of generation 4 onto its timeline 4, which began at 0/100.
  const TimelineHistory followed{4, {{2, WalPosition(0x80)}, {3, WalPosition(0x100)}}};
  auto writes = fencedTakeover(h, WalPosition(0x180), followed);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.initWal, WalPosition(0x180));
  EXPECT_EQ(writes[0].state.initTimeline, 4);
}

// A state written without timelines (by an older build, or by the scripted simulator)
// has none: positions decide, and so does a takeover that read no history.
TEST(Peer, GenerationWithoutATimelineIsTakenOverOnPositionAlone) {
  Harness h;
  ClusterState s = cluster(4, "old", "me", {"a"});
  s.initWal = WalPosition(0x100);
  h.start(s, {"me", "a"});
  h.applied(true);
  ASSERT_EQ(only<FencePg>(h.step(WalPositionRead{WalPosition(0x100), "", 0, TimelineHistory{2, {}}})).size(), 1u);
  h.step(PgFenced{true, ""});
  auto writes = only<WriteClusterState>(h.step(WalPositionRead{WalPosition(0x100), ""}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.initTimeline, 0);
  EXPECT_FALSE(writes[0].state.toJson().contains("initTimeline"));
}

// A primary's configuration carries the history its data must hold (the generation's
// initWal and initTimeline): a primary whose data forked off before initWal (a host
// restored from an older copy) lacks what the generation acknowledged, and its adapter
// refuses to start it (pg/plan/transition.h). A new cluster's first primary has none.
TEST(Peer, APrimarysConfigurationNamesTheHistoryItsDataMustHold) {
  Harness h;
  ClusterState s = cluster(4, "me", "b", {"a"});
  s.initWal = WalPosition(0x8880);
  s.initTimeline = 3;
  auto apply = only<ApplyPgConfig>(h.startAsPrimary(s, {"me", "b", "a"}));
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kPrimary);
  EXPECT_EQ(apply[0].config.initWal, WalPosition(0x8880));
  EXPECT_EQ(apply[0].config.initTimeline, 3);
  EXPECT_EQ(apply[0].config.toJson()["initTimeline"], 3);
  EXPECT_FALSE(apply[0].config.newCluster);

  Harness first;
  apply = only<ApplyPgConfig>(first.startAsPrimary(cluster(1, "me", "b"), {"me", "b"}));
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_TRUE(apply[0].config.newCluster);
  EXPECT_EQ(apply[0].config.initTimeline, 0);
  EXPECT_FALSE(apply[0].config.toJson().contains("initTimeline"));
}


// The sync of generation 4 (timeline 3 up to initWal 0/100) takes over at 0/180 on
// timeline 3, and its postgres runs as the primary of generation 5.
void takeOverAtTimelineThree(Harness& h) {
  startAsSyncOfGenerationFourOnTimelineThree(h, WalPosition(0x100));
  auto writes = fencedTakeover(h, WalPosition(0x180), TimelineHistory{3, {{2, WalPosition(0x80)}}});
  ASSERT_EQ(writes.size(), 1u);
  ASSERT_EQ(writes[0].state.initWal, WalPosition(0x180));
  ASSERT_EQ(writes[0].state.initTimeline, 3);
  auto apply = only<ApplyPgConfig>(h.step(StateWriteFinished{true, "", false, 1}));
  ASSERT_EQ(apply.size(), 1u);
  ASSERT_EQ(apply[0].config.role, PgRole::kPrimary);
}

// Defence in depth (decision 0072): the promotion ended recovery at 0/170, before the
// initWal the takeover recorded (the end of what it had received was a partial record):
// the generation's history names WAL this primary never had, and at its next restart its
// adapter would refuse its own data (pg/plan/transition.h). Once running, it checks its
// history against the generation's, and writes a new generation at its own position.
TEST(PeerHistory, ANewPrimaryWhoseInitWalIsNotOnItsHistoryWritesAGenerationAtItsOwnPosition) {
  Harness h;
  takeOverAtTimelineThree(h);
  auto actions = h.applied(true);
  ASSERT_EQ(only<ReadWal>(actions).size(), 1u) << "the new primary checks its history once it runs";
  const TimelineHistory forkedBefore{4, {{2, WalPosition(0x80)}, {3, WalPosition(0x170)}}};
  actions = h.step(WalPositionRead{WalPosition(0x200), "", 0, forkedBefore});
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  ASSERT_TRUE(fences[0].newSync.has_value());
  EXPECT_EQ(fences[0].newSync->id, "a") << "commits keep waiting for its sync";
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  ASSERT_EQ(only<ReadWal>(h.step(PgFenced{true, ""})).size(), 1u);
  actions = h.step(WalPositionRead{WalPosition(0x210), "", 0, forkedBefore});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.generation, 6);
  EXPECT_EQ(writes[0].state.primary.id, "me");
  EXPECT_EQ(writes[0].state.sync->id, "a");
  EXPECT_EQ(writes[0].state.initWal, WalPosition(0x210));
  EXPECT_EQ(writes[0].state.initTimeline, 4);
  EXPECT_TRUE(logged(actions, "initWal 0/00000180 of generation 5 is not on this primary's history"));
  // Written: the primary's configuration names the history it holds.
  auto apply = only<ApplyPgConfig>(h.step(StateWriteFinished{true, "", false, 2}));
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.initWal, WalPosition(0x210));
  EXPECT_EQ(apply[0].config.initTimeline, 4);
  EXPECT_TRUE(only<ReadWal>(h.applied(true)).empty()) << "generation 6 began on its own history";
}

// On its history (the promotion forked at initWal or after it): nothing to write, and
// the check is made once per generation.
TEST(PeerHistory, ANewPrimaryOnItsGenerationsHistoryWritesNothing) {
  Harness h;
  takeOverAtTimelineThree(h);
  ASSERT_EQ(only<ReadWal>(h.applied(true)).size(), 1u);
  const TimelineHistory forkedAt{4, {{2, WalPosition(0x80)}, {3, WalPosition(0x180)}}};
  auto actions = h.step(WalPositionRead{WalPosition(0x200), "", 0, forkedAt});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(only<ReadWal>(h.step(ActivePeersChanged{peers({"me", "a", "b"})})).empty());
}

// A history that cannot be read is no reason for a new generation: the check is tried
// again after the retry delay, as any failed WAL read.
TEST(PeerHistory, ANewPrimaryThatCannotReadItsHistoryWritesNothing) {
  Harness h;
  takeOverAtTimelineThree(h);
  ASSERT_EQ(only<ReadWal>(h.applied(true)).size(), 1u);
  auto actions = h.step(WalPositionRead{WalPosition(0x200), ""});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "cannot tell whether initWal 0/00000180 of generation 5 is on this primary's history"));
}

}  // namespace
}  // namespace dugong
