// The peer's quorum rules (peer_quorum.cc; docs/decisions/0079-quorum-commit.md 4.1-4.7
// and 5.x): what a member, a taker, a non-taker, an async and the primary of a format-2
// state do, step by step.
#include <gtest/gtest.h>

#include "statemachine/peer_test_support.h"
#include "statemachine/promote_request.h"

namespace dugong {
namespace {

using peer_test::ident;
using peer_test::kT0;
using peer_test::logged;
using peer_test::node;
using peer_test::only;
using peer_test::peers;

// The generation's history: timeline 3, from 2 at 0/800, from 1 at 0/500.
const TimelineHistory kHistory{3, {{1, WalPosition(0x500)}, {2, WalPosition(0x800)}}};

TakeoverReport memberReport(uint64_t wal, int32_t version, int64_t generation = 7) {
  return {generation, WalPosition(wal), kHistory, version, 0};
}

// Generation 7 of primary p: ANY k (members), asyncs, initWal 0/1000 on timeline 3.
ClusterState memberQuorumState(int k, const std::vector<std::string>& members, const std::vector<std::string>& asyncs = {},
                         const std::string& primary = "p") {
  ClusterState s;
  s.generation = 7;
  s.primary = ident(primary);
  s.quorum = Quorum{k, peers(members)};
  s.async = peers(asyncs);
  s.initWal = WalPosition(0x1000);
  s.initTimeline = 3;
  return s;
}

PeerOptions quorumOptions(PeerIdentity self) {
  PeerOptions o{std::move(self), false, 1000};
  o.quorum = true;
  return o;
}

// Steps one quorum-mode Peer ("me").
struct Harness {
  explicit Harness(PeerIdentity self = ident("me")) : peer(quorumOptions(std::move(self))) {}
  std::vector<Action> step(const Event& e) { return peer.step(now++, e); }
  // Started with postgres running the configuration of its role in `s`.
  std::vector<Action> member(const ClusterState& s, std::vector<std::string> active, TakeoverReports reports = {}) {
    step(PgInitialized{true, true});
    auto a = step(ZkInitialized{node(s, 4), peers(std::move(active)), {}, false, {}, std::move(reports)});
    auto b = step(PgConfigApplied{true, "", true});
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  std::vector<Action> primary(const ClusterState& s, std::vector<std::string> active) {
    step(PgInitialized{false, true});
    auto a = step(ZkInitialized{node(s, 4), peers(std::move(active)), {}, true});  // session kept: no confirmation
    auto b = step(PgConfigApplied{true, "", true});
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  std::vector<Action> active(std::vector<std::string> ids, TakeoverReports reports = {}) {
    return step(ActivePeersChanged{peers(std::move(ids)), {}, {}, std::move(reports)});
  }
  // The primary is gone: the member fences, reads (WAL `wal` from run 11) and publishes
  // (its node at `version`). Returns the actions of the publication's answer.
  std::vector<Action> reported(std::vector<std::string> ids, uint64_t wal, int32_t version,
                               TakeoverReports others = {}) {
    active(ids, others);
    step(PgFenced{true, "", 11});
    step(WalPositionRead{WalPosition(wal), "", 11, kHistory});
    return step(ReportPublished{true, "", version});
  }
  Peer peer;
  EpochMs now = kT0;
};

// The rule of the one primary configuration applied among `actions`.
std::string appliedRule(const std::vector<Action>& actions) {
  auto apply = only<ApplyPgConfig>(actions);
  if (apply.size() != 1 || !apply[0].config.quorum) return "not one quorum primary's apply";
  const Quorum& q = *apply[0].config.quorum;
  return "ANY " + std::to_string(q.k) + " (" + peerIds(q.members) + ")";
}

template <class T>
bool has(const std::vector<Action>& actions) {
  return !only<T>(actions).empty();
}

// 4.1, 4.2: the primary gone, a member fences first, reads its WAL under the fence, and
// only then publishes that report: a report stands for a member that acknowledges
// nothing more. (The mutant `quorum-report-before-fence` publishes an unfenced read.)
TEST(PeerQuorum, AMemberFencesThenReadsThenPublishesItsReport) {
  Harness h;
  auto start = h.member(memberQuorumState(1, {"me", "b"}, {"c"}), {"p", "me", "b", "c"});
  auto apply = only<ApplyPgConfig>(start);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kSync);  // a member is a synchronous standby
  EXPECT_EQ(apply[0].config.upstream->id, "p");
  EXPECT_EQ(h.peer.role(), Role::kSync);

  auto gone = h.active({"me", "b", "c"});
  auto fence = only<FencePg>(gone);
  ASSERT_EQ(fence.size(), 1u);
  EXPECT_FALSE(fence[0].newSync);
  EXPECT_FALSE(fence[0].quorum);
  EXPECT_FALSE(has<ReadWal>(gone));
  EXPECT_FALSE(has<PublishReport>(gone));
  EXPECT_TRUE(h.peer.keepsFence() == false);

  auto fenced = h.step(PgFenced{true, "", 11});
  EXPECT_TRUE(has<ReadWal>(fenced));
  EXPECT_FALSE(has<PublishReport>(fenced));

  auto read = h.step(WalPositionRead{WalPosition(0x2000), "", 11, kHistory});
  auto publish = only<PublishReport>(read);
  ASSERT_EQ(publish.size(), 1u);
  ASSERT_TRUE(publish[0].report);
  EXPECT_EQ(publish[0].report->generation, 7);
  EXPECT_EQ(publish[0].report->wal, WalPosition(0x2000));
  EXPECT_EQ(publish[0].report->history, kHistory);
  EXPECT_EQ(publish[0].report->instance, 11u);
  EXPECT_TRUE(h.peer.keepsFence());  // from the publication on
  EXPECT_FALSE(has<ApplyPgConfig>(read));
}

// A fence that fails publishes nothing; nor does a read of another run of postgres.
TEST(PeerQuorum, NoReportWithoutAConfirmedFenceOfTheRunThatIsRead) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}), {"p", "me", "b"});
  h.active({"me", "b"});
  auto failed = h.step(PgFenced{false, "timeout", 0});
  EXPECT_FALSE(has<PublishReport>(failed));
  EXPECT_FALSE(has<ReadWal>(failed));
  auto again = h.step(TimerFired{TimerId::kRetryEvaluation});
  ASSERT_TRUE(has<FencePg>(again));
  h.step(PgFenced{true, "", 11});
  auto restarted = h.step(WalPositionRead{WalPosition(0x2000), "", 12, kHistory});  // postgres restarted
  EXPECT_FALSE(has<PublishReport>(restarted));
  EXPECT_TRUE(has<FencePg>(restarted));
}

