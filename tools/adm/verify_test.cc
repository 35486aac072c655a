#include "tools/adm/verify.h"

#include <gtest/gtest.h>

#include "statemachine/time_format.h"
#include "ops/test_views.h"

namespace dugong::adm {
namespace {

using namespace testing;

std::vector<std::string> problems(const ClusterView& v, VerifyOptions o = {}) {
  std::vector<std::string> out;
  for (const auto& f : verifyCluster(v, o)) {
    if (f.problem) out.push_back(f.text);
  }
  return out;
}

bool mentions(const std::vector<std::string>& texts, const std::string& needle) {
  for (const auto& t : texts) {
    if (t.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(Verify, AHealthyClusterHasNoProblemAndPassedChecksAreListed) {
  ClusterView v = healthyView(threePeers({"c", "d"}));
  auto findings = verifyCluster(v);
  EXPECT_FALSE(anyProblem(findings));
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  std::vector<std::string> oks;
  for (const auto& f : findings) oks.push_back(f.text);
  EXPECT_TRUE(mentions(oks, "primary a is writable"));
  EXPECT_TRUE(mentions(oks, "sync b streams from a synchronously"));
  EXPECT_TRUE(mentions(oks, "async[1] d streams from c"));
}

std::vector<std::string> oks(const ClusterView& v) {
  std::vector<std::string> out;
  for (const auto& f : verifyCluster(v)) {
    if (!f.problem) out.push_back(f.text);
  }
  return out;
}

PeerView& primaryOf(ClusterView& v) { return mutablePeer(v, v.state.primary.id); }

// Quorum mode (docs/decisions/0079 6.5): no sync is no problem; each member is checked as
// a synchronous standby whose stream shows sync_state quorum; the primary runs the
// state's rule and k members acknowledge.
TEST(Verify, AHealthyQuorumClusterHasNoProblemAndEachMembersStreamIsChecked) {
  ClusterView v = healthyView(quorumPeers(1, {"b", "d"}, {"c"}));
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  auto passed = oks(v);
  EXPECT_TRUE(mentions(passed, "member b streams from a synchronously (sync_state quorum)"));
  EXPECT_TRUE(mentions(passed, "member d streams from a synchronously (sync_state quorum)"));
  EXPECT_TRUE(mentions(passed, "async[0] c streams from b"));
  EXPECT_TRUE(mentions(passed, "primary a's postgres runs the state's rule ANY 1 (b, d)"));
  EXPECT_TRUE(mentions(passed, "primary a: 2 of the 2 members acknowledge, a commit waits for 1"));
}

TEST(Verify, AMemberWhoseAgentIsGoneIsAProblemAndHasARow) {
  ClusterView v = healthyView(quorumPeers(1, {"b", "d"}, {"c"}));
  v.active.erase(v.active.begin() + indexOfPeer(v.active, "d"));
  v.peers = listPeers(v.state, v.active);  // d's row stays, inactive
  ClusterView fresh = healthyView(v.state);
  for (auto& p : v.peers) p.status = fresh.find(p.identity.id)->status;
  mutablePeer(v, "d").status = nullptr;
  primaryOf(v).status["postgres"]["replication"] = nlohmann::json::array({replRow("b", "quorum", "0/5000000")});
  ASSERT_NE(v.find("d"), nullptr);
  EXPECT_FALSE(v.find("d")->active);
  auto found = problems(v);
  EXPECT_TRUE(mentions(found, "member d is not in ZooKeeper (its agent is down or cut off)"));
  EXPECT_FALSE(mentions(found, "member b"));
  EXPECT_FALSE(mentions(found, "the state has no sync"));
  EXPECT_FALSE(mentions(found, "no role"));
  EXPECT_TRUE(mentions(oks(v), "primary a: 1 of the 2 members acknowledge, a commit waits for 1"));
}

TEST(Verify, AMemberNotStreamingWithSyncStateQuorumIsAProblemUnlessAStepIsInFlight) {
  ClusterView v = healthyView(quorumPeers(1, {"b", "d"}));
  primaryOf(v).status["postgres"]["replication"][1]["syncState"] = "async";
  auto found = problems(v);
  ASSERT_EQ(found.size(), 1u) << found[0];
  EXPECT_TRUE(mentions(found, "member d streams from a but not synchronously (sync_state async, not quorum)"));
  // The primary removing d (reloaded ANY 1 (b) first, written after): the step's doing.
  primaryOf(v).status["peer"]["quorum"]["step"] = "quorum: d acknowledges nothing; removing it from ANY 1 (b, d)";
  primaryOf(v).status["peer"]["pg"]["applied"] = appliedQuorum(1, {"b"});
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  EXPECT_TRUE(mentions(oks(v), "member d streams from a with sync_state async while a membership step is in flight "
                               "(quorum: d acknowledges nothing"));
  EXPECT_TRUE(mentions(oks(v), "primary a: its postgres runs ANY 1 (b), the state says ANY 1 (b, d) while a "
                               "membership step is in flight"));
}

TEST(Verify, APrimaryRunningAnotherRuleThanTheStatesIsAProblem) {
  ClusterView v = healthyView(quorumPeers(1, {"b", "d"}));
  primaryOf(v).status["peer"]["pg"]["applied"] = appliedQuorum(2, {"b", "d"});
  EXPECT_TRUE(mentions(problems(v), "primary a: its postgres runs ANY 2 (b, d), the state says ANY 1 (b, d)"));
  // A sync-mode apply (no quorum in it): the rule is not the state's.
  primaryOf(v).status["peer"]["pg"]["applied"] = {{"role", "primary"}};
  EXPECT_TRUE(mentions(problems(v), "primary a: its postgres runs no quorum rule (its agent applied primary without "
                                    "one), the state says ANY 1 (b, d)"));
  // Postgres counting a peer outside the set.
  v = healthyView(quorumPeers(1, {"b", "d"}, {"c"}));
  primaryOf(v).status["postgres"]["replication"].push_back(replRow("c", "quorum", "0/5000000"));
  EXPECT_TRUE(mentions(problems(v), "its postgres counts c's acknowledgements (sync_state quorum), which is not a "
                                    "member"));
}

TEST(Verify, FewerThanKMembersAcknowledgingIsAProblem) {
  ClusterView v = healthyView(quorumPeers(2, {"b", "d", "e"}));
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  primaryOf(v).status["postgres"]["replication"][0]["state"] = "catchup";
  primaryOf(v).status["postgres"]["replication"][2]["state"] = "catchup";
  EXPECT_TRUE(mentions(problems(v), "primary a: only 1 of the 3 members stream with sync_state quorum, and a commit "
                                    "waits for 2: commits stall"));
}

TEST(Verify, WalArchivingThatFailsOnThePrimaryIsAProblem) {
  ClusterView v = healthyView(threePeers());
  EXPECT_TRUE(problems(v).empty());  // archive_mode off: no archiver, nothing checked
  mutablePeer(v, "a").status["postgres"]["archiver"] = {{"mode", "on"}, {"archived", 12}, {"failed", 0},
                                                         {"failing", false}};
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  mutablePeer(v, "a").status["postgres"]["archiver"] = {{"mode", "on"},    {"archived", 12},
                                                         {"failed", 3},     {"failing", true},
                                                         {"lastFailedWal", "000000010000000000000007"}};
  auto p = problems(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("primary a cannot archive its WAL: archive_command failed 3 times, last on segment "
                      "000000010000000000000007"),
            std::string::npos)
      << p[0];
  // A standby's archiver (it archives nothing until promoted) is not the primary's.
  mutablePeer(v, "a").status["postgres"]["archiver"]["failing"] = false;
  mutablePeer(v, "b").status["postgres"]["archiver"] = {{"mode", "on"}, {"failed", 1}, {"failing", true}};
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
}

TEST(Verify, StoppedAsyncIsAProblem) {
  ClusterView v = healthyView(threePeers());
  // The async's agent and postgres are gone: no election node, no status, no row upstream.
  mutablePeer(v, "c").active = false;
  mutablePeer(v, "c").status = nullptr;
  mutablePeer(v, "b").status["postgres"]["replication"] = nlohmann::json::array();
  auto p = problems(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("async[0] c is not in ZooKeeper"), std::string::npos);
}

TEST(Verify, NoAsyncIsAProblem) {
  // A stopped async's agent leaves ZooKeeper and the primary drops it from the state.
  ClusterView v = healthyView(threePeers({}));
  auto p = problems(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("there is no async"), std::string::npos);
}

TEST(Verify, NoFailoverTagsThatLeaveNobodyToTakeOverAreProblems) {
  ClusterView v = healthyView(threePeers({"c", "d"}));
  v.active[2].tags.nofailover = true;  // c: d can still become the new sync
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  v.active[3].tags.nofailover = true;
  auto p = problems(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("every async is tagged nofailover"), std::string::npos) << p[0];
  v.active[1].tags.nofailover = true;  // the sync
  EXPECT_TRUE(mentions(problems(v), "the sync b is tagged nofailover: if the primary fails, nobody takes over"));
}

TEST(Verify, AsyncNotStreamingIsAProblem) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "b").status["postgres"]["replication"] = nlohmann::json::array();
  EXPECT_TRUE(mentions(problems(v), "async[0] c is not streaming from b"));
  mutablePeer(v, "b").status["postgres"]["replication"] =
      nlohmann::json::array({replRow("c", "async", "0/5000000", "catchup")});  // not {x}: for a json x, clang copies it
  EXPECT_TRUE(mentions(problems(v), "connected to b but catchup"));
}

TEST(Verify, SyncMustStreamSynchronously) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "a").status["postgres"]["replication"] =
      nlohmann::json::array({replRow("b", "potential", "0/5000000")});  // not {x}: for a json x, clang copies it
  EXPECT_TRUE(mentions(problems(v), "not synchronously (sync_state potential)"));
}

TEST(Verify, PrimaryNotWritableOrUnreachable) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "a").status["postgres"]["readOnly"] = true;
  EXPECT_TRUE(mentions(problems(v), "primary a is not writable"));
  mutablePeer(v, "a").status = nullptr;
  mutablePeer(v, "a").agentError = "connection refused";
  auto p = problems(v);
  EXPECT_TRUE(mentions(p, "primary a: its agent does not answer (connection refused)"));
  EXPECT_TRUE(mentions(p, "cannot tell whether it streams"));
}

