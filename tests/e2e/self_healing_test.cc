// Self-healing after primary kills (issue 38): kill -9 of the primary's agent and postmaster
// (as the README's failover demo does), the sync takes over, the killed peer's agent is
// started again, and the ex-primary must stream again as an async by itself (rejoin:
// rewind, the default), with no `dugong-adm rebuild` and no copy (pg_basebackup), round
// after round. Real ZooKeeper, postgres (scram passwords) and agents.
//
// - ThreeKillsThreeRejoins: a fresh cluster with almost no data, three kills in a row.
// - RejoinsAfterARestartOnlySettingWasRaised: max_connections raised cluster-wide
//   (`dugong-adm config set max_connections=120`, `dugong-adm restart --rolling`) before
//   the kill; the rejoined standby must start above the primary's hot-standby floor.
// - TakeoverWhileTheSyncReplayIsHeldBack: under a write load, a read transaction on the
//   sync holds a lock that the replay of the primary's TRUNCATE needs, then the primary is
//   killed: the sync takes over, the killed peer rejoins, the new primary is killed too and
//   is taken over as well; no acknowledged row is lost.
//
// Every wait is bounded (the session timeout plus a generous margin) and fails with the
// agents' logs; nothing asserts on elapsed time as such. The SelfHealingLong tests (more
// rounds, data) carry the ctest labels full and campaign: scripts/test.sh --full runs them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pg/command.h"
#include "pg/connection.h"
#include "pg/sql.h"
#include "tests/e2e/careful_writer.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

// The lines of `text` that contain any of `needles` (the last `max` of them).
std::string linesWith(const std::string& text, const std::vector<std::string>& needles, size_t max = 12) {
  std::vector<std::string> hits;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    for (const auto& n : needles) {
      if (line.find(n) != std::string::npos) {
        hits.push_back(line);
        break;
      }
    }
  }
  std::string out;
  for (size_t k = hits.size() > max ? hits.size() - max : 0; k < hits.size(); ++k) out += "  " + hits[k] + "\n";
  return out;
}

// The log lines that say why a rejoin did not happen (for failure messages).
const std::vector<std::string> kRejoinClues = {"not rejoined", "pg_rewind:", "could not", "is not set up",
                                              "lower setting than on the primary", "rejoining automatically",
                                              "left deposed", "FATAL", "trying again", "by pg_basebackup"};

