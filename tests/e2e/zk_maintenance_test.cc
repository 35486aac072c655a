// ZooKeeper maintenance costs no writes, end to end and short: the ZooKeeper
// leader is killed (and started again), then every server is restarted in turn, the
// leader last, then the quorum is lost for 5 s (two of the three servers killed, then
// started again) (tests/e2e/zk_maintenance_scenario.h, session timeout 4 s). The
// primary's agent keeps its session and, under the lease, its postgres: no postgres
// restart, no new generation, the same writable primary; over the quorum loss, the
// failsafe (zookeeper.failsafe: on, the default) keeps it writing past the lease's end:
// rows are acknowledged in the loss's last second. The longest write gap is printed, not
// asserted (bench/zk_maintenance_bench measures it over many runs). DUGONG_E2E_NO_LEASE=1
// runs it as the agent was before the lease: it fails whenever an election outlasts a
// sixth of the session timeout (postgres is then restarted; one run of two here).
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

#include "tests/e2e/zk_maintenance_scenario.h"

namespace dugong::e2e {
namespace {

void expectFree(const MaintenanceOutcome& o, const std::string& fault) {
  EXPECT_TRUE(o.samePrimary) << fault << ": the primary changed or is not writable";
  EXPECT_FALSE(o.newGeneration) << fault << ": a new generation";
  EXPECT_FALSE(o.postgresRestarted) << fault << ": the primary's postgres was restarted";
  EXPECT_GT(o.rows, 0) << fault << ": no row acknowledged";
}

TEST(ZooKeeperMaintenance, ALeaderKillARollingRestartAndAQuorumLossCostNoPostgresRestartAndNoGeneration) {
  const bool noLease = std::getenv("DUGONG_E2E_NO_LEASE") != nullptr;
  ZkMaintenanceCluster cluster(4000, noLease);
  ASSERT_TRUE(cluster.start()) << cluster.error() << "\n" << cluster.harness().describe();
  const MaintenanceOutcome kill = cluster.leaderKill();
  const MaintenanceOutcome rolling = cluster.rollingRestart();
  const MaintenanceOutcome quorum = cluster.quorumLoss(std::chrono::seconds(5));
  std::cout << "zookeeper maintenance" << (noLease ? " (no lease)" : "")
            << " (session 4000 ms, tickTime 200 ms): longest write gap " << kill.maxGapMs
            << " ms over the leader kill, " << rolling.maxGapMs << " ms over the rolling restart, " << quorum.maxGapMs
            << " ms over a quorum loss of 5 s (" << quorum.rowsLate << " rows in its last second)\n";
  expectFree(kill, "leader kill");
  expectFree(rolling, "rolling restart");
  if (!noLease) {
    expectFree(quorum, "quorum loss");
    EXPECT_GT(quorum.rowsLate, 0) << "no row acknowledged in the quorum loss's last second, past the lease's end";
  }
  if (HasFailure()) std::cerr << cluster.harness().describe();
}

// Quorum mode (docs/decisions/0079 "Phase 5c as built"): the same quorum loss, with the
// failsafe's permission from the members of ANY 1 (two members). Before, a format-2
// primary asked nobody and stopped writes at its lease's end: no row past it.
TEST(ZooKeeperMaintenance, InQuorumModeTheMembersPromisesKeepWritesOnThroughAQuorumLoss) {
  ZkMaintenanceCluster cluster(4000, false, false, "replication:\n  mode: quorum\n  k: 1\n  size: 2\n");
  ASSERT_TRUE(cluster.start()) << cluster.error() << "\n" << cluster.harness().describe();
  Harness& h = cluster.harness();
  ASSERT_TRUE(h.waitFor(
      [&] {
        auto s = h.zkState(ClusterState::Formats::kSyncAndQuorum);
        return s && s->quorum && s->quorum->members.size() == 2 && h.waitForHealthyCluster(2, std::chrono::seconds(1)) >= 0;
      },
      std::chrono::seconds(120)))
      << "no ANY 1 of 2 members\n" << h.describe();
  const MaintenanceOutcome quorum = cluster.quorumLoss(std::chrono::seconds(5));
  std::cout << "zookeeper quorum loss of 5 s in quorum mode (session 4000 ms): longest write gap " << quorum.maxGapMs
            << " ms (" << quorum.rowsLate << " rows in its last second)\n";
  expectFree(quorum, "quorum loss");
  EXPECT_GT(quorum.rowsLate, 0) << "no row acknowledged in the quorum loss's last second, past the lease's end";
  if (HasFailure()) std::cerr << h.describe();
}

}  // namespace
}  // namespace dugong::e2e