// 4.3: with fewer than q = N - k + 1 reports nobody takes over, and inspect() says why.
TEST(PeerQuorum, TooFewReportsMeansNoTakeoverAndInspectSaysWhichAreMissing) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}, {"c"}), {"p", "me", "b", "c"});
  auto waiting = h.reported({"me", "c"}, 0x2000, 5);  // b is gone too
  EXPECT_FALSE(has<WriteClusterState>(waiting));
  EXPECT_FALSE(has<ApplyPgConfig>(waiting));  // the fence stays
  EXPECT_TRUE(logged(waiting, "2 of 2 member reports needed"));
  const auto q = h.peer.inspect()["quorum"];
  EXPECT_EQ(q["mode"], "quorum");
  EXPECT_EQ(q["readQuorum"], 2);
  EXPECT_NE(q["waiting"].get<std::string>().find("b is gone"), std::string::npos) << q.dump();
  EXPECT_EQ(q["mine"]["wal"], WalPosition(0x2000).toString());
  EXPECT_TRUE(h.peer.keepsFence());
}

// 4.3, 4.4, 4.5: the member with the most WAL writes the next generation naming itself,
// checking every report it counted; it promotes once the write landed, and withdraws
// its report without waiting for that.
TEST(PeerQuorum, TheTakerWritesWithAChecksPerCountedReportAndPromotes) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}, {"c"}), {"p", "me", "b", "c"});
  auto mine = h.reported({"me", "b", "c"}, 0x2000, 5);
  EXPECT_FALSE(has<WriteClusterState>(mine));  // b has not reported yet
  auto decided = h.active({"me", "b", "c"}, {{"b", memberReport(0x1800, 3)}});
  auto writes = only<WriteClusterState>(decided);
  ASSERT_EQ(writes.size(), 1u);
  const WriteClusterState& w = writes[0];
  EXPECT_EQ(w.expectedVersion, 4);
  EXPECT_EQ(w.checks, (std::vector<ElectionNodeCheck>{{"me", 5}, {"b", 3}}));
  EXPECT_EQ(w.state.generation, 8);
  EXPECT_EQ(w.state.primary.id, "me");
  EXPECT_EQ(w.state.initWal, WalPosition(0x2000));  // j = 1: the highest report
  EXPECT_EQ(w.state.initTimeline, 3);
  ASSERT_TRUE(w.state.quorum);
  EXPECT_EQ(peerIds(w.state.quorum->members), "b, c");
  EXPECT_EQ(peerIds(w.state.deposed), "p");
  EXPECT_FALSE(has<ApplyPgConfig>(decided));

  auto landed = h.step(StateWriteFinished{true, "", false, 5});
  EXPECT_EQ(h.peer.role(), Role::kPrimary);
  auto apply = only<ApplyPgConfig>(landed);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kPrimary);
  ASSERT_TRUE(apply[0].config.quorum);
  EXPECT_EQ(apply[0].config.quorum->k, 1);
  EXPECT_EQ(peerIds(apply[0].config.quorum->members), "b, c");
  EXPECT_FALSE(apply[0].config.downstream);
  auto withdraw = only<PublishReport>(landed);
  ASSERT_EQ(withdraw.size(), 1u);
  EXPECT_FALSE(withdraw[0].report);
  h.step(ReportPublished{true, "", 6});
  EXPECT_FALSE(h.peer.keepsFence());
}

