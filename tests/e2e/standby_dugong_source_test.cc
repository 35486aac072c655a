// A standby cluster of a `dugong` source (issue 43; docs/decisions/0083-standby-cluster.md
// 3.2, 3.3, 5.3; phase 5 as built): two clusters of 3 peers, each with its own ZooKeeper,
// on loopback; the standby cluster's source is `dugong://<the source's ensemble>/<root>`:
// every agent reads the source's state, and the standby leader streams from the source's
// sync. A careful writer writes to the writable site throughout.
// - Failover: the source's primary host killed (agent, watchdog, postmaster): the source's
//   sync takes over and a new sync is named; the standby leader moves to it (a reload),
//   with no copy; every acknowledged row reaches every standby peer; no standby peer ever
//   answers /primary 200.
// - The source site lost under writes: what the leader had received survives its
//   promotion; the lag it reported before is not more than what is missing.
// - A leader restarted with the source gone (0083 "Phase 7 as built"): it keeps running in
//   recovery and promote-cluster --source-gone makes the standby cluster writable.
// - The planned switch of sites and back (0083 5.3): `demote-cluster --source
//   dugong://siteB` on A, then `promote-cluster` (no --source-gone) on B; A follows B with
//   no copy and no rewind; then the same with the sites swapped. No acknowledged row is
//   lost; the time from the first command to the first acknowledged write on the other
//   site is printed (never asserted).
// Label full (two clusters: a few minutes each).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pg/command.h"
#include "pg/testing/pg_test_cluster.h"
#include "tests/e2e/careful_writer.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

pg::CommandResult adm(const Harness& h, std::vector<std::string> args) {
  pg::CommandSpec spec;
  spec.argv = {DUGONG_ADM_BINARY, "--zk", h.zkConnect(), "-c", h.options().cluster};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.timeout = std::chrono::seconds(240);
  return pg::runCommand(spec);
}

// "dugong://127.0.0.1:port/dugong/<cluster>": a harness with a ZooKeeper of its own.
std::string dugongUrl(const Harness& h) { return "dugong://" + h.zkConnect() + "/dugong/" + h.options().cluster; }

long msSince(Clock::time_point t) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

// How many times `needle` appears in peer i's agent log.
size_t countInLog(Harness& h, int i, const std::string& needle) {
  const std::string log = dugong::testing::fileText(h.peer(i).logPath);
  size_t n = 0;
  for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
  return n;
}

bool holds(Harness& h, int peer, int id) {
  auto r = h.sql(peer, "SELECT count(*) FROM acked WHERE id = " + std::to_string(id), 2s);
  return r && !r->rows.empty() && r->rows[0][0] == "1";
}

// The standby leader (its /standby-leader answers 200), or -1.
int standbyLeader(Harness& h) {
  for (int i = 0; i < h.size(); ++i) {
    if (h.agentRunning(i) && h.httpStatus(i, "/standby-leader") == 200) return i;
  }
  return -1;
}

// The source peer the agent says a standby leader of it streams from (/state
// peer.sourceUpstream.id), or "".
std::string sourceUpstream(Harness& h, int i) {
  auto st = h.status(i);
  if (!st || !st->contains("peer") || !(*st)["peer"].contains("sourceUpstream")) return "";
  return (*st)["peer"]["sourceUpstream"].value("id", "");
}

void expectNoPeerWritable(Harness& h, const std::string& why) {
  for (int i = 0; i < h.size(); ++i) {
    if (!h.agentRunning(i)) continue;
    EXPECT_NE(h.httpStatus(i, "/primary"), 200) << h.peer(i).id << " " << why;
  }
}

