// A standby cluster's peers (docs/decisions/0083-standby-cluster.md 3.1, 3.4, 4.1): the
// standby leader of a `hosts` source, its chain, its sync's takeover, and the setup of a
// new standby cluster.
#include <gtest/gtest.h>

#include "statemachine/peer_test_support.h"

namespace dugong {
namespace {
using peer_test::cluster;
using StandbyHarness = peer_test::Harness;
using peer_test::ident;
using peer_test::only;
using peer_test::peers;

StandbySource twoHosts() { return *parseSourceUrl("hosts://h1:5432,h2:5432"); }

ClusterState hostsStandby(int64_t gen, const std::string& leader, const std::string& sync,
                          std::vector<std::string> async = {}) {
  ClusterState s = cluster(gen, leader, sync, std::move(async));
  s.standby = StandbyMode{twoHosts(), std::nullopt, nullptr};
  return s;
}

PgConfig onlyApply(const std::vector<Action>& actions) {
  auto applies = only<ApplyPgConfig>(actions);
  EXPECT_EQ(applies.size(), 1u);
  return applies.empty() ? PgConfig::none() : applies[0].config;
}

// Once the fence holds: the WAL read under it (`wal`, on `history`), then the one state
// written, before any apply.
WriteClusterState fencedWrite(StandbyHarness& h, WalPosition wal, const TimelineHistory& history) {
  EXPECT_EQ(only<ReadWal>(h.step(PgFenced{true, ""})).size(), 1u);
  auto actions = h.step(WalPositionRead{wal, "", 0, history});
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  auto writes = only<WriteClusterState>(actions);
  EXPECT_EQ(writes.size(), 1u);
  return writes.empty() ? WriteClusterState{} : writes[0];
}

// standbyShape: "generation primary sync [asyncs] deposed [...] initWal/initTimeline standby-or-not".
std::string standbyShape(const ClusterState& s) {
  return std::to_string(s.generation) + " " + s.primary.id + " " + (s.sync ? s.sync->id : "-") + " " +
         peerIdList(s.async) + " deposed " + peerIdList(s.deposed) + " " + s.initWal.toString() + "/" +
         std::to_string(s.initTimeline) + (s.standby ? " standby" : " normal");
}

// The state's primary in a standby state is its standby leader: postgres in recovery,
// following the source's hosts (no slot on them), never a primary; only generation 1 with
// no initWal makes its data directory (from the source). Its sync and asyncs cascade as
// today's.
TEST(PeerStandby, TheLeaderFollowsTheSourceAndItsPeersCascadeFromIt) {
  StandbyHarness h;
  auto actions = h.start(hostsStandby(1, "me", "s", {"a"}), {"me", "s", "a"});
  EXPECT_EQ(h.peer.role(), Role::kStandbyLeader);
  PgConfig c = onlyApply(actions);
  EXPECT_EQ(c.role, PgRole::kStandbyLeader);
  ASSERT_TRUE(c.source.has_value());
  EXPECT_EQ(*c.source, hostsEndpoint(twoHosts()));
  EXPECT_TRUE(c.newCluster);
  EXPECT_FALSE(c.upstream.has_value());
  EXPECT_TRUE(peer_test::logged(actions, "configuring postgres as standby-leader, following the source hosts h1:5432, "
                                         "h2:5432"));
  EXPECT_EQ(h.peer.inspect()["role"], "standby-leader");
  EXPECT_EQ(h.peer.inspect()["standby"]["source"], "hosts h1:5432, h2:5432");
  h.applied(true);
  EXPECT_FALSE(h.peer.busy());

  ClusterState later = hostsStandby(3, "me", "s", {"a"});
  later.initWal = WalPosition(500);
  StandbyHarness h3;
  c = onlyApply(h3.start(later, {"me", "s", "a"}));
  EXPECT_EQ(c.role, PgRole::kStandbyLeader);
  EXPECT_FALSE(c.newCluster) << "a later leader never makes a data directory it finds missing";

  StandbyHarness sync(false, ident("s"));
  c = onlyApply(sync.start(later, {"me", "s", "a"}));
  EXPECT_EQ(sync.peer.role(), Role::kSync);
  EXPECT_EQ(c, PgConfig::standby(PgRole::kSync, ident("me"), ident("me")));
  StandbyHarness async(false, ident("a"));
  c = onlyApply(async.start(later, {"me", "s", "a"}));
  EXPECT_EQ(c, PgConfig::standby(PgRole::kAsync, ident("s"), ident("me")));
}

// Every agent reads every format (docs/decisions/0089): a peer that runs the quorum rules
// runs a standby cluster too, as the standby leader and as its sync.
TEST(PeerStandby, APeerThatRunsTheQuorumRulesRunsAStandbyCluster) {
  PeerOptions o{ident("me"), false, 1000};
  o.quorum = true;
  StandbyHarness h(o);
  auto actions = h.start(hostsStandby(1, "me", "s", {"a"}), {"me", "s", "a"});
  EXPECT_FALSE(h.peer.inspect().contains("halted")) << h.peer.inspect().dump();
  EXPECT_EQ(h.peer.role(), Role::kStandbyLeader);
  EXPECT_EQ(onlyApply(actions).role, PgRole::kStandbyLeader);
  o.self = ident("s");
  StandbyHarness sync(o);
  EXPECT_EQ(onlyApply(sync.start(hostsStandby(3, "me", "s", {"a"}), {"me", "s", "a"})),
            PgConfig::standby(PgRole::kSync, ident("me"), ident("me")));
}

// The leader keeps its chain as a primary does: a newcomer is appended, an absent async
// dropped; the standby state (its source) is kept in the write.
TEST(PeerStandby, TheLeaderKeepsItsChain) {
  StandbyHarness h;
  h.start(hostsStandby(2, "me", "s", {"a"}), {"me", "s", "a"}, false, false, 4);
  h.applied(true);
  auto writes = only<WriteClusterState>(h.step(ActivePeersChanged{peers({"me", "s", "n"})}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.generation, 2);
  ASSERT_EQ(writes[0].state.async.size(), 1u);
  EXPECT_EQ(writes[0].state.async[0].id, "n");
  ASSERT_TRUE(writes[0].state.standby.has_value());
  EXPECT_EQ(writes[0].state.standby->source, twoHosts());
  EXPECT_EQ(writes[0].state.format(), 3);
}

// A gone sync is replaced by the first present async, in a new generation whose initWal
// is where the leader's replay ends under the standby fence (not the received position,
// which may end inside a record); the fence is lifted by applying the leader's
// configuration again. No commit waits for the new sync: the fence names none.
TEST(PeerStandby, TheLeaderReplacesAGoneSyncAtItsReplayEnd) {
  StandbyHarness h;
  ClusterState s = hostsStandby(2, "me", "s", {"a", "b"});
  s.initWal = WalPosition(100);
  h.start(s, {"me", "s", "a", "b"}, false, false, 4);
  h.applied(true);
  auto actions = h.step(ActivePeersChanged{peers({"me", "a", "b"})});
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_FALSE(fences[0].newSync.has_value());
  TimelineHistory history;
  history.timeline = 2;
  history.ancestors = {{1, WalPosition(50)}};
  const WriteClusterState write = fencedWrite(h, WalPosition(300), history);
  EXPECT_EQ(standbyShape(write.state), "3 me a [b] deposed [] " + WalPosition(300).toString() + "/2 standby");
  EXPECT_EQ(write.reason, "generation 3: sync s is gone; a becomes sync of the standby cluster");
  actions = h.step(StateWriteFinished{true, "", false, 5});
  EXPECT_EQ(h.peer.role(), Role::kStandbyLeader);
  EXPECT_EQ(onlyApply(actions).role, PgRole::kStandbyLeader);
}

// The leader gone, its sync takes over as standby leader under today's conditions and in
// today's order (fence: stop streaming; read where replay ends; write G+1; apply), with
// the standby state kept, the old leader not deposed (it wrote nothing), and no promotion:
// its postgres is configured as standby leader, following the source.
TEST(PeerStandby, TheSyncTakesOverAsStandbyLeaderWithoutDeposingOrPromoting) {
  StandbyHarness h(false, ident("s"));
  ClusterState s = hostsStandby(4, "old", "s", {"a", "b"});
  s.initWal = WalPosition(100);
  s.initTimeline = 1;
  h.start(s, {"old", "s", "a", "b"}, false, false, 9);
  h.applied(true);
  auto actions = h.step(ActivePeersChanged{peers({"s", "a", "b"})});
  ASSERT_EQ(only<ReadWal>(actions).size(), 1u);
  TimelineHistory history;
  history.timeline = 1;
  actions = h.step(WalPositionRead{WalPosition(150), "", 0, history});
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_FALSE(fences[0].newSync.has_value());
  const WriteClusterState write = fencedWrite(h, WalPosition(160), history);
  EXPECT_EQ(standbyShape(write.state), "5 s a [b] deposed [] " + WalPosition(160).toString() + "/1 standby")
      << "a standby leader wrote nothing: it is not deposed";
  EXPECT_EQ(write.state.standby->source, twoHosts());
  EXPECT_EQ(write.reason, "generation 5: primary old is gone; s takes over as standby leader with WAL 0/000000a0, "
                         "a becomes sync, old is not deposed (a standby leader wrote nothing)");
  actions = h.step(StateWriteFinished{true, "", false, 10});
  EXPECT_EQ(h.peer.role(), Role::kStandbyLeader);
  PgConfig c = onlyApply(actions);
  EXPECT_EQ(c.role, PgRole::kStandbyLeader) << "never promoted";
  EXPECT_FALSE(c.newCluster);

  // The old leader back: appended to the chain as a newcomer.
  h.applied(true);
  auto writes = only<WriteClusterState>(h.step(ActivePeersChanged{peers({"s", "a", "b", "old"})}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(peerIdList(writes[0].state.async), "[b, old]");
}

// Rule 3 and the initWal condition hold in a standby cluster as in a normal one.
TEST(PeerStandby, TheSyncKeepsTodaysTakeoverConditions) {
  StandbyHarness h(false, ident("s"));
  ClusterState s = hostsStandby(4, "old", "s");
  h.start(s, {"old", "s"});
  h.applied(true);
  auto actions = h.step(ActivePeersChanged{peers({"s"})});
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  EXPECT_TRUE(peer_test::logged(actions, "primary old is gone, but no async is present to become the new sync"));

  StandbyHarness behind(false, ident("s"));
  s = hostsStandby(4, "old", "s", {"a"});
  s.initWal = WalPosition(1000);
  behind.start(s, {"old", "s", "a"});
  behind.applied(true);
  behind.step(ActivePeersChanged{peers({"s", "a"})});
  actions = behind.step(WalPositionRead{WalPosition(900), ""});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(peer_test::logged(actions, "this peer has not caught up: its WAL " + WalPosition(900).toString() +
                                             " is behind initWal " + WalPosition(1000).toString()));
}

// A switchover inside the standby cluster: the sync's promote request; the leader
// present, it becomes an async (appended by the new leader), not deposed.
TEST(PeerStandby, APromoteRequestOfTheSyncMakesItStandbyLeader) {
  StandbyHarness h(false, ident("s"));
  ClusterState s = hostsStandby(4, "old", "s", {"a"});
  s.promote = {{"id", "s"}, {"role", "sync"}, {"generation", 4},
               {"expireTime", formatIso8601(peer_test::kT0 + 60000)}};
  h.start(s, {"old", "s", "a"}, false, false, 2);
  auto actions = h.applied(true);
  ASSERT_EQ(only<ReadWal>(actions).size(), 1u);
  actions = h.step(WalPositionRead{WalPosition(10), ""});
  ASSERT_EQ(only<FencePg>(actions).size(), 1u);
  h.step(PgFenced{true, ""});
  auto writes = only<WriteClusterState>(h.step(WalPositionRead{WalPosition(20), ""}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.primary.id, "s");
  EXPECT_TRUE(writes[0].state.deposed.empty());
  EXPECT_TRUE(writes[0].state.promote.is_null());
  EXPECT_NE(writes[0].reason.find("promote request for this sync (standby leader old becomes an async)"),
            std::string::npos)
      << writes[0].reason;
}

// dugong.yaml's standby.source (0083 4.1): a new cluster is set up as a standby cluster
// of it, by the first peer in session order, with empty peers (initWal empty: its leader
// makes its data directory from the source); from data, the most advanced holder leads.
TEST(PeerStandby, ANewClusterIsSetUpAsAStandbyClusterOfTheConfiguredSource) {
  PeerOptions o{ident("me"), false, 1000};
  o.standbySource = twoHosts();
  Peer p(o);
  p.step(peer_test::kT0, PgInitialized{false, false});
  auto actions = p.step(peer_test::kT0 + 1, ZkInitialized{StateNode{}, peers({"me", "s", "a"})});
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  const ClusterState& s = writes[0].state;
  EXPECT_EQ(s.generation, 1);
  EXPECT_EQ(s.primary.id, "me");
  EXPECT_EQ(s.sync->id, "s");
  ASSERT_TRUE(s.standby.has_value());
  EXPECT_EQ(s.standby->source, twoHosts());
  EXPECT_EQ(s.format(), 3);
  EXPECT_EQ(s.initWal, WalPosition());
  EXPECT_EQ(writes[0].reason, "initial setup: me is standby leader, s is sync; a standby cluster of hosts h1:5432, "
                              "h2:5432 (dugong.yaml standby.source)");
  p.step(peer_test::kT0 + 2, StateWriteFinished{true, "", false, 0});
  EXPECT_EQ(p.role(), Role::kStandbyLeader);
  actions = p.step(peer_test::kT0 + 3, PgConfigApplied{true, "", false});  // role none, applied before the state
  PgConfig c = onlyApply(actions);
  EXPECT_EQ(c.role, PgRole::kStandbyLeader);
  EXPECT_TRUE(c.newCluster);

  // The agent's way (setupFromData), every present peer empty: the same.
  o.setupFromData = true;
  Peer empty(o);
  empty.step(peer_test::kT0, PgInitialized{false, false});
  PeerDataStates none;
  none["me"] = PeerDataState{};
  none["s"] = PeerDataState{};
  writes = only<WriteClusterState>(empty.step(peer_test::kT0 + 1, ZkInitialized{StateNode{}, peers({"me", "s"}), none}));
  ASSERT_EQ(writes.size(), 1u);
  ASSERT_TRUE(writes[0].state.standby.has_value());
  EXPECT_EQ(writes[0].state.initWal, WalPosition());
  EXPECT_EQ(writes[0].reason, "initial setup of a new cluster (no present peer holds data): me is standby leader, s "
                              "is sync; a standby cluster of hosts h1:5432, h2:5432 (dugong.yaml standby.source)");

  // Set up from data: the same, with the most advanced holder as leader.
  Peer d(o);
  PeerDataStates data;
  data["me"] = PeerDataState{};
  data["me"].setUp = true;
  data["me"].systemId = "7";
  data["me"].wal = WalPosition(900);
  data["me"].timeline = 1;
  data["s"] = PeerDataState{};
  d.step(peer_test::kT0, PgInitialized{false, true});
  actions = d.step(peer_test::kT0 + 1, ZkInitialized{StateNode{}, peers({"me", "s"}), data});
  writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u) << peer_test::only<LogDecision>(actions).back().message;
  ASSERT_TRUE(writes[0].state.standby.has_value());
  EXPECT_EQ(writes[0].state.initWal, WalPosition(900));
  EXPECT_NE(writes[0].reason.find(") is standby leader, s is sync"), std::string::npos) << writes[0].reason;
}

// promote-cluster (0083 6.2; phase 3 as built): the leader fences (stops streaming from
// the source), reads where its replay ends, and writes the next generation as a normal
// state (no standby field: Manatee's bytes) naming itself primary with the same sync and
// asyncs; only after the write does it apply the primary configuration, which promotes.
TEST(PeerStandby, PromoteClusterWritesANormalGenerationThenPromotes) {
  StandbyHarness h;
  ClusterState s = hostsStandby(5, "me", "s", {"a"});
  s.initWal = WalPosition(100);
  s.initTimeline = 1;
  h.start(s, {"me", "s", "a"}, false, false, 7);
  h.applied(true);
  ClusterState asked = s;
  asked.standby->promote = {{"by", "ops@jump1"}, {"sourceGone", true}, {"generation", 5},
                            {"expireTime", formatIso8601(peer_test::kT0 + 60000)}};
  auto actions = h.step(ClusterStateChanged{peer_test::node(asked, 8)});
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  auto fences = only<FencePg>(actions);
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_FALSE(fences[0].newSync.has_value()) << "the standby fence: no more WAL from the source";
  TimelineHistory history;
  history.timeline = 1;
  const WriteClusterState write = fencedWrite(h, WalPosition(900), history);
  EXPECT_EQ(standbyShape(write.state), "6 me s [a] deposed [] " + WalPosition(900).toString() + "/1 normal");
  EXPECT_EQ(write.state.format(), 1);
  EXPECT_EQ(write.expectedVersion, 8);
  EXPECT_EQ(write.reason, "generation 6: promote-cluster requested by ops@jump1 (--source-gone): no longer a standby "
                          "cluster of hosts h1:5432, h2:5432; me is primary with WAL " +
                              WalPosition(900).toString() + " and promotes, s stays sync");
  actions = h.step(StateWriteFinished{true, "", false, 9});
  EXPECT_EQ(h.peer.role(), Role::kPrimary);
  PgConfig c = onlyApply(actions);
  EXPECT_EQ(c.role, PgRole::kPrimary);
  EXPECT_EQ(c.initWal, WalPosition(900));
}

// An expired promote-cluster request is removed in the same generation (the leader keeps
// following); a frozen standby cluster is not promoted; one behind initWal is not either.
TEST(PeerStandby, PromoteClusterRefusesWhatItMustNotCarryOut) {
  StandbyHarness h;
  ClusterState s = hostsStandby(5, "me", "s", {"a"});
  h.start(s, {"me", "s", "a"}, false, false, 7);
  h.applied(true);
  ClusterState expired = s;
  expired.standby->promote = {{"by", "ops"}, {"sourceGone", false}, {"generation", 5},
                              {"expireTime", formatIso8601(peer_test::kT0 - 1000)}};
  auto writes = only<WriteClusterState>(h.step(ClusterStateChanged{peer_test::node(expired, 8)}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(standbyShape(writes[0].state), "5 me s [a] deposed [] " + WalPosition().toString() + "/0 standby");
  EXPECT_FALSE(writes[0].state.standby->hasPromote());
  EXPECT_NE(writes[0].reason.find("removed an invalid promote-cluster request"), std::string::npos) << writes[0].reason;

  StandbyHarness frozen;
  ClusterState f = hostsStandby(5, "me", "s", {"a"});
  f.freeze = true;
  f.standby->promote = {{"by", "ops"}, {"sourceGone", true}, {"generation", 5},
                        {"expireTime", formatIso8601(peer_test::kT0 + 60000)}};
  auto actions = frozen.start(f, {"me", "s", "a"}, false, false, 7);
  const auto more = frozen.applied(true);
  actions.insert(actions.end(), more.begin(), more.end());
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(peer_test::logged(actions, "promote-cluster requested by ops (--source-gone), but the cluster is frozen: "
                                         "not promoted"));

  StandbyHarness behind;
  ClusterState b = hostsStandby(5, "me", "s", {"a"});
  b.initWal = WalPosition(1000);
  b.standby->promote = f.standby->promote;
  behind.start(b, {"me", "s", "a"}, false, false, 7);
  behind.applied(true);
  TimelineHistory history;
  history.timeline = 1;
  EXPECT_EQ(only<ReadWal>(behind.step(PgFenced{true, ""})).size(), 1u);
  actions = behind.step(WalPositionRead{WalPosition(900), "", 0, history});
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_EQ(onlyApply(actions).role, PgRole::kStandbyLeader) << "the fence lifted: it follows the source again";
}

// The leader's own check before it promotes (0083 6.2 step 1; phase 4 as built): its
// fence asks the source (PgFenced::source), and a source with a writable host it reaches
// refuses the request even with --source-gone (dugong-adm judged an older observation);
// without --source-gone, a source its fence did not reach refuses it too. The request is
// removed in the same generation with the reason, and the fence lifted.
TEST(PeerStandby, PromoteClusterIsRefusedByTheLeaderWhenItsOwnCheckOfTheSourceRefuses) {
  struct Row {
    std::string name;
    bool sourceGone;
    std::optional<SourceObservation> seen;
    std::string reason;  // empty: promoted
  };
  SourceObservation writable;
  writable.reachable = true;
  writable.writableHosts = {HostPort{"h2", 5432}};
  SourceObservation unreachable;
  unreachable.lastSeen = "no host answered";
  const std::vector<Row> rows = {
      {"writable, --source-gone", true, writable,
       "promote-cluster requested by ops (--source-gone), refused by standby leader me: the source hosts h1:5432, "
       "h2:5432 has a writable host, h2:5432 (not in recovery): demote that site (dugong-adm demote-cluster) or stop "
       "it first; --source-gone does not override a primary this cluster can see"},
      {"writable", false, writable, "refused by standby leader me: the source hosts h1:5432, h2:5432 has a writable host"},
      {"unreachable", false, unreachable,
       "promote-cluster requested by ops, refused by standby leader me: the source hosts h1:5432, h2:5432 cannot be "
       "reached (no host answered): if it is gone, promote-cluster --source-gone (what this cluster did not receive "
       "is lost)"},
      {"not asked", false, std::nullopt, "cannot be reached (its standby leader's fence did not ask it)"},
      {"unreachable, --source-gone", true, unreachable, ""},
      {"not asked, --source-gone", true, std::nullopt, ""},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    StandbyHarness h;
    ClusterState s = hostsStandby(5, "me", "s", {"a"});
    h.start(s, {"me", "s", "a"}, false, false, 7);
    h.applied(true);
    s.standby->promote = {{"by", "ops"}, {"sourceGone", row.sourceGone}, {"generation", 5},
                          {"expireTime", formatIso8601(peer_test::kT0 + 60000)}};
    ASSERT_EQ(only<FencePg>(h.step(ClusterStateChanged{peer_test::node(s, 8)})).size(), 1u);
    PgFenced fenced{true, ""};
    fenced.source = row.seen;
    EXPECT_EQ(only<ReadWal>(h.step(fenced)).size(), 1u);
    TimelineHistory history;
    history.timeline = 1;
    auto actions = h.step(WalPositionRead{WalPosition(900), "", 0, history});
    auto writes = only<WriteClusterState>(actions);
    ASSERT_EQ(writes.size(), 1u);
    if (row.reason.empty()) {
      EXPECT_FALSE(writes[0].state.standby.has_value()) << writes[0].reason;
      EXPECT_TRUE(only<ApplyPgConfig>(actions).empty()) << "promoted only after the write";
      continue;
    }
    EXPECT_NE(writes[0].reason.find(row.reason), std::string::npos) << writes[0].reason;
    EXPECT_EQ(standbyShape(writes[0].state), "5 me s [a] deposed [] " + WalPosition().toString() + "/0 standby")
        << "the same generation, still a standby cluster";
    EXPECT_FALSE(writes[0].state.standby->hasPromote());
    EXPECT_EQ(writes[0].expectedVersion, 8);
    EXPECT_EQ(onlyApply(actions).role, PgRole::kStandbyLeader) << "the fence lifted: it follows the source again";
    actions = h.step(StateWriteFinished{true, "", false, 9});
    EXPECT_TRUE(only<FencePg>(actions).empty());
    EXPECT_TRUE(only<WriteClusterState>(actions).empty());
    EXPECT_EQ(h.peer.role(), Role::kStandbyLeader);
  }
}

nlohmann::json demoteRequest(EpochMs expire) {
  return {{"source", twoHosts().toJson()}, {"by", "ops@jump1"}, {"generation", 5}, {"expireTime", formatIso8601(expire)}};
}

// `s` (generation 5, "me" primary) running, then the same state with a demote request
// expiring `expireIn` ms from now, as version 9: the actions of that step.
std::vector<Action> demoteAsked(StandbyHarness& h, const ClusterState& s, int64_t expireIn) {
  h.startAsPrimary(s, {"me", "s", "a"}, 7);
  h.applied(true);
  ClusterState asked = s;
  asked.demote = demoteRequest(h.now + expireIn);
  return h.step(ClusterStateChanged{peer_test::node(asked, 9)});
}

// demote-cluster (0083 5.2; phase 4 as built): the primary stops postgres (a fast shutdown
// while its sync streams), reads where its WAL ended, writes the next generation as a
// standby state naming itself standby leader (demotedAt = initWal = that position, on its
// timeline; the request dropped), and only then starts postgres as standby leader of the
// new source, allowed to rewind its data directory (PgConfig::demoted). Once postgres is
// down for it, an expired request is carried out all the same; the sync runs the state
// as it is.
TEST(PeerStandby, DemoteClusterStopsPostgresThenWritesAStandbyStateThenFollowsTheSource) {
  StandbyHarness h;
  const ClusterState s = cluster(5, "me", "s", {"a"});
  auto actions = demoteAsked(h, s, 60000);
  ClusterState asked = s;
  asked.demote = demoteRequest(h.now - 1 + 60000);
  EXPECT_TRUE(only<WriteClusterState>(actions).empty()) << "nothing written before postgres is down";
  EXPECT_TRUE(only<ReadWal>(actions).empty());
  EXPECT_EQ(onlyApply(actions).role, PgRole::kNone);
  EXPECT_TRUE(peer_test::logged(actions, "demote-cluster requested by ops@jump1 (source hosts h1:5432, h2:5432): "
                                         "stopping postgres"));
  h.now += 120000;  // the request expires meanwhile: postgres is down for it, it goes on
  actions = h.step(PgConfigApplied{true, "", false});
  ASSERT_EQ(only<ReadWal>(actions).size(), 1u);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  TimelineHistory history;
  history.timeline = 2;
  actions = h.step(WalPositionRead{WalPosition(5000), "", 0, history});
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty()) << "postgres starts only after the write";
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  const ClusterState& next = writes[0].state;
  EXPECT_EQ(standbyShape(next), "6 me s [a] deposed [] " + WalPosition(5000).toString() + "/2 standby");
  EXPECT_EQ(next.standby->source, twoHosts());
  EXPECT_EQ(next.standby->demotedAt, (DemotionPoint{WalPosition(5000), 2}));
  EXPECT_FALSE(next.hasDemote());
  EXPECT_EQ(next.format(), 3);
  EXPECT_EQ(writes[0].expectedVersion, 9);
  EXPECT_EQ(writes[0].reason, "generation 6: demote-cluster requested by ops@jump1 (source hosts h1:5432, h2:5432): a "
                              "standby cluster of hosts h1:5432, h2:5432; me is standby leader, its WAL ended at " +
                                  WalPosition(5000).toString() + " on timeline 2, s stays sync");
  actions = h.step(StateWriteFinished{true, "", false, 10});
  EXPECT_EQ(h.peer.role(), Role::kStandbyLeader) << "not deposed: it demoted itself";
  PgConfig c = onlyApply(actions);
  EXPECT_EQ(c.role, PgRole::kStandbyLeader);
  EXPECT_EQ(*c.source, hostsEndpoint(twoHosts()));
  EXPECT_TRUE(c.demoted) << "the generation the demotion began: a former primary's data directory, rewound if need be";
  EXPECT_FALSE(c.newCluster);

  // Its sync runs the normal state with the request as it is (nothing to do: its primary is
  // present), then the standby state, streaming from its leader as before.
  StandbyHarness sync(false, ident("s"));
  sync.start(s, {"me", "s", "a"}, false, false, 7);
  sync.applied(true);
  actions = sync.step(ClusterStateChanged{peer_test::node(asked, 9)});
  EXPECT_FALSE(sync.peer.haltReason().has_value());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  actions = sync.step(ClusterStateChanged{peer_test::node(next, 10)});
  EXPECT_EQ(sync.peer.role(), Role::kSync);
  // The same upstream, repaired at once if it cannot follow: its WAL forked with the old
  // primary's, which is rewound (PgConfig::repairAtOnce).
  PgConfig syncConfig = onlyApply(actions);
  EXPECT_EQ(syncConfig.role, PgRole::kSync);
  EXPECT_EQ(syncConfig.upstream->id, "me");
  EXPECT_TRUE(syncConfig.repairAtOnce);
  EXPECT_FALSE(c.repairAtOnce) << "the leader is rewound by its own apply";
  // The next generation is not the demotion's: the usual wait again.
  ClusterState later = next;
  later.generation = 7;
  later.initWal = WalPosition(6000);
  sync.applied(true);
  actions = sync.step(ClusterStateChanged{peer_test::node(later, 11)});
  EXPECT_FALSE(onlyApply(actions).repairAtOnce);
}

// A demote request the primary does not carry out: an expired one (before postgres is
// down for it) is removed in the same generation; on a frozen cluster it waits, postgres
// running as primary.
TEST(PeerStandby, DemoteClusterRefusesWhatItMustNotCarryOut) {
  StandbyHarness h;
  auto actions = demoteAsked(h, cluster(5, "me", "s", {"a"}), -1000);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  auto writes = only<WriteClusterState>(actions);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.generation, 5);
  EXPECT_FALSE(writes[0].state.hasDemote());
  EXPECT_EQ(writes[0].state.format(), 1);
  EXPECT_NE(writes[0].reason.find("removed an invalid demote-cluster request: "), std::string::npos)
      << writes[0].reason;

  StandbyHarness frozen;
  ClusterState f = cluster(5, "me", "s", {"a"});
  f.freeze = true;
  actions = demoteAsked(frozen, f, 60000);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty()) << "postgres keeps running as primary";
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(peer_test::logged(actions, "but the cluster is frozen: not demoted"));
}

}  // namespace
}  // namespace dugong

namespace dugong {
namespace {

// A standby cluster of a dugong source (0083 3.2, 3.3; phase 5 as built): the leader
// streams from the source peer sourceUpstream names in the last state its agent read of
// the source (the source's sync), runs with no source peer chosen until one was read
// (phase 7 as built), reloads toward the source's new sync when the source's state names
// another one, and changes nothing while the source cannot be read.
TEST(PeerStandby, ADugongSourcesLeaderStreamsFromTheSourcesSyncAndFollowsIt) {
  const StandbySource siteA = *parseSourceUrl("dugong://z1:2181/dugong/siteA");
  ClusterState s = peer_test::cluster(3, "me", "s", {"a"});
  s.standby = StandbyMode{siteA, std::nullopt, nullptr};
  s.initWal = WalPosition(500);
  auto seen = [](const ClusterState& source) {
    SourceObservation o;
    o.reachable = true;
    o.state = ObservedSourceState::of(source);
    o.primaryPresent = true;
    return SourceObserved{o, "siteB", "", "/dugong/siteB"};
  };
  StandbyHarness h;
  auto actions = h.start(s, {"me", "s", "a"});
  EXPECT_EQ(onlyApply(actions), PgConfig::standbyLeader(dugongEndpoint(siteA, std::nullopt), false))
      << "no upstream known yet: in recovery with the source peer it followed last, if any";
  h.applied(true);

  actions = h.step(seen(peer_test::cluster(9, "a1", "a2", {"a3"})));
  PgConfig c = onlyApply(actions);
  EXPECT_EQ(c, PgConfig::standbyLeader(dugongEndpoint(siteA, ident("a2")), false));
  EXPECT_EQ(c.source->describe(), "dugong siteA peer a2");
  EXPECT_TRUE(peer_test::logged(actions, "the source's generation 9 names a2 sync"));
  EXPECT_EQ(h.peer.inspect()["sourceUpstream"]["id"], "a2");
  h.applied(true);

  SourceObserved gone;
  gone.seen.lastSeen = "connection refused";
  EXPECT_TRUE(only<ApplyPgConfig>(h.step(gone)).empty()) << "an unreachable source changes nothing in postgres";
  EXPECT_EQ(h.peer.inspect()["sourceUpstream"]["id"], "a2");

  // The source failed over: a2 is its primary, a3 its sync: a reload toward a3.
  c = onlyApply(h.step(seen(peer_test::cluster(10, "a2", "a3", {}))));
  EXPECT_EQ(*c.source, dugongEndpoint(siteA, ident("a3")));
  h.applied(true);
  EXPECT_TRUE(only<ApplyPgConfig>(h.step(seen(peer_test::cluster(10, "a2", "a3", {})))).empty());

  // The sync and asyncs cascade inside the site whatever the source does.
  StandbyHarness sync(false, ident("s"));
  EXPECT_EQ(onlyApply(sync.start(s, {"me", "s", "a"})), PgConfig::standby(PgRole::kSync, ident("me"), ident("me")));
  sync.applied(true);
  EXPECT_TRUE(only<ApplyPgConfig>(sync.step(seen(peer_test::cluster(9, "a1", "a2", {})))).empty());
}

}  // namespace
}  // namespace dugong

namespace dugong {
namespace {

const StandbySource kSiteA = *parseSourceUrl("dugong://z1:2181/dugong/siteA");

ClusterState dugongStandby(int64_t gen, const std::string& leader, const std::string& sync,
                           std::vector<std::string> async = {}) {
  ClusterState s = cluster(gen, leader, sync, std::move(async));
  s.standby = StandbyMode{kSiteA, std::nullopt, nullptr};
  s.initWal = WalPosition(100);
  s.initTimeline = 1;
  return s;
}

SourceObserved unreachable() {
  SourceObserved o;
  o.seen.lastSeen = "unreachable since 00:12:03";
  o.cluster = "siteB";
  o.root = "/dugong/siteB";
  return o;
}

TimelineHistory timeline1() {
  TimelineHistory h;
  h.timeline = 1;
  return h;
}

// 0083 "Phase 7 as built": a leader whose agent starts while its source cannot be read
// (the site gone) has chosen no source peer; it runs all the same, in recovery with no
// source peer chosen (the pg adapter keeps the one it followed last as this source's
// leader, else none), never as a primary, so that promote-cluster --source-gone is
// carried out: before this rule it waited for ever ("waiting for postgres to run as
// standby leader first").
TEST(PeerStandby, ALeaderStartedWithItsSourceUnreachableRunsAndIsPromotedWithSourceGone) {
  ClusterState s = dugongStandby(5, "me", "s", {"a"});
  const PgConfig c = PgConfig::standbyLeader(dugongEndpoint(kSiteA, std::nullopt), false);
  StandbyHarness fresh;
  auto actions = fresh.start(s, {"me", "s", "a"}, true, true, 7);
  EXPECT_EQ(onlyApply(actions), c);
  EXPECT_TRUE(peer_test::logged(actions, "following the source dugong siteA (no state of the source read yet"));
  EXPECT_TRUE(only<ApplyPgConfig>(fresh.step(unreachable())).empty()) << "an unreachable source changes nothing";
  fresh.applied(true);
  EXPECT_FALSE(fresh.peer.inspect().contains("sourceUpstream"));

  ClusterState asked = s;
  asked.standby->promote = {{"by", "ops@jump1"}, {"sourceGone", true}, {"generation", 5},
                            {"expireTime", formatIso8601(peer_test::kT0 + 60000)}};
  actions = fresh.step(ClusterStateChanged{peer_test::node(asked, 8)});
  EXPECT_FALSE(peer_test::logged(actions, "waiting for postgres to run as standby leader first"));
  // Its look (unreachable) predates the request: judged once a full look has passed.
  EXPECT_TRUE(peer_test::logged(actions, "a look at the source newer than the request"));
  fresh.now += 3000;
  actions = fresh.step(TimerFired{TimerId::kRetryEvaluation});
  ASSERT_EQ(only<FencePg>(actions).size(), 1u);
  const WriteClusterState write = fencedWrite(fresh, WalPosition(900), timeline1());
  EXPECT_EQ(standbyShape(write.state), "6 me s [a] deposed [] " + WalPosition(900).toString() + "/1 normal");
  EXPECT_EQ(write.reason, "generation 6: promote-cluster requested by ops@jump1 (--source-gone): no longer a standby "
                          "cluster of dugong siteA (z1:2181/dugong/siteA); me is primary with WAL " +
                              WalPosition(900).toString() + " and promotes, s stays sync");
  actions = fresh.step(StateWriteFinished{true, "", false, 9});
  EXPECT_EQ(onlyApply(actions).role, PgRole::kPrimary);

  // Without --source-gone the unreachable source is not enough: refused, the fence lifted.
  StandbyHarness planned;
  planned.start(s, {"me", "s", "a"}, true, true, 7);
  planned.step(unreachable());
  planned.applied(true);
  asked.standby->promote["sourceGone"] = false;
  planned.step(ClusterStateChanged{peer_test::node(asked, 8)});
  planned.now += 3000;
  ASSERT_EQ(only<FencePg>(planned.step(TimerFired{TimerId::kRetryEvaluation})).size(), 1u);
  ASSERT_EQ(only<ReadWal>(planned.step(PgFenced{true, ""})).size(), 1u);
  auto writes = only<WriteClusterState>(planned.step(WalPositionRead{WalPosition(900), "", 0, timeline1()}));
  ASSERT_EQ(writes.size(), 1u);
  const WriteClusterState& refused = writes[0];
  EXPECT_EQ(refused.state.generation, 5);
  EXPECT_TRUE(refused.state.standby.has_value()) << refused.reason;
  EXPECT_NE(refused.reason.find("refused by standby leader me"), std::string::npos) << refused.reason;
}

// A leader whose agent has not read its dugong source yet (its agent just started: the
// source watch's first read has not answered) does not judge a promote-cluster request:
// "not read yet" is not "cannot be reached" (0083 6.1), and a --source-gone judged so
// would make this site writable beside a source in sight (N2). It waits for the first
// read (a failed one answers within the read's timeout); once it sees the source's primary
// present, it refuses. Found by the simulator (0083 "Phase 9 as built", seed 3359).
TEST(PeerStandby, ALeaderThatHasNotReadItsSourceYetWaitsForItBeforeJudgingPromoteCluster) {
  ClusterState s = dugongStandby(5, "me", "s", {"a"});
  StandbyHarness h;
  h.start(s, {"me", "s", "a"}, true, true, 7);
  h.applied(true);
  ClusterState asked = s;
  asked.standby->promote = {{"by", "ops@jump1"}, {"sourceGone", true}, {"generation", 5},
                            {"expireTime", formatIso8601(peer_test::kT0 + 60000)}};
  auto actions = h.step(ClusterStateChanged{peer_test::node(asked, 8)});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty());
  EXPECT_TRUE(peer_test::logged(actions, "waiting for this agent's first read of the source"));