// 4.3, 4.5: a member that is not the taker keeps its fence until the state names the
// taker; then it withdraws its report, and only once that is confirmed follows it.
TEST(PeerQuorum, ANonTakerWaitsThenWithdrawsItsReportBeforeItFollows) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}, {"c"}), {"p", "me", "b", "c"});
  auto waiting = h.reported({"me", "b", "c"}, 0x1800, 5, {{"b", memberReport(0x2000, 3)}});
  EXPECT_FALSE(has<WriteClusterState>(waiting));
  EXPECT_FALSE(has<ApplyPgConfig>(waiting));
  EXPECT_TRUE(logged(waiting, "waiting for b to write"));
  EXPECT_NE(h.peer.inspect()["quorum"]["waiting"].get<std::string>().find("b takes over"), std::string::npos);

  ClusterState next = memberQuorumState(1, {"me", "c"}, {}, "b");
  next.generation = 8;
  next.deposed = peers({"p"});
  auto follow = h.step(ClusterStateChanged{node(next, 5)});
  EXPECT_EQ(h.peer.role(), Role::kSync);
  auto withdraw = only<PublishReport>(follow);
  ASSERT_EQ(withdraw.size(), 1u);
  EXPECT_FALSE(withdraw[0].report);
  EXPECT_FALSE(has<ApplyPgConfig>(follow));  // not before the withdrawal is confirmed
  EXPECT_TRUE(h.peer.keepsFence());

  auto withdrawn = h.step(ReportPublished{true, "", 6});
  auto apply = only<ApplyPgConfig>(withdrawn);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.role, PgRole::kSync);
  EXPECT_EQ(apply[0].config.upstream->id, "b");
  EXPECT_FALSE(h.peer.keepsFence());
}

// 4.5: the primary back, the takeover is abandoned: withdraw, then lift the fence.
TEST(PeerQuorum, ThePrimaryBackAbandonsTheTakeoverWithdrawingFirst) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}), {"p", "me", "b"});
  h.reported({"me"}, 0x2000, 5);
  auto back = h.active({"p", "me", "b"});
  ASSERT_EQ(only<PublishReport>(back).size(), 1u);
  EXPECT_FALSE(has<ApplyPgConfig>(back));
  auto lifted = h.step(ReportPublished{true, "", 6});
  ASSERT_EQ(only<ApplyPgConfig>(lifted).size(), 1u);
  EXPECT_TRUE(h.peer.inspect()["quorum"]["mine"].is_null());
}