class StandbyDugongSource : public ::testing::Test {
 protected:
  void TearDown() override {
    if (writer_) writer_->stop();
    if (HasFailure()) {
      if (a_) std::cerr << "site a:\n" << a_->describe();
      if (b_) std::cerr << "site b:\n" << b_->describe();
    }
  }
  // Site a, normal, with table acked and rows written; site b, a standby cluster of
  // dugong://a, its three peers holding a's rows.
  void startSites() {
    HarnessOptions ao;
    ao.cluster = "site-a";
    ao.ownZooKeeper = true;
    a_ = std::make_unique<Harness>(ao);
    a_->startAll();
    const int ap = a_->waitForHealthyCluster(2, 180s);
    ASSERT_GE(ap, 0) << a_->describe();
    ASSERT_TRUE(a_->sql(ap, "CREATE TABLE acked (id int PRIMARY KEY)").ok());
    writer_ = std::make_unique<CarefulWriter>(a_->multiHostConninfo());
    ASSERT_TRUE(a_->waitFor([&] { return writer_->ackedSince(1) >= 10; }, 60s));

    HarnessOptions bo;
    bo.cluster = "site-b";
    bo.ownZooKeeper = true;
    bo.extraConfig = "standby:\n  source: " + dugongUrl(*a_) + "\n";
    b_ = std::make_unique<Harness>(bo);
    b_->startAll();
    int leader = -1;
    ASSERT_TRUE(b_->waitFor([&] { return (leader = standbyLeader(*b_)) >= 0; }, 240s)) << "no standby leader";
    const int early = writer_->nextId() - 1;
    for (int i = 0; i < b_->size(); ++i) {
      ASSERT_TRUE(b_->waitFor([&] { return holds(*b_, i, early); }, 180s)) << b_->peer(i).id << " lacks row " << early;
    }
  }
  // The whole site lost at once: the agents first (an agent left running would start its
  // postgres again), then every postmaster, then the ensemble.
  static void loseSite(Harness& h) {
    for (int i = 0; i < h.size(); ++i) h.killAgentAndWatchdog(i);
    for (int i = 0; i < h.size(); ++i) h.killPostgres(i);
    for (int s = 0; s < h.zookeeper().size(); ++s) h.zookeeper().kill(s);
  }
  // Every row in `acked` on every running peer of h.
  void expectAllRows(Harness& h, const std::set<int>& acked) {
    for (int i = 0; i < h.size(); ++i) {
      if (!h.agentRunning(i)) continue;
      ASSERT_TRUE(h.waitFor([&] { return holds(h, i, *acked.rbegin()); }, 180s))
          << h.peer(i).id << " lacks the last acknowledged row " << *acked.rbegin() << "\n" << h.logTail(i, 40);
      const std::set<int> present = h.intColumn(i, "SELECT id FROM acked");
      size_t missing = 0;
      for (int id : acked) missing += present.count(id) == 0;
      EXPECT_EQ(missing, 0u) << missing << " of " << acked.size() << " acknowledged rows are not on " << h.peer(i).id;
    }
  }

  std::unique_ptr<Harness> a_;
  std::unique_ptr<Harness> b_;
  std::unique_ptr<CarefulWriter> writer_;
};