  SourceObserved seen;
  seen.seen.reachable = true;
  seen.seen.state = ObservedSourceState::of(peer_test::cluster(9, "a1", "a2", {"a3"}));
  seen.seen.primaryPresent = true;
  seen.cluster = "siteB";
  seen.root = "/dugong/siteB";
  actions = h.step(seen);
  const auto more = h.applied(true);  // the reload toward the source's sync
  actions.insert(actions.end(), more.begin(), more.end());
  ASSERT_EQ(only<FencePg>(actions).size(), 1u);
  ASSERT_EQ(only<ReadWal>(h.step(PgFenced{true, ""})).size(), 1u);
  auto writes = only<WriteClusterState>(h.step(WalPositionRead{WalPosition(900), "", 0, timeline1()}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.generation, 5);
  EXPECT_TRUE(writes[0].state.standby.has_value());
  EXPECT_NE(writes[0].reason.find("refused by standby leader me: the source siteA has a writable primary, a1"),
            std::string::npos)
      << writes[0].reason;
}

// The leader judges a promote-cluster request of a dugong source on a look at the source
// newer than the request: its watch reads the source once a second and reports changes
// only, so the look it holds when the request lands may predate what dugong-adm saw (a
// planned switch of sites: demote-cluster on the source returned, promote-cluster asked at
// once). It waits for a change reported after the request, or for a full look (3 s: a
// read a second, each bounded by 2 s) with no change, before it judges. Found by
// `StandbyDugongSource.APlannedSwitchOfSitesAndBackLosesNothingAndCopiesNothing`: refused
// 15 ms before the look that showed the source demoted.
TEST(PeerStandby, ALeaderJudgesPromoteClusterOnALookAtItsSourceNewerThanTheRequest) {
  ClusterState s = dugongStandby(5, "me", "s", {"a"});
  auto look = [](const ClusterState& source) {
    SourceObserved o;
    o.seen.reachable = true;
    o.seen.state = ObservedSourceState::of(source);
    o.seen.primaryPresent = true;
    o.cluster = "siteB";
    o.root = "/dugong/siteB";
    return o;
  };
  ClusterState writable = cluster(9, "a1", "a2", {"a3"});
  ClusterState demoted = writable;
  demoted.generation = 10;
  demoted.standby = StandbyMode{*parseSourceUrl("dugong://z2:2181/dugong/siteB"), DemotionPoint{WalPosition(800), 1},
                                nullptr};
  ClusterState asked = s;
  asked.standby->promote = {{"by", "ops@jump1"}, {"sourceGone", false}, {"generation", 5},
                            {"expireTime", formatIso8601(peer_test::kT0 + 60000)}};

  // The source's demotion reported after the request: the planned case goes ahead.
  StandbyHarness h;
  h.start(s, {"me", "s", "a"}, true, true, 7);
  h.applied(true);
  h.step(look(writable));
  h.applied(true);  // the reload toward the source's sync
  auto actions = h.step(ClusterStateChanged{peer_test::node(asked, 8)});
  EXPECT_TRUE(only<FencePg>(actions).empty());
  EXPECT_TRUE(only<WriteClusterState>(actions).empty()) << "not refused on the look from before the request";
  EXPECT_TRUE(peer_test::logged(actions, "a look at the source newer than the request"));
  actions = h.step(look(demoted));
  ASSERT_EQ(only<FencePg>(actions).size(), 1u);
  const WriteClusterState write = fencedWrite(h, WalPosition(900), timeline1());
  EXPECT_EQ(standbyShape(write.state), "6 me s [a] deposed [] " + WalPosition(900).toString() + "/1 normal");

  // No change within a full look: the look stands, and is judged (refused: writable).
  StandbyHarness still;
  still.start(s, {"me", "s", "a"}, true, true, 7);
  still.applied(true);
  still.step(look(writable));
  still.applied(true);
  EXPECT_TRUE(only<FencePg>(still.step(ClusterStateChanged{peer_test::node(asked, 8)})).empty());
  still.now += 2000;
  EXPECT_TRUE(only<FencePg>(still.step(TimerFired{TimerId::kRetryEvaluation})).empty());
  still.now += 1000;
  ASSERT_EQ(only<FencePg>(still.step(TimerFired{TimerId::kRetryEvaluation})).size(), 1u);
  ASSERT_EQ(only<ReadWal>(still.step(PgFenced{true, ""})).size(), 1u);
  auto writes = only<WriteClusterState>(still.step(WalPositionRead{WalPosition(900), "", 0, timeline1()}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_NE(writes[0].reason.find("refused by standby leader me: the source siteA has a writable primary, a1"),
            std::string::npos)
      << writes[0].reason;
}

// A new standby cluster's first leader with no data directory has nothing to run: it
// waits for the source's state to choose the source peer to copy it from.
TEST(PeerStandby, ANewStandbyClustersFirstLeaderWithNoDataWaitsForTheSourcesState) {
  ClusterState s = dugongStandby(1, "me", "s", {"a"});
  s.initWal = WalPosition();
  s.initTimeline = 0;
  StandbyHarness h;
  auto actions = h.start(s, {"me", "s", "a"}, false, false, 0);
  EXPECT_TRUE(only<ApplyPgConfig>(actions).empty());
  EXPECT_TRUE(peer_test::logged(actions, "with no data directory: waiting to read the source's state"));
  EXPECT_TRUE(only<ApplyPgConfig>(h.step(unreachable())).empty());
  SourceObservation o;
  o.reachable = true;
  o.state = ObservedSourceState::of(cluster(9, "a1", "a2", {"a3"}));
  EXPECT_EQ(onlyApply(h.step(SourceObserved{o, "siteB", "", "/dugong/siteB"})),
            PgConfig::standbyLeader(dugongEndpoint(kSiteA, ident("a2")), true));

  // Its data directory there (copied by an earlier run), it runs with none chosen.
  StandbyHarness copied;
  EXPECT_EQ(onlyApply(copied.start(s, {"me", "s", "a"}, false, true, 0)),
            PgConfig::standbyLeader(dugongEndpoint(kSiteA, std::nullopt), true));
}

// A sync that takes over while the source cannot be read (its agent never read it) runs as
// standby leader with no source peer chosen: never streaming from a peer of its own cluster
// (the pg adapter follows only a source peer), and ready, so that its gone sync is replaced.
TEST(PeerStandby, ASyncTakingOverWithItsSourceUnreachableRunsAsLeaderAndReplacesAGoneSync) {
  StandbyHarness h(false, ident("s"));
  ClusterState s = dugongStandby(4, "old", "s", {"a", "b"});
  h.start(s, {"old", "s", "a", "b"}, false, false, 9);
  h.step(unreachable());
  h.applied(true);
  ASSERT_EQ(only<ReadWal>(h.step(ActivePeersChanged{peers({"s", "a", "b"})})).size(), 1u);
  ASSERT_EQ(only<FencePg>(h.step(WalPositionRead{WalPosition(150), "", 0, timeline1()})).size(), 1u);
  const WriteClusterState write = fencedWrite(h, WalPosition(160), timeline1());
  EXPECT_EQ(standbyShape(write.state), "5 s a [b] deposed [] " + WalPosition(160).toString() + "/1 standby");
  auto actions = h.step(StateWriteFinished{true, "", false, 10});
  EXPECT_EQ(h.peer.role(), Role::kStandbyLeader);
  PgConfig c = onlyApply(actions);
  EXPECT_EQ(c, PgConfig::standbyLeader(dugongEndpoint(kSiteA, std::nullopt), false));
  EXPECT_FALSE(c.upstream.has_value()) << "not the old leader: only a source peer is followed";
  h.applied(true);

  // Its new sync gone: replaced at its fenced replay end, as a leader that read the source.
  actions = h.step(ActivePeersChanged{peers({"s", "b"})});
  ASSERT_EQ(only<FencePg>(actions).size(), 1u);
  const WriteClusterState replaced = fencedWrite(h, WalPosition(170), timeline1());
  EXPECT_EQ(standbyShape(replaced.state), "6 s b [] deposed [] " + WalPosition(170).toString() + "/1 standby");
  EXPECT_EQ(replaced.reason, "generation 6: sync a is gone; b becomes sync of the standby cluster");

  // The source read at last: the leader streams from its sync.
  h.step(StateWriteFinished{true, "", false, 11});
  h.applied(true);
  SourceObservation o;
  o.reachable = true;
  o.state = ObservedSourceState::of(cluster(9, "a1", "a2", {"a3"}));
  o.primaryPresent = true;
  c = onlyApply(h.step(SourceObserved{o, "siteB", "", "/dugong/siteB"}));
  EXPECT_EQ(*c.source, dugongEndpoint(kSiteA, ident("a2")));
}

}  // namespace
}  // namespace dugong

namespace dugong {
namespace {

// A standby cluster of a pgBackRest repository (0083 2.1, 4.1; "Phase 8 as built"): the
// leader's wanted configuration restores from the source's stanza and streams from
// nothing; the first leader with no data directory applies at once (it waits for no
// source's state: the repository is read by the pg adapter, `pgbackrest restore
// --type=standby`); a sync that takes over applies the same endpoint, never a promotion.
TEST(PeerStandby, ARepositorySourcesLeaderRestoresFromItsStanza) {
  StandbySource repo = *parseSourceUrl("pgbackrest://sitea");
  repo.restore->options = {{"repo1-path", "/srv/pgbackrest"}};
  ClusterState s = cluster(1, "me", "s", {"a"});
  s.standby = StandbyMode{repo, std::nullopt, nullptr};
  s.initWal = WalPosition();
  s.initTimeline = 0;
  StandbyHarness h;
  auto actions = h.start(s, {"me", "s", "a"}, false, false, 0);
  EXPECT_FALSE(h.peer.inspect().contains("halted")) << h.peer.inspect().dump();
  PgConfig c = onlyApply(actions);
  EXPECT_EQ(c, PgConfig::standbyLeader(sourceEndpoint(repo, std::nullopt), true));
  ASSERT_TRUE(c.source && c.source->restore);
  EXPECT_EQ(c.source->kind, SourceKind::kPgbackrest);
  EXPECT_EQ(c.source->restore->options.at("repo1-path"), "/srv/pgbackrest");
  EXPECT_TRUE(peer_test::logged(actions, "following the source pgbackrest (restoring from stanza sitea)"));

  ClusterState later = cluster(4, "old", "s", {"a", "b"});
  later.standby = StandbyMode{repo, std::nullopt, nullptr};
  later.initWal = WalPosition(100);
  later.initTimeline = 1;
  StandbyHarness sync(false, ident("s"));
  sync.start(later, {"old", "s", "a", "b"}, false, false, 9);
  sync.applied(true);
  ASSERT_EQ(only<ReadWal>(sync.step(ActivePeersChanged{peers({"s", "a", "b"})})).size(), 1u);
  TimelineHistory history;
  history.timeline = 1;
  ASSERT_EQ(only<FencePg>(sync.step(WalPositionRead{WalPosition(150), "", 0, history})).size(), 1u);
  const WriteClusterState write = fencedWrite(sync, WalPosition(160), history);
  EXPECT_EQ(write.state.standby->source, repo);
  c = onlyApply(sync.step(StateWriteFinished{true, "", false, 10}));
  EXPECT_EQ(c, PgConfig::standbyLeader(sourceEndpoint(repo, std::nullopt), false)) << "never promoted";
}

// A `hosts` or `dugong` source with `restore`: the leader streams as before and its
// endpoint carries the repository too (restore_command, 0083 P6).
TEST(PeerStandby, AStreamingSourcesRestoreIsInTheLeadersEndpoint) {
  StandbySource hosts = twoHosts();
  hosts.restore = SourceRepository{"sitea", {{"repo1-path", "/srv/pgbackrest"}}};
  ClusterState s = hostsStandby(3, "me", "s", {"a"});
  s.standby->source = hosts;
  s.initWal = WalPosition(500);
  StandbyHarness h;
  PgConfig c = onlyApply(h.start(s, {"me", "s", "a"}));
  ASSERT_TRUE(c.source.has_value());
  EXPECT_EQ(c.source->kind, SourceKind::kHosts);
  EXPECT_EQ(c.source->restore, hosts.restore);
  EXPECT_EQ(c.source->hosts, hosts.hosts);
}

}  // namespace
}  // namespace dugong
