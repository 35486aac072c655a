// Rules of the peer state machine that the scenario scripts cannot reach (the
// simulator's postgres never fails, its ZooKeeper never loses a race), and the
// ordering guarantees of its output.
#include "statemachine/peer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "statemachine/peer_test_support.h"
#include "statemachine/time_format.h"

namespace dugong {
namespace {
using namespace peer_test;


TEST(Peer, WaitsForZooKeeperAndPostgresBeforeActing) {
  Harness h;
  EXPECT_TRUE(h.step(ZkInitialized{StateNode{}, peers({"me", "b"})}).empty());
  EXPECT_TRUE(h.step(ActivePeersChanged{peers({"me", "b", "c"})}).empty());
  auto actions = h.step(PgInitialized{false, false});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].expectedVersion, -1);
  EXPECT_EQ(writes[0].state.generation, 1);
  EXPECT_EQ(writes[0].state.sync->id, "b");
  ASSERT_EQ(writes[0].state.async.size(), 1u);
  EXPECT_EQ(writes[0].state.initWal, WalPosition(0));
}

TEST(Peer, NeverSetsUpAClusterOverPreviouslySetUpPostgres) {
  for (bool singleton : {false, true}) {
    Harness h(singleton);
    auto actions = h.start(std::nullopt, {"me", "b"}, /*online=*/true, /*setUp=*/true);
    EXPECT_TRUE(only<WriteClusterState>(actions).empty());
    EXPECT_TRUE(logged(actions, "was set up before; not setting up a new cluster"));
    // Postgres is stopped: an unassigned peer serves nothing.
    auto apply = only<ApplyPgConfig>(actions);
    ASSERT_EQ(apply.size(), 1u);
    EXPECT_EQ(apply[0].config.role, PgRole::kNone);
  }
}

TEST(Peer, SingletonSetsUpAFrozenOneNodeWriteCluster) {
  Harness h(/*singleton=*/true);
  auto actions = h.start(std::nullopt, {"other", "me"});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  const ClusterState& s = writes[0].state;
  EXPECT_TRUE(s.oneNodeWriteMode);
  EXPECT_FALSE(s.sync.has_value());
  EXPECT_EQ(s.primary.id, "me");
  EXPECT_EQ(s.freeze["date"], formatIso8601(kT0 + 1));
  EXPECT_NE(s.freeze["reason"].get<std::string>().find("one-node-write"), std::string::npos);
  EXPECT_TRUE(ClusterState::parse(s.serialize()).ok());
}

TEST(Peer, InvalidStateIsReportedAndNeverActedUpon) {
  Harness h;
  auto actions = h.step(PgInitialized{true, true});
  actions = h.step(ZkInitialized{StateNode{true, "{\"generation\": \"x\"}", 3}, peers({"me", "b"})});
  ASSERT_EQ(actions.size(), 1u);
  auto log = std::get<LogDecision>(actions[0]);
  EXPECT_EQ(log.level, LogLevel::kError);
  EXPECT_NE(log.message.find("invalid cluster state (version 3): cluster state: generation must be an integer"),
            std::string::npos);
  ASSERT_TRUE(h.peer.haltReason().has_value());
  // Nothing happens while the state is invalid, whatever else changes.
  EXPECT_TRUE(only<ApplyPgConfig>(h.step(ActivePeersChanged{peers({"me"})})).empty());
  EXPECT_TRUE(only<ApplyPgConfig>(h.step(ClusterStateChanged{StateNode{true, "not json", 4}})).empty());
  // A valid state resumes the peer.
  actions = h.step(ClusterStateChanged{node(cluster(2, "b", "me"), 5)});
  EXPECT_FALSE(h.peer.haltReason().has_value());
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kSync);
  EXPECT_EQ(apply[0].config.upstream->id, "b");
  EXPECT_EQ(apply[0].config.restorePeer->id, "b");
}

// How an agent refuses a state of a format newer than it knows (docs/decisions/0079
// section 2). Before quorum mode (commit 6632277) this test fed 0079's format-2 example
// to that build and got exactly this error for format 2 ("newer than the format 1");
// now the same path refuses format 4 (format 3, a standby state, is refused as not run
// yet: standby_test.cc, StandbyFormat.AFormat3StateHaltsTodaysPeers). The error names the format and says to upgrade;
// the peer halts: while the state stands it applies, fences, reads and writes nothing,
// whatever else changes; `halted` in inspect() says why. Postgres keeps its configuration.
TEST(Peer, AStateOfANewerFormatHaltsThePeerWithAClearError) {
  Harness h;
  h.start(cluster(6, "p", "me", {"d"}), {"p", "me", "d"});
  h.applied(true);
  ClusterState quorum = cluster(7, "p", "me", {"d"});
  nlohmann::json j = quorum.toJson();
  j["format"] = 4;
  j["sync"] = nullptr;
  j["quorum"] = {{"k", 1}, {"members", {ident("me").toJson(), ident("c").toJson()}}};
  auto actions = h.step(ClusterStateChanged{StateNode{true, j.dump(), 1}});
  ASSERT_EQ(actions.size(), 1u);
  auto log = std::get<LogDecision>(actions[0]);
  EXPECT_EQ(log.level, LogLevel::kError);
  EXPECT_EQ(log.message,
            "invalid cluster state (version 1): cluster state: format 4 is newer than the format 3 this dugong knows "
            "(written by a newer version); upgrade this dugong: nothing is done with it; not acting until a valid "
            "state is written");
  EXPECT_EQ(h.peer.inspect()["halted"], log.message);
  // The primary gone, a member's takeover would start here: this peer does nothing.
  EXPECT_TRUE(h.step(ActivePeersChanged{peers({"me", "c", "d"})}).empty());
  EXPECT_TRUE(h.step(ActivePeersChanged{peers({"me", "d"})}).empty());
  EXPECT_FALSE(h.peer.busy());
}