// 4.4: a write whose checked report changed fails as a lost race: the member keeps its
// fence and decides again, after the retry's wait, on the reports as they are then.
TEST(PeerQuorum, ALostRaceKeepsTheFenceAndDecidesAgainOnNews) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}), {"p", "me", "b"});
  h.reported({"me", "b"}, 0x2000, 5);
  ASSERT_EQ(only<WriteClusterState>(h.active({"me", "b"}, {{"b", memberReport(0x1800, 3)}})).size(), 1u);
  auto lost = h.step(StateWriteFinished{false, "a checked node changed", true, -1});
  EXPECT_FALSE(has<ApplyPgConfig>(lost));
  EXPECT_FALSE(has<WriteClusterState>(lost));
  EXPECT_FALSE(has<WriteClusterState>(h.active({"me", "b"}, {{"b", memberReport(0x1800, 4)}})));  // b published again
  auto writes = only<WriteClusterState>(h.step(TimerFired{TimerId::kRetryEvaluation}));  // after the retry's wait
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].checks, (std::vector<ElectionNodeCheck>{{"me", 5}, {"b", 4}}));
}

// 4.7, a member that is gone before its promotion: the best gone, the others decide
// again without it, on the reports that remain (here too few: k = 1 of 2).
TEST(PeerQuorum, TheBestGoneBeforeItWritesLeavesTooFewReports) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}), {"p", "me", "b"});
  h.reported({"me", "b"}, 0x1800, 5, {{"b", memberReport(0x2000, 3)}});
  auto gone = h.active({"me"});
  EXPECT_FALSE(has<WriteClusterState>(gone));
  EXPECT_TRUE(logged(gone, "b is gone"));
}

// 4.7, promote requests: `role: "sync"` names any member in quorum mode; the members
// start a takeover with the primary present, and only the target may write.
TEST(PeerQuorum, APromoteRequestForAMemberStartsATakeoverThatOnlyItsTargetWrites) {
  Harness h;
  ClusterState s = memberQuorumState(1, {"b", "me"}, {"c"});
  s.promote = {{"id", "me"}, {"role", "sync"}, {"generation", 7}, {"expireTime", "2099-01-01T00:00:00Z"}};
  EXPECT_TRUE(has<FencePg>(h.member(s, {"p", "me", "b", "c"})));
  h.step(PgFenced{true, "", 11});
  h.step(WalPositionRead{WalPosition(0x2000), "", 11, kHistory});
  h.step(ReportPublished{true, "", 5});
  auto decided = h.active({"p", "me", "b", "c"}, {{"b", memberReport(0x2000, 3)}});  // tied: b first in set order
  auto writes = only<WriteClusterState>(decided);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.primary.id, "me");
  EXPECT_TRUE(writes[0].state.promote.is_null());

  ClusterState other = s;
  other.promote["id"] = "x";
  EXPECT_FALSE(validatePromote(other.promote, other, kT0));
  EXPECT_EQ(validatePromote(other.promote, other, kT0).error(),
            "promote request: \"x\" is not a member of the synchronous set");
}

// 4.7, freeze: a frozen cluster's members do not fence.
TEST(PeerQuorum, AFrozenClusterMemberDoesNotFence) {
  Harness h;
  ClusterState s = memberQuorumState(1, {"me", "b"});
  s.freeze = true;
  h.member(s, {"p", "me", "b"});
  auto gone = h.active({"me", "b"});
  EXPECT_FALSE(has<FencePg>(gone));
  EXPECT_TRUE(logged(gone, "frozen"));
}

// 4.2: an agent restarted with its session finds its report in its election node: it
// stands, so the fence is kept until it is withdrawn.
TEST(PeerQuorum, AReportFoundByANewStateMachineIsWithdrawnBeforeAnyApply) {
  Harness h;
  h.step(PgInitialized{true, true});
  auto start = h.step(ZkInitialized{node(memberQuorumState(1, {"me", "b"}), 4), peers({"p", "me", "b"}), {}, true, {},
                                    {{"me", memberReport(0x2000, 9)}}});
  EXPECT_TRUE(h.peer.keepsFence());
  EXPECT_TRUE(logged(start, "found this member's takeover report"));
  EXPECT_EQ(only<PublishReport>(start).size(), 1u);
  EXPECT_FALSE(has<ApplyPgConfig>(start));
  EXPECT_TRUE(has<ApplyPgConfig>(h.step(ReportPublished{true, "", 10})));
}