TEST_F(StandbyDugongSource, FollowsTheSourcesNewSyncAcrossItsFailoverWithoutACopy) {
  ASSERT_NO_FATAL_FAILURE(startSites());
  Harness& a = *a_;
  Harness& b = *b_;
  const int leader = standbyLeader(b);
  ASSERT_GE(leader, 0);
  auto as = a.zkState();
  ASSERT_TRUE(as.has_value() && as->sync.has_value()) << a.zkStateText();
  const std::string sourceSync = as->sync->id;
  EXPECT_TRUE(b.waitFor([&] { return sourceUpstream(b, leader) == sourceSync; }, 30s))
      << "the leader streams from the source's sync " << sourceSync << ", says /state: " << sourceUpstream(b, leader);
  expectNoPeerWritable(b, "before the failover");
  std::vector<size_t> copiesBefore;
  for (int i = 0; i < b.size(); ++i) copiesBefore.push_back(countInLog(b, i, "pg_basebackup finished"));

  const int sourcePrimary = a.writablePrimary();
  ASSERT_GE(sourcePrimary, 0);
  const auto killed = Clock::now();
  a.killAgentAndWatchdog(sourcePrimary);
  a.killPostgres(sourcePrimary);
  int newPrimary = -1;
  ASSERT_TRUE(a.waitFor([&] { return (newPrimary = a.writablePrimary()) >= 0 && newPrimary != sourcePrimary; }, 120s))
      << "the source does not fail over";
  as = a.zkState();
  ASSERT_TRUE(as.has_value() && as->sync.has_value()) << a.zkStateText();
  const std::string newSync = as->sync->id;
  EXPECT_NE(newSync, sourceSync);
  const int afterFailover = writer_->nextId();
  ASSERT_TRUE(a.waitFor([&] { return writer_->ackedSince(afterFailover) >= 1; }, 60s));
  const int probe = *writer_->acked().lower_bound(afterFailover);
  ASSERT_TRUE(b.waitFor([&] { return holds(b, leader, probe); }, 120s))
      << "the standby leader does not receive what the new source primary wrote\n" << b.logTail(leader, 60);
  std::cout << "[standby] the source's primary " << a.peer(sourcePrimary).id << " killed; "
            << a.peer(newPrimary).id << " took over, " << newSync << " is its sync; the standby leader "
            << b.peer(leader).id << " held a row written on the new primary " << msSince(killed)
            << " ms after the kill" << std::endl;
  EXPECT_TRUE(b.waitFor([&] { return sourceUpstream(b, leader) == newSync; }, 30s))
      << "the leader moves to the source's new sync " << newSync << ", says /state: " << sourceUpstream(b, leader);
  auto shown = adm(b, {"show"});
  std::cout << shown.output;
  EXPECT_NE(shown.output.find("source peer followed"), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find(newSync), std::string::npos) << shown.output;
  writer_->stop();
  ASSERT_NO_FATAL_FAILURE(expectAllRows(b, writer_->acked()));
  for (int i = 0; i < b.size(); ++i) {
    EXPECT_EQ(countInLog(b, i, "pg_basebackup finished"), copiesBefore[static_cast<size_t>(i)])
        << b.peer(i).id << " was copied again";
  }
  expectNoPeerWritable(b, "after the failover");
}