// A quorum state (format 2) is refused by a peer without PeerOptions::quorum (the agent
// always sets it, 0089; cluster_state.h, Formats): it halts as on a state it cannot read,
// and resumes on a sync-mode state.
TEST(Peer, AQuorumStateIsRefusedUntilQuorumModeRuns) {
  Harness h;
  h.start(cluster(6, "p", "me", {"d"}), {"p", "me", "d"});
  h.applied(true);
  ClusterState quorum = cluster(7, "p", "me", {"d"});
  quorum.sync.reset();
  quorum.quorum = Quorum{1, peers({"me", "c"})};
  auto actions = h.step(ClusterStateChanged{node(quorum, 1)});
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(std::get<LogDecision>(actions[0]).message,
            "invalid cluster state (version 1): cluster state: a quorum-mode cluster (format 2, ANY 1 of 2 members: "
            "docs/decisions/0079), which this reader does not run: nothing is done with it; not acting until a valid "
            "state is written");
  ASSERT_TRUE(h.peer.haltReason().has_value());
  EXPECT_TRUE(h.step(ActivePeersChanged{peers({"me", "c", "d"})}).empty());
  EXPECT_FALSE(h.peer.busy());
  actions = h.step(ClusterStateChanged{node(cluster(8, "p", "me", {"d"}), 2)});
  EXPECT_FALSE(h.peer.haltReason().has_value());
  EXPECT_TRUE(logged(actions, "valid cluster state found again (version 2)"));
}

TEST(Peer, DeletedStateHaltsThePeer) {
  Harness h;
  h.start(cluster(2, "b", "me", {"c"}), {"b", "me", "c"});
  h.applied(true);
  auto actions = h.step(ClusterStateChanged{StateNode{}});
  EXPECT_TRUE(logged(actions, "the cluster state was deleted"));
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  EXPECT_TRUE(only<ApplyPgConfig>(h.step(ActivePeersChanged{peers({"me", "c"})})).empty());
  EXPECT_TRUE(only<ReadWal>(h.step(ActivePeersChanged{peers({"me", "c"})})).empty());
}

// A state deleted and written again starts over at version 0: every running peer must
// act on it (ZooKeeper versions count the changes of one node, not of the cluster).
TEST(Peer, StateRecreatedAtVersionZeroIsActedUpon) {
  Harness h;
  h.start(cluster(5, "b", "me", {"c"}), {"b", "me", "c"}, false, false, /*version=*/9);
  h.applied(true);
  h.step(ClusterStateChanged{StateNode{}});
  auto actions = h.step(ClusterStateChanged{node(cluster(6, "c", "me", {"b"}), 0)});
  EXPECT_EQ(h.peer.stateVersion(), 0);
  EXPECT_EQ(h.peer.clusterState()->generation, 6);
  EXPECT_FALSE(h.peer.haltReason().has_value());
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.upstream->id, "c");
}

// A new session reads the state afresh: a lower version than the old session's means
// the node was re-created meanwhile (a deletion this peer never saw), not an old read.
TEST(Peer, NewSessionTakesTheStateWhateverItsVersion) {
  Harness h;
  h.start(cluster(5, "b", "me", {"c"}), {"b", "me", "c"}, false, false, /*version=*/9);
  h.applied(true);
  auto actions = h.step(ZkInitialized{node(cluster(6, "c", "me", {"b"}), 1), peers({"b", "me", "c"})});
  EXPECT_EQ(h.peer.stateVersion(), 1);
  EXPECT_EQ(h.peer.clusterState()->generation, 6);
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.upstream->id, "c");
}

TEST(Peer, IgnoresStateOlderThanWhatItHas) {
  Harness h;
  h.start(cluster(3, "b", "me", {"c"}), {"b", "me", "c"}, false, false, /*version=*/7);
  h.applied(true);
  auto actions = h.step(ClusterStateChanged{node(cluster(2, "me", "b", {"c"}), 6)});
  EXPECT_TRUE(actions.empty());
  EXPECT_EQ(h.peer.stateVersion(), 7);
  EXPECT_EQ(h.peer.role(), Role::kSync);
}

// The sync takes over: WAL read, then the write, and only after the write is confirmed
// is postgres reconfigured as primary.
TEST(Peer, SyncTakeoverWritesBeforePromotingPostgres) {
  Harness h;
  ClusterState s = cluster(4, "old", "me", {"a", "b"}, {"x"});
  s.initWal = WalPosition(100);
  h.start(s, {"old", "me", "a", "b"}, false, false, 9);
  h.applied(true);
  auto actions = h.step(ActivePeersChanged{peers({"me", "b", "a"})});
  ASSERT_EQ(only<ReadWal>(actions).size(), 1u);
  EXPECT_TRUE(h.peer.busy());
  // Caught up: fence (stop streaming from the old primary), then read initWal.
  actions = h.step(WalPositionRead{WalPosition(150), ""});
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_FALSE(fences[0].newSync.has_value());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_EQ(h.peer.inspect()["pending"][0], "postgres fence: primary old is gone");
  ASSERT_EQ(only<ReadWal>(h.step(PgFenced{true, ""})).size(), 1u);
  actions = h.step(WalPositionRead{WalPosition(160), ""});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  const ClusterState& next = writes[0].state;
  EXPECT_EQ(writes[0].expectedVersion, 9);
  EXPECT_EQ(next.generation, 5);
  EXPECT_EQ(next.primary.id, "me");
  EXPECT_EQ(next.sync->id, "a");  // first present async, in chain order
  ASSERT_EQ(next.async.size(), 1u);
  EXPECT_EQ(next.async[0].id, "b");
  ASSERT_EQ(next.deposed.size(), 2u);
  EXPECT_EQ(next.deposed[1].id, "old");
  EXPECT_EQ(next.initWal, WalPosition(160));
  // Events during the write are recorded but not acted upon.
  EXPECT_TRUE(h.step(ActivePeersChanged{peers({"me", "a"})}).empty());
  actions = h.step(StateWriteFinished{true, "", false, 10});
  EXPECT_EQ(h.peer.role(), Role::kPrimary);
  EXPECT_EQ(h.peer.stateVersion(), 10);
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kPrimary);
  EXPECT_EQ(apply[0].config.downstream->id, "a");
  // The primary of a later generation never creates a data directory it finds missing.
  EXPECT_FALSE(apply[0].config.newCluster);
}

