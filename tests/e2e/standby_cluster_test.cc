// A dugong standby cluster following a plain postgres primary (docs/decisions/
// 0083-standby-cluster.md, phase 2; the smoke test of 9.2): three agents whose dugong.yaml
// names standby.source hosts://, with no data and no state. The first in session order
// writes generation 1 as a standby state and, its leader, copies its data directory from
// the source by pg_basebackup; its sync and async cascade from it. Rows written on the
// source reach every peer; no peer answers /primary 200 or leaves recovery; the leader
// answers /standby-leader 200. The leader's host killed (agent, watchdog, postgres): its
// sync takes over as standby leader, and rows keep arriving.
#include <gtest/gtest.h>

#include "pg/controller.h"
#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {
namespace {

bool holdsRow(Harness& h, int i, int id) {
  auto r = h.sql(i, "SELECT count(*) FROM t WHERE id = " + std::to_string(id), 2s);
  return r && !r->rows.empty() && r->rows[0][0] == "1";
}

// The index of the peer that is standby leader and streams from the source, or -1.
int streamingLeader(Harness& h) {
  for (int i = 0; i < h.size(); ++i) {
    if (h.agentRunning(i) && h.httpStatus(i, "/standby-leader") == 200) return i;
  }
  return -1;
}

// Every running peer: /primary 503, postgres in recovery (or not answering).
void expectNothingWritable(Harness& h) {
  for (int i = 0; i < h.size(); ++i) {
    if (!h.agentRunning(i)) continue;
    EXPECT_EQ(h.httpStatus(i, "/primary"), 503) << h.peer(i).id;
    auto r = h.sql(i, "SELECT pg_is_in_recovery()", 2s);
    if (r && !r->rows.empty()) {
      EXPECT_EQ(r->rows[0][0], "t") << h.peer(i).id;
    }
  }
}

TEST(StandbyClusterE2E, ADugongStandbyClusterFollowsAPlainPostgresPrimary) {
  pg::testing::PgTestCluster sourceCluster("dugong-e2e-source");
  pg::testing::PgTestNode& source = sourceCluster.addNode("source-a");
  pg::PgController sourcePg(source.options);
  auto applied = sourcePg.apply(PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(applied.ok) << applied.error;
  ASSERT_TRUE(pg::testing::eventually([&] { return sourcePg.pollWritable(); }, 60s));
  ASSERT_EQ(source.value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");

  HarnessOptions o;
  o.extraConfig = "standby:\n  source: hosts://127.0.0.1:" + std::to_string(source.port) + "\n";
  Harness h(o);
  h.startAll();
  int leader = -1;
  ASSERT_TRUE(h.waitFor([&] { return (leader = streamingLeader(h)) >= 0; }, 180s)) << h.describe();
  EXPECT_EQ(h.role(leader), "standby-leader");
  ASSERT_TRUE(h.waitFor([&] { return holdsRow(h, 0, 1) && holdsRow(h, 1, 1) && holdsRow(h, 2, 1); }, 180s))
      << h.describe();
  std::set<std::string> roles;
  for (int i = 0; i < h.size(); ++i) roles.insert(h.role(i));
  EXPECT_EQ(roles, (std::set<std::string>{"standby-leader", "sync", "async"}));
  auto status = h.status(leader);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ((*status)["peer"]["standby"]["source"], "hosts 127.0.0.1:" + std::to_string(source.port));
  EXPECT_EQ((*status)["peer"]["clusterState"]["format"], 3);
  expectNothingWritable(h);

  ASSERT_EQ(source.value("INSERT INTO t VALUES (2)"), "");
  EXPECT_TRUE(h.waitFor([&] { return holdsRow(h, 0, 2) && holdsRow(h, 1, 2) && holdsRow(h, 2, 2); }, 60s))
      << h.describe();

  // The leader's host lost: its sync takes over as standby leader, deposing nobody.
  h.killAgentAndWatchdog(leader);
  h.killPostgres(leader);
  int next = -1;
  ASSERT_TRUE(h.waitFor([&] { return (next = streamingLeader(h)) >= 0 && next != leader; }, 120s)) << h.describe();
  status = h.status(next);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE((*status)["peer"]["clusterState"]["deposed"].empty()) << (*status)["peer"]["clusterState"].dump();
  ASSERT_EQ(source.value("INSERT INTO t VALUES (3)"), "");
  for (int i = 0; i < h.size(); ++i) {
    if (i == leader) continue;
    EXPECT_TRUE(h.waitFor([&] { return holdsRow(h, i, 3); }, 60s)) << h.peer(i).id << "\n" << h.describe();
  }
  expectNothingWritable(h);
}

}  // namespace
}  // namespace dugong::e2e
