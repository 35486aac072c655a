#include "agent/status_report.h"

#include <gtest/gtest.h>

namespace dugong::agent {
namespace {

PeerIdentity peer(const std::string& id) {
  PeerIdentity p;
  p.id = id;
  return p;
}

// Quorum mode's gauges (docs/decisions/0079 6.5): the mode, k, the set and what a takeover
// reads on every peer; on the writable primary the members that acknowledge now.
TEST(StatusReport, ReplicationGaugesGiveTheModeKTheSetAndTheMembersAcknowledging) {
  ClusterState state;
  state.generation = 3;
  state.primary = peer("a");
  state.quorum = Quorum{1, {peer("b"), peer("c")}};
  pg::PgStatus postgres;
  // b acknowledges; c's walsender still catches up; d is no member.
  postgres.replication = {{"b", "streaming", "quorum", "0/5000200", "0/5000200", "0/5000200", "0/5000100"},
                          {"c", "catchup", "potential", "0/5000000", std::nullopt, "0/4FFFF00", std::nullopt},
                          {"d", "streaming", "quorum", "0/5000200", "0/5000200", "0/5000200", "0/5000200"}};
  const std::string primary = replicationMetricsText(Role::kPrimary, true, state, postgres);
  for (const char* line : {"dugong_replication_mode{mode=\"sync\"} 0\n", "dugong_replication_mode{mode=\"quorum\"} 1\n",
                           "dugong_quorum_k 1\n", "dugong_quorum_members 2\n", "dugong_quorum_read_quorum 2\n",
                           "dugong_quorum_acknowledging_members 1\n", "# TYPE dugong_quorum_k gauge\n"}) {
    EXPECT_NE(primary.find(line), std::string::npos) << line << " in\n" << primary;
  }
  // Both stream: 2. Raised to k = 2 of 3 with one member gone: 2 of 3 read, none of the
  // gone one counted.
  postgres.replication[1] = {"c", "streaming", "quorum", "0/5000200", "0/5000200", "0/5000200", "0/5000200"};
  EXPECT_NE(replicationMetricsText(Role::kPrimary, true, state, postgres).find("dugong_quorum_acknowledging_members 2\n"),
            std::string::npos);
  state.quorum = Quorum{2, {peer("b"), peer("c"), peer("e")}};
  const std::string raised = replicationMetricsText(Role::kPrimary, true, state, postgres);
  EXPECT_NE(raised.find("dugong_quorum_read_quorum 2\n"), std::string::npos) << raised;
  EXPECT_NE(raised.find("dugong_quorum_members 3\n"), std::string::npos) << raised;
  EXPECT_NE(raised.find("dugong_quorum_acknowledging_members 2\n"), std::string::npos) << raised;

  // A member, or a primary not writable: the set, not the acknowledging count (its
  // pg_stat_replication is not the primary's).
  for (auto [role, writable] : {std::pair{Role::kSync, false}, std::pair{Role::kPrimary, false}}) {
    const std::string other = replicationMetricsText(role, writable, state, postgres);
    EXPECT_NE(other.find("dugong_quorum_k 2\n"), std::string::npos) << other;
    EXPECT_EQ(other.find("dugong_quorum_acknowledging_members"), std::string::npos) << other;
  }

  // Sync mode: the mode only; no state yet: nothing.
  ClusterState sync = state;
  sync.quorum.reset();
  sync.sync = peer("b");
  const std::string syncText = replicationMetricsText(Role::kPrimary, true, sync, postgres);
  EXPECT_NE(syncText.find("dugong_replication_mode{mode=\"sync\"} 1\n"), std::string::npos) << syncText;
  EXPECT_EQ(syncText.find("dugong_quorum"), std::string::npos) << syncText;
  EXPECT_EQ(replicationMetricsText(Role::kPrimary, true, std::nullopt, postgres), "");
}

// /standby-leader's predicate (0083 9.1, "Phase 8 as built"): a leader of a streaming
// source follows it while its WAL receiver streams; one of a repository, which streams
// nothing, while it runs in recovery and its last lag sample read the repository.
TEST(StatusReport, AStandbyLeaderFollowsARepositoryWithoutAStream) {
  pg::PgStatus postgres;
  postgres.online = true;
  postgres.inRecovery = true;
  EXPECT_FALSE(leaderFollowsSource(SourceKind::kPgbackrest, false, true, postgres)) << "no sample of the repository yet";
  pg::SourceLag read;
  postgres.source = read;
  EXPECT_TRUE(leaderFollowsSource(SourceKind::kPgbackrest, false, true, postgres));
  EXPECT_FALSE(leaderFollowsSource(SourceKind::kPgbackrest, false, false, postgres)) << "not its wanted configuration";
  postgres.source->sourceError = "pgbackrest info: the repository cannot be read";
  EXPECT_FALSE(leaderFollowsSource(SourceKind::kPgbackrest, false, true, postgres));
  postgres.source.reset();
  postgres.inRecovery = false;
  EXPECT_FALSE(leaderFollowsSource(SourceKind::kPgbackrest, false, true, postgres)) << "out of recovery";
  // A streaming source: the stream, as for any replica.
  postgres.inRecovery = true;
  postgres.source = read;
  EXPECT_FALSE(leaderFollowsSource(SourceKind::kHosts, false, true, postgres));
  EXPECT_TRUE(leaderFollowsSource(SourceKind::kHosts, true, true, postgres));
  EXPECT_TRUE(leaderFollowsSource(SourceKind::kDugong, true, true, postgres));
}

}  // namespace
}  // namespace dugong::agent