TEST(Peer, SyncNeedsPostgresOnlineToTakeOver) {
  Harness h;
  auto actions = h.start(cluster(1, "p", "me", {"a"}), {"me", "a"});
  EXPECT_TRUE(logged(actions, "postgres is not online"));
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  auto timers = only<StartTimer>(actions);
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_EQ(timers[0].id, TimerId::kRetryEvaluation);
  EXPECT_EQ(timers[0].delayMs, 1000);
  // The blocked reason is logged once, and the timer is not started twice.
  actions = h.step(ActivePeersChanged{peers({"me", "a", "z"})});
  EXPECT_FALSE(logged(actions, "postgres is not online"));
  EXPECT_TRUE(only<StartTimer>(actions).empty());
}

TEST(Peer, WalReadFailureBacksOff) {
  Harness h;
  ClusterState s = cluster(1, "me", "gone", {"a"});
  h.startAsPrimary(s, {"me", "a"});
  auto fences = only<FencePg>(h.applied(true));  // primary runs: fence, then read the WAL
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "a");  // commits now wait for the new sync
  h.step(PgFenced{true, ""});
  EXPECT_EQ(h.peer.inspect()["pending"][0], "WAL read: sync gone is gone");
  auto actions = h.step(WalPositionRead{std::nullopt, "connection refused"});
  EXPECT_TRUE(logged(actions, "cannot read the WAL position (connection refused)"));
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  EXPECT_EQ(only<StartTimer>(actions).size(), 1u);
  actions = h.step(TimerFired{TimerId::kRetryEvaluation});
  EXPECT_EQ(only<ReadWal>(actions).size(), 1u);
  actions = h.step(WalPositionRead{WalPosition(42), ""});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.initWal, WalPosition(42));
  EXPECT_EQ(writes[0].state.sync->id, "a");
  EXPECT_TRUE(writes[0].state.deposed.empty());  // the old sync is dropped, not deposed
}

TEST(Peer, AbandonedTakeoverLiftsTheFence) {
  Harness h;
  h.start(cluster(1, "old", "me", {"a"}), {"old", "me", "a"});
  h.applied(true);
  h.step(ActivePeersChanged{peers({"me", "a"})});
  ASSERT_EQ(only<FencePg>(h.step(WalPositionRead{WalPosition(0), ""})).size(), 1u);
  // The primary comes back while the fence is applied: no takeover, streaming resumes.
  EXPECT_TRUE(h.step(ActivePeersChanged{peers({"old", "me", "a"})}).empty());
  auto actions = h.step(PgFenced{true, ""});
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kSync);
  EXPECT_EQ(apply[0].config.upstream->id, "old");
  h.applied(true);
  EXPECT_FALSE(h.peer.busy());
}

TEST(Peer, FailedFenceIsRetriedAndNeverSkipped) {
  Harness h;
  h.startAsPrimary(cluster(1, "me", "gone", {"a", "b"}), {"me", "a", "b"});
  ASSERT_EQ(only<FencePg>(h.applied(true)).size(), 1u);
  auto actions = h.step(PgFenced{false, "reload failed"});
  EXPECT_TRUE(logged(actions, "fencing postgres failed (reload failed)"));
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  EXPECT_EQ(only<StartTimer>(actions).size(), 1u);
  actions = h.step(TimerFired{TimerId::kRetryEvaluation});
  ASSERT_EQ(only<FencePg>(actions).size(), 1u);  // fence again before any WAL read
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  ASSERT_EQ(only<ReadWal>(h.step(PgFenced{true, ""})).size(), 1u);
  auto writes = only<WriteClusterState>(h.step(WalPositionRead{WalPosition(9), ""}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.initWal, WalPosition(9));
}

TEST(Peer, PostgresRestartedAfterTheFenceIsFencedAgain) {
  Harness h;
  h.startAsPrimary(cluster(1, "me", "gone", {"a"}), {"me", "a"});
  ASSERT_EQ(only<FencePg>(h.applied(true)).size(), 1u);
  ASSERT_EQ(only<ReadWal>(h.step(PgFenced{true, "", 5})).size(), 1u);
  // Another run of postgres answers: it came back with its old configuration.
  auto actions = h.step(WalPositionRead{WalPosition(70), "", 6});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "postgres restarted after it was fenced"));
  ASSERT_EQ(only<FencePg>(actions).size(), 1u);
  ASSERT_EQ(only<ReadWal>(h.step(PgFenced{true, "", 6})).size(), 1u);
  auto writes = only<WriteClusterState>(h.step(WalPositionRead{WalPosition(71), "", 6}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.initWal, WalPosition(71));
}

TEST(Peer, FencedSyncThatFindsItselfBehindStreamsAgain) {
  Harness h;
  ClusterState s = cluster(2, "old", "me", {"a"});
  s.initWal = WalPosition(100);
  h.start(s, {"me", "a"});
  h.applied(true);  // online as sync; the primary is gone: read the WAL
  ASSERT_EQ(only<FencePg>(h.step(WalPositionRead{WalPosition(100), ""})).size(), 1u);
  h.step(PgFenced{true, ""});
  // A lower position after the fence (cannot happen with postgres, but never trusted).
  auto actions = h.step(WalPositionRead{WalPosition(99), ""});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "has not caught up"));
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);  // the fence is lifted
  EXPECT_EQ(apply[0].config.role, PgRole::kSync);
}

