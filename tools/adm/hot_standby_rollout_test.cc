#include "tools/adm/hot_standby_rollout.h"

#include <gtest/gtest.h>

#include "ops/test_views.h"

namespace dugong::adm {
namespace {

PeerView runningValues(nlohmann::json values) {
  PeerView p;
  p.identity.id = "c";
  p.status = testing::standbyStatus("0/5000000", nlohmann::json::array());
  p.status["postgres"]["hotStandbyValues"] = std::move(values);
  return p;
}

const std::map<std::string, std::string> kDugongDefaults = {{"max_wal_senders", "10"}};

TEST(HotStandbyRollout, AStandbyThatKeptTheOldHigherValueIsAMismatch) {
  // The review's P15: max_connections lowered from 120 to 90, the async still at 120.
  PeerView p = runningValues({{"max_connections", 120}, {"max_wal_senders", 10}, {"max_worker_processes", 8}});
  auto m = hotStandbyMismatches(p, {{"max_connections", "90"}}, kDugongDefaults);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(describeMismatches(m), "max_connections = 120 (configured: 90)");
  EXPECT_TRUE(hotStandbyMismatches(runningValues({{"max_connections", 90}, {"max_wal_senders", 10}}),
                                   {{"max_connections", "'90'"}}, kDugongDefaults)
                  .empty());
}

TEST(HotStandbyRollout, DugongsDefaultsAndPostgresDefaultsAreTheConfiguredValuesOfUnsetSettings) {
  // max_wal_senders unset: dugong's default (10) is configured, in both directions.
  EXPECT_EQ(describeMismatches(hotStandbyMismatches(runningValues({{"max_wal_senders", 12}}), {}, kDugongDefaults)),
            "max_wal_senders = 12 (configured: 10)");
  EXPECT_EQ(describeMismatches(hotStandbyMismatches(runningValues({{"max_wal_senders", 8}}), {}, kDugongDefaults)),
            "max_wal_senders = 8 (configured: 10)");
  // max_connections unset (`config set --unset`): postgres' default, 100; above it is flagged.
  EXPECT_EQ(describeMismatches(hotStandbyMismatches(runningValues({{"max_connections", 120}}), {}, kDugongDefaults)),
            "max_connections = 120 (configured: postgres' default)");
  EXPECT_TRUE(hotStandbyMismatches(runningValues({{"max_connections", 100}}), {}, kDugongDefaults).empty());
}

TEST(HotStandbyRollout, APeerThatReportsNoValuesHasNoMismatch) {
  PeerView p;
  EXPECT_TRUE(hotStandbyMismatches(p, {{"max_connections", "90"}}, kDugongDefaults).empty());
  EXPECT_FALSE(replayPosition(p).has_value());
}

TEST(HotStandbyRollout, ReplayPositionIsTheStandbysReplayLsn) {
  PeerView p = runningValues({});
  p.status["postgres"]["replayLsn"] = "0/5000060";
  ASSERT_TRUE(replayPosition(p).has_value());
  EXPECT_EQ(*replayPosition(p), WalPosition(0x5000060));
  p.status["postgres"]["replayLsn"] = nullptr;
  EXPECT_FALSE(replayPosition(p).has_value());
}

}  // namespace
}  // namespace dugong::adm
