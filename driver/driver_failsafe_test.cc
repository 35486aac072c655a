// The driver's failsafe on a hand-driven environment: what only the runner does. The
// protocol itself (the primary's requests and the permission it writes under, the
// sync's promise and the takeover it holds back, a restarted sync's record) is
// specified by driver/testdata/failsafe.txt.
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
}  // namespace dugong::agent