// "me" is the sync of generation 4, whose primary "old" is gone; the generation began
// at `initWal` on timeline 3. Postgres runs as sync.
TEST(Peer, LostRaceWaitsForNewsOrTheRetryTimer) {
  Harness h;
  h.startAsPrimary(cluster(1, "me", "b"), {"me", "b"});
  h.applied(true);
  auto actions = h.step(ActivePeersChanged{peers({"me", "b", "c"})});
  ASSERT_EQ(only<WriteClusterState>(actions).size(), 1u);  // appending c to the chain
  actions = h.step(StateWriteFinished{false, "bad version", true, -1});
  EXPECT_TRUE(logged(actions, "another writer changed the state first"));
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_EQ(only<StartTimer>(actions).size(), 1u);
  // Nothing new: no write.
  EXPECT_TRUE(only<WriteClusterState>(h.step(ActivePeersChanged{peers({"me", "b", "c"})})).empty());
  // The timer fires: try again.
  actions = h.step(TimerFired{TimerId::kRetryEvaluation});
  ASSERT_EQ(only<WriteClusterState>(actions).size(), 1u);
  h.step(StateWriteFinished{false, "connection loss", false, -1});
  // News from ZooKeeper: evaluate on it at once.
  ClusterState newer = cluster(1, "me", "b", {"c"});
  actions = h.step(ClusterStateChanged{node(newer, 1)});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());  // already what we wanted
  EXPECT_EQ(h.peer.clusterState()->async.size(), 1u);
}

// A sync's takeover write fails with a connection loss: it may have landed. The old
// primary coming back must not lift the fence before the state machine knows: the sync
// would stream from the old primary again and acknowledge its commits beyond the new
// generation's initWal, the write having landed. News from ZooKeeper settles it.
TEST(Peer, ATakeoverWriteOfUnknownOutcomeKeepsTheFenceUntilNewsSayWhetherItLanded) {
  Harness h;
  ClusterState s = cluster(1, "old", "me", {"a"});
  h.start(s, {"old", "me", "a"}, false, false, 5);
  h.applied(true);
  h.step(ActivePeersChanged{peers({"me", "a"})});
  ASSERT_EQ(only<FencePg>(h.step(WalPositionRead{WalPosition(10), ""})).size(), 1u);
  h.step(PgFenced{true, ""});
  ASSERT_EQ(only<WriteClusterState>(h.step(WalPositionRead{WalPosition(10), ""})).size(), 1u);
  auto actions = h.step(StateWriteFinished{false, "connection loss", false, -1});
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  actions = h.step(ActivePeersChanged{peers({"old", "me", "a"})});
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty()) << "the fence was lifted while the write may have landed";
  // It had landed: this peer is the primary of generation 2.
  ClusterState landed = cluster(2, "me", "a", {}, {"old"});
  actions = h.step(ClusterStateChanged{node(landed, 6)});
  EXPECT_EQ(h.peer.role(), Role::kPrimary);
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kPrimary);
}

// With no news, the retry first settles the outcome: the state as read is written back,
// test-and-set at the version the takeover expected. Once that lands, the takeover's
// cannot: the fence is lifted if the takeover's reason is gone.
TEST(Peer, WithoutNewsATakeoverWriteOfUnknownOutcomeIsSettledByWritingTheStateBack) {
  Harness h;
  ClusterState s = cluster(1, "old", "me", {"a"});
  h.start(s, {"old", "me", "a"}, false, false, 5);
  h.applied(true);
  h.step(ActivePeersChanged{peers({"me", "a"})});
  h.step(WalPositionRead{WalPosition(10), ""});
  h.step(PgFenced{true, ""});
  h.step(WalPositionRead{WalPosition(10), ""});
  h.step(StateWriteFinished{false, "connection loss", false, -1});
  h.step(ActivePeersChanged{peers({"old", "me", "a"})});
  auto actions = h.step(TimerFired{TimerId::kRetryEvaluation});
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].expectedVersion, 5);
  EXPECT_EQ(writes[0].state.serialize(), s.serialize());
  actions = h.step(StateWriteFinished{true, "", false, 6});
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kSync);
  EXPECT_EQ(apply[0].config.upstream->id, "old");
}

// A peer that starts (a new agent, so a new session) and finds itself primary does not
// start postgres as primary before a test-and-set of the state as read has landed: a
// takeover decided while its previous session was gone may still be on its way (the
// sync, told late that the old session was gone, takes over from a primary already
// running again with a new session).
TEST(Peer, APrimaryStartingOnANewSessionConfirmsTheStateBeforeRunningAsPrimary) {
  Harness h;
  ClusterState s = cluster(1, "me", "b", {"c"});
  auto actions = h.start(s, {"me", "b", "c"}, false, true, 3);
  EXPECT_EQ(h.peer.role(), Role::kPrimary);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty()) << "ran as primary before the confirmation";
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].expectedVersion, 3);
  EXPECT_EQ(writes[0].state.serialize(), s.serialize());
  actions = h.step(StateWriteFinished{true, "", false, 4});
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kPrimary);
}

// An agent restart that re-attached to its session: it never expired, no confirmation.
TEST(Peer, APrimaryStartingOnAKeptSessionRunsAtOnce) {
  Harness h;
  h.step(PgInitialized{true, true});
  auto actions = h.step(ZkInitialized{node(cluster(1, "me", "b", {"c"}), 3), peers({"me", "b", "c"}), {}, true});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kPrimary);
}

TEST(Peer, APrimaryWhoseStartConfirmationLosesTheRaceFollowsTheNewState) {
  Harness h;
  auto actions = h.start(cluster(1, "me", "b", {"c"}), {"me", "b", "c"}, false, true, 3);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty()) << "ran as primary before the confirmation";
  actions = h.step(StateWriteFinished{false, "bad version", true, -1});
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  actions = h.step(ClusterStateChanged{node(cluster(2, "b", "c", {}, {"me"}), 4)});
  EXPECT_EQ(h.peer.role(), Role::kDeposed);
  for (const auto& a : only<ApplyPgConfig>(actions)) EXPECT_EQ(a.config.role, PgRole::kNone);
}

