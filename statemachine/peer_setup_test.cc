// The setup of a cluster with no state from the data states the peers publish
// (PeerOptions::setupFromData): never over data the cluster may need (rule 8).
#include "statemachine/peer.h"

#include <gtest/gtest.h>

#include "statemachine/peer_test_support.h"

namespace dugong {
namespace peer_setup_test {
using namespace peer_test;

constexpr int64_t kWaitMs = 5000;

PeerDataState holding(const std::string& system, int64_t timeline, uint64_t wal) {
  return {true, system, timeline, WalPosition(wal), std::nullopt};
}
const PeerDataState kEmpty{};

PeerOptions options() {
  PeerOptions o{ident("me"), false, 1000};
  o.setupFromData = true;
  o.setupWaitMs = kWaitMs;
  return o;
}

struct Harness {
  Harness() : peer(options()) {}
  std::vector<Action> step(const Event& e) { return peer.step(now++, e); }
  // Postgres stopped and (setUp) set up before; ZooKeeper with no state.
  std::vector<Action> start(const std::vector<std::string>& active, PeerDataStates data, bool setUp = true) {
    auto a = step(PgInitialized{false, setUp});
    auto b = step(ZkInitialized{StateNode{}, peers(active), std::move(data)});
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  Peer peer;
  EpochMs now = kT0;
};

TEST(PeerSetup, ANewClusterOfEmptyPeersIsSetUpAtOnceByTheFirstInSessionOrder) {
  Harness h;
  auto actions = h.start({"me", "b", "c"}, {{"me", kEmpty}, {"b", kEmpty}, {"c", kEmpty}}, false);
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].expectedVersion, -1);
  EXPECT_EQ(writes[0].state.primary.id, "me");
  EXPECT_EQ(writes[0].state.sync->id, "b");
  ASSERT_EQ(writes[0].state.async.size(), 1u);
  EXPECT_TRUE(only<StartTimer>(actions).empty());  // no wait for a new cluster
  // The first primary of a new cluster: the one that may create its data directory.
  h.step(PgConfigApplied{true, "", false});  // role none, while there was no state
  actions = h.step(StateWriteFinished{true, "", false, 0});
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kPrimary);
  EXPECT_TRUE(apply[0].config.newCluster);
  EXPECT_EQ(apply[0].config.toJson()["newCluster"], true);

  Harness second;
  actions = second.start({"b", "me"}, {{"me", kEmpty}, {"b", kEmpty}}, false);
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "b is first in session order and sets up a new cluster"));
}

TEST(PeerSetup, WaitsUntilEveryPresentPeerHasPublishedItsData) {
  Harness h;
  auto actions = h.start({"me", "b"}, {{"me", kEmpty}}, false);
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "waiting for [b] to publish what its data directory holds"));
  // b publishes: it holds data, and this empty peer does not set up over it.
  actions = h.step(ActivePeersChanged{peers({"me", "b"}), {{"me", kEmpty}, {"b", holding("S", 1, 0x500)}}});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(h.peer.inspect()["setup"]["dataStates"].contains("b"));
}

TEST(PeerSetup, ThePeerWithTheMostAdvancedWalSetsUpAfterTheWait) {
  Harness h;
  // me: a later timeline (a promotion after b's WAL forked), so ahead although lower.
  PeerDataStates data{{"b", holding("S", 1, 0x900)}, {"me", holding("S", 2, 0x100)}, {"c", kEmpty}};
  auto actions = h.start({"b", "me", "c"}, data);
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  auto timers = only<StartTimer>(actions);
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_EQ(timers[0].delayMs, kWaitMs);
  EXPECT_TRUE(logged(actions, "waiting 5000 ms for more peers to come back"));
  // Postgres stays stopped meanwhile.
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kNone);
  h.step(PgConfigApplied{true, "", false});

  h.now += kWaitMs;
  actions = h.step(TimerFired{TimerId::kRetryEvaluation});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  const ClusterState& s = writes[0].state;
  EXPECT_EQ(s.generation, 1);
  EXPECT_EQ(s.primary.id, "me");
  EXPECT_EQ(s.sync->id, "b");  // the next most advanced holder, then the empty peers
  ASSERT_EQ(s.async.size(), 1u);
  EXPECT_EQ(s.async[0].id, "c");
  EXPECT_EQ(s.initWal, WalPosition(0x100));
  EXPECT_TRUE(ClusterState::parse(s.serialize()).ok());

  // The primary is configured once the state is written.
  actions = h.step(StateWriteFinished{true, "", false, 0});
  apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kPrimary);
  // Set up from its data (initWal): that data directory is the cluster's, never recreated.
  EXPECT_FALSE(apply[0].config.newCluster);
  EXPECT_FALSE(apply[0].config.toJson().contains("newCluster"));
}

