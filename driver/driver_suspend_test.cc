// A host suspended under a primary (decision 0070, docs/security.md "Clocks that
// stop"): the driver's clock counts the suspend (CLOCK_BOOTTIME in the daemon,
// FakeClock::suspend here), so a primary whose lease, or failsafe permission, ended
// while the host slept stops writes at the first turn of its loop after the resume, and
// one whose deadline the suspend did not reach writes on. ZooKeeper expires a session,
// and a sync's promise ends, in real time: that is the clock these deadlines are on.
#include <gtest/gtest.h>

#include "driver/driver.h"
#include "driver/driver_test_support.h"

namespace dugong::agent {
namespace {

using namespace dugong::agent::testing;  // NOLINT(google-build-using-namespace)

// The fixture's lease ends 7110 ms after a round trip's send, and writes stop 200 ms
// before it; a permission ends kPermissionMs after its request's send.
constexpr int64_t kLeaseMs = 7110;
constexpr int64_t kWriteStopLeadMs = 200;

class SuspendTest : public DriverTest {
 protected:
  // The loop's first turn after the resume: every timer the suspend made late runs.
  void resumes() { clock_.advance(0); }
  // The end of writes `held` (the lease's or the permission's, `what`), extended by an
  // answer dated at a send before the suspend, is no later than `latest` and already
  // past: the resumed loop's first turn stops writes and shuts postgres down.
  void resumesPast(std::optional<int64_t> held, int64_t latest, const std::string& what) {
    ASSERT_TRUE(held);
    EXPECT_LE(*held, latest);
    EXPECT_LT(*held, clock_.monotonicMs()) << "the suspend did not pass the " << what << "'s end";
    resumes();
    EXPECT_FALSE(pg_.acknowledgesWrites()) << "a commit is acknowledged after the " << what << "'s real end";
    EXPECT_EQ(pg_.shutdowns.size(), 1u) << "postgres runs on past the " << what << "'s real end";
  }
  // Round trips every 500 ms, each answered at once, until `at`; false as soon as
  // postgres stops acknowledging commits.
  bool writesOnWithRoundTripsUntil(int64_t at) {
    while (clock_.monotonicMs() < at) {
      coordinator_.lease(clock_.monotonicMs());
      clock_.advance(500);
      if (!pg_.acknowledgesWrites()) return false;
    }
    return true;
  }
};

TEST_F(SuspendTest, APrimarySuspendedThroughItsLeaseStopsWritesAtItsFirstTurn) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  clock_.advance(1000);
  ASSERT_TRUE(pg_.acknowledgesWrites());
  clock_.suspend(30000);  // ZooKeeper expires the session meanwhile, in real time
  resumes();
  EXPECT_FALSE(pg_.acknowledgesWrites()) << "a commit is acknowledged after the lease's real end";
  EXPECT_EQ(pg_.stops.size(), 1u);
  EXPECT_EQ(pg_.shutdowns.size(), 1u) << "postgres runs on past the lease's real end";
  EXPECT_TRUE(driver_->writesStopped());
  EXPECT_TRUE(logged("no round trip through the ZooKeeper leader has confirmed the session for 31000 ms"));
}

// The round trip in flight when the host slept is answered after the resume, before any
// timer runs: it is dated at its send, so it extends the lease to no later than the send
// allows, which the suspend has passed.
TEST_F(SuspendTest, ARoundTripSentBeforeTheSuspendExtendsNothingPastTheRealDeadline) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  clock_.advance(1000);
  const int64_t sentBeforeTheSuspend = clock_.monotonicMs();
  clock_.suspend(30000);
  coordinator_.lease(sentBeforeTheSuspend);  // the first input after the resume
  resumesPast(driver_->leaseDeadline(), sentBeforeTheSuspend + kLeaseMs, "lease");
}

// A suspend the lease outlives: nothing stops, and the round trips after it carry on.
TEST_F(SuspendTest, APrimarySuspendedBrieflyWritesOn) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  clock_.advance(1000);
  clock_.suspend(2000);
  resumes();
  EXPECT_TRUE(pg_.acknowledgesWrites()) << "writes stopped although the suspend ended within the lease";
  EXPECT_TRUE(writesOnWithRoundTripsUntil(t0 + 20000)) << "writes stopped under a lease renewed after the resume";
  EXPECT_TRUE(pg_.stops.empty());
  EXPECT_TRUE(pg_.shutdowns.empty());
}

