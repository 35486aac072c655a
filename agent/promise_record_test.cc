#include "agent/promise_record.h"

#include <fstream>

#include <gtest/gtest.h>

#include "driver/failsafe.h"
#include "tests/support/test_env.h"

namespace dugong::agent {
namespace {

class PromiseRecordTest : public ::testing::Test {
 protected:
  dugong::testing::ScratchDir dir{"promise-record"};
  PromiseRecord record{dir.path() + "/data.dugong-session.promise"};
};

TEST_F(PromiseRecordTest, NoFileIsNoRecord) {
  auto r = record.remainingAt(BootClock{"boot-a", 1000});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->has_value());
}

TEST_F(PromiseRecordTest, OnTheSameBootThePromiseRunsOnFromItsRecordedEnd) {
  ASSERT_TRUE(record.save(30000, BootClock{"boot-a", 1000}).ok());
  auto r = record.remainingAt(BootClock{"boot-a", 2000});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*r, std::optional<int64_t>(29000));
  EXPECT_EQ(*record.remainingAt(BootClock{"boot-a", 40000}), std::optional<int64_t>(0)) << "an ended promise";
}

// After a restart of the host the time since is unknown: the whole rest is held again.
TEST_F(PromiseRecordTest, OnAnotherBootThePromiseIsHeldForItsRestAtTheRecord) {
  ASSERT_TRUE(record.save(30000, BootClock{"boot-a", 50000}).ok());
  EXPECT_EQ(*record.remainingAt(BootClock{"boot-b", 10}), std::optional<int64_t>(30000));
}

TEST_F(PromiseRecordTest, AtMostTheLongestPromise) {
  ASSERT_TRUE(record.save(10 * driver::kFailsafeMaxDurationMs, BootClock{"boot-a", 0}).ok());
  EXPECT_EQ(*record.remainingAt(BootClock{"boot-a", 0}), std::optional<int64_t>(driver::kFailsafeMaxDurationMs));
}

TEST_F(PromiseRecordTest, AFileThatIsNoRecordIsAnError) {
  std::ofstream(record.path()) << "{\"sessionId\": 1}\n";
  auto r = record.remainingAt(BootClock{"boot-a", 0});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("not a dugong promise record"), std::string::npos) << r.error();
}

TEST_F(PromiseRecordTest, TheBootClockReadsTheKernels) {
  const BootClock a = BootClock::now();
  EXPECT_EQ(a.bootId.size(), 36u) << a.bootId;
  EXPECT_GT(a.ms, 0);
}

}  // namespace
}  // namespace dugong::agent
