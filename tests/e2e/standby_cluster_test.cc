// A dugong standby cluster following a plain postgres primary (docs/decisions/
// 0083-standby-cluster.md, phase 2; the smoke test of 9.2): three agents whose dugong.yaml
// names standby.source hosts://, with no data and no state. The first in session order
// writes generation 1 as a standby state and, its leader, copies its data directory from
// the source by pg_basebackup; its sync and async cascade from it. Rows written on the
// source reach every peer; no peer answers /primary 200 or leaves recovery; the leader
// answers /standby-leader 200. The leader's host killed (agent, watchdog, postgres): its
// sync takes over as standby leader, and rows keep arriving.
// Phase 3: what the operator sees (the lag in /state, /metrics, `dugong-adm show` and
// `verify`), and promote-cluster: refused while the source's primary is reachable (even
// with --source-gone), refused without the flag once the source is stopped, then with
// --source-gone the cluster becomes a normal, writable one holding every row it received.
// Phase 4 (label full, two dugong sites): site B, a standby cluster of site A, is promoted
// while A is down; A comes back writable and writes a row B never gets (the wrong
// --source-gone of 0083 7.1), then demote-cluster on A with B as its source: A's primary
// stops, writes the standby state, is rewound from B (no copy) and follows B; rows written
// on B reach it, A's own row after the fork is gone.
// Phase 8: a standby cluster fed by a pgBackRest repository, its leader's loss and
// promote-cluster --source-gone.
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include <gtest/gtest.h>