TEST(Peer, PostgresApplyFailureIsRetried) {
  Harness h;
  auto actions = h.start(cluster(1, "p", "me"), {"p", "me"});
  ASSERT_EQ(only<ApplyPgConfig>(actions).size(), 1u);
  actions = h.step(PgConfigApplied{false, "pg_ctl timed out", false});
  EXPECT_TRUE(logged(actions, "pg_ctl timed out"));
  auto timers = only<StartTimer>(actions);
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_EQ(timers[0].id, TimerId::kRetryPgApply);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  EXPECT_TRUE(only<ApplyPgConfig>(h.step(ActivePeersChanged{peers({"p", "me", "x"})})).empty());
  actions = h.step(TimerFired{TimerId::kRetryPgApply});
  ASSERT_EQ(only<ApplyPgConfig>(actions).size(), 1u);
  h.applied(true);
  EXPECT_FALSE(h.peer.busy());
  // The same configuration is not applied again.
  EXPECT_TRUE(only<ApplyPgConfig>(h.step(ActivePeersChanged{peers({"p", "me"})})).empty());
}

// Postgres refuses to replace data the cluster may need (another database system):
// the peer halts with the error, tries nothing again, and says so in inspect().
TEST(Peer, RefusedConfigurationHaltsWithoutRetrying) {
  Harness h;
  auto actions = h.start(cluster(1, "p", "me", {"c"}), {"p", "me", "c"}, false, true);
  ASSERT_EQ(only<ApplyPgConfig>(actions).size(), 1u);
  const std::string error = "this data directory holds database system 111, and p serves another one, 222";
  actions = h.step(PgConfigApplied{false, error, false, /*refused=*/true});
  EXPECT_TRUE(logged(actions, error));
  EXPECT_TRUE(only<StartTimer>(actions).empty());
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  ASSERT_TRUE(h.peer.haltReason().has_value());
  EXPECT_NE(h.peer.haltReason()->find(error), std::string::npos);
  EXPECT_NE(h.peer.inspect()["halted"].get<std::string>().find("222"), std::string::npos);
  // Nothing wakes it: not the primary leaving, not a new state.
  EXPECT_TRUE(h.step(ActivePeersChanged{peers({"me", "c"})}).empty());
  EXPECT_TRUE(only<ApplyPgConfig>(h.step(ClusterStateChanged{node(cluster(2, "c", "me"), 1)})).empty());
  EXPECT_FALSE(h.peer.busy());
}

TEST(Peer, PrimarySeeingANewerGenerationIsDeposedEvenIfNotListed) {
  Harness h;
  h.startAsPrimary(cluster(3, "me", "b", {"c"}), {"me", "b", "c"});
  h.applied(true);
  // A new generation names b as primary and, wrongly, this peer as an async.
  auto actions = h.step(ClusterStateChanged{node(cluster(4, "b", "c", {"me"}), 1)});
  EXPECT_EQ(h.peer.role(), Role::kDeposed);
  EXPECT_TRUE(logged(actions, "deposed: generation 4 names b as primary"));
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kNone);
  // A deposed peer ignores ZooKeeper from now on, even a state that no longer lists it
  // as deposed (its rebuild): the driver, not this state machine, starts a fresh one
  // then (tests/scenarios/deposed_ignores_events.jsonl shows the whole agent).
  EXPECT_TRUE(h.step(ClusterStateChanged{node(cluster(5, "c", "me"), 2)}).empty());
  EXPECT_TRUE(h.step(ZkInitialized{node(cluster(5, "c", "me"), 2), peers({"c", "me"})}).empty());
  EXPECT_TRUE(h.step(ActivePeersChanged{peers({"me"})}).empty());
  // It keeps postgres stopped: a failed stop is retried.
  actions = h.step(PgConfigApplied{false, "pg_ctl stop timed out", true});
  EXPECT_EQ(only<StartTimer>(actions).size(), 1u);
  apply = only<ApplyPgConfig>(h.step(TimerFired{TimerId::kRetryPgApply}));
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kNone);
  h.applied(false);
  EXPECT_EQ(h.peer.inspect()["role"], "deposed");
}

TEST(Peer, NewSessionReplacesWhatTheOldOneKnew) {
  Harness h;
  h.start(cluster(1, "p", "me", {"a"}), {"p", "me", "a"});
  h.applied(true);
  // Session expired; the new session finds a newer state in which this peer is async.
  auto actions = h.step(ZkInitialized{node(cluster(2, "p", "a", {"me"}), 1), peers({"p", "a", "me"})});
  EXPECT_EQ(h.peer.role(), Role::kAsync);
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.upstream->id, "a");
  EXPECT_EQ(h.peer.activePeers()->size(), 3u);
}

TEST(Peer, SingletonFindingANormalClusterIsFatal) {
  Harness h(/*singleton=*/true);
  auto actions = h.start(cluster(1, "a", "b"), {"a", "b", "me"});
  auto fatal = only<Fatal>(actions);
  ASSERT_EQ(fatal.size(), 1u);
  EXPECT_NE(fatal[0].reason.find("configured for one-node-write mode"), std::string::npos);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  EXPECT_TRUE(h.step(ActivePeersChanged{peers({"me"})}).empty());
  EXPECT_EQ(*h.peer.haltReason(), fatal[0].reason);
}

TEST(Peer, InspectShowsRoleStateAndPendingWork) {
  Harness h;
  h.start(cluster(1, "p", "me", {"a"}), {"p", "me", "a"});
  auto j = h.peer.inspect();
  EXPECT_EQ(j["id"], "me");
  EXPECT_EQ(j["role"], "sync");
  EXPECT_EQ(j["clusterState"]["generation"], 1);
  EXPECT_EQ(j["stateVersion"], 0);
  EXPECT_EQ(j["activePeers"], nlohmann::json({"p", "me", "a"}));
  EXPECT_EQ(j["pg"]["applying"]["role"], "sync");
  EXPECT_TRUE(j["pg"]["applied"].is_null());
  EXPECT_EQ(j["pending"][0], "postgres transition to sync");
  EXPECT_FALSE(j.contains("halted"));
  h.applied(true);
  j = h.peer.inspect();
  EXPECT_EQ(j["pg"]["applied"]["upstream"]["id"], "p");
  EXPECT_TRUE(j["pg"]["online"]);
  EXPECT_EQ(roleName(Role::kUnknown), std::string("unknown"));
}

