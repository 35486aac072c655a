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