#include "ops/http_client.h"
#include "pg/command.h"
#include "pg/controller.h"
#include "pg/testing/backed_up_primary.h"
#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {
namespace {

bool holdsRow(Harness& h, int i, int id) {
  auto r = h.sql(i, "SELECT count(*) FROM t WHERE id = " + std::to_string(id), 2s);
  return r && !r->rows.empty() && r->rows[0][0] == "1";
}

pg::CommandResult adm(const Harness& h, std::vector<std::string> args) {
  pg::CommandSpec spec;
  spec.argv = {DUGONG_ADM_BINARY, "--zk", h.zkConnect(), "-c", h.options().cluster};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.timeout = std::chrono::seconds(180);
  return pg::runCommand(spec);
}

std::string metrics(Harness& h, int i) {
  auto r = agent::httpGet("http://127.0.0.1:" + std::to_string(h.peer(i).httpPort) + "/metrics");
  return r ? r->body : "";
}

// The leader's lag sample in its /state (standby.lag), or null.
nlohmann::json leaderLag(Harness& h, int i) {
  auto st = h.status(i);
  if (!st || !st->contains("standby") || !(*st)["standby"].is_object()) return nullptr;
  return (*st)["standby"]["lag"];
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

// After promote-cluster: the new primary `next` holds rows 1..3 and takes row 4, which
// every other peer but the lost `leader` receives on the new timeline.
void expectPromotedAndFollowed(Harness& h, int next, int leader) {
  for (int id = 1; id <= 3; ++id) EXPECT_TRUE(holdsRow(h, next, id)) << id;
  auto w = h.sql(next, "INSERT INTO t VALUES (4)", 5s);
  EXPECT_TRUE(w.ok()) << w.error();
  for (int i = 0; i < h.size(); ++i) {
    if (i == leader || i == next) continue;
    EXPECT_TRUE(h.waitFor([&] { return holdsRow(h, i, 4); }, 60s)) << h.peer(i).id << " follows the new timeline";
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

  // What the operator sees: the lag, in bytes and seconds, and the source's primary.
  const std::string sourceHost = "127.0.0.1:" + std::to_string(source.port);
  const std::string of = "hosts " + sourceHost;
  nlohmann::json lag;
  EXPECT_TRUE(h.waitFor(
      [&] {
        lag = leaderLag(h, leader);
        return lag.is_object() && lag["lagBytes"] == 0 && lag["lagSeconds"] == 0.0 &&
               lag["walReceiverStatus"] == "streaming";
      },
      60s))
      << lag.dump();
  EXPECT_EQ(lag["sourcePrimary"], sourceHost);
  EXPECT_EQ(lag["streamingFrom"], sourceHost);
  auto leaderState = h.status(leader);
  ASSERT_TRUE(leaderState.has_value());
  EXPECT_EQ((*leaderState)["standby"]["cluster"], "standby cluster of " + of);
  EXPECT_NE(metrics(h, leader).find("\ndugong_standby_source_lag_bytes 0\n"), std::string::npos) << metrics(h, leader);
  EXPECT_NE(metrics(h, leader).find("\ndugong_standby_source_receiving 1\n"), std::string::npos);
  auto shown = adm(h, {"show"});
  EXPECT_EQ(shown.exitCode, 0) << shown.output;
  EXPECT_NE(shown.output.find("standby cluster of " + of + ", standby leader " + h.peer(leader).id), std::string::npos)
      << shown.output;
  EXPECT_NE(shown.output.find(sourceHost + ", the leader streams from it"), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find("0.0 MB and 0.0 s behind " + of), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find("standby-leader"), std::string::npos) << shown.output;
  // The agents publish their replication rows with each status poll (every second): the
  // sync's row may lag the rows that reached it.
  pg::CommandResult verified;
  EXPECT_TRUE(h.waitFor([&] { return (verified = adm(h, {"verify", "-v"})).exitCode == 0; }, 60s))
      << verified.output;
  EXPECT_NE(verified.output.find("standby leader " + h.peer(leader).id + " streams from " + of), std::string::npos)
      << verified.output;

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

  // promote-cluster: refused while the source's primary can be reached, even with the flag.
  ASSERT_TRUE(h.waitFor([&] { return leaderLag(h, next).is_object() && leaderLag(h, next)["lagBytes"] == 0; }, 60s));
  // The harness reads no format 3: a refusal is checked by the history (no write).
  const size_t writesBefore = h.history().size();
  ASSERT_GT(writesBefore, 0u);
  auto refused = adm(h, {"promote-cluster", "--source-gone"});
  EXPECT_EQ(refused.exitCode, 2) << refused.output;
  EXPECT_NE(refused.output.find("refused: the source " + of + " has a writable host, " + sourceHost), std::string::npos)
      << refused.output;
  EXPECT_EQ(h.history().size(), writesBefore) << "a refusal writes nothing";

  // The source stopped: without the flag, refused with what was last seen.
  ASSERT_TRUE(sourcePg.apply(PgConfig::none()).ok);
  ASSERT_TRUE(h.waitFor(
      [&] {
        const nlohmann::json l = leaderLag(h, next);
        return l.is_object() && l["sourceReachable"] == false;
      },
      60s));
  refused = adm(h, {"promote-cluster"});
  EXPECT_EQ(refused.exitCode, 2) << refused.output;
  EXPECT_NE(refused.output.find("the source " + of + " cannot be reached"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("at least 0.0 MB"), std::string::npos) << refused.output;
  EXPECT_EQ(h.history().size(), writesBefore) << "a refusal writes nothing";
  // The leader's stream may still be up in the sample that saw the source refuse
  // connections (a source shutting down streams its last WAL): verify says so once the
  // next sample shows the stream ended.
  pg::CommandResult stalled;
  EXPECT_TRUE(h.waitFor(
      [&] {
        stalled = adm(h, {"verify"});
        return stalled.output.find("does not receive from " + of) != std::string::npos;
      },
      30s))
      << stalled.output;
  EXPECT_EQ(stalled.exitCode, 1) << stalled.output;

  // --source-gone: a normal cluster, writable, with every row it received.
  auto promoted = adm(h, {"promote-cluster", "--source-gone", "--wait", "120"});
  std::cout << promoted.output;
  ASSERT_EQ(promoted.exitCode, 0) << promoted.output;
  EXPECT_NE(promoted.output.find("lag before the promotion: at least 0.0 MB and"), std::string::npos) << promoted.output;
  ASSERT_TRUE(h.waitFor([&] { return h.httpStatus(next, "/primary") == 200; }, 60s)) << h.describe();
  auto state = h.zkState();
  ASSERT_TRUE(state.has_value());
  EXPECT_FALSE(state->standby.has_value());
  EXPECT_EQ(state->primary.id, h.peer(next).id);
  expectPromotedAndFollowed(h, next, leader);
  shown = adm(h, {"show"});
  EXPECT_EQ(shown.output.find("standby cluster of"), std::string::npos) << shown.output;
  auto history = adm(h, {"history"});
  EXPECT_NE(history.output.find("promote-cluster: no longer a standby cluster of " + of), std::string::npos)
      << history.output;
}

std::string hostsOf(Harness& h) {
  std::string out = "hosts://";
  for (int i = 0; i < h.size(); ++i) out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(h.peer(i).pg->port);
  return out;
}

std::string fileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(StandbyClusterE2E, TheOldSiteDemotedAfterPromoteClusterFollowsTheNewSiteByRewind) {
  // Site A: a normal dugong cluster (primary and sync).
  HarnessOptions ao;
  ao.peers = 2;
  ao.cluster = "sitea";
  // A's sync received the WAL its primary wrote past the fork: it cannot follow the rewound
  // leader. In the demotion's generation it is repaired at once (PgConfig::repairAtOnce,
  // 0083 5.2), not after repairStandbyAfterSeconds: an hour here, so that only that rule
  // repairs it within the test (before it, the test set 5 s).
  ao.postgresConfig = "  repairStandbyAfterSeconds: 3600\n";
  Harness a(ao);
  a.startAll();
  const int ap = a.waitForHealthyCluster(1, 180s);
  ASSERT_GE(ap, 0) << a.describe();
  ASSERT_TRUE(a.sql(ap, "CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)").ok());

  // Site B: a standby cluster of A's hosts.
  HarnessOptions bo;
  bo.peers = 2;
  bo.cluster = "siteb";
  bo.extraConfig = "standby:\n  source: " + hostsOf(a) + "\n";
  Harness b(bo);
  b.startAll();
  int bl = -1;
  ASSERT_TRUE(b.waitFor([&] { return (bl = streamingLeader(b)) >= 0; }, 180s)) << b.describe();
  const int bs = 1 - bl;
  ASSERT_TRUE(a.sql(ap, "INSERT INTO t VALUES (2)").ok());
  ASSERT_TRUE(b.waitFor([&] { return holdsRow(b, bl, 2) && holdsRow(b, bs, 2); }, 120s)) << b.describe();

  // A lost (agents and postgres killed), B promoted with --source-gone.
  for (int i = 0; i < a.size(); ++i) {
    a.killAgentAndWatchdog(i);
    a.killPostgres(i);
  }
  ASSERT_TRUE(b.waitFor(
      [&] {
        const nlohmann::json l = leaderLag(b, bl);
        return l.is_object() && l["sourceReachable"] == false;
      },
      60s));
  const auto promoteStarted = std::chrono::steady_clock::now();
  auto promoted = adm(b, {"promote-cluster", "--source-gone", "--wait", "120"});
  std::cout << promoted.output;
  ASSERT_EQ(promoted.exitCode, 0) << promoted.output;
  std::cout << "promote-cluster to writes on site B: " << secondsSince(promoteStarted) << " s\n";
  ASSERT_TRUE(b.sql(bl, "INSERT INTO t VALUES (3)").ok());

  // A back, writable again (the wrong --source-gone of 0083 7.1): its row 99 is on a fork
  // B never has.
  for (int i = 0; i < a.size(); ++i) a.startAgent(i);
  int ap2 = a.waitForHealthyCluster(1, 180s);
  ASSERT_GE(ap2, 0) << a.describe();
  ASSERT_TRUE(a.sql(ap2, "INSERT INTO t VALUES (99)").ok());
  ASSERT_FALSE(holdsRow(b, bl, 99));

  // Refused: a malformed source, and B's hosts as A's own.
  auto refused = adm(a, {"demote-cluster", "--source", "hosts://nowhere"});
  EXPECT_EQ(refused.exitCode, 2) << refused.output;
  refused = adm(a, {"demote-cluster", "--source", hostsOf(a)});
  EXPECT_EQ(refused.exitCode, 2) << refused.output;
  EXPECT_NE(refused.output.find("a peer of this cluster: it would follow itself"), std::string::npos)
      << refused.output;

  // demote-cluster on A toward B: A follows B by rewind, with no copy.
  const size_t historyBefore = a.history().size();
  const int as2 = 1 - ap2;
  const size_t syncLogBefore = fileText(a.peer(as2).logPath).size();
  const auto demoteStarted = std::chrono::steady_clock::now();
  auto demoted = adm(a, {"demote-cluster", "--source", hostsOf(b), "--wait", "180"});
  std::cout << demoted.output;
  ASSERT_EQ(demoted.exitCode, 0) << demoted.output << "\n" << a.logTail(ap2, 80);
  std::cout << "demote-cluster to the old site's leader streaming from the new site: " << secondsSince(demoteStarted)
            << " s\n";
  EXPECT_EQ(a.httpStatus(ap2, "/standby-leader"), 200);
  EXPECT_EQ(a.httpStatus(ap2, "/primary"), 503);
  EXPECT_GE(a.history().size(), historyBefore + 2) << "the request and the standby generation";
  ASSERT_TRUE(b.sql(bl, "INSERT INTO t VALUES (4)").ok());
  ASSERT_TRUE(a.waitFor([&] { return holdsRow(a, ap2, 4); }, 120s)) << a.logTail(ap2, 80);
  std::cout << "demote-cluster to a row written on the new site read on the old site: " << secondsSince(demoteStarted)
            << " s\n";
  EXPECT_TRUE(holdsRow(a, ap2, 3));
  EXPECT_FALSE(holdsRow(a, ap2, 99)) << "what A wrote past the fork is discarded by the rewind";
  // Its sync follows it too, once repaired (printed: by pg_rewind from the leader, or a copy).
  EXPECT_TRUE(a.waitFor([&] { return holdsRow(a, as2, 4) && !holdsRow(a, as2, 99); }, 180s)) << a.logTail(as2, 80);
  const std::string syncLog = fileText(a.peer(as2).logPath).substr(syncLogBefore);
  std::cout << "demote-cluster to the old site's sync holding the row written on the new site: "
            << secondsSince(demoteStarted) << " s; repaired by "
            << (syncLog.find("bin/pg_basebackup") != std::string::npos
                    ? "a copy (pg_basebackup)"
                : syncLog.find("bin/pg_rewind") != std::string::npos ? "pg_rewind"
                                                                       : "neither")
            << "\n";
  const std::string log = fileText(a.peer(ap2).logPath);
  EXPECT_NE(log.find("demoted: pg_rewind from"), std::string::npos) << a.logTail(ap2, 80);
  EXPECT_EQ(log.find("pg_basebackup"), std::string::npos) << "no copy";
  auto r = a.sql(ap2, "SELECT pg_is_in_recovery()", 5s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows[0][0], "t");
  auto shown = adm(a, {"show"});
  EXPECT_NE(shown.output.find("standby cluster of " + std::string("hosts ")), std::string::npos) << shown.output;
}

// A standby cluster fed by a pgBackRest repository (0083 "Phase 8 as built", issue 43's
// third kind of source): a plain postgres primary archives into stanza sa of the test's
// repository, and three agents name `standby.source: pgbackrest://sa` with its options.
// The leader, with no data, is restored from the stanza and replays what the source
// archives, its sync and async cascade from it, and it answers /standby-leader 200 with
// no stream (its sample read the repository). Its host killed: the sync takes over as
// standby leader and keeps restoring. promote-cluster needs --source-gone (no primary
// can be seen in a repository); with it the cluster is writable, with every row the
// source archived.
TEST(StandbyClusterE2E, AStandbyClusterFedByARepositoryFollowsItsArchiveAndIsPromoted) {
  pg::testing::PgTestCluster sourceCluster("dugong-e2e-repository");
  sourceCluster.makePgBackRestDirs();
  pg::testing::PgTestNode& source = sourceCluster.addNode("source-a");
  pg::PgController sourcePg(source.options);
  ASSERT_EQ(pg::testing::startArchivingPrimary(sourceCluster, sourcePg, "sa"), "");
  ASSERT_EQ(source.value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");
  ASSERT_EQ(pg::testing::takeFullBackup(sourceCluster, source, "sa"), "");
  // A row written on the source, and its segment archived (the source switches WAL).
  auto writeAndArchive = [&](int id) {
    ASSERT_EQ(source.value("INSERT INTO t VALUES (" + std::to_string(id) + ")"), "");
    ASSERT_NE(source.value("SELECT pg_switch_wal()::text").rfind("ERROR", 0), 0u);
  };

  HarnessOptions o;
  o.extraConfig = "standby:\n  source: pgbackrest://sa\n  restore:\n    options:\n";
  for (const auto& [key, value] : pg::testing::repositoryOptions(sourceCluster)) {
    o.extraConfig += "      " + key + ": " + value + "\n";
  }
  Harness h(o);
  h.startAll();
  int leader = -1;
  ASSERT_TRUE(h.waitFor([&] { return (leader = streamingLeader(h)) >= 0; }, 240s)) << h.describe();
  ASSERT_TRUE(h.waitFor([&] { return holdsRow(h, 0, 1) && holdsRow(h, 1, 1) && holdsRow(h, 2, 1); }, 180s))
      << h.describe();
  std::set<std::string> roles;
  for (int i = 0; i < h.size(); ++i) roles.insert(h.role(i));
  EXPECT_EQ(roles, (std::set<std::string>{"standby-leader", "sync", "async"}));
  const std::string of = "pgbackrest stanza sa";
  auto leaderState = h.status(leader);
  ASSERT_TRUE(leaderState.has_value());
  EXPECT_EQ((*leaderState)["standby"]["cluster"], "standby cluster of " + of);
  auto r = h.sql(leader, "SHOW primary_conninfo", 5s);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->rows[0][0], "") << "the leader of a repository streams from nothing";
  expectNothingWritable(h);
  writeAndArchive(2);
  EXPECT_TRUE(h.waitFor([&] { return holdsRow(h, 0, 2) && holdsRow(h, 1, 2) && holdsRow(h, 2, 2); }, 120s))
      << h.describe();
  auto shown = adm(h, {"show"});
  EXPECT_EQ(shown.exitCode, 0) << shown.output;
  EXPECT_NE(shown.output.find("standby cluster of " + of + ", standby leader " + h.peer(leader).id), std::string::npos)
      << shown.output;

  // The leader's host lost: its sync takes over as standby leader and restores in turn.
  h.killAgentAndWatchdog(leader);
  h.killPostgres(leader);
  int next = -1;
  ASSERT_TRUE(h.waitFor([&] { return (next = streamingLeader(h)) >= 0 && next != leader; }, 120s)) << h.describe();
  writeAndArchive(3);
  for (int i = 0; i < h.size(); ++i) {
    if (i == leader) continue;
    EXPECT_TRUE(h.waitFor([&] { return holdsRow(h, i, 3); }, 120s)) << h.peer(i).id << "\n" << h.describe();
  }
  expectNothingWritable(h);

  // promote-cluster: a repository shows no primary, so only --source-gone promotes.
  ASSERT_TRUE(sourcePg.apply(PgConfig::none()).ok);
  const size_t writesBefore = h.history().size();
  auto refused = adm(h, {"promote-cluster"});
  EXPECT_EQ(refused.exitCode, 2) << refused.output;
  EXPECT_NE(refused.output.find("the source is a pgBackRest repository (stanza sa): no primary can be seen there"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(h.history().size(), writesBefore) << "a refusal writes nothing";
  auto promoted = adm(h, {"promote-cluster", "--source-gone", "--wait", "120"});
  std::cout << promoted.output;
  ASSERT_EQ(promoted.exitCode, 0) << promoted.output;
  ASSERT_TRUE(h.waitFor([&] { return h.httpStatus(next, "/primary") == 200; }, 60s)) << h.describe();
  expectPromotedAndFollowed(h, next, leader);
  auto history = adm(h, {"history"});
  EXPECT_NE(history.output.find("promote-cluster: no longer a standby cluster of " + of), std::string::npos)
      << history.output;
}

}  // namespace
}  // namespace dugong::e2e