TEST(Verify, LagBeyondTheLimit) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "a").status["postgres"]["currentLsn"] = "0/6000000";
  VerifyOptions o;
  o.maxLagBytes = 1024;
  EXPECT_TRUE(mentions(problems(v, o), "sync b lags 16777216 bytes behind a (more than 1024)"));
  o.maxLagBytes = 16777216;
  EXPECT_TRUE(problems(v, o).empty());
}

// A standby whose replay is paused (pg_wal_replay_pause(), or a hot-standby setting lower
// than the primary's: postgres pauses replay at the parameter change) receives WAL but
// applies none: its lag grows, and as the sync it holds a takeover until replay ends
// (operator review P15: the cluster could no longer fail over, verify said nothing).
TEST(Verify, AStandbyWhoseReplayIsPausedIsAProblem) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "b").status["postgres"]["replayPaused"] = true;
  EXPECT_TRUE(mentions(problems(v), "sync b: its replay is paused"));
  mutablePeer(v, "b").status["postgres"]["replayPaused"] = false;
  EXPECT_TRUE(problems(v).empty());
}

// A standby that runs a hot-standby setting (max_connections, max_worker_processes,
// max_wal_senders, max_prepared_transactions, max_locks_per_transaction) lower than its
// primary's pauses its replay once it reaches the primary's change, and refuses to start
// afterwards (operator review P12, P15): each such setting is named with both values,
// from the /state's postgres.hotStandbyValues. Equal or higher values are fine; a peer
// that publishes none (an older agent) is not judged.
TEST(Verify, AStandbyBelowThePrimarysHotStandbySettingsIsAProblem) {
  ClusterView v = healthyView(threePeers());
  const nlohmann::json primaryValues = {{"max_connections", 120}, {"max_wal_senders", 10},
                                        {"max_worker_processes", 8}};
  mutablePeer(v, "a").status["postgres"]["hotStandbyValues"] = primaryValues;
  mutablePeer(v, "b").status["postgres"]["hotStandbyValues"] = primaryValues;
  nlohmann::json lower = primaryValues;
  lower["max_connections"] = 100;
  lower["max_wal_senders"] = 12;  // higher: fine
  mutablePeer(v, "c").status["postgres"]["hotStandbyValues"] = lower;
  auto found = problems(v);
  ASSERT_EQ(found.size(), 1u) << (found.empty() ? "" : found[0]);
  EXPECT_TRUE(mentions(found, "async[0] c runs max_connections = 100, below the primary a's 120"));
  EXPECT_TRUE(mentions(found, "pauses its replay")) << found[0];

  mutablePeer(v, "c").status["postgres"]["hotStandbyValues"] = primaryValues;
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  mutablePeer(v, "c").status["postgres"].erase("hotStandbyValues");
  mutablePeer(v, "b").status["postgres"]["hotStandbyValues"]["max_worker_processes"] = 4;
  EXPECT_TRUE(mentions(problems(v), "sync b runs max_worker_processes = 4, below the primary a's 8"));
}