// 0083 "Phase 7 as built": site a lost entirely (its agents, postmasters and ZooKeeper
// killed), then the standby leader's agent restarted, so that it starts with no
// observation of its source. It keeps its postgres running in recovery (the same
// postmaster; never writable), and `promote-cluster --source-gone` makes site b writable
// with every row a acknowledged before the loss; b's other peers follow on the new
// timeline.
TEST_F(StandbyDugongSource, ALeaderRestartedWithItsSourceGoneKeepsRunningAndIsPromoted) {
  ASSERT_NO_FATAL_FAILURE(startSites());
  Harness& a = *a_;
  Harness& b = *b_;
  const int leader = standbyLeader(b);
  ASSERT_GE(leader, 0);
  writer_->stop();
  const std::set<int> acked = writer_->acked();
  ASSERT_NO_FATAL_FAILURE(expectAllRows(b, acked));

  loseSite(a);
  const std::string pidFile = b.peer(leader).pg->options.dataDir + "/postmaster.pid";
  const std::string postmasterBefore = dugong::testing::fileText(pidFile).substr(0, 16);
  b.stopAgent(leader);
  b.startAgent(leader);
  ASSERT_TRUE(b.waitFor([&] { return b.role(leader) == "standby-leader"; }, 60s)) << b.logTail(leader, 40);
  EXPECT_EQ(dugong::testing::fileText(pidFile).substr(0, 16), postmasterBefore)
      << "the restarted agent keeps its postgres as it runs";
  auto inRecovery = b.sql(leader, "SELECT pg_is_in_recovery()", 5s);
  ASSERT_TRUE(inRecovery.ok()) << inRecovery.error();
  EXPECT_EQ(inRecovery->rows[0][0], "t");
  expectNoPeerWritable(b, "with the source gone, before promote-cluster");
  // What it holds is said, though the source's position cannot be read.
  std::string lag;
  EXPECT_TRUE(b.waitFor(
      [&] {
        auto st = b.status(leader);
        if (!st || !st->contains("standby") || !(*st)["standby"].is_object()) return false;
        const nlohmann::json l = (*st)["standby"].value("lag", nlohmann::json(nullptr));
        lag = l.is_object() ? l.value("summary", "") : "";
        return !lag.empty();
      },
      30s));
  EXPECT_NE(lag.find("; received 0/"), std::string::npos) << lag;

  auto promoted = adm(b, {"promote-cluster", "--source-gone", "--wait", "120"});
  std::cout << promoted.output;
  ASSERT_EQ(promoted.exitCode, 0) << promoted.output << b.logTail(leader, 60);
  EXPECT_NE(promoted.output.find("standby leader " + b.peer(leader).id + ": lag to "), std::string::npos)
      << promoted.output;
  EXPECT_NE(promoted.output.find("; received 0/"), std::string::npos) << promoted.output;
  ASSERT_TRUE(b.waitFor([&] { return b.httpStatus(leader, "/primary") == 200; }, 60s)) << b.describe();
  ASSERT_TRUE(b.sql(leader, "INSERT INTO acked VALUES (1000000)", 5s).ok());
  std::set<int> all = acked;
  all.insert(1000000);
  ASSERT_NO_FATAL_FAILURE(expectAllRows(b, all));
}

