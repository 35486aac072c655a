// The driver on a hand-driven environment (driver/driver_test_support.h).
#include "driver/driver.h"

#include <gtest/gtest.h>

#include "driver/driver_test_support.h"

namespace dugong::agent {
namespace {

using namespace dugong::agent::testing;  // NOLINT(google-build-using-namespace)

// The role counts as applied (the agent's /primary answers 200 on it) only once
// postgres runs that role's configuration: a one-node-write peer's first apply, of role
// none, is not its role primary, and its primary's apply (initdb, the roles and their
// passwords) must end before a client is sent there. Failed in CI: /primary answered 200
// before the passwords were set.
TEST_F(DriverTest, ARoleIsAppliedOnlyByAnApplyOfItsOwnConfiguration) {
  singleton_ = true;
  makeDriver(RejoinPolicy::kFollow);
  ASSERT_TRUE(driver_->start());
  pg_.inits.front()(PgInitialized{false, false});
  pg_.inits.pop_front();
  coordinator_.deliver(ZkInitialized{StateNode{}, active({"node1"})});
  clock_.advance(0);
  ASSERT_TRUE(coordinator_.pendingWrite);
  (*std::exchange(coordinator_.pendingWrite, std::nullopt))(StateWriteFinished{true, "", false, 0});
  clock_.advance(0);
  ASSERT_EQ(driver_->peer().role(), Role::kPrimary);
  while (!pg_.applies.empty() && pg_.applies.front().first.role != PgRole::kPrimary) {
    pg_.finishApply(true);
    clock_.advance(0);
    EXPECT_NE(driver_->appliedRole(), Role::kPrimary) << "an apply of role none made the role primary applied";
  }
  ASSERT_EQ(pg_.applies.size(), 1u);
  EXPECT_NE(driver_->appliedRole(), Role::kPrimary) << "the primary's apply is still in flight";
  pg_.finishApply(true);
  clock_.advance(0);
  EXPECT_EQ(driver_->appliedRole(), Role::kPrimary);
}

// A standby reports that it streams in its role (dugong-adm's rolling restart waits for
// that) only while postgres runs the configuration the state machine wants: not between
// a change of its upstream and the end of the apply that follows it.
TEST_F(DriverTest, RunsTheWantedConfigurationOnlyOnceTheApplyOfANewUpstreamEnds) {
  startAsAsync();
  EXPECT_TRUE(driver_->runsWantedConfig());
  // A fourth peer ahead of node1 in the chain: node1's upstream changes, its role does not.
  ClusterState next = state_;
  next.async = {peerId("node4"), peerId("node1")};
  coordinator_.deliver(ClusterStateChanged{stateNode(next, 1)});
  EXPECT_FALSE(driver_->runsWantedConfig()) << "the new upstream is not applied yet";
  clock_.advance(0);
  ASSERT_EQ(pg_.applies.size(), 1u);
  EXPECT_EQ(pg_.applies.front().first.upstream->id, "node4");
  EXPECT_EQ(driver_->appliedRole(), Role::kAsync);
  EXPECT_FALSE(driver_->runsWantedConfig()) << "its apply is in flight";
  pg_.finishApply(true);
  clock_.advance(0);
  EXPECT_TRUE(driver_->runsWantedConfig());
}

TEST_F(DriverTest, QueuesTheStateMachinesApplyBehindARestart) {
  startAsAsync();
  pg_.health(false, "connection refused");
  clock_.advance(3500);
  ASSERT_EQ(pg_.applies.size(), 1u);  // the restart, as async
  // Meanwhile node1 becomes the sync.
  ClusterState next = state_;
  next.generation = 2;
  next.primary = peerId("node2");
  next.sync = peerId("node1");
  next.async = {peerId("node3")};
  coordinator_.deliver(ClusterStateChanged{stateNode(next, 1)});
  clock_.advance(0);
  EXPECT_EQ(pg_.applies.size(), 1u) << "two postgres transitions at once";
  EXPECT_TRUE(driver_->applyQueued());
  EXPECT_EQ(pg_.finishApply(true).role, PgRole::kAsync);
  ASSERT_EQ(pg_.applies.size(), 1u);
  EXPECT_EQ(pg_.applies.front().first.role, PgRole::kSync);
  EXPECT_FALSE(driver_->applyQueued());
  pg_.finishApply(true);
  EXPECT_EQ(driver_->peer().role(), Role::kSync);
}

TEST_F(DriverTest, StartsAFreshStateMachineOnceRebuilt) {
  ASSERT_TRUE(driver_->start());
  pg_.inits.front()(PgInitialized{true, true});
  pg_.inits.pop_front();
  state_.generation = 3;
  state_.primary = peerId("node2");
  state_.sync = peerId("node3");
  state_.deposed = {peerId("node1")};
  coordinator_.deliver(ZkInitialized{stateNode(state_, 4), active({"node2", "node3", "node1"})});
  clock_.advance(0);
  ASSERT_EQ(driver_->peer().role(), Role::kDeposed);
  ASSERT_EQ(pg_.applies.size(), 1u);  // a deposed peer stops its postgres
  EXPECT_EQ(pg_.finishApply(true).role, PgRole::kNone);
  // The operator rebuilt node1 (dugong-adm rebuild) and moved it to the asyncs.
  ClusterState rebuilt = state_;
  rebuilt.deposed.clear();
  rebuilt.async = {peerId("node1")};
  coordinator_.deliver(ClusterStateChanged{stateNode(rebuilt, 5)});
  EXPECT_EQ(driver_->counters().freshStateMachines, 1u);
  ASSERT_EQ(pg_.inits.size(), 1u) << "the fresh state machine looks at postgres again";
  pg_.inits.front()(PgInitialized{false, true});
  pg_.inits.pop_front();
  clock_.advance(0);
  ASSERT_EQ(pg_.applies.size(), 1u);
  EXPECT_EQ(pg_.finishApply(true).role, PgRole::kAsync);
  EXPECT_EQ(driver_->peer().role(), Role::kAsync);
}

// The rebuild is seen while the deposed peer is still stopping postgres, and no state
// change follows: the fresh state machine starts when the transition ends.
TEST_F(DriverTest, StartsAFreshStateMachineWhenTheTransitionDuringTheRebuildEnds) {
  ASSERT_TRUE(driver_->start());
  pg_.inits.front()(PgInitialized{true, true});
  pg_.inits.pop_front();
  state_.generation = 3;
  state_.primary = peerId("node2");
  state_.sync = peerId("node3");
  state_.deposed = {peerId("node1")};
  coordinator_.deliver(ZkInitialized{stateNode(state_, 4), active({"node2", "node3", "node1"})});
  clock_.advance(0);
  ASSERT_EQ(pg_.applies.size(), 1u);  // stopping postgres, still in flight
  ClusterState rebuilt = state_;
  rebuilt.deposed.clear();
  rebuilt.async = {peerId("node1")};
  coordinator_.deliver(ClusterStateChanged{stateNode(rebuilt, 5)});
  EXPECT_EQ(driver_->counters().freshStateMachines, 0u);
  EXPECT_EQ(pg_.finishApply(true).role, PgRole::kNone);
  EXPECT_EQ(driver_->counters().freshStateMachines, 1u) << "the rebuilt peer stays deposed";
  ASSERT_EQ(pg_.inits.size(), 1u);
}

// ---- the primary's lease -----------------------------------------------------

TEST(LeaseDeadline, EachTermIsTakenOffTheSessionTimeout) {
  LeaseTerms t;
  t.tickTimeMs = 2000;
  t.stopMarginMs = 300;
  EXPECT_EQ(leaseDeadlineMs(1000, 10000, 1000, t), 1000 + 10000 - 2000 - 1000 - 100 - 300);
  t.tickTimeMs = 0;  // unknown: half the session timeout
  EXPECT_EQ(leaseLengthMs(4000, 400, t), 4000 - 2000 - 400 - 40 - 300);
  EXPECT_LE(leaseLengthMs(1000, 100, t), 100) << "a short session leaves (almost) no lease";
}

// ---- the isolated primary ------------------------------------------------

// A primary's takeover (its sync was gone) is in flight when ZooKeeper goes; on the new
// session the sync is back, so the state machine abandons the takeover and applies its
// configuration again, which starts postgres. That state was read on the new session, and
// a takeover by another peer may still land before this peer's test-and-set: writes stay
// stopped until the confirmation succeeds, as when nothing is applied.
TEST_F(DriverTest, AnApplyOfTheSameRoleOnTheNewSessionDoesNotResumeWritesBeforeTheConfirmation) {
  startAsPrimary();
  coordinator_.deliver(ActivePeersChanged{active({"node1", "node3"})});
  clock_.advance(0);
  fenceAndReadTheWalUntilTheStateWrite();
  ASSERT_EQ(coordinator_.writes.size(), 1u) << "the primary did not replace its sync";
  coordinator_.connection(false);
  pg_.stops.front()(0);
  pg_.stops.pop_front();
  (*coordinator_.pendingWrite)(StateWriteFinished{false, "connection loss", false, -1});
  coordinator_.pendingWrite.reset();
  clock_.advance(20000);
  ASSERT_EQ(pg_.shutdowns.size(), 1u);
  answerShutdowns();
  clock_.advance(0);
  ASSERT_TRUE(coordinator_.pendingWrite) << "no attempt to settle the takeover write of unknown outcome";
  EXPECT_EQ(coordinator_.writeVersions.back(), 1);
  (*coordinator_.pendingWrite)(StateWriteFinished{false, "session expired", false, -1});
  coordinator_.pendingWrite.reset();
  clock_.advance(0);
  coordinator_.deliver(ZkInitialized{stateNode(state_, 0), active({"node1", "node2", "node3"})});
  clock_.advance(0);
  while (!pg_.walReads.empty()) {  // the takeover's retry, on a postgres shut down
    pg_.walReads.front()(WalPositionRead{std::nullopt, "postgres is not running", 0});
    pg_.walReads.pop_front();
    clock_.advance(0);
  }
  ASSERT_EQ(pg_.applies.size(), 1u) << "the abandoned takeover's fence was not lifted";
  EXPECT_EQ(pg_.finishApply(true).role, PgRole::kPrimary);
  clock_.advance(0);
  EXPECT_TRUE(driver_->writesStopped()) << "writes resumed before the test-and-set confirmed that no takeover landed";
  while (coordinator_.pendingWrite && driver_->writesStopped()) {
    auto done = std::move(*coordinator_.pendingWrite);
    coordinator_.pendingWrite.reset();
    done(StateWriteFinished{true, "", false, static_cast<int32_t>(coordinator_.writes.size())});
    clock_.advance(0);
    while (!pg_.stops.empty()) {
      pg_.stops.front()(0);
      pg_.stops.pop_front();
    }
    while (!pg_.resumes.empty()) {
      pg_.resumes.front()(true);
      pg_.resumes.pop_front();
    }
    clock_.advance(0);
  }
  EXPECT_FALSE(driver_->writesStopped()) << "the confirmation did not resume writes";
}

// A sync loses ZooKeeper while its takeover write is in flight; the write lands and
// postgres is configured as primary during the outage. It is shut down at once: it was a
// sync at the loss, so no shutdown was planned then, and its session may expire any time
// (running on with writes stopped, it could acknowledge a local commit after the next
// takeover). The same session back: the new primary starts postgres and resumes.
TEST_F(DriverTest, ATakeoverThatLandedDuringTheOutageIsShutDownThenResumesOnTheSameSession) {
  ASSERT_NO_FATAL_FAILURE(takeoverLandsDuringAnOutageAndIsShutDown());
  coordinator_.connection(true);
  clock_.advance(0);
  ASSERT_NO_FATAL_FAILURE(startsAgainAsPrimaryAndResumes("on resumption"));
}

// The same with a new session (the old one expired meanwhile): the peer is the primary
// now, with postgres shut down as a primary's is, and confirms the state read on the new
// session as a primary does before postgres starts again (the role has changed since the
// loss: writes must not stay stopped for good).
TEST_F(DriverTest, ATakeoverThatLandedDuringTheOutageIsConfirmedOnANewSessionThenResumes) {
  ASSERT_NO_FATAL_FAILURE(takeoverLandsDuringAnOutageAndIsShutDown());
  ClusterState landed = coordinator_.writes.front();
  coordinator_.deliver(ZkInitialized{stateNode(landed, 1), active({"node1", "node3"})});
  clock_.advance(0);
  ASSERT_TRUE(coordinator_.pendingWrite) << "no confirmation of the state read on the new session";
  EXPECT_EQ(coordinator_.writeVersions.back(), 1);
  EXPECT_TRUE(pg_.applies.empty()) << "postgres started before the confirmation";
  (*std::exchange(coordinator_.pendingWrite, std::nullopt))(StateWriteFinished{true, "", false, 2});
  clock_.advance(0);
  ASSERT_NO_FATAL_FAILURE(startsAgainAsPrimaryAndResumes("after the confirmation"));
}

// The same when the state machine writes first on the new session (it removes an
// invalid promote request): the confirmation follows its write.
TEST_F(DriverTest, ATakeoverConfirmedOnANewSessionWaitsForTheStateMachinesWrite) {
  ASSERT_NO_FATAL_FAILURE(takeoverLandsDuringAnOutageAndIsShutDown());
  ClusterState landed = coordinator_.writes.front();
  landed.promote = {{"id", "node3"}, {"role", "sync"}, {"generation", 1}};  // of an older generation: invalid
  coordinator_.deliver(ZkInitialized{stateNode(landed, 1), active({"node1", "node3"})});
  clock_.advance(0);
  ASSERT_TRUE(coordinator_.pendingWrite);
  EXPECT_TRUE(coordinator_.writes.back().promote.is_null()) << "not the state machine's removal of the request";
  coordinator_.deliver(ClusterStateChanged{stateNode(coordinator_.writes.back(), 2)});  // its watch fires
  (*std::exchange(coordinator_.pendingWrite, std::nullopt))(StateWriteFinished{true, "", false, 2});
  clock_.advance(0);
  ASSERT_TRUE(coordinator_.pendingWrite) << "no confirmation after the state machine's write";
  EXPECT_EQ(coordinator_.writeVersions.back(), 2);
  (*std::exchange(coordinator_.pendingWrite, std::nullopt))(StateWriteFinished{true, "", false, 3});
  clock_.advance(0);
  ASSERT_NO_FATAL_FAILURE(startsAgainAsPrimaryAndResumes("after the confirmation"));
}

// A second new session comes while the state machine's write of the first is in flight
// (the agent left ZooKeeper and joined again at once: cluster simulator seed 41220): the
// confirmation the first session owed must still be written once that write is over, or
// the primary stays shut down for good with its session alive, and no peer takes over.
TEST_F(DriverTest, AConfirmationOwedIsWrittenAfterASecondNewSession) {
  startAsPrimary();
  coordinator_.connection(false);
  pg_.stops.front()(0);
  pg_.stops.pop_front();
  clock_.advance(20000);
  answerShutdowns();
  ClusterState withRequest = state_;
  withRequest.promote = {{"id", "node3"}, {"role", "sync"}, {"generation", 0}};  // invalid: removed at once
  coordinator_.deliver(ZkInitialized{stateNode(withRequest, 0), active({"node1", "node2", "node3"})});
  clock_.advance(0);
  ASSERT_TRUE(coordinator_.pendingWrite);
  ASSERT_TRUE(coordinator_.writes.back().promote.is_null()) << "not the state machine's removal of the request";
  auto removal = std::move(*std::exchange(coordinator_.pendingWrite, std::nullopt));
  // Another new session, which reads the removal landed, before the removal's answer.
  coordinator_.deliver(ZkInitialized{stateNode(state_, 1), active({"node1", "node2", "node3"})});
  clock_.advance(0);
  removal(StateWriteFinished{false, "session expired", false, -1});
  clock_.advance(0);
  ASSERT_TRUE(coordinator_.pendingWrite) << "the confirmation owed was never written";
  EXPECT_EQ(coordinator_.writeVersions.back(), 1);
  (*std::exchange(coordinator_.pendingWrite, std::nullopt))(StateWriteFinished{true, "", false, 2});
  clock_.advance(0);
  ASSERT_NO_FATAL_FAILURE(startsAgainAsPrimaryAndResumes("after the confirmation"));
}

// A ZooKeeper outage every peer saw: the primary's new session comes first, before its
// sync's. The sync is not treated as gone for a session timeout (no new generation);
// if it never comes back, it is gone after that.
TEST_F(DriverTest, AfterAnOutageAPeerNotYetBackIsNotTreatedAsGone) {
  startAsPrimary();
  coordinator_.connection(false);
  pg_.stops.front()(0);
  pg_.stops.pop_front();
  clock_.advance(15000);
  coordinator_.deliver(ZkInitialized{stateNode(state_, 0), active({"node1", "node3"})});
  ASSERT_EQ(coordinator_.writes.size(), 1u);  // the confirmation of the unchanged state
  (*coordinator_.pendingWrite)(StateWriteFinished{true, "", false, 1});
  clock_.advance(8000);
  EXPECT_TRUE(pg_.fences.empty() && coordinator_.writes.size() == 1u) << "the sync, not reconnected yet, was replaced";
  EXPECT_TRUE(logged("treating node2 as present"));
  coordinator_.deliver(ActivePeersChanged{active({"node1", "node3", "node2"})});
  clock_.advance(20000);
  EXPECT_TRUE(pg_.fences.empty() && coordinator_.writes.size() == 1u) << "a new generation although every peer came back";
  EXPECT_FALSE(driver_->writesStopped());
}

TEST_F(DriverTest, AfterAnOutageAPeerThatNeverComesBackIsGoneAfterASessionTimeout) {
  startAsPrimary();
  coordinator_.connection(false);
  pg_.stops.front()(0);
  pg_.stops.pop_front();
  clock_.advance(15000);
  answerShutdowns();
  coordinator_.deliver(ZkInitialized{stateNode(state_, 0), active({"node1", "node3"})});
  (*coordinator_.pendingWrite)(StateWriteFinished{true, "", false, 1});  // confirmed: postgres starts again
  clock_.advance(2000);
  ASSERT_EQ(pg_.applies.size(), 1u);
  EXPECT_EQ(pg_.finishApply(true).role, PgRole::kPrimary);
  clock_.advance(6999);
  EXPECT_TRUE(pg_.fences.empty()) << "the replacement of the sync began within the grace";
  clock_.advance(1);
  ASSERT_EQ(pg_.fences.size(), 1u) << "the sync that never came back was never replaced";
  pg_.fences.front()(PgFenced{true, "", 1});
  pg_.fences.pop_front();
  clock_.advance(0);
  ASSERT_EQ(pg_.walReads.size(), 1u);
  pg_.walReads.front()(WalPositionRead{WalPosition::parse("0/3000000").value(), "", 1});
  pg_.walReads.pop_front();
  clock_.advance(0);
  ASSERT_EQ(coordinator_.writes.size(), 2u);
  EXPECT_EQ(coordinator_.writes.back().sync->id, "node3");
  EXPECT_TRUE(logged("did not come back within a session timeout"));
}

// The sync's view of the same outage: back first, it does not take over from a primary
// that has not reconnected yet.
TEST_F(DriverTest, AfterAnOutageTheSyncDoesNotTakeOverFromAPrimaryNotYetBack) {
  ASSERT_NO_FATAL_FAILURE(startAsSync());
  coordinator_.connection(false);
  pg_.stops.front()(0);  // a standby: nothing to stop
  pg_.stops.pop_front();
  clock_.advance(15000);
  coordinator_.deliver(ZkInitialized{stateNode(state_, 0), active({"node1", "node3"})});
  clock_.advance(5000);
  EXPECT_TRUE(pg_.walReads.empty() && coordinator_.writes.empty())
      << "took over from a primary that had not reconnected yet";
  EXPECT_EQ(driver_->peer().role(), Role::kSync);
}

// The same with the lease in use and valid when the connection is lost (a loss by a
// closed connection, or a small tickTime): the sync is not isolated, but the peers
// present before the loss still count as present for a session timeout after the new
// session (review of 2f035ac, finding 3).
TEST_F(DriverTest, AfterAnOutageTheSyncUnderALeaseDoesNotTakeOverFromAPrimaryNotYetBack) {
  ASSERT_NO_FATAL_FAILURE(startAsSync());
  coordinator_.lease(clock_.monotonicMs());
  clock_.advance(0);
  coordinator_.connection(false);
  answerStops();
  clock_.advance(15000);
  coordinator_.deliver(ZkInitialized{stateNode(state_, 0), active({"node1", "node3"})});
  clock_.advance(9000 - 1);
  EXPECT_TRUE(pg_.walReads.empty() && pg_.fences.empty() && coordinator_.writes.empty())
      << "took over from a primary that had not reconnected yet";
  EXPECT_EQ(driver_->peer().role(), Role::kSync);
  clock_.advance(1);
  EXPECT_FALSE(pg_.walReads.empty() && pg_.fences.empty()) << "no takeover once the grace ended";
}

// Environments that do not model stopping writes answer at once with an error: the
// driver copes (no re-entrance), and logs it.
TEST(DriverDefaultPostgres, TheDefaultStopWritesAnswersAnError) {
  class MinimalPostgres : public Postgres {
   public:
    void init(std::function<void(PgInitialized)>) override {}
    void apply(const PgConfig&, std::function<void(PgConfigApplied)>) override {}
    void fence(const std::optional<PeerIdentity>&, std::function<void(PgFenced)>) override {}
    void readWal(std::function<void(WalPositionRead)>) override {}
    void startHealthCheck(std::function<void(bool, const std::string&)>) override {}
    void stopHealthCheck() override {}
  } pg;
  bool answered = false;
  pg.stopWrites([&](Result<int> r) {
    answered = true;
    EXPECT_FALSE(r);
  });
  EXPECT_TRUE(answered);
}

// ---- the automatic rejoin of a deposed peer -----------------------------------


}  // namespace
}  // namespace dugong::agent