TEST(Peer, StrayCompletionsAreIgnored) {
  Harness h;
  EXPECT_TRUE(h.step(StateWriteFinished{true, "", false, 3}).empty());
  EXPECT_TRUE(h.step(WalPositionRead{WalPosition(1), ""}).empty());
  EXPECT_TRUE(h.step(PgConfigApplied{true, "", true}).empty());
  EXPECT_TRUE(h.step(TimerFired{TimerId::kRetryEvaluation}).empty());
  EXPECT_EQ(h.peer.role(), Role::kUnknown);
}

// ---- tags: a peer tagged nofailover is never made the sync --------------------------

PeerIdentity noFailover(const std::string& id) {
  PeerIdentity p = ident(id);
  p.tags.nofailover = true;
  return p;
}

// `ids` as election nodes, those in `tagged` tagged nofailover.
PeerList present(const std::vector<std::string>& ids, const std::vector<std::string>& tagged) {
  PeerList out;
  for (const auto& id : ids) {
    out.push_back(std::find(tagged.begin(), tagged.end(), id) != tagged.end() ? noFailover(id) : ident(id));
  }
  return out;
}

TEST(PeerTags, InitialSetupSkipsANoFailoverPeerForTheSync) {
  Harness h;
  h.step(ZkInitialized{StateNode{}, present({"me", "b", "c"}, {"b"})});
  auto writes = only<WriteClusterState>(h.step(PgInitialized{false, false}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.sync->id, "c");
  ASSERT_EQ(writes[0].state.async.size(), 1u);
  EXPECT_EQ(writes[0].state.async[0].id, "b");
  EXPECT_TRUE(writes[0].state.async[0].tags.nofailover);  // kept in the state's identity

  Harness alone;
  alone.step(ZkInitialized{StateNode{}, present({"me", "b"}, {"b"})});
  auto actions = alone.step(PgInitialized{false, false});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "every other peer is tagged nofailover"));
}

TEST(PeerTags, SyncTakeoverSkipsANoFailoverAsync) {
  Harness h;
  ClusterState s = cluster(4, "old", "me", {"a", "b"});
  h.start(s, {"old", "me", "a", "b"}, false, false, 9);
  h.applied(true);
  h.step(ActivePeersChanged{present({"me", "a", "b"}, {"a"})});
  h.step(WalPositionRead{WalPosition(150), ""});
  h.step(PgFenced{true, ""});
  auto writes = only<WriteClusterState>(h.step(WalPositionRead{WalPosition(160), ""}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.sync->id, "b");
  ASSERT_EQ(writes[0].state.async.size(), 1u);
  EXPECT_EQ(writes[0].state.async[0].id, "a");
}

TEST(PeerTags, SyncDoesNotTakeOverWhenOnlyNoFailoverAsyncsArePresent) {
  Harness h;
  h.start(cluster(4, "old", "me", {"a"}), {"old", "me", "a"});
  h.applied(true);
  auto actions = h.step(ActivePeersChanged{present({"me", "a"}, {"a"})});
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(logged(actions, "every present async [a] is tagged nofailover: none becomes the new sync"));
}

TEST(PeerTags, ANoFailoverSyncNeverTakesOver) {
  Harness h(false, noFailover("me"));
  h.start(cluster(4, "old", "me", {"a"}), {"old", "me", "a"});
  h.applied(true);
  auto actions = h.step(ActivePeersChanged{peers({"me", "a"})});
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(logged(actions, "this peer is tagged nofailover: it never takes over"));
}

TEST(PeerTags, PrimaryReplacingItsSyncSkipsNoFailoverAsyncs) {
  Harness h;
  h.startAsPrimary(cluster(4, "me", "gone", {"a", "b"}), {"me", "gone", "a", "b"}, 3);
  h.applied(true);
  auto actions = h.step(ActivePeersChanged{present({"me", "a", "b"}, {"a"})});
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "b");

  Harness none;
  none.startAsPrimary(cluster(4, "me", "gone", {"a"}), {"me", "gone", "a"}, 3);
  none.applied(true);
  actions = none.step(ActivePeersChanged{present({"me", "a"}, {"a"})});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(logged(actions, "sync gone is gone, but every present async [a] is tagged nofailover"));
}

TEST(PeerTags, PromoteRequestForANoFailoverAsyncIsRemoved) {
  Harness h;
  ClusterState s = cluster(4, "me", "b", {"a"});
  s.promote = {{"id", "a"}, {"role", "async"}, {"asyncIndex", 0}, {"generation", 4},
               {"expireTime", formatIso8601(kT0 + 60000)}};
  std::vector<Action> actions;
  for (const Event& e : std::vector<Event>{PgInitialized{false, false}, ZkInitialized{node(s, 3), present({"me", "b", "a"}, {"a"})},
                                           StateWriteFinished{true, "", false, 4}, PgConfigApplied{true, "", true}}) {
    auto a = h.step(e);
    actions.insert(actions.end(), a.begin(), a.end());
  }
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 2u) << h.peer.inspect().dump();  // the start's confirmation, then the removal
  EXPECT_TRUE(writes[1].state.promote.is_null());
  EXPECT_EQ(writes[1].state.sync->id, "b");
  EXPECT_TRUE(logged(actions, "a is tagged nofailover and is never made the sync"));
}

TEST(PeerTags, LeavingOneNodeWriteModeSkipsNoFailoverPeers) {
  ClusterState s;
  s.generation = 2;
  s.primary = ident("me");
  s.oneNodeWriteMode = true;
  Harness h;
  h.startAsPrimary(s, {"me"}, 3);
  h.applied(true);
  auto actions = h.step(ActivePeersChanged{present({"me", "a"}, {"a"})});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(logged(actions, "every other present peer is tagged nofailover"));
  actions = h.step(ActivePeersChanged{present({"me", "a", "b"}, {"a"})});
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "b");
}

