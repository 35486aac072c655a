// The driver's failsafe (driver/core_failsafe.cc) on a hand-driven environment: the
// primary's requests and the permission it writes under, the sync's promise and the
// takeover it holds back.
#include <gtest/gtest.h>

#include "driver/driver.h"
#include "driver/driver_test_support.h"

namespace dugong::agent {
namespace {

using namespace dugong::agent::testing;  // NOLINT(google-build-using-namespace)

class FailsafeDriverTest : public DriverTest {
 protected:
  FailsafeDriverTest() {
    failsafe_ = true;
    makeDriver(RejoinPolicy::kFollow);
  }
  FailsafeAnswer granted() { return FailsafeAnswer{true, "promised"}; }
  FailsafeAnswer refused() { return FailsafeAnswer{false, "this peer reaches ZooKeeper"}; }
  // Answers every request asked so far with `a`.
  void answerAll(const FailsafeAnswer& a) {
    while (!peers_.asks.empty()) peers_.answer(a);
    clock_.advance(0);
  }
  // Moves the clock on to `at`, answering every request on the way with `a`.
  void runUntil(int64_t at, const FailsafeAnswer& a) {
    while (clock_.monotonicMs() < at) {
      clock_.advance(std::min<int64_t>(10, at - clock_.monotonicMs()));
      answerAll(a);
    }
  }
  // Answers the WAL reads the takeover's evaluation asks for before its fence.
  void answerWalReads() {
    while (!pg_.walReads.empty()) {
      pg_.walReads.front()(WalPositionRead{WalPosition::parse("0/5000000").value(), "", 1});
      pg_.walReads.pop_front();
      clock_.advance(0);
    }
  }
  // node1, the sync, no longer reaches ZooKeeper (its last round trip sent at 0) and
  // its agent started long enough ago (the hold at its start is over).
  void syncOutOfReach() {
    startAsSync();
    for (int i = 0; i < 20; ++i) {
      coordinator_.lease(clock_.monotonicMs());
      clock_.advance(500);
    }
    clock_.advance(800);
  }
};

TEST_F(FailsafeDriverTest, APrimaryAsksItsSyncOnceARoundTripIsLateAndWritesOnUnderThePromise) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  clock_.advance(749);
  EXPECT_TRUE(peers_.asks.empty()) << "asked while the round trips come in time";
  clock_.advance(1);
  ASSERT_EQ(peers_.asks.size(), 1u);
  EXPECT_EQ(peers_.asks.front().to.id, "node2");
  EXPECT_EQ(peers_.asks.front().request.generation, 1);
  EXPECT_EQ(peers_.asks.front().request.primaryId, "node1");
  EXPECT_EQ(peers_.asks.front().request.durationMs, 9000);
  clock_.advance(10);
  peers_.answer(granted());
  clock_.advance(0);
  EXPECT_EQ(leaseDeadlines_.back(), t0 + 750 + kPermissionMs) << "the watchdog holds another end";
  EXPECT_TRUE(logged("promised not to take over"));
  // Renewed every 3000 ms while granted: writes go on past the lease's end.
  runUntil(t0 + 20000, granted());
  EXPECT_TRUE(pg_.stops.empty()) << "writes stopped under the promise";
  EXPECT_FALSE(driver_->writesStopped());
  // The last renewal granted was sent at 18750; the next ones are refused.
  EXPECT_EQ(leaseDeadlines_.back(), t0 + 18750 + kPermissionMs);
  runUntil(t0 + 18750 + kPermissionMs - 200 - 1, refused());
  EXPECT_TRUE(pg_.stops.empty());
  runUntil(t0 + 18750 + kPermissionMs - 200, refused());
  ASSERT_EQ(pg_.stops.size(), 1u) << "writes go on past the permission";
  answerStops();
  runUntil(t0 + 18750 + kPermissionMs - 1, refused());
  EXPECT_TRUE(pg_.shutdowns.empty());
  runUntil(t0 + 18750 + kPermissionMs, refused());
  EXPECT_EQ(pg_.shutdowns.size(), 1u) << "postgres runs on past the permission";
}

// An answer that comes late gives no more: the permission runs from the send.
TEST_F(FailsafeDriverTest, ThePermissionIsTimedFromTheRequestsSend) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  clock_.advance(750);
  ASSERT_FALSE(peers_.asks.empty());
  clock_.advance(2000);
  peers_.answer(granted());
  clock_.advance(0);
  EXPECT_EQ(leaseDeadlines_.back(), t0 + 750 + kPermissionMs);
}

