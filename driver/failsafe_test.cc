// The failsafe's pure rules (driver/failsafe.h).
#include "driver/failsafe.h"

#include <gtest/gtest.h>

namespace dugong::driver {
namespace {

PeerIdentity peer(const std::string& id) {
  PeerIdentity p;
  p.id = id;
  return p;
}

class FailsafeGrantTest : public ::testing::Test {
 protected:
  FailsafeGrantTest() {
    state_.generation = 4;
    state_.primary = peer("node1");
    state_.sync = peer("node2");
    state_.async = {peer("node3")};
    view_.enabled = true;
    view_.selfId = "node2";
    view_.state = &state_;
    view_.leaseInUse = true;
    view_.reachesZooKeeper = false;
  }
  FailsafeAnswer ask(int64_t generation = 4, const std::string& primary = "node1", int64_t ms = 9000) const {
    return decideFailsafeGrant(FailsafeRequest{generation, primary, ms}, view_);
  }

  ClusterState state_;
  FailsafeGranterView view_;
};

TEST_F(FailsafeGrantTest, TheSyncThatReachesNoZooKeeperPromises) {
  const FailsafeAnswer a = ask();
  EXPECT_TRUE(a.granted) << a.reason;
  EXPECT_NE(a.reason.find("9000 ms"), std::string::npos) << a.reason;
}

// A promise longer than the granter would hold at a restart with no record of it (its
// own failsafe length) is refused (review of 2f035ac, finding 1).
TEST_F(FailsafeGrantTest, NoPromiseLongerThanTheGrantersOwn) {
  view_.maxDurationMs = 10000;
  const FailsafeAnswer a = ask(4, "node1", 30000);
  EXPECT_FALSE(a.granted);
  EXPECT_NE(a.reason.find("longer than this peer's own (10000 ms"), std::string::npos) << a.reason;
  EXPECT_FALSE(ask(4, "node1", 10001).granted);
  EXPECT_TRUE(ask(4, "node1", 10000).granted);
}

TEST_F(FailsafeGrantTest, ASyncThatReachesZooKeeperPromisesNothing) {
  view_.reachesZooKeeper = true;
  const FailsafeAnswer a = ask();
  EXPECT_FALSE(a.granted);
  EXPECT_NE(a.reason.find("reaches ZooKeeper"), std::string::npos) << a.reason;
}

TEST_F(FailsafeGrantTest, NoPromiseWithoutRoundTripsToJudgeItsReachBy) {
  view_.leaseInUse = false;
  EXPECT_FALSE(ask().granted);
}

TEST_F(FailsafeGrantTest, NoPromiseForAnotherGenerationOrPrimary) {
  EXPECT_FALSE(ask(3).granted);
  EXPECT_FALSE(ask(5).granted);
  EXPECT_FALSE(ask(4, "node3").granted);
}

TEST_F(FailsafeGrantTest, NoPromiseFromAPeerThatIsNotTheSync) {
  view_.selfId = "node3";
  EXPECT_FALSE(ask().granted);
  state_.sync.reset();  // one-node-write mode: nobody to ask
  view_.selfId = "node2";
  EXPECT_FALSE(ask().granted);
}

TEST_F(FailsafeGrantTest, NoPromiseOnceTakingOver) {
  view_.takingOver = true;
  const FailsafeAnswer a = ask();
  EXPECT_FALSE(a.granted);
  EXPECT_NE(a.reason.find("taking over"), std::string::npos) << a.reason;
}

TEST_F(FailsafeGrantTest, NoPromiseWhenOffOrWithoutAStateOrOutOfBounds) {
  EXPECT_FALSE(ask(4, "node1", 0).granted);
  EXPECT_FALSE(ask(4, "node1", kFailsafeMaxDurationMs + 1).granted);
  EXPECT_TRUE(ask(4, "node1", kFailsafeMaxDurationMs).granted);
  view_.state = nullptr;
  EXPECT_FALSE(ask().granted);
  view_.state = &state_;
  view_.enabled = false;
  EXPECT_FALSE(ask().granted);
}

// Quorum mode (docs/decisions/0079 4.7): any member can take over, so every member of the
// generation's set promises as the sync does; a peer outside the set does not.
TEST_F(FailsafeGrantTest, InQuorumModeEachMemberOfTheSetPromisesAndNoOtherPeer) {
  state_.sync.reset();
  state_.async.clear();
  state_.quorum = Quorum{2, {peer("node2"), peer("node3"), peer("node4")}};
  for (const char* member : {"node2", "node3", "node4"}) {
    view_.selfId = member;
    EXPECT_TRUE(ask().granted) << member << ": " << ask().reason;
  }
  view_.selfId = "node5";
  const FailsafeAnswer a = ask();
  EXPECT_FALSE(a.granted);
  EXPECT_EQ(a.reason, "this peer is not a member of generation 4's synchronous set");
  view_.selfId = "node3";
  EXPECT_FALSE(ask(4, "node2").granted);
}

TEST(FailsafePromise, OnlyEverExtends) {
  EXPECT_EQ(extendPromise(std::nullopt, 1000, 9000), 10000);
  EXPECT_EQ(extendPromise(10000, 4000, 9000), 13000);
  EXPECT_EQ(extendPromise(13000, 2000, 9000), 13000) << "a request that arrives late shortened the promise";
  EXPECT_EQ(extendPromise(13000, 3000, 5000), 13000) << "a shorter promise shortened it";
}

// The permission ends before the promise can, however late the request arrived and
// whatever the two clocks' rates within 1 %: D - D/100 - stopMargin after the send.
TEST(FailsafePermission, EndsBeforeThePromiseTimedFromTheSend) {
  EXPECT_EQ(failsafePermissionEndMs(1000, 9000, 300), 1000 + 9000 - 90 - 300);
  EXPECT_EQ(failsafePermissionEndMs(0, 4000, 300), 4000 - 40 - 300);
  // The promise runs from the request's arrival, at or after its send: for any arrival
  // and any rate within 1 %, the sync's D outlasts the permission.
  for (int64_t arrival : {0, 1, 500, 3000}) {
    const int64_t promiseEnd = arrival + 4000 * 99 / 100;  // the sync's clock 1 % fast
    EXPECT_LT(failsafePermissionEndMs(0, 4000, 300), promiseEnd) << arrival;
  }
}

TEST(FailsafeReach, ARoundTripLateByHalfAnIntervalMeansOutOfReach) {
  EXPECT_TRUE(reachesZooKeeper(1000, 400, 1000 + 599));
  EXPECT_FALSE(reachesZooKeeper(1000, 400, 1000 + 600));
}

// The primary's permission in quorum mode is the k-th latest of its members' grants: until
// then at least k members promise, which leaves N - k, fewer than the N - k + 1 reports a
// takeover needs. In sync mode (k = 1), the sync's.
TEST(FailsafePermission, KthGrant) {
  EXPECT_EQ(kthLatestGrant({}, 1), std::nullopt);
  EXPECT_EQ(kthLatestGrant({5000}, 1), 5000);
  EXPECT_EQ(kthLatestGrant({5000}, 2), std::nullopt);
  EXPECT_EQ(kthLatestGrant({5000, 7000}, 1), 7000);
  EXPECT_EQ(kthLatestGrant({5000, 7000}, 2), 5000);
  EXPECT_EQ(kthLatestGrant({7000, 3000, 5000}, 2), 5000);
  EXPECT_EQ(kthLatestGrant({7000, 3000, 5000}, 3), 3000);
  EXPECT_EQ(kthLatestGrant({7000, 3000, 5000}, 0), std::nullopt);
}

}  // namespace
}  // namespace dugong::driver