// A peer whose agent refused the cluster's configuration (a setting this host does not
// allow, or one its postgres rejected) runs the last one it applied: the setting and the
// reason are the problem's text, from its /state's clusterConfig.
TEST(Verify, APeerThatRefusedTheClusterConfigurationIsAProblem) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "c").status["clusterConfig"] = {{"appliedVersion", 3}, {"refused", nullptr}};
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  mutablePeer(v, "c").status["clusterConfig"] = {
      {"appliedVersion", 3},
      {"refused", "version 4: archive_command = 'touch /tmp/x' runs a command as postgres: refused unless every "
                  "host's dugong.yaml allows it (clusterConfig.allowUnsafe: [archive_command])"}};
  auto p = problems(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "async[0] c refused the cluster's configuration version 4: archive_command = 'touch /tmp/x' runs a "
                  "command as postgres: refused unless every host's dugong.yaml allows it "
                  "(clusterConfig.allowUnsafe: [archive_command]); its postgres runs version 3 (`dugong-adm config "
                  "show`, `dugong-adm config history`)");
  mutablePeer(v, "c").status["clusterConfig"]["appliedVersion"] = nullptr;
  EXPECT_TRUE(mentions(problems(v), "; its postgres runs none of the cluster's configurations yet"));
}

// A host whose own postgres.settings override some of the cluster's settings does not
// run them (operator review P5): its agent says which in clusterConfig.shadowed.
TEST(Verify, AClusterSettingAHostOverridesIsAProblem) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "b").status["clusterConfig"] = {{"appliedVersion", 3}, {"shadowed", nlohmann::json::array()}};
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  mutablePeer(v, "b").status["clusterConfig"]["shadowed"] = {"work_mem"};
  auto p = problems(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "sync b does not run the cluster's work_mem: its dugong.yaml sets it too (postgres.settings), and "
                  "the host's value is the one in effect there");
}