// A publication that fails leaves a report that may stand: the fence stays, and the
// member publishes again after the retry.
TEST(PeerQuorum, AFailedPublicationKeepsTheFenceAndPublishesAgain) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}), {"p", "me", "b"});
  h.active({"me", "b"});
  h.step(PgFenced{true, "", 11});
  h.step(WalPositionRead{WalPosition(0x2000), "", 11, kHistory});
  auto failed = h.step(ReportPublished{false, "connection loss", -1});
  EXPECT_TRUE(h.peer.keepsFence());
  EXPECT_FALSE(has<PublishReport>(failed));
  EXPECT_FALSE(has<ApplyPgConfig>(failed));
  auto retry = h.step(TimerFired{TimerId::kRetryEvaluation});
  EXPECT_TRUE(has<ReadWal>(retry));  // read again under the same fence, then published
  auto publish = only<PublishReport>(h.step(WalPositionRead{WalPosition(0x2000), "", 11, kHistory}));
  ASSERT_EQ(publish.size(), 1u);
  EXPECT_TRUE(publish[0].report);
}

// A report that stands across a session expiry: the new session writes it into its new
// election node, whose version is not the one the old node's publication was answered
// with. The report counts as unpublished until published again, so the member's write
// checks its new node's version, not the old one (which would fail every time).
TEST(PeerQuorum, AReportStandingAcrossANewSessionIsPublishedAgainBeforeItIsCounted) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}), {"p", "me", "b"});
  h.reported({"me", "b"}, 0x2000, 5);  // b has not reported yet
  EXPECT_EQ(h.peer.inspect()["quorum"]["mine"]["wal"], WalPosition(0x2000).toString());
  // The session expired; the new one (not kept) holds the report at its node's version 1.
  auto renewed = h.step(ZkInitialized{node(memberQuorumState(1, {"me", "b"}), 4), peers({"me", "b"}), {}, false, {},
                                      {{"me", memberReport(0x2000, 1)}, {"b", memberReport(0x1800, 3)}}});
  for (const auto& w : only<WriteClusterState>(renewed)) {
    EXPECT_NE(w.checks, (std::vector<ElectionNodeCheck>{{"me", 5}, {"b", 3}})) << "a check of the old node's version";
  }
  EXPECT_FALSE(has<WriteClusterState>(renewed));
  EXPECT_TRUE(h.peer.keepsFence());  // the report stands meanwhile
  EXPECT_FALSE(has<ApplyPgConfig>(renewed));
  // Published again (its fence and its read are those of the same run of postgres).
  std::vector<Action> read = renewed;
  if (has<ReadWal>(read)) read = h.step(WalPositionRead{WalPosition(0x2000), "", 11, kHistory});
  auto publish = only<PublishReport>(read);
  ASSERT_EQ(publish.size(), 1u);
  ASSERT_TRUE(publish[0].report);
  EXPECT_EQ(publish[0].report->wal, WalPosition(0x2000));
  auto writes = only<WriteClusterState>(h.step(ReportPublished{true, "", 2}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].checks, (std::vector<ElectionNodeCheck>{{"me", 2}, {"b", 3}}));
}

// A session re-attached by a restarted agent is the same session and node: a report this
// run published keeps its version there.
TEST(PeerQuorum, AReportKeepsItsVersionInAKeptSession) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}), {"p", "me", "b"});
  h.reported({"me", "b"}, 0x2000, 5);
  auto kept = h.step(ZkInitialized{node(memberQuorumState(1, {"me", "b"}), 4), peers({"me", "b"}), {}, true, {},
                                   {{"me", memberReport(0x2000, 5)}, {"b", memberReport(0x1800, 3)}}});
  EXPECT_FALSE(has<PublishReport>(kept));
  auto writes = only<WriteClusterState>(kept);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].checks, (std::vector<ElectionNodeCheck>{{"me", 5}, {"b", 3}}));
}

