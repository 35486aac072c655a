#include "agent/watchdog.h"

#include <gtest/gtest.h>

namespace dugong::agent {
namespace {

// Session timeout 6000 ms: limit 3000, polled every 1500.
TEST(WatchdogDeadline, AStoppedAgentsPostgresIsShutDownALimitAfterTheStopBegan) {
  EXPECT_EQ(watchdogDeadlineMs(10000, 1500, 3000, std::nullopt), 11500);
}

// Cluster sim seed 58622: the connection was lost as primary at 4000, the agent died at
// 8500 before its own shutdown (due at 5000) and was seen gone at 9000; the session
// could expire from 10000 on. The shutdown is due at once, not at 10500.
TEST(WatchdogDeadline, AfterAConnectionLostAsPrimaryItIsDueWhenTheAgentWouldHaveShutDown) {
  EXPECT_EQ(watchdogDeadlineMs(9000, 1500, 3000, 4000), 5000);
  // A loss just before the stop: still the earlier of the two.
  EXPECT_EQ(watchdogDeadlineMs(9000, 1500, 3000, 8900), 9900);
  EXPECT_EQ(watchdogDeadlineMs(9000, 1500, 3000, 9900), 10500);
}

}  // namespace
}  // namespace dugong::agent