// A peer whose postgres has settings waiting for a restart does not run the cluster's
// configuration (the week test: a lowered max_connections left on an async, verify 0).
TEST(Verify, APeerWithSettingsWaitingForARestartIsAProblem) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "c").status["postgres"]["pendingRestart"] = nlohmann::json::array();
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  mutablePeer(v, "c").status["postgres"]["pendingRestart"] = {"max_connections", "shared_buffers"};
  auto p = problems(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "async[0] c does not run its configuration yet: max_connections, shared_buffers wait for a restart "
                  "of its postgres (`dugong-adm restart --pending`)");
}

TEST(Verify, DeposedFrozenStalePromoteAndUnassigned) {
  ClusterState s = threePeers();
  s.deposed.push_back(peer("z"));
  s.freeze = {{"date", "2026-01-01T00:00:00.000Z"}, {"reason", "maintenance"}};
  s.promote = {{"id", "b"}, {"role", "sync"}, {"generation", 1}, {"expireTime", "2000-01-01T00:00:00Z"}};
  ClusterView v = healthyView(s);
  v.active.push_back(peer("y"));
  v.peers = listPeers(s, v.active);
  ClusterView healthy = healthyView(s);
  for (auto& p : v.peers) {
    if (const PeerView* h = healthy.find(p.identity.id)) p.status = h->status;
  }
  auto p = problems(v);
  EXPECT_TRUE(mentions(p, "frozen since 2026-01-01T00:00:00.000Z: maintenance"));
  EXPECT_TRUE(mentions(p, "deposed peer z does not serve yet: its agent rejoins it by itself"));
  EXPECT_TRUE(mentions(p, "stale promote request (promote request expired"));
  EXPECT_TRUE(mentions(p, "peer y is in ZooKeeper but has no role"));
}