// Refused (or unanswered): writes stop at the lease's end, as without the failsafe.
TEST_F(FailsafeDriverTest, ARefusalLeavesTheLeasesEnd) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  runUntil(t0 + 7110 - 200 - 1, refused());
  EXPECT_TRUE(pg_.stops.empty());
  EXPECT_EQ(leaseDeadlines_.back(), t0 + 7110);
  runUntil(t0 + 7110 - 200, refused());
  EXPECT_EQ(pg_.stops.size(), 1u) << "writes go on past the lease although the sync refused";
  EXPECT_TRUE(logged("gave no promise, refused"));
}

TEST_F(FailsafeDriverTest, AnUnansweredRequestLeavesTheLeasesEnd) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  clock_.advance(7110 - 200);
  EXPECT_FALSE(peers_.asks.empty());
  EXPECT_EQ(pg_.stops.size(), 1u);
}

// A round trip back on the same session ends the failsafe quietly: no stop, no restart.
TEST_F(FailsafeDriverTest, ARoundTripBackEndsTheFailsafeQuietly) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  runUntil(t0 + 9000, granted());
  coordinator_.lease(clock_.monotonicMs());
  clock_.advance(0);
  EXPECT_TRUE(logged("confirmed the session again: writes go on under the lease"));
  const size_t asked = peers_.asks.size();
  clock_.advance(600);
  EXPECT_EQ(peers_.asks.size(), asked) << "asked again while round trips come in time";
  EXPECT_TRUE(pg_.stops.empty());
  EXPECT_TRUE(pg_.applies.empty());
}

// Writes that went on past the lease: a new session means the old one may have expired
// and a takeover be decided. They stop until the state is confirmed on the new one.
TEST_F(FailsafeDriverTest, ANewSessionWhileWritingUnderThePromiseStopsWrites) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  runUntil(t0 + 8000, granted());
  ASSERT_TRUE(pg_.stops.empty());
  coordinator_.lease(clock_.monotonicMs(), 0x43);
  clock_.advance(0);
  EXPECT_EQ(pg_.stops.size(), 1u);
  EXPECT_TRUE(driver_->writesStopped());
  EXPECT_FALSE(driver_->failsafeUntil());
  EXPECT_TRUE(logged("a new ZooKeeper session while writing under the sync's promise"));
}

// A cluster-state write of the primary's own may name another sync, which promised
// nothing: the permission ends with it.
TEST_F(FailsafeDriverTest, AStateWriteEndsThePermission) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  runUntil(t0 + 8000, granted());
  ASSERT_TRUE(driver_->failsafeUntil());
  coordinator_.deliver(ActivePeersChanged{active({"node1", "node2"})});  // node3 gone: the async chain changes
  clock_.advance(0);
  ASSERT_FALSE(coordinator_.writes.empty()) << "no state write to test with";
  EXPECT_FALSE(driver_->failsafeUntil());
  EXPECT_EQ(pg_.stops.size(), 1u) << "writes go on past the lease with no permission";
}

TEST_F(FailsafeDriverTest, OffAPrimaryNeverAsks) {
  failsafe_ = false;
  makeDriver(RejoinPolicy::kFollow);
  startAsPrimary();
  coordinator_.lease(clock_.monotonicMs());
  clock_.advance(7110);
  EXPECT_TRUE(peers_.asks.empty());
  EXPECT_EQ(pg_.stops.size(), 1u);
}