// The source site lost under writes (issue 43's "done when": the site cut off entirely,
// promote-cluster --source-gone; the rows the source acknowledged that reached the
// standby cluster are there, and the lag reported before the promotion against what is
// missing). Site a's postmasters, agents and ZooKeeper are killed while the writer runs:
// between the sites replication is asynchronous, so the last rows a acknowledged may be
// missing on b. Asserted: the acknowledged rows b's leader holds are a prefix of those a
// acknowledged (none missing before one that is there), the promotion keeps every one of
// them, and the source position the leader reported (its last sample of a) is not past a's
// real WAL end (read from a's old primary after its crash recovery, with nothing else
// running on site a), so its reported lag is at most what b is missing. Both numbers and
// the missing rows are printed: their difference is what a wrote after the last sample.
TEST_F(StandbyDugongSource, TheSiteLostUnderWritesLosesOnlyWhatItsLeaderHadNotReceived) {
  ASSERT_NO_FATAL_FAILURE(startSites());
  Harness& a = *a_;
  Harness& b = *b_;
  const int leader = standbyLeader(b);
  ASSERT_GE(leader, 0);
  const int ap = a.indexWithRole("primary");
  ASSERT_GE(ap, 0) << a.describe();
  ASSERT_TRUE(a.waitFor([&] { return writer_->ackedSince(1) >= 40; }, 60s));

  loseSite(a);  // the writer still writing
  writer_->stop();
  const std::set<int> acked = writer_->acked();

  // What the leader reports once its sample finds the source gone.
  nlohmann::json lag;
  ASSERT_TRUE(b.waitFor(
      [&] {
        auto st = b.status(leader);
        if (!st || !st->contains("standby") || !(*st)["standby"].is_object()) return false;
        lag = (*st)["standby"].value("lag", nlohmann::json(nullptr));
        return lag.is_object() && lag["sourceReachable"] == false && lag["receivedLsn"].is_string() &&
               lag["sourceWal"].is_string();
      },
      60s))
      << lag.dump();
  const std::set<int> onLeader = b.intColumn(leader, "SELECT id FROM acked");
  std::set<int> kept;  // what a acknowledged that b's leader holds
  std::vector<int> missing;
  for (int id : acked) {
    if (onLeader.count(id)) {
      kept.insert(id);
    } else {
      missing.push_back(id);
    }
  }
  const int lastHeld = kept.empty() ? 0 : *kept.rbegin();
  for (int id : missing) EXPECT_GT(id, lastHeld) << "row " << id << " is missing before row " << lastHeld;

  // Site a's real WAL end: its old primary's postgres started alone after the loss.
  const pg::testing::PgTestNode& old = *a.peer(ap).pg;
  ASSERT_TRUE(pg::testing::eventually([&] { return !old.postmasterPid(); }, 30s)) << "the killed postmaster is gone";
  // Gone, or a zombie that nobody reaps (postgres would take it for a running server):
  // its lock files are stale, as the adapter's removeStaleLockFiles finds them.
  std::filesystem::remove(old.options.dataDir + "/postmaster.pid");
  std::filesystem::remove(old.options.socketPath() + "/.s.PGSQL." + std::to_string(old.port) + ".lock");
  pg::CommandSpec start;
  start.argv = {old.options.binDir + "/pg_ctl", "-D", old.options.dataDir, "-l", old.options.dataDir + "/after-the-loss.log",
                "-w", "-t", "120", "start"};
  start.runAsUser = old.options.osUser;
  start.timeout = 150s;
  auto started = pg::runCommand(start);
  ASSERT_EQ(started.exitCode, 0) << started.output;
  const auto sourceWal = lag["sourceWal"].get<std::string>();
  const auto received = lag["receivedLsn"].get<std::string>();
  const std::string missingBytes = old.value("SELECT pg_current_wal_lsn() - '" + received + "'::pg_lsn");
  const std::string pastReport = old.value("SELECT pg_current_wal_lsn() - '" + sourceWal + "'::pg_lsn");
  old.forceStop();
  ASSERT_EQ(missingBytes.find("ERROR"), std::string::npos) << missingBytes;
  EXPECT_GE(std::stod(pastReport), 0.0) << "the leader reported a source position past site a's WAL end";
  std::cout << "site a lost under writes: " << acked.size() << " rows acknowledged, " << missing.size()
            << " not on b's leader; the leader reported " << lag.value("lagBytes", nlohmann::json(nullptr)).dump()
            << " bytes of lag (source " << sourceWal << ", received " << received << "); b misses at most "
            << missingBytes << " bytes of a's WAL (to its end after crash recovery, whose own records count too)\n";

  auto promoted = adm(b, {"promote-cluster", "--source-gone", "--wait", "120"});
  std::cout << promoted.output;
  ASSERT_EQ(promoted.exitCode, 0) << promoted.output << b.logTail(leader, 60);
  ASSERT_TRUE(b.waitFor([&] { return b.httpStatus(leader, "/primary") == 200; }, 60s)) << b.describe();
  ASSERT_FALSE(kept.empty());
  ASSERT_NO_FATAL_FAILURE(expectAllRows(b, kept));
}