// An async of a format-2 state streams from the first member (async[0]) or the async
// before it.
TEST(PeerQuorum, TheAsyncChainHangsFromTheFirstMember) {
  Harness h;
  auto start = h.member(memberQuorumState(1, {"b", "c"}, {"me", "d"}), {"p", "b", "c", "me", "d"});
  EXPECT_EQ(h.peer.role(), Role::kAsync);
  auto apply = only<ApplyPgConfig>(start);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_EQ(apply[0].config.upstream->id, "b");
  Harness second(ident("d"));
  auto d = second.member(memberQuorumState(1, {"b", "c"}, {"me", "d"}), {"p", "b", "c", "me", "d"});
  EXPECT_EQ(only<ApplyPgConfig>(d)[0].config.upstream->id, "me");
}

// 5.1: removing a gone member makes postgres acknowledge less easily: the primary
// reloads the new rule and fences (catch-up) first, and writes after.
TEST(PeerQuorum, ThePrimaryRemovesAGoneMemberFencingBeforeItWrites) {
  Harness h;
  auto start = h.primary(memberQuorumState(1, {"a", "b", "c"}, {}, "me"), {"me", "a", "b"});
  auto fence = only<FencePg>(start);
  ASSERT_EQ(fence.size(), 1u);
  ASSERT_TRUE(fence[0].quorum);
  EXPECT_EQ(peerIds(fence[0].quorum->members), "a, b");
  EXPECT_FALSE(fence[0].endWalsenders);
  EXPECT_FALSE(has<WriteClusterState>(start));
  auto fenced = h.step(PgFenced{true, "", 3});
  auto writes = only<WriteClusterState>(fenced);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(peerIds(writes[0].state.quorum->members), "a, b");
  EXPECT_TRUE(writes[0].checks.empty());
  EXPECT_NE(h.peer.inspect()["quorum"]["step"].get<std::string>().find("c is gone"), std::string::npos);
  auto landed = h.step(StateWriteFinished{true, "", false, 5});
  EXPECT_EQ(appliedRule(landed), "ANY 1 (a, b)");
}

// 5.2: a step's fence that fails is undone by applying the state's rule; the step is
// planned again after the retry.
TEST(PeerQuorum, AStepsFenceThatFailsIsUndoneByTheStatesRule) {
  Harness h;
  h.primary(memberQuorumState(1, {"a", "b", "c"}, {}, "me"), {"me", "a", "b"});
  auto failed = h.step(PgFenced{false, "a did not catch up", 3});
  EXPECT_EQ(appliedRule(failed), "ANY 1 (a, b, c)");
  EXPECT_FALSE(has<WriteClusterState>(failed));
  h.step(PgConfigApplied{true, "", true});
  EXPECT_TRUE(has<FencePg>(h.step(TimerFired{TimerId::kRetryEvaluation})));
}

// 5.1: adding a member makes postgres acknowledge more easily: written first, reloaded
// once the write has landed.
TEST(PeerQuorum, ThePrimaryAddsAMemberWritingBeforeItReloads) {
  Harness h;
  auto start = h.primary(memberQuorumState(1, {"a"}, {"c"}, "me"), {"me", "a", "c"});
  EXPECT_FALSE(has<WriteClusterState>(start));  // the state's own size: nothing wanted
  auto wanted = h.step(ReplicationWanted{ReplicationMode::kQuorum, 1, 2});
  auto writes = only<WriteClusterState>(wanted);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(peerIds(writes[0].state.quorum->members), "a, c");
  EXPECT_TRUE(writes[0].state.async.empty());
  EXPECT_FALSE(has<FencePg>(wanted));
  EXPECT_FALSE(has<ApplyPgConfig>(wanted));
  auto landed = h.step(StateWriteFinished{true, "", false, 5});
  EXPECT_EQ(appliedRule(landed), "ANY 1 (a, c)");
}

