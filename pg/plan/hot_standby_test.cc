#include "pg/plan/hot_standby.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

const char kControlData[] =
    "wal_level setting:                    replica\n"
    "max_connections setting:              120\n"
    "max_worker_processes setting:         8\n"
    "max_wal_senders setting:              10\n"
    "max_prepared_xacts setting:           0\n"
    "max_locks_per_xact setting:           64\n";

TEST(HotStandby, ReadsThePrimarysValuesFromControlData) {
  auto v = hotStandbyValuesFromControlData(kControlData);
  EXPECT_EQ(v.size(), 5u);
  EXPECT_EQ(v.at("max_connections"), 120);
  EXPECT_EQ(v.at("max_prepared_transactions"), 0);
  EXPECT_EQ(v.at("max_locks_per_transaction"), 64);
}

TEST(HotStandby, AStandbyNeverWritesLessThanItsPrimary) {
  auto floor = hotStandbyValuesFromControlData(kControlData);
  // Lowered in the configuration while the primary still runs 120: the standby keeps 120.
  auto s = raiseToFloor({{"max_connections", "90"}, {"work_mem", "8MB"}}, floor, {});
  EXPECT_EQ(s.at("max_connections"), "120");
  EXPECT_EQ(s.at("work_mem"), "8MB");
  EXPECT_FALSE(s.count("max_worker_processes"));  // postgres' default 8 is not below 8
  // Raised above the primary: kept.
  EXPECT_EQ(raiseToFloor({{"max_connections", "200"}}, floor, {}).at("max_connections"), "200");
  // Absent: counted at dugong's default, else postgres'.
  EXPECT_EQ(raiseToFloor({}, {{"max_wal_senders", 20}}, {{"max_wal_senders", "10"}}).at("max_wal_senders"), "20");
  EXPECT_EQ(raiseToFloor({}, floor, {}).at("max_connections"), "120");
}

TEST(HotStandby, OnlyAStandbyStartsAtTheFloor) {
  const std::map<std::string, long> floor = {{"max_connections", 120}};
  const std::map<std::string, std::string> own = {{"max_connections", "100"}};
  EXPECT_TRUE(startsAtHotStandbyFloor("sync"));
  EXPECT_TRUE(startsAtHotStandbyFloor("async"));
  EXPECT_FALSE(startsAtHotStandbyFloor("primary"));
  EXPECT_FALSE(startsAtHotStandbyFloor("none"));
  EXPECT_EQ(hotStandbyStartSettings("async", own, floor, {}).at("max_connections"), "120");
  EXPECT_EQ(hotStandbyStartSettings("sync", own, floor, {}).at("max_connections"), "120");
  // A primary runs its own values: its standbys replay them.
  EXPECT_EQ(hotStandbyStartSettings("primary", own, floor, {}).at("max_connections"), "100");
}

TEST(HotStandby, LoweringIsJudgedAgainstWhatThePrimaryRuns) {
  std::map<std::string, long> running = {{"max_connections", 100}, {"max_wal_senders", 10}};
  EXPECT_EQ(loweredHotStandbySettings({{"max_connections", "90"}}, running, {}),
            (std::vector<std::string>{"max_connections"}));
  EXPECT_TRUE(loweredHotStandbySettings({{"max_connections", "120"}}, running, {}).empty());
  EXPECT_TRUE(loweredHotStandbySettings({}, running, {{"max_wal_senders", "10"}}).empty());
  EXPECT_EQ(loweredHotStandbySettings({}, {{"max_wal_senders", 20}}, {{"max_wal_senders", "10"}}),
            (std::vector<std::string>{"max_wal_senders"}));
}

}  // namespace
}  // namespace dugong::pg
