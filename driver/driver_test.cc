// What the driver's transcripts (driver/testdata/*.txt, driver/transcript_test.cc)
// cannot say, on a hand-driven environment (driver/driver_test_support.h): the runner's
// own work, and the arithmetic of lease.h. Every protocol of the core is specified by a
// transcript, one file per protocol.
#include "driver/driver.h"

#include <gtest/gtest.h>

#include "driver/driver_test_support.h"

namespace dugong::driver {
namespace {

using namespace dugong::driver::testing;  // NOLINT(google-build-using-namespace)

// A unit test of lease.h's arithmetic: no core to step.
TEST(LeaseDeadline, EachTermIsTakenOffTheSessionTimeout) {
  LeaseTerms t;
  t.tickTimeMs = 2000;
  t.stopMarginMs = 300;
  EXPECT_EQ(leaseDeadlineMs(1000, 10000, 1000, t), 1000 + 10000 - 2000 - 1000 - 100 - 300);
  t.tickTimeMs = 0;  // unknown: half the session timeout
  EXPECT_EQ(leaseLengthMs(4000, 400, t), 4000 - 2000 - 400 - 40 - 300);
  EXPECT_LE(leaseLengthMs(1000, 100, t), 100) << "a short session leaves (almost) no lease";
}

// Environments that do not model stopping writes answer at once with an error: the
// driver copes (no re-entrance), and logs it. Not a transcript: env.h's default, which
// the runner calls, not the core.
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

class FailsafeDriverTest : public DriverTest {
 protected:
  FailsafeDriverTest() {
    failsafe_ = true;
    makeDriver(RejoinPolicy::kFollow);
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

// The promise is recorded before it is answered; a promise that cannot be recorded is
// refused (a restart would forget it). Not a transcript: the record
// (DriverOptions::recordPromise) is written by the runner (driver.cc) from the core's
// AnswerFailsafe, and a record that fails turns the answer into a refusal there; the
// core only says what to record.
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

}  // namespace
}  // namespace dugong::driver