// What a deposed peer's agent says of its last failed rejoin is the problem's text, so
// that the operator sees why without reading its log (issue 38).
TEST(Verify, ADeposedPeerWhoseRejoinFailedSaysWhy) {
  ClusterState s = threePeers();
  s.deposed = {peer("z")};
  ClusterView v;
  v.state = s;
  v.active = {peer("a"), peer("b"), peer("c"), peer("z")};
  v.peers = listPeers(s, v.active);
  for (auto& p : v.peers) {
    if (p.identity.id == "z") p.status = {{"rejoin", {{"failures", 2}, {"lastError", "pg_rewind failed (...)"}}}};
  }
  EXPECT_TRUE(mentions(problems(v), "deposed peer z could not rejoin by itself: pg_rewind failed (...); its agent "
                                    "tries again; otherwise `dugong-adm rebuild` on that peer"));
}

// A deposed peer rejoins by itself only while its agent runs (rejoin: rewind, the
// default): the advice is to start its agent first, and to rebuild only if that fails
// (operator review P1: a killed primary's agent is down, and verify said to rebuild).
TEST(Verify, ADeposedPeerWhoseAgentIsDownIsToldToStartItFirst) {
  ClusterState s = threePeers();
  s.deposed = {peer("z")};
  ClusterView v;
  v.state = s;
  v.active = {peer("a"), peer("b"), peer("c")};
  v.peers = listPeers(s, v.active);
  EXPECT_TRUE(mentions(problems(v), "deposed peer z does not serve and its agent does not answer: start its agent "
                                    "first (with rejoin: rewind, the default, it then rejoins by itself); if it "
                                    "cannot, `dugong-adm rebuild` on that peer, or `dugong-adm reap z` if it is "
                                    "gone for good"))
      << problems(v)[0];
  // Its agent runs: it rejoins by itself, or says why not.
  for (auto& p : v.peers) {
    if (p.identity.id == "z") p.status = nlohmann::json::object();
  }
  EXPECT_TRUE(mentions(problems(v), "deposed peer z does not serve yet: its agent rejoins it by itself"));
}