TEST_F(FailsafeDriverTest, TheSyncPromisesOnlyOnceItsOwnRoundTripIsLate) {
  startAsSync();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  const FailsafeRequest ask{1, "node2", 9000};
  EXPECT_FALSE(driver_->onFailsafeRequest(ask).granted) << "promised while reaching ZooKeeper";
  clock_.advance(749);
  EXPECT_FALSE(driver_->onFailsafeRequest(ask).granted);
  clock_.advance(1);
  EXPECT_TRUE(driver_->onFailsafeRequest(ask).granted);
  EXPECT_EQ(driver_->promisedUntil(), t0 + 750 + 9000);
  EXPECT_FALSE(driver_->onFailsafeRequest(FailsafeRequest{2, "node2", 9000}).granted) << "another generation";
  EXPECT_FALSE(driver_->onFailsafeRequest(FailsafeRequest{1, "node3", 9000}).granted) << "not the primary";
}

// The promise holds the takeover's first step (the fence) back until it ends; no
// promise is given once it has begun.
TEST_F(FailsafeDriverTest, TheSyncHoldsItsTakeoverUntilThePromiseEnds) {
  syncOutOfReach();
  ASSERT_TRUE(driver_->onFailsafeRequest(FailsafeRequest{1, "node2", 9000}).granted);
  const int64_t until = *driver_->promisedUntil();
  coordinator_.deliver(ActivePeersChanged{active({"node1", "node3"})});  // the primary's session expired
  clock_.advance(0);
  answerWalReads();
  EXPECT_TRUE(pg_.fences.empty()) << "the takeover began within the promise";
  EXPECT_TRUE(logged("holding this takeover's fence back"));
  EXPECT_FALSE(driver_->onFailsafeRequest(FailsafeRequest{1, "node2", 9000}).granted) << "promised while taking over";
  clock_.advance(until - clock_.monotonicMs() - 1);
  EXPECT_TRUE(pg_.fences.empty());
  clock_.advance(1);
  EXPECT_EQ(pg_.fences.size(), 1u) << "no takeover once the promise ended";
  fenceAndReadTheWalUntilTheStateWrite();
  EXPECT_EQ(coordinator_.writes.size(), 1u);
}

// A promise given by an earlier run of the agent is not remembered: a started agent
// takes over from no primary for the promise's length.
TEST_F(FailsafeDriverTest, AStartedSyncTakesOverFromNoPrimaryForAPromisesLength) {
  startAsSync();
  coordinator_.deliver(ActivePeersChanged{active({"node1", "node3"})});
  clock_.advance(0);
  answerWalReads();
  EXPECT_TRUE(pg_.fences.empty());
  clock_.advance(9000 - clock_.monotonicMs());
  EXPECT_EQ(pg_.fences.size(), 1u);
}

// A planned switchover is not held by a promise once the old primary's stream ended: the
// old primary stopped postgres for it, as it does only once it has read the request,
// and gave up its permission then (issue 40: a switchover right after the sync's agent
// restarted cost 3.8 s of writes, held by the promise a started agent assumes).
class SwitchoverUnderAPromiseTest : public FailsafeDriverTest {
 protected:
  SwitchoverUnderAPromiseTest() { pg_.modelHandover = true; }
  // node1, the sync, just started (it holds its takeovers for a promise's length), is
  // asked to take over by a promote request; it waits for the old primary's stream.
  void switchoverRequested() {
    startAsSync();
    ASSERT_TRUE(driver_->promisedUntil().has_value()) << "a started sync holds no promise";
    ClusterState requested = state_;
    requested.promote = {{"id", "node1"}, {"role", "sync"}, {"generation", 1},
                         {"expireTime", std::to_string(clock_.wallMs() + 60000)}};
    coordinator_.deliver(ClusterStateChanged{stateNode(requested, 1)});
    clock_.advance(0);
    answerWalReads();
    ASSERT_EQ(pg_.upstreamWaits.size(), 1u) << "the switchover did not wait for the old primary's stop";
    EXPECT_FALSE(driver_->onFailsafeRequest(FailsafeRequest{1, "node2", 9000}).granted)
        << "promised while waiting to take over";
  }
  void upstreamStopped(bool ended) {
    pg_.upstreamWaits.front()(ended);
    pg_.upstreamWaits.pop_front();
    clock_.advance(0);
  }
};