class SelfHealing : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && h_) std::cerr << h_->describe();
  }

  // The WAL settings left to dugong's and postgres' defaults, as in production and in the
  // README's demo (wal_keep_size 0: slots alone keep WAL), not the test cluster's own
  // (wal_keep_size 256MB, small max/min_wal_size), which keep every segment of a young
  // cluster and so hide what a checkpoint removes. Passwords and scram as always.
  static HarnessOptions production() {
    HarnessOptions o;
    o.clusterWideSettings = {"wal_keep_size", "max_wal_size", "min_wal_size", "checkpoint_timeout", "wal_buffers"};
    return o;
  }

  int startCluster(HarnessOptions o = production()) {
    if (o.cluster == "e2e") o.cluster = "selfheal";
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    const int primary = h_->waitForHealthyCluster(2, 180s);
    EXPECT_GE(primary, 0) << "no writable primary with 2 streaming replicas";
    return primary;
  }

  // How long a takeover or a rejoin may take before the test fails: the session timeout
  // plus a generous margin (a rejoin runs crash recovery, pg_rewind and a start).
  std::chrono::milliseconds bound(std::chrono::seconds margin = 120s) const {
    return std::chrono::milliseconds(h_->options().sessionTimeoutMs) + margin;
  }

  // dugong-adm -z <zk> -c <cluster> <args>; output and exit status.
  pg::CommandResult adm(std::vector<std::string> args) {
    pg::CommandSpec spec;
    spec.argv = {DUGONG_ADM_BINARY, "-z", h_->zkConnect(), "-c", h_->options().cluster};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.timeout = 300s;
    return pg::runCommand(spec);
  }

  bool streams(int i) {
    auto r = h_->sql(i, "SELECT status FROM pg_stat_wal_receiver", 3s);
    return r && !r->rows.empty() && r->rows[0][0] == "streaming";
  }
  bool hasRow(int i, int id) { return h_->intColumn(i, "SELECT id FROM acked WHERE id = " + std::to_string(id)).count(id) == 1; }
  bool insert(int i, int id) {
    return h_->sql(i, "INSERT INTO acked VALUES (" + std::to_string(id) + ")", 5s).ok();
  }

  // Peer `i` is an async of the cluster whose primary is `primaryId`, no longer deposed,
  // and its postgres streams.
  bool rejoined(int i, const std::string& primaryId) {
    auto s = h_->zkState();
    const std::string& id = h_->peer(i).id;
    return s && s->primary.id == primaryId && containsPeer(s->async, id) && !containsPeer(s->deposed, id) &&
           streams(i);
  }

  // Copies of a data directory a peer's agent made (pg_basebackup runs in its log).
  size_t copies(int i) {
    const std::string log = dugong::testing::fileText(h_->peer(i).logPath);
    size_t n = 0;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.find("pg: running") != std::string::npos && line.find("pg_basebackup") != std::string::npos) ++n;
    }
    return n;
  }
  // History entries that name a rebuild (an operator's `dugong-adm rebuild`).
  size_t rebuildsInHistory() {
    size_t n = 0;
    for (const auto& e : h_->history()) n += e.data.find("rebuild peer") != std::string::npos;  // dugong-adm rebuild <id>
    return n;
  }

  std::string whyNotRejoined(int i) {
    return "\n" + h_->peer(i).id + "'s agent log, the lines about the rejoin:\n" +
           linesWith(dugong::testing::fileText(h_->peer(i).logPath), kRejoinClues) + "its postgres log, last lines:\n" +
           linesWith(dugong::testing::fileText(h_->peer(i).pg->options.logPath()), {"FATAL", "LOG", "ERROR", "PANIC"}, 8);
  }

  // One round: a row committed on `primary`, kill -9 of its agent and postmaster, the
  // sync takes over and is writable, the killed agent is started again, and the peer
  // streams again as an async without a copy. `primary` becomes the new primary; `id`
  // and id + 1 are the round's rows.
  void killPrimaryAndAwaitItsRejoin(int round, int& primary, int id) {
    SCOPED_TRACE("round " + std::to_string(round));
    // A WAL segment boundary since the previous round, as any cluster that writes has
    // (16 MB of WAL, or archive_timeout): the primary's last checkpoint (or, on a promoted
    // sync, restartpoint) and its newest slot then lie in different segments.
    ASSERT_TRUE(h_->sql(primary, "SELECT pg_switch_wal()").ok());
    ASSERT_TRUE(insert(primary, id)) << "round " << round << ": the primary takes no write before the kill";
    const int sync = h_->indexWithRole("sync");
    ASSERT_GE(sync, 0);
    const std::string S = h_->peer(sync).id;
    const size_t copiesBefore = copies(primary);
    const size_t rebuildsBefore = rebuildsInHistory();

    h_->killAgent(primary);  // kill -9 "$(cat $d/pid)" "$(head -1 $d/data/postmaster.pid)"
    h_->killPostgres(primary);
    ASSERT_TRUE(h_->waitFor(
        [&] {
          auto s = h_->zkState();
          return s && s->primary.id == S && h_->writablePrimary() == sync;
        },
        bound(60s)))
        << "round " << round << ": " << S << " did not take over";
    EXPECT_TRUE(hasRow(sync, id)) << "round " << round << ": the row committed before the kill is not on " << S;
    // Writable: a commit goes through on the new primary (once its new sync streams).
    ASSERT_TRUE(h_->waitFor([&] { return insert(sync, id + 1); }, bound(60s)))
        << "round " << round << ": the new primary " << S << " takes no write";

    h_->startAgent(primary);
    ASSERT_TRUE(h_->waitFor([&] { return rejoined(primary, S); }, bound()))
        << "round " << round << ": " << h_->peer(primary).id
        << " did not rejoin as a streaming async by itself (its agent started again)" << whyNotRejoined(primary);
    EXPECT_EQ(copies(primary), copiesBefore) << "round " << round << ": rejoined by a copy, not in place";
    EXPECT_EQ(rebuildsInHistory(), rebuildsBefore) << "round " << round << ": a rebuild is in the history";
    EXPECT_TRUE(h_->waitFor([&] { return hasRow(primary, id) && hasRow(primary, id + 1); }, 30s))
        << "round " << round << ": the rejoined peer does not replicate";
    ASSERT_EQ(h_->waitForHealthyCluster(2, bound(60s)), sync) << "round " << round << ": the cluster is not whole";
    primary = sync;
  }

  void createAcked(int primary) {
    auto r = h_->sql(primary, "CREATE TABLE IF NOT EXISTS acked (id int PRIMARY KEY)");
    ASSERT_TRUE(r.ok()) << r.error();
  }

  // Raises max_connections cluster-wide and restarts every peer (rolling); on every peer
  // postgres runs with 120 afterwards.
  void raiseMaxConnections() {
    auto set = adm({"config", "set", "max_connections=120"});
    ASSERT_TRUE(set.ok()) << set.output;
    auto rolling = adm({"restart", "--rolling"});
    ASSERT_TRUE(rolling.ok()) << rolling.output;
    for (int i = 0; i < h_->size(); ++i) {
      EXPECT_TRUE(h_->waitFor([&] { return h_->peer(i).pg->value("SHOW max_connections") == "120"; }, 60s))
          << h_->peer(i).id << " runs max_connections " << h_->peer(i).pg->value("SHOW max_connections");
    }
  }

  void killsAndRejoins(int rounds, int& primary) {
    for (int round = 1; round <= rounds; ++round) {
      killPrimaryAndAwaitItsRejoin(round, primary, round * 1000);
      if (HasFatalFailure()) return;
    }
    ASSERT_TRUE(insert(primary, 999999)) << "the cluster is not writable after the last round";
    std::set<int> present = h_->intColumn(primary, "SELECT id FROM acked");
    for (int round = 1; round <= rounds; ++round) {
      EXPECT_EQ(present.count(round * 1000), 1u) << "the row committed before kill " << round << " is missing";
    }
  }

  // Fills the database with about `mb` MB (a generated table), checkpointed.
  void fill(int primary, int mb) {
    auto r = h_->sql(primary,
                     "CREATE TABLE filler AS SELECT g AS id, repeat(md5(g::text), 28) AS pad FROM generate_series(1, " +
                         std::to_string(mb * 1024) + ") g; CHECKPOINT",
                     600s);
    ASSERT_TRUE(r.ok()) << r.error();
  }

  std::unique_ptr<Harness> h_;
};