TEST(PeerTags, IdentityCarriesTagsOnlyWhenSet) {
  EXPECT_FALSE(ident("a").toJson().contains("tags"));
  auto j = noFailover("a").toJson();
  EXPECT_EQ(j["tags"], (nlohmann::json{{"noloadbalance", false}, {"nofailover", true}}));
  auto back = PeerIdentity::fromJson(j, "a");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->tags.nofailover);
  j["tags"] = 3;
  EXPECT_EQ(PeerIdentity::fromJson(j, "a").error(), "a.tags: expected an object");
  j["tags"] = {{"nofailover", "yes"}};
  EXPECT_EQ(PeerIdentity::fromJson(j, "a").error(), "a.tags.nofailover: expected true or false");
}

// ---- a sync that keeps its session but acknowledges nothing ---------------------------

SyncAcknowledgement stalled(const std::string& sync) { return {sync, false, "no walsender for 1500 ms"}; }

// Primary "me" of generation 4 with sync "s" and asyncs "a", "b", all present, postgres
// running as primary.
void startPrimaryWithChain(Harness& h) {
  h.startAsPrimary(cluster(4, "me", "s", {"a", "b"}), {"me", "s", "a", "b"}, 3);
  h.applied(true);
}

// Fence (commits wait for the new sync), then the WAL read that becomes initWal, then
// the write; postgres is reconfigured only after the write landed, as in a takeover.
TEST(PeerStalledSync, IsReplacedByTheFirstPresentAsyncAfterTheFenceAndGoesLast) {
  Harness h;
  startPrimaryWithChain(h);
  auto actions = h.step(stalled("s"));
  EXPECT_TRUE(logged(actions, "sync s acknowledges no commits: no walsender for 1500 ms"));
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "a");
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  ASSERT_EQ(only<ReadWal>(h.step(PgFenced{true, "", 1})).size(), 1u);
  actions = h.step(WalPositionRead{WalPosition(500), "", 1});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  const ClusterState& next = writes[0].state;
  EXPECT_EQ(writes[0].expectedVersion, 4);
  EXPECT_EQ(next.generation, 5);
  EXPECT_EQ(next.primary.id, "me");
  EXPECT_EQ(next.sync->id, "a");
  ASSERT_EQ(next.async.size(), 2u);
  EXPECT_EQ(next.async[0].id, "b");
  EXPECT_EQ(next.async[1].id, "s");
  EXPECT_TRUE(next.deposed.empty());
  EXPECT_EQ(next.initWal, WalPosition(500));
  EXPECT_TRUE(logged(actions, "generation 5: sync s acknowledges no commits (no walsender for 1500 ms); a becomes "
                              "sync, s the last async"));
  actions = h.step(StateWriteFinished{true, "", false, 5});
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.downstream->id, "a");
}

TEST(PeerStalledSync, NewsThatItAcknowledgesAgainBeforeTheFenceEndsIsNoReplacement) {
  Harness h;
  startPrimaryWithChain(h);
  h.step(stalled("s"));
  auto actions = h.step(SyncAcknowledgement{"s", true, ""});
  EXPECT_TRUE(logged(actions, "sync s acknowledges commits again"));
  // The fence completes; with the sync acknowledging, the takeover is abandoned and the
  // configuration (synchronous standby s) applied again.
  actions = h.step(PgFenced{true, "", 1});
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  auto apply = only<ApplyPgConfig>(actions);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.downstream->id, "s");
}

TEST(PeerStalledSync, NoReplacementWhileFrozenOrWithoutACandidate) {
  ClusterState s = cluster(4, "me", "s", {"a"});
  s.freeze = {{"date", formatIso8601(kT0)}, {"reason", "maintenance"}};
  Harness frozen;
  frozen.startAsPrimary(s, {"me", "s", "a"}, 3);
  frozen.applied(true);
  auto actions = frozen.step(stalled("s"));
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(logged(actions, "but the cluster is frozen: it stays the sync"));

  Harness alone;
  alone.startAsPrimary(cluster(4, "me", "s"), {"me", "s"}, 3);
  alone.applied(true);
  actions = alone.step(stalled("s"));
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(logged(actions, "but no async is present to become the new sync"));
  // A newcomer joins the async chain first, and is then the candidate.
  actions = alone.step(ActivePeersChanged{peers({"me", "s", "a"})});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  ASSERT_EQ(only<WriteClusterState>(actions).size(), 1u);
  auto fences = only<FencePg>(alone.step(StateWriteFinished{true, "", false, 5}));
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "a");
}

TEST(PeerStalledSync, StaleOrForeignNewsIsIgnored) {
  Harness h;
  startPrimaryWithChain(h);
  EXPECT_TRUE(h.step(stalled("a")).empty());  // not the sync
  EXPECT_TRUE(h.step(SyncAcknowledgement{"s", true, ""}).empty());  // nothing to clear

  Harness standby;
  standby.start(cluster(4, "p", "me", {"a"}), {"p", "me", "a"});
  standby.applied(true);
  EXPECT_TRUE(standby.step(stalled("me")).empty());  // only a primary replaces its sync
  EXPECT_FALSE(standby.peer.inspect().contains("syncAcknowledgesNothing"));
}

// Carries a replacement begun by a stall to its end (fence, WAL read, write at version
// `version`, the primary's apply).
void completeReplacement(Harness& h, int32_t version) {
  h.step(PgFenced{true, "", 1});
  h.step(WalPositionRead{WalPosition(500), "", 1});
  h.step(StateWriteFinished{true, "", false, version});
  h.applied(true);
}