TEST(Verify, AValidPendingPromoteIsNotAProblem) {
  ClusterState s = threePeers();
  s.promote = {{"id", "b"}, {"role", "sync"}, {"generation", 1}, {"expireTime", formatIso8601(1700000060000)}};
  ClusterView v = healthyView(s);
  EXPECT_TRUE(problems(v).empty());
}

TEST(Verify, HaltedAgentIsAProblem) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "b").status["peer"]["halted"] = "fatal: bad state";
  EXPECT_TRUE(mentions(problems(v), "sync b: its state machine is halted"));
}

TEST(Verify, OneNodeWriteModeNeedsNoSync) {
  ClusterState s;
  s.primary = peer("a");
  s.oneNodeWriteMode = true;
  ClusterView v = healthyView(s);
  EXPECT_TRUE(problems(v).empty());
}

// A standby cluster of a hosts source (docs/decisions/0083, phase 3): its leader is
// checked as standby leader, receiving from the source, not as a writable primary.
ClusterView standbyView() {
  ClusterState s = threePeers();
  StandbyMode mode;
  mode.source.kind = SourceKind::kHosts;
  mode.source.hosts = {HostPort{"10.0.0.5", 5432}};
  s.standby = mode;
  ClusterView v = healthyView(s);
  for (auto& p : v.peers) {
    const PeerView* down = v.downstreamOf(p.identity.id);
    nlohmann::json rows = nlohmann::json::array();
    if (down) rows.push_back(replRow(down->identity.id, "async", "0/5000000"));
    p.status = standbyStatus("0/5000000", rows);
  }
  mutablePeer(v, "a").status["postgres"]["source"] = {
      {"source", "hosts 10.0.0.5:5432"}, {"sampledAt", v.now},         {"walReceiverStatus", "streaming"},
      {"streamingFrom", "10.0.0.5:5432"}, {"sourceReachable", true},    {"sourceWal", "0/5000000"},
      {"receivedLsn", "0/5000000"},      {"receivingStalledSince", 0}, {"lagBytes", 0},
      {"summary", "0.0 MB and 0.0 s behind hosts 10.0.0.5:5432"}};
  return v;
}

TEST(Verify, AStandbyClusterStreamingFromItsSourceHasNoProblem) {
  ClusterView v = standbyView();
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];
  std::vector<std::string> oks;
  for (const auto& f : verifyCluster(v)) oks.push_back(f.text);
  EXPECT_TRUE(mentions(oks, "standby leader a streams from hosts 10.0.0.5:5432 at 10.0.0.5:5432"));
  EXPECT_TRUE(mentions(oks, "sync b streams from a"));
}

TEST(Verify, AStandbyLeaderThatStoppedReceivingIsAProblem) {
  ClusterView v = standbyView();
  mutablePeer(v, "a").status["postgres"]["source"]["walReceiverStatus"] = nullptr;
  auto p = problems(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("standby leader a does not receive from hosts 10.0.0.5:5432: no WAL receiver"),
            std::string::npos)
      << p[0];

  // A receiver, but received not moving for 45 s while the source moves.
  v = standbyView();
  mutablePeer(v, "a").status["postgres"]["source"]["receivingStalledSince"] = v.now - 45'000;
  p = problems(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("standby leader a has received nothing for 45 s while hosts 10.0.0.5:5432 moved on"),
            std::string::npos)
      << p[0];
  // 10 s: not yet.
  mutablePeer(v, "a").status["postgres"]["source"]["receivingStalledSince"] = v.now - 10'000;
  EXPECT_TRUE(problems(v).empty()) << problems(v)[0];

  // A writable "standby leader" is the worst of all.
  v = standbyView();
  mutablePeer(v, "a").status["postgres"]["inRecovery"] = false;
  mutablePeer(v, "a").status["postgres"]["readOnly"] = false;
  EXPECT_TRUE(mentions(problems(v), "runs postgres out of recovery"));
}

}  // namespace
}  // namespace dugong::adm