// One switch: `from` (normal, written to by writer_) demoted toward `to` (a standby of
// `from`), then `to` promoted without --source-gone; writer_ then writes to `to`.
// Returns the ms from the demote command to the first row acknowledged on `to`.
long switchSites(Harness& from, Harness& to, std::unique_ptr<CarefulWriter>& writer, std::set<int>& acked) {
  const auto started = Clock::now();
  // Refused (exit 2) while a site is not healthy yet (its sync's walsender not published
  // by its primary's agent, an agent briefly away under load): asked again.
  auto untilNotRefused = [](const std::function<pg::CommandResult()>& run) {
    pg::CommandResult r = run();
    const auto until = Clock::now() + 90s;
    while (r.exitCode == 2 && Clock::now() < until) {
      std::cout << "refused, asking again: " << r.output;
      std::this_thread::sleep_for(2s);
      r = run();
    }
    return r;
  };
  auto demoted = untilNotRefused([&] { return adm(from, {"demote-cluster", "--source", dugongUrl(to), "--wait", "180"}); });
  std::cout << demoted.output;
  EXPECT_EQ(demoted.exitCode, 0) << demoted.output;
  writer->stop();
  for (int id : writer->acked()) acked.insert(id);
  const int next = writer->nextId() + 1000;
  expectNoPeerWritable(from, "after demote-cluster");
  expectNoPeerWritable(to, "before promote-cluster");
  auto promoted = untilNotRefused([&] { return adm(to, {"promote-cluster", "--wait", "180"}); });
  std::cout << promoted.output;
  EXPECT_EQ(promoted.exitCode, 0) << promoted.output;
  EXPECT_NE(promoted.output.find("lossless: the source was demoted toward this cluster"), std::string::npos)
      << promoted.output;
  writer = std::make_unique<CarefulWriter>(to.multiHostConninfo(), next);
  if (!to.waitFor([&] { return writer->ackedSince(next) >= 1; }, 120s)) {
    ADD_FAILURE() << "no write acknowledged on the promoted site";
    return -1;
  }
  return msSince(started);
}

TEST_F(StandbyDugongSource, APlannedSwitchOfSitesAndBackLosesNothingAndCopiesNothing) {
  ASSERT_NO_FATAL_FAILURE(startSites());
  Harness& a = *a_;
  Harness& b = *b_;
  std::vector<size_t> copiesA, copiesB;
  for (int i = 0; i < 3; ++i) {
    copiesA.push_back(countInLog(a, i, "pg_basebackup finished"));
    copiesB.push_back(countInLog(b, i, "pg_basebackup finished"));
  }
  std::set<int> acked;

  // A -> B.
  const long toB = switchSites(a, b, writer_, acked);
  ASSERT_FALSE(HasFailure()) << a.logTail(a.writablePrimary() >= 0 ? a.writablePrimary() : 0, 60);
  std::cout << "[switch] demote-cluster on site-a to the first write acknowledged on site-b: " << toB << " ms"
            << std::endl;
  const int onB = *writer_->acked().begin();
  const int aLeader = standbyLeader(a);
  ASSERT_TRUE(a.waitFor([&] { return standbyLeader(a) >= 0 && holds(a, standbyLeader(a), onB); }, 120s))
      << "site-a does not follow site-b\n" << a.describe();
  std::cout << "[switch] site-a's leader " << (aLeader >= 0 ? a.peer(aLeader).id : "?")
            << " holds site-b's first row" << std::endl;

  // B -> A.
  const long toA = switchSites(b, a, writer_, acked);
  ASSERT_FALSE(HasFailure());
  std::cout << "[switch] demote-cluster on site-b to the first write acknowledged on site-a: " << toA << " ms"
            << std::endl;
  ASSERT_TRUE(a.waitFor([&] { return writer_->ackedSince(*writer_->acked().begin()) >= 5; }, 60s));
  writer_->stop();
  for (int id : writer_->acked()) acked.insert(id);

  ASSERT_NO_FATAL_FAILURE(expectAllRows(a, acked));
  ASSERT_NO_FATAL_FAILURE(expectAllRows(b, acked));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(countInLog(a, i, "pg_basebackup finished"), copiesA[static_cast<size_t>(i)]) << a.peer(i).id << " copied";
    EXPECT_EQ(countInLog(b, i, "pg_basebackup finished"), copiesB[static_cast<size_t>(i)]) << b.peer(i).id << " copied";
    EXPECT_EQ(countInLog(a, i, "bin/pg_rewind"), 0u) << a.peer(i).id << " rewound";
    EXPECT_EQ(countInLog(b, i, "bin/pg_rewind"), 0u) << b.peer(i).id << " rewound";
  }
  expectNoPeerWritable(b, "at the end");
  std::cout << "[switch] " << acked.size() << " acknowledged rows, all on every peer of both sites" << std::endl;
}

}  // namespace
}  // namespace dugong::e2e