// A replacement for a stall starts a hold: a stall within it waits for its end (a timer);
// a replacement within two holds of the previous one doubles the hold; two holds without
// one bring it back to the base. A sync whose session ends is no stall and is not held.
TEST(PeerStalledSync, StallsWithinTheHoldWaitAndTheHoldDoublesWhileTheyKeepComing) {
  Harness h;
  startPrimaryWithChain(h);  // sync s, async [a, b]
  h.step(stalled("s"));
  completeReplacement(h, 5);  // sync a, async [b, s]: hold 5000
  auto actions = h.step(stalled("a"));
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(logged(actions, "less than 5000 ms ago: the next replacement waits until"));
  EXPECT_EQ(h.peer.inspect()["syncAcknowledgesNothing"]["sync"], "a");
  auto timers = only<StartTimer>(actions);
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_EQ(timers[0].id, TimerId::kRetryEvaluation);
  EXPECT_GT(timers[0].delayMs, 4900);
  h.now += timers[0].delayMs;
  auto fences = only<FencePg>(h.step(TimerFired{TimerId::kRetryEvaluation}));
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "b");
  completeReplacement(h, 6);  // sync b, async [s, a]: within two holds, so the hold doubles
  actions = h.step(stalled("b"));
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(logged(actions, "less than 10000 ms ago"));
  // Two holds (20 s) later the hold is the base again: replaced at once, then 5000.
  h.now += 20001;
  fences = only<FencePg>(h.step(TimerFired{TimerId::kRetryEvaluation}));
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "s");
  completeReplacement(h, 7);
  EXPECT_TRUE(logged(h.step(stalled("s")), "less than 5000 ms ago"));
}

// News of a stall belongs to its generation: the same peer made sync again later is not
// replaced on old news.
TEST(PeerStalledSync, AStallIsForgottenWithItsGeneration) {
  Harness h;
  startPrimaryWithChain(h);
  h.step(stalled("s"));
  completeReplacement(h, 5);
  // Generation 6 (written elsewhere, e.g. by an operator) makes s the sync again.
  auto actions = h.step(ClusterStateChanged{node(cluster(6, "me", "s", {"a", "b"}), 8)});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
}

// ---- streaming: the new sync is a present async that streams, when one does ----------

// `ids` as election nodes, those in `lagging` publishing that they do not stream.
ActivePeersChanged presentStreaming(const std::vector<std::string>& ids, std::set<std::string> lagging,
                                    const std::vector<std::string>& tagged = {}) {
  return ActivePeersChanged{present(ids, tagged), {}, std::move(lagging)};
}

TEST(PeerStreaming, PrimaryReplacingAGoneSyncPrefersAStreamingAsync) {
  Harness h;
  h.startAsPrimary(cluster(4, "me", "gone", {"a", "b", "c"}), {"me", "gone", "a", "b", "c"}, 3);
  h.applied(true);
  auto actions = h.step(presentStreaming({"me", "a", "b", "c"}, {"a"}));
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "b");  // a rebuilds: commits would wait on it
  ASSERT_EQ(only<ReadWal>(h.step(PgFenced{true, "", 1})).size(), 1u);
  actions = h.step(WalPositionRead{WalPosition(500), "", 1});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.sync->id, "b");
  ASSERT_EQ(writes[0].state.async.size(), 2u);
  EXPECT_EQ(writes[0].state.async[0].id, "a");  // the order is kept otherwise
  EXPECT_EQ(writes[0].state.async[1].id, "c");
  EXPECT_TRUE(logged(actions, "generation 5: sync gone is gone; b becomes sync, passing over a, which does not "
                              "stream from its upstream"));
}

TEST(PeerStreaming, SyncTakeoverPrefersAStreamingAsyncAndSkipsNoFailover) {
  Harness h;
  h.start(cluster(4, "old", "me", {"a", "b", "c", "d"}), {"old", "me", "a", "b", "c", "d"}, false, false, 9);
  h.applied(true);
  h.step(presentStreaming({"me", "a", "b", "c", "d"}, {"a", "b"}, {"c"}));
  h.step(WalPositionRead{WalPosition(150), ""});
  h.step(PgFenced{true, ""});
  auto actions = h.step(WalPositionRead{WalPosition(160), ""});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.sync->id, "d");  // c streams, but is tagged nofailover
  ASSERT_EQ(writes[0].state.async.size(), 3u);
  EXPECT_EQ(writes[0].state.async[0].id, "a");
  EXPECT_EQ(writes[0].state.async[1].id, "b");
  EXPECT_EQ(writes[0].state.async[2].id, "c");
  EXPECT_TRUE(logged(actions, "d becomes sync, old is deposed, passing over a, b, which do not stream"));
}

TEST(PeerStreaming, WhenNoCandidateStreamsTheFirstThatMayBeTheSyncIsChosen) {
  Harness h;
  h.startAsPrimary(cluster(4, "me", "gone", {"a", "b"}), {"me", "gone", "a", "b"}, 3);
  h.applied(true);
  auto actions = h.step(presentStreaming({"me", "a", "b"}, {"a", "b"}));
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "a");
  h.step(PgFenced{true, "", 1});
  actions = h.step(WalPositionRead{WalPosition(500), "", 1});
  EXPECT_TRUE(logged(actions, "generation 5: sync gone is gone; a becomes sync"));
  EXPECT_FALSE(logged(actions, "passing over"));
}

TEST(PeerStreaming, AStalledSyncIsReplacedByAStreamingAsync) {
  Harness h;
  startPrimaryWithChain(h);  // sync s, asyncs a, b
  h.step(presentStreaming({"me", "s", "a", "b"}, {"a"}));
  auto fences = only<FencePg>(h.step(stalled("s")));
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "b");
  h.step(PgFenced{true, "", 1});
  auto actions = h.step(WalPositionRead{WalPosition(500), "", 1});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.sync->id, "b");
  ASSERT_EQ(writes[0].state.async.size(), 2u);
  EXPECT_EQ(writes[0].state.async[0].id, "a");
  EXPECT_EQ(writes[0].state.async[1].id, "s");
  EXPECT_TRUE(logged(actions, "b becomes sync, s the last async, passing over a, which does not stream"));
}

TEST(PeerStreaming, ANewSessionReplacesWhatWasPublished) {
  Harness h;
  h.start(cluster(4, "me", "s", {"a", "b"}), {}, false, false, 3);
  h.step(ZkInitialized{node(cluster(4, "me", "s", {"a", "b"}), 3), present({"me", "s", "a", "b"}, {}), {}, false,
                       {"a"}});
  h.step(StateWriteFinished{true, "", false, 4});
  h.applied(true);
  auto fences = only<FencePg>(h.step(stalled("s")));
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences[0].newSync->id, "b");
}

}  // namespace
}  // namespace dugong