// Histories, not timeline numbers: the most advanced by number must hold (or have left at
// a promotion) every other holder's timeline, or nobody sets the cluster up.
TEST(PeerSetup, HoldersWhoseHistoriesDivergedSetUpNothing) {
  Harness h;
  PeerDataState forked = holding("S", 3, 0x900);  // timeline 3, from 1 at 0x200
  forked.ancestors = {{{1, WalPosition(0x200)}}};
  PeerDataState other = holding("S", 2, 0x800);  // timeline 2, from 1 at 0x500
  other.ancestors = {{{1, WalPosition(0x500)}}};
  PeerDataState deposed = holding("S", 1, 0x950);
  deposed.ancestors = std::vector<TimelineHistory::Ancestor>{};
  auto actions = h.start({"me", "b", "c"}, {{"me", forked}, {"b", other}, {"c", deposed}});
  h.now += kWaitMs;
  actions = h.step(TimerFired{TimerId::kRetryEvaluation});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "the WAL history of [b] diverged from it")) << h.peer.inspect().dump();

  // Without b, the history of timeline 3 left timeline 1 at a promotion: me sets up.
  actions = h.step(ActivePeersChanged{peers({"me", "c"}), {{"me", forked}, {"c", deposed}}});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.primary.id, "me");
}

TEST(PeerSetup, ALessAdvancedPeerLeavesTheSetupToTheMostAdvanced) {
  Harness h;
  auto actions = h.start({"me", "b"}, {{"me", holding("S", 1, 0x100)}, {"b", holding("S", 1, 0x200)}});
  h.now += kWaitMs;
  actions = h.step(TimerFired{TimerId::kRetryEvaluation});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "b holds the most advanced WAL (system S, timeline 1, WAL 0/00000200)"));
  // Equal WAL: the first in session order.
  Harness tie;
  tie.start({"me", "b"}, {{"me", holding("S", 1, 0x200)}, {"b", holding("S", 1, 0x200)}});
  tie.now += kWaitMs;
  EXPECT_EQ(only<WriteClusterState>(tie.step(TimerFired{TimerId::kRetryEvaluation})).size(), 1u);
}

TEST(PeerSetup, PeersHoldingDifferentSystemsSetUpNothingAndSayWhatTheOperatorMustDo) {
  Harness h;
  auto actions = h.start({"me", "b", "c"}, {{"me", holding("A", 1, 0x900)}, {"b", holding("B", 1, 0x100)}, {"c", kEmpty}});
  h.now += 10 * kWaitMs;
  actions = h.step(TimerFired{TimerId::kRetryEvaluation});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(only<StartTimer>(actions).empty());
  const std::string waiting = h.peer.inspect()["setup"]["waiting"];
  EXPECT_NE(waiting.find("[me] hold system A; [b] hold system B"), std::string::npos) << waiting;
  EXPECT_NE(waiting.find("An operator must choose"), std::string::npos) << waiting;
  // The operator removes b's data: the cluster is set up from the rest.
  actions = h.step(ActivePeersChanged{peers({"me", "b", "c"}), {{"me", holding("A", 1, 0x900)}, {"b", kEmpty}, {"c", kEmpty}}});
  EXPECT_EQ(only<WriteClusterState>(actions).size(), 1u);
}

TEST(PeerSetup, AStateThatDisappearsIsForgottenPostgresStopsAndTheClusterIsSetUpAgain) {
  Harness h;
  ClusterState s;
  s.generation = 4;
  s.primary = ident("me");
  s.sync = ident("b");
  h.step(PgInitialized{true, true});
  h.step(ZkInitialized{StateNode{true, s.serialize(), 7}, peers({"me", "b"}), {}});
  h.step(StateWriteFinished{true, "", false, 8});  // its confirmation as primary
  h.step(PgConfigApplied{true, "", true});
  EXPECT_EQ(h.peer.role(), Role::kPrimary);

  auto actions = h.step(ClusterStateChanged{StateNode{}});
  EXPECT_TRUE(logged(actions, "the cluster state is gone from ZooKeeper"));
  EXPECT_FALSE(h.peer.haltReason().has_value());
  EXPECT_EQ(h.peer.role(), Role::kUnassigned);
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kNone);
  h.step(PgConfigApplied{true, "", false});

  // Both publish; this peer's WAL is ahead: it sets the cluster up again after the wait.
  actions = h.step(ActivePeersChanged{peers({"b", "me"}), {{"me", holding("S", 3, 0x700)}, {"b", holding("S", 3, 0x600)}}});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  h.now += kWaitMs;
  auto writes = only<WriteClusterState>(h.step(TimerFired{TimerId::kRetryEvaluation}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].expectedVersion, -1);
  EXPECT_EQ(writes[0].state.primary.id, "me");
  EXPECT_EQ(writes[0].state.generation, 1);
}

TEST(PeerSetup, ASecondPeerIsNeededAndASingletonKeepsItsOwnRule) {
  Harness h;
  auto actions = h.start({"me"}, {{"me", holding("S", 1, 0x100)}});
  EXPECT_TRUE(logged(actions, "waiting for a second peer"));

  PeerOptions o = options();
  o.singleton = true;
  Peer single(o);
  single.step(kT0, PgInitialized{false, false});
  auto w = only<WriteClusterState>(single.step(kT0, ZkInitialized{StateNode{}, peers({"other", "me"}), {}}));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(w[0].state.oneNodeWriteMode);
}

}  // namespace peer_setup_test
}  // namespace dugong