// 5.3: a member the primary's agent says acknowledges nothing is removed (fenced first),
// and goes last in the async chain.
TEST(PeerQuorum, AMemberThatAcknowledgesNothingIsRemoved) {
  Harness h;
  h.primary(memberQuorumState(1, {"a", "b"}, {"c"}, "me"), {"me", "a", "b", "c"});
  EXPECT_TRUE(h.step(SyncAcknowledgement{"x", false, "not a member"}).empty());
  auto stalled = h.step(SyncAcknowledgement{"b", false, "no walsender for 5 s"});
  auto fence = only<FencePg>(stalled);
  ASSERT_EQ(fence.size(), 1u);
  EXPECT_EQ(peerIds(fence[0].quorum->members), "a");
  EXPECT_EQ(h.peer.inspect()["quorum"]["acknowledgeNothing"]["b"], "no walsender for 5 s");
  auto writes = only<WriteClusterState>(h.step(PgFenced{true, "", 3}));
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(peerIds(writes[0].state.async), "c, b");
  h.step(StateWriteFinished{true, "", false, 5});
  EXPECT_FALSE(h.peer.inspect()["quorum"].contains("acknowledgeNothing"));  // no longer a member
  EXPECT_TRUE(h.step(SyncAcknowledgement{"b", true, ""}).empty());         // stale
}

// A member removed for acknowledging nothing is not added back while its link may still
// be held (a walsender that streams and acknowledges nothing looks like any streaming
// async): it is held back for syncReplaceHoldMs (5 s), doubled each time it is removed
// again within twice its hold, up to 64 times; then it is added back if it streams.
TEST(PeerQuorum, AMemberRemovedForAcknowledgingNothingIsHeldBackBeforeItIsAddedAgain) {
  Harness h;
  h.primary(memberQuorumState(1, {"a", "b"}, {}, "me"), {"me", "a", "b"});
  h.step(ReplicationWanted{ReplicationMode::kQuorum, 1, 2});
  // b stalls, is fenced out and the removal written (the node at `version`): the actions
  // of the write's answer.
  auto removeB = [&h](int32_t version) {
    h.step(SyncAcknowledgement{"b", false, "no walsender reply for 5 s"});
    auto fenced = h.step(PgFenced{true, "", 3});
    EXPECT_EQ(only<WriteClusterState>(fenced).size(), 1u);
    EXPECT_TRUE(logged(fenced, "b is not added back as a member before"));
    return h.step(StateWriteFinished{true, "", false, version});
  };
  auto removed = removeB(5);
  EXPECT_FALSE(has<WriteClusterState>(removed)) << "b, the only async, is not added back at once";
  EXPECT_EQ(h.peer.inspect()["quorum"]["heldBack"]["b"]["holdMs"], 5000);
  h.step(PgConfigApplied{true, "", true});
  h.now += 4000;
  EXPECT_FALSE(has<WriteClusterState>(h.step(TimerFired{TimerId::kRetryEvaluation})));
  h.now += 1000;
  auto added = only<WriteClusterState>(h.step(TimerFired{TimerId::kRetryEvaluation}));
  ASSERT_EQ(added.size(), 1u) << "held back no longer";
  EXPECT_EQ(peerIds(added[0].state.quorum->members), "a, b");
  h.step(StateWriteFinished{true, "", false, 6});
  h.step(PgConfigApplied{true, "", true});

  // Removed again within twice its hold: 10 s this time.
  h.now += 1000;
  removeB(7);
  EXPECT_EQ(h.peer.inspect()["quorum"]["heldBack"]["b"]["holdMs"], 10000);
  h.step(PgConfigApplied{true, "", true});
  h.now += 9000;
  EXPECT_FALSE(has<WriteClusterState>(h.step(TimerFired{TimerId::kRetryEvaluation})));
  h.now += 1000;
  EXPECT_EQ(only<WriteClusterState>(h.step(TimerFired{TimerId::kRetryEvaluation})).size(), 1u);
}

// A member that acknowledges again before its removal is written stays: the step's
// fence is lifted by the state's rule.
TEST(PeerQuorum, AMemberThatAcknowledgesAgainBeforeItsRemovalStays) {
  Harness h;
  h.primary(memberQuorumState(1, {"a", "b"}, {}, "me"), {"me", "a", "b"});
  ASSERT_TRUE(has<FencePg>(h.step(SyncAcknowledgement{"b", false, "stuck"})));
  EXPECT_TRUE(logged(h.step(SyncAcknowledgement{"b", true, ""}), "member b acknowledges commits again"));
  auto fenced = h.step(PgFenced{true, "", 3});
  EXPECT_FALSE(has<WriteClusterState>(fenced));
  EXPECT_EQ(appliedRule(fenced), "ANY 1 (a, b)");
}