TEST_F(SwitchoverUnderAPromiseTest, TheTakeoverGoesAheadOnceTheOldPrimarysStreamEnded) {
  switchoverRequested();
  upstreamStopped(true);
  EXPECT_EQ(pg_.fences.size(), 1u) << "the switchover's fence was held by the promise";
  EXPECT_FALSE(logged("holding this takeover's"));
  fenceAndReadTheWalUntilTheStateWrite();
  ASSERT_EQ(coordinator_.writes.size(), 1u) << "the switchover's state write was held by the promise";
  EXPECT_EQ(coordinator_.writes.back().primary.id, "node1");
}

TEST_F(SwitchoverUnderAPromiseTest, IsHeldWhileTheOldPrimaryStillStreams) {
  switchoverRequested();
  const int64_t until = *driver_->promisedUntil();
  upstreamStopped(false);
  EXPECT_TRUE(pg_.fences.empty()) << "fenced within the promise although the old primary did not stop";
  EXPECT_TRUE(logged("holding this takeover's fence back"));
  clock_.advance(until - clock_.monotonicMs());
  EXPECT_EQ(pg_.fences.size(), 1u) << "no takeover once the promise ended";
}

// The primary that hands over gives its permission up: it writes no more under it, and
// asks for none while it hands over.
TEST_F(FailsafeDriverTest, APrimaryThatHandsOverGivesUpItsPermission) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  runUntil(t0 + 1000, granted());
  ASSERT_TRUE(driver_->failsafeUntil().has_value());
  ClusterState requested = state_;
  requested.promote = {{"id", "node2"}, {"role", "sync"}, {"generation", 1},
                       {"expireTime", std::to_string(clock_.wallMs() + 60000)}};
  coordinator_.deliver(ClusterStateChanged{stateNode(requested, 1)});
  clock_.advance(0);
  ASSERT_EQ(pg_.applies.size(), 1u) << "postgres was not stopped for the switchover";
  EXPECT_FALSE(driver_->failsafeUntil().has_value()) << "kept the permission while handing over";
  peers_.asks.clear();
  clock_.advance(2000);
  EXPECT_TRUE(peers_.asks.empty()) << "asked for a promise while handing over";
}

// A sync asked for a promise longer than it would hold at a restart with no record of
// it (its own failsafe length) refuses it (review of 2f035ac, finding 1).
TEST_F(FailsafeDriverTest, TheSyncRefusesAPromiseLongerThanItsOwn) {
  failsafeDurationMs_ = 10000;
  makeDriver(RejoinPolicy::kFollow);
  syncOutOfReach();
  const FailsafeAnswer longer = driver_->onFailsafeRequest(FailsafeRequest{1, "node2", 30000});
  EXPECT_FALSE(longer.granted);
  EXPECT_NE(longer.reason.find("longer than"), std::string::npos) << longer.reason;
  EXPECT_TRUE(driver_->onFailsafeRequest(FailsafeRequest{1, "node2", 10000}).granted);
}

// The promise is recorded before it is answered; a promise that cannot be recorded is
// refused (a restart would forget it).
TEST_F(FailsafeDriverTest, APromiseIsRecordedBeforeItIsAnsweredOrRefused) {
  std::vector<int64_t> recorded;
  bool fail = false;
  recordPromise_ = [&](int64_t until) -> Result<bool> {
    if (fail) return Error{"disk full"};
    recorded.push_back(until);
    return true;
  };
  makeDriver(RejoinPolicy::kFollow);
  syncOutOfReach();
  const int64_t t0 = clock_.monotonicMs();
  ASSERT_TRUE(driver_->onFailsafeRequest(FailsafeRequest{1, "node2", 9000}).granted);
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded.back(), t0 + 9000);
  fail = true;
  clock_.advance(100);
  const FailsafeAnswer a = driver_->onFailsafeRequest(FailsafeRequest{1, "node2", 9000});
  EXPECT_FALSE(a.granted);
  EXPECT_NE(a.reason.find("disk full"), std::string::npos) << a.reason;
}