class SelfHealingTest : public SelfHealing {};
class SelfHealingLong : public SelfHealing {};

// A fresh cluster with almost no data (the first minutes of a cluster: the standbys'
// slots are younger than the primary's last checkpoint), three kills in a row.
TEST_F(SelfHealingTest, ThreeKillsThreeRejoins) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  createAcked(primary);
  killsAndRejoins(3, primary);
}

// max_connections raised cluster-wide (a hot-standby setting, restart only), rolled out,
// then the primary killed: the rejoined standby must start with at least the primary's
// value (its pg_controldata says 120), not the default 100.
TEST_F(SelfHealingTest, RejoinsAfterARestartOnlySettingWasRaised) {
  HarnessOptions o = production();
  o.clusterWideSettings.insert("max_connections");  // the cluster configuration decides it
  int primary = startCluster(o);
  ASSERT_GE(primary, 0);
  createAcked(primary);
  raiseMaxConnections();
  primary = h_->writablePrimary();  // the rolling restart switched over
  ASSERT_GE(primary, 0);
  killsAndRejoins(2, primary);
  for (int i = 0; i < h_->size(); ++i) {
    EXPECT_EQ(h_->peer(i).pg->value("SHOW max_connections"), "120") << h_->peer(i).id;
  }
}

// Under a write load, the sync's replay is held back by a read transaction on the sync
// holding a lock (ACCESS SHARE on `held`) that the replay of the primary's TRUNCATE of
// `held` needs (max_standby_*_delay are postgres' defaults, 30 s): WAL is received and
// flushed (commits are acknowledged) but not replayed. The primary is killed: the sync
// takes over (it must replay what it flushed); the killed peer rejoins; the new primary is
// killed: its sync takes over too. No acknowledged row is lost, no operator acts.
TEST_F(SelfHealingTest, TakeoverWhileTheSyncReplayIsHeldBack) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  createAcked(primary);
  ASSERT_TRUE(h_->sql(primary, "CREATE TABLE held (id int); INSERT INTO held VALUES (1)").ok());
  const int sync = h_->indexWithRole("sync");
  ASSERT_GE(sync, 0);
  ASSERT_TRUE(h_->waitFor([&] { return h_->intColumn(sync, "SELECT id FROM held").count(1) == 1; }, 30s));
  const size_t copiesBefore = copies(primary);

  CarefulWriter writer(h_->multiHostConninfo());
  ASSERT_TRUE(h_->waitFor([&] { return writer.ackedSince(1) >= 10; }, 60s)) << "the writer gets no acknowledgement";

  // A reader on the sync holds ACCESS SHARE on `held` in an open transaction.
  auto opened = pg::Connection::open(h_->peer(sync).pg->conninfo(), std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(opened.ok()) << opened.error();
  std::unique_ptr<pg::Connection> reader = std::move(opened).value();
  auto locked = reader->query("BEGIN; LOCK TABLE held IN ACCESS SHARE MODE; SELECT count(*) FROM held",
                                 std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(locked.ok()) << locked.error();
  // The primary's TRUNCATE (ACCESS EXCLUSIVE, WAL-logged) commits (the sync flushed it) but
  // its replay waits for the reader: the sync's replay falls behind what it received.
  auto truncated = h_->sql(primary, "TRUNCATE held", 20s);
  ASSERT_TRUE(truncated.ok()) << truncated.error();
  const int firstHeld = writer.nextId();
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto r = h_->sql(sync,
                         "SELECT pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn()", 3s);
        return writer.ackedSince(firstHeld) >= 10 && r && !r->rows.empty() && r->rows[0][0] == "t";
      },
      30s))
      << "the sync's replay is not held back (or no write was acknowledged meanwhile)";
  const auto lagging = h_->sql(sync, "SELECT pg_last_wal_receive_lsn() - pg_last_wal_replay_lsn()");
  std::cerr << "the sync has received " << (lagging ? lagging->rows[0][0].value_or("?") : "?")
            << " bytes it has not replayed; killing the primary\n";

  // 1. The primary killed while its sync's replay is held back.
  const std::string S = h_->peer(sync).id;
  h_->killAgent(primary);
  h_->killPostgres(primary);
  // The takeover may wait for the replay (up to max_standby_archive_delay, 30 s).
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto s = h_->zkState();
        return s && s->primary.id == S && h_->writablePrimary() == sync;
      },
      bound(120s)))
      << S << " did not take over with its replay held back";
  reader.reset();  // the reader's transaction was cancelled by the replay, or ends now
  const int firstAfter = writer.nextId();
  ASSERT_TRUE(h_->waitFor([&] { return writer.ackedSince(firstAfter) >= 5; }, bound(60s)))
      << "no write acknowledged after the first takeover";

  // 2. The killed peer rejoins by itself.
  h_->startAgent(primary);
  ASSERT_TRUE(h_->waitFor([&] { return rejoined(primary, S); }, bound()))
      << h_->peer(primary).id << " did not rejoin as a streaming async by itself" << whyNotRejoined(primary);
  EXPECT_EQ(copies(primary), copiesBefore) << "rejoined by a copy, not in place";

  // 3. The new primary killed too: its sync takes over as well.
  ASSERT_EQ(h_->waitForHealthyCluster(2, bound(60s)), sync) << "the cluster is not whole after the rejoin";
  const int sync2 = h_->indexWithRole("sync");
  ASSERT_GE(sync2, 0);
  const std::string S2 = h_->peer(sync2).id;
  const int firstBeforeSecondKill = writer.nextId();
  ASSERT_TRUE(h_->waitFor([&] { return writer.ackedSince(firstBeforeSecondKill) >= 5; }, 60s));
  h_->killAgent(sync);
  h_->killPostgres(sync);
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto s = h_->zkState();
        return s && s->primary.id == S2 && h_->writablePrimary() == sync2;
      },
      bound(60s)))
      << S2 << " did not take over from the killed " << S;
  const int firstAfterSecond = writer.nextId();
  ASSERT_TRUE(h_->waitFor([&] { return writer.ackedSince(firstAfterSecond) >= 5; }, bound(60s)))
      << "no write acknowledged after the second takeover";
  writer.stop();

  const std::set<int> acked = writer.acked();
  const std::set<int> present = h_->intColumn(sync2, "SELECT id FROM acked");
  size_t lost = 0;
  for (int id : acked) lost += present.count(id) == 0;
  std::cerr << acked.size() << " rows acknowledged, " << lost << " lost\n";
  EXPECT_EQ(lost, 0u) << "acknowledged rows are missing on the final primary " << S2;

  // And the second killed peer rejoins as well: the cluster is whole without an operator.
  h_->startAgent(sync);
  EXPECT_TRUE(h_->waitFor([&] { return rejoined(sync, S2); }, bound()))
      << S << " did not rejoin as a streaming async by itself" << whyNotRejoined(sync);
  EXPECT_EQ(rebuildsInHistory(), 0u);
}

// --full (ctest labels full, campaign): ten kills in a row with 256 MB of data.
TEST_F(SelfHealingLong, TenKillsTenRejoinsWithData) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  createAcked(primary);
  fill(primary, 256);
  killsAndRejoins(10, primary);
}

// --full: the raised setting, then five kills in a row.
TEST_F(SelfHealingLong, FiveRejoinsAfterARestartOnlySettingWasRaised) {
  HarnessOptions o = production();
  o.clusterWideSettings.insert("max_connections");
  int primary = startCluster(o);
  ASSERT_GE(primary, 0);
  createAcked(primary);
  raiseMaxConnections();
  primary = h_->writablePrimary();
  ASSERT_GE(primary, 0);
  killsAndRejoins(5, primary);
}

}  // namespace
}  // namespace dugong::e2e