// At the edge: a resume 1 ms before writes stop leaves them on, and with no round trip
// since, they stop 1 ms later, at the deadline the suspend did not move.
TEST_F(SuspendTest, AResumeJustBeforeTheWriteStopLeavesTheDeadlineWhereItWas) {
  startAsPrimary();
  const int64_t t0 = clock_.monotonicMs();
  coordinator_.lease(t0);
  clock_.suspend(kLeaseMs - kWriteStopLeadMs - 1);
  resumes();
  EXPECT_TRUE(pg_.acknowledgesWrites());
  clock_.advance(1);
  EXPECT_FALSE(pg_.acknowledgesWrites()) << "writes go on past the lease's deadline after a suspend";
  EXPECT_EQ(pg_.stops.size(), 1u);
}

class SuspendUnderThePermissionTest : public SuspendTest {
 protected:
  SuspendUnderThePermissionTest() {
    failsafe_ = true;
    makeDriver(RejoinPolicy::kFollow);
  }
  static FailsafeAnswer granted() { return FailsafeAnswer{true, "promised"}; }
  void answerAll(const FailsafeAnswer& a) {
    while (!peers_.asks.empty()) peers_.answer(a);
  }
  // No round trip after t0; every request is granted until `at`.
  void grantedUntil(int64_t at) {
    while (clock_.monotonicMs() < at) {
      clock_.advance(10);
      answerAll(granted());
      clock_.advance(0);
    }
  }
  // The primary writes on under a permission past its lease's end (round trip at t0).
  int64_t primaryWritesUnderThePermission() {
    startAsPrimary();
    const int64_t t0 = clock_.monotonicMs();
    coordinator_.lease(t0);
    grantedUntil(t0 + 10000);
    EXPECT_TRUE(pg_.acknowledgesWrites()) << "writes stopped under the permission";
    EXPECT_TRUE(driver_->failsafeUntil());
    return t0;
  }
};

TEST_F(SuspendUnderThePermissionTest, APrimarySuspendedThroughItsPermissionStopsWritesAtItsFirstTurn) {
  primaryWritesUnderThePermission();
  const int64_t permissionEnd = *driver_->failsafeUntil();
  clock_.suspend(20000);  // the sync's promise ends meanwhile, in real time
  ASSERT_GT(clock_.monotonicMs(), permissionEnd);
  resumes();
  EXPECT_FALSE(pg_.acknowledgesWrites()) << "a commit is acknowledged after the permission's real end";
  EXPECT_EQ(pg_.shutdowns.size(), 1u) << "postgres runs on past the permission's real end";
  // The requests the resumed loop sends are granted (the sync still cannot reach
  // ZooKeeper): they come too late, the writes stay stopped until a round trip.
  for (int i = 0; i < 10; ++i) {
    answerAll(granted());
    clock_.advance(100);
  }
  EXPECT_FALSE(pg_.acknowledgesWrites()) << "a grant after the resume lifted the stop";
  EXPECT_TRUE(pg_.resumes.empty());
}

// The grant of a request sent just before the suspend arrives as the resumed loop's first
// input: the permission runs from the request's send, which the suspend has passed.
TEST_F(SuspendUnderThePermissionTest, AGrantAskedBeforeTheSuspendExtendsNothingPastTheRealDeadline) {
  primaryWritesUnderThePermission();
  // Let the next request leave, unanswered, and the host sleep before its answer.
  while (peers_.asks.empty()) clock_.advance(10);
  const int64_t sentBeforeTheSuspend = clock_.monotonicMs();
  clock_.suspend(20000);
  peers_.answer(granted());  // the first input after the resume
  resumesPast(driver_->failsafeUntil(), sentBeforeTheSuspend + kPermissionMs, "permission");
}

TEST_F(SuspendUnderThePermissionTest, APrimarySuspendedBrieflyUnderItsPermissionWritesOn) {
  const int64_t t0 = primaryWritesUnderThePermission();
  clock_.suspend(1000);
  resumes();
  EXPECT_TRUE(pg_.acknowledgesWrites()) << "writes stopped although the suspend ended within the permission";
  grantedUntil(t0 + 30000);
  EXPECT_TRUE(pg_.acknowledgesWrites()) << "writes stopped under a permission renewed after the resume";
  EXPECT_TRUE(pg_.stops.empty());
}

}  // namespace
}  // namespace dugong::agent