// A request to promote an async waits in quorum mode (an async becomes a member by a
// step first) and expires.
TEST(PeerQuorum, APromoteRequestForAnAsyncIsNotCarriedOutInQuorumMode) {
  Harness h;
  ClusterState s = memberQuorumState(1, {"a", "b"}, {"c"}, "me");
  s.promote = {{"id", "c"}, {"role", "async"}, {"asyncIndex", 0}, {"generation", 7},
               {"expireTime", "2099-01-01T00:00:00Z"}};
  auto start = h.primary(s, {"me", "a", "b", "c"});
  EXPECT_FALSE(has<WriteClusterState>(start));
  EXPECT_TRUE(logged(start, "an async becomes a member by a membership step first"));
}

// A member reports only with its WAL's history.
TEST(PeerQuorum, AMemberWhoseHistoryIsNotKnownDoesNotReport) {
  Harness h;
  h.member(memberQuorumState(1, {"me", "b"}), {"p", "me", "b"});
  h.active({"me", "b"});
  h.step(PgFenced{true, "", 11});
  auto read = h.step(WalPositionRead{WalPosition(0x2000), "", 11, std::nullopt});
  EXPECT_FALSE(has<PublishReport>(read));
  EXPECT_TRUE(logged(read, "the timelines of this member's WAL are not known"));
}

// 5.3 step 6: quorum mode wanted on a sync-mode state: the sync re-encoded as
// ANY 1 (sync), written only; postgres then runs the same rule as a quorum.
TEST(PeerQuorum, QuorumModeWantedReencodesTheSyncModeState) {
  Harness h;
  ClusterState s = peer_test::cluster(7, "me", "a", {"c"});
  s.initWal = WalPosition(0x1000);
  h.primary(s, {"me", "a", "c"});
  EXPECT_EQ(h.peer.inspect()["quorum"]["mode"], "sync");
  auto wanted = h.step(ReplicationWanted{ReplicationMode::kQuorum, 1, 2});
  auto writes = only<WriteClusterState>(wanted);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].state.format(), 2);
  EXPECT_FALSE(writes[0].state.sync);
  EXPECT_EQ(peerIds(writes[0].state.quorum->members), "a");
  auto landed = h.step(StateWriteFinished{true, "", false, 5});
  auto apply = only<ApplyPgConfig>(landed);
  ASSERT_EQ(apply.size(), 1u);
  EXPECT_FALSE(apply[0].config.downstream);
  EXPECT_EQ(apply[0].config.quorum->k, 1);
}

// The primary of a format-2 state keeps the async chain (members hold no place in it),
// and removes an invalid promote request.
TEST(PeerQuorum, ThePrimaryKeepsTheChainAndRemovesAnInvalidPromoteRequest) {
  Harness h;
  auto start = h.primary(memberQuorumState(1, {"a", "b"}, {"c"}, "me"), {"me", "a", "b", "c", "d"});
  auto writes = only<WriteClusterState>(start);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(peerIds(writes[0].state.async), "c, d");
  h.step(StateWriteFinished{true, "", false, 5});

  Harness p;
  ClusterState s = memberQuorumState(1, {"a", "b"}, {}, "me");
  s.promote = {{"id", "zz"}, {"role", "sync"}, {"generation", 7}, {"expireTime", "2099-01-01T00:00:00Z"}};
  auto removed = only<WriteClusterState>(p.primary(s, {"me", "a", "b"}));
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_TRUE(removed[0].state.promote.is_null());
  EXPECT_NE(removed[0].reason.find("not a member"), std::string::npos);
}

// Sync mode is not quorum mode's: with the option off a format-2 state is refused as
// before, and a ReplicationWanted is ignored.
TEST(PeerQuorum, WithoutTheOptionReplicationWantedChangesNothing) {
  peer_test::Harness h;
  h.startAsPrimary(peer_test::cluster(7, "me", "a"), {"me", "a"});
  h.applied(true);
  EXPECT_TRUE(h.step(ReplicationWanted{ReplicationMode::kQuorum, 1, 2}).empty());
  EXPECT_FALSE(h.peer.inspect().contains("quorum"));
}

}  // namespace
}  // namespace dugong