// A restarted sync keeps the promise its earlier run gave (review of 2f035ac, finding 1):
// run 1, configured with a 30 s session timeout, promises 30 s at t0; run 2, configured
// with 10 s, starts at t0 + 1 s with the record of it and reaches ZooKeeper at t0 + 12 s
// without the primary.
class RestartedSyncTest : public FailsafeDriverTest {
 protected:
  // Run 1 promises 30000 ms at the returned moment; the promise's end is recorded.
  int64_t firstRunPromises() {
    failsafeDurationMs_ = 30000;
    recordPromise_ = [this](int64_t until) -> Result<bool> {
      recorded_ = until;
      return true;
    };
    makeDriver(RejoinPolicy::kFollow);
    syncOutOfReach();
    const int64_t t0 = clock_.monotonicMs();
    EXPECT_TRUE(driver_->onFailsafeRequest(FailsafeRequest{1, "node2", 30000}).granted);
    EXPECT_EQ(recorded_, t0 + 30000);
    return t0;
  }
  // Run 2 starts at `at` (the agent restarted) with this configuration and the record.
  void secondRunStarts(int64_t at, bool failsafe) {
    clock_.advance(at - clock_.monotonicMs());
    state_.generation = 1;  // as startAsSync: node1 the sync of node2
    state_.primary = peerId("node2");
    state_.sync = peerId("node1");
    state_.async = {peerId("node3")};
    failsafe_ = failsafe;
    failsafeDurationMs_ = 10000;
    earlierPromiseMs_ = recorded_ ? std::max<int64_t>(*recorded_ - at, 0) : 0;
    makeDriver(RejoinPolicy::kFollow);
    pg_.applies.clear();
    pg_.fences.clear();
    pg_.walReads.clear();
    coordinator_.writes.clear();
    ASSERT_TRUE(driver_->start());
    ASSERT_EQ(pg_.inits.size(), 1u);
    pg_.inits.front()(PgInitialized{true, true});
    pg_.inits.pop_front();
    clock_.advance(0);
  }
  // Answers what postgres is asked (applies, WAL reads) until `at`, fences excepted.
  void runUntil(int64_t at) {
    while (clock_.monotonicMs() < at) {
      while (!pg_.applies.empty()) pg_.finishApply(true);
      answerWalReads();
      clock_.advance(std::min<int64_t>(100, at - clock_.monotonicMs()));
    }
    while (!pg_.applies.empty()) pg_.finishApply(true);
    answerWalReads();
  }
  void holdsUntilThePromiseEnds(int64_t t0) {
    runUntil(t0 + 12000);
    coordinator_.deliver(ZkInitialized{stateNode(state_, 0), active({"node1", "node3"})});  // node2 gone
    clock_.advance(0);
    runUntil(t0 + 30000 - 1);
    EXPECT_TRUE(pg_.fences.empty()) << "fenced within the promise of the earlier run";
    EXPECT_TRUE(coordinator_.writes.empty()) << "took over within the promise of the earlier run";
    runUntil(t0 + 30000);
    EXPECT_EQ(pg_.fences.size(), 1u) << "no takeover once the promise ended";
  }
  std::optional<int64_t> recorded_;
};

TEST_F(RestartedSyncTest, KeepsAPromiseLongerThanItsOwnSessionTimeout) {
  const int64_t t0 = firstRunPromises();
  ASSERT_NO_FATAL_FAILURE(secondRunStarts(t0 + 1000, true));
  holdsUntilThePromiseEnds(t0);
}

TEST_F(RestartedSyncTest, KeepsThePromiseWithTheFailsafeOff) {
  const int64_t t0 = firstRunPromises();
  ASSERT_NO_FATAL_FAILURE(secondRunStarts(t0 + 1000, false));
  holdsUntilThePromiseEnds(t0);
  EXPECT_TRUE(logged("an earlier run of this agent promised"));
}

// A record that says no promise runs on: no hold at the start, whatever the failsafe.
TEST_F(RestartedSyncTest, ARecordOfNoPromiseHoldsNothing) {
  ASSERT_NO_FATAL_FAILURE(secondRunStarts(20000, true));
  runUntil(21000);
  coordinator_.deliver(ZkInitialized{stateNode(state_, 0), active({"node1", "node3"})});
  clock_.advance(0);
  runUntil(21000);
  EXPECT_EQ(pg_.fences.size(), 1u) << "held a takeover for a promise no earlier run gave";
}

}  // namespace
}  // namespace dugong::agent
