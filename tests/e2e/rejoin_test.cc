// A deposed ex-primary rejoins without an operator: real ZooKeeper,
// real postgres, real agents.
// - rejoin: follow: a planned switchover (a promote request of the
//   sync) hands over cleanly, and the old primary streams again as an async, its data
//   directory neither replaced nor rewound;
// - rejoin: rewind (the default): a killed primary (diverged: its crash recovery wrote WAL the new
//   primary does not have) is rewound in place and streams again. That cluster is TLS
//   only (pg_hba hostssl, sslmode verify-full): the standbys' pg_basebackup, the
//   replication, the failover and the pg_rewind all run over TLS.
// (rejoin: manual, Manatee's behaviour, is AdmTest.FreezeUnfreezeAndRebuildOfADeposedPrimary's:
// a killed primary that rewind would rejoin stays deposed until dugong-adm rebuild.)
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "statemachine/time_format.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

ino_t inode(const std::string& path) {
  struct stat st{};
  ::stat(path.c_str(), &st);
  return st.st_ino;
}

EpochMs wallNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class RejoinTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && h_) std::cerr << h_->describe();
  }
  int startCluster(const std::string& extraConfig, bool tlsOnly = false) {
    HarnessOptions o;
    o.cluster = "rejoin";
    o.extraConfig = extraConfig;
    o.tlsOnly = tlsOnly;
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    int primary = h_->waitForHealthyCluster(2, 180s);
    EXPECT_GE(primary, 0) << "no writable primary with 2 streaming replicas";
    return primary;
  }
  // What `dugong-adm promote -r sync` writes.
  bool requestSwitchover(const std::string& sync) {
    return h_->updateState([&](ClusterState& s) {
      s.promote = {{"id", sync}, {"role", "sync"}, {"generation", s.generation},
                   {"expireTime", formatIso8601(wallNow() + 60000)}};
    });
  }
  bool streams(int i) {
    auto r = h_->sql(i, "SELECT status FROM pg_stat_wal_receiver");
    return r && !r->rows.empty() && r->rows[0][0] == "streaming";
  }
  bool hasRow(int i, int id) {
    return h_->intColumn(i, "SELECT id FROM t").count(id) == 1;
  }
  std::unique_ptr<Harness> h_;
};

TEST_F(RejoinTest, AfterASwitchoverTheOldPrimaryStreamsAgainAsItIs) {
  int primary = startCluster("rejoin: follow\n");
  ASSERT_GE(primary, 0);
  int sync = h_->indexWithRole("sync");
  const std::string P = h_->peer(primary).id, S = h_->peer(sync).id;
  ASSERT_TRUE(h_->sql(primary, "CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)").ok());
  const std::string dataDir = h_->peer(primary).pg->options.dataDir;
  const ino_t before = inode(dataDir);

  ASSERT_TRUE(requestSwitchover(S));
  ASSERT_TRUE(h_->waitFor([&] { auto s = h_->zkState(); return s && s->primary.id == S; }, 60s));
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 60s));
  // No operator: the old primary leaves deposed by itself and streams as an async.
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto s = h_->zkState();
        return s && containsPeer(s->async, P) && !containsPeer(s->deposed, P) && streams(primary);
      },
      120s))
      << h_->logTail(primary, 80);
  EXPECT_EQ(inode(dataDir), before) << "the data directory was replaced";
  EXPECT_FALSE(std::filesystem::exists(dataDir + ".dugong-old"));
  const std::string log = dugong::testing::fileText(h_->peer(primary).logPath);
  EXPECT_NE(log.find("switchover to " + S + " requested: stopping postgres now"), std::string::npos);
  EXPECT_NE(log.find("can follow " + S + " as it is"), std::string::npos) << "not a plain follow";
  EXPECT_EQ(log.find("pg_rewind discarded"), std::string::npos);
  EXPECT_EQ(log.find("pg_basebackup"), std::string::npos);
  EXPECT_NE(log.find("left deposed: rejoin " + P), std::string::npos);
  ASSERT_TRUE(h_->sql(sync, "INSERT INTO t VALUES (2)").ok());
  EXPECT_TRUE(h_->waitFor([&] { return hasRow(primary, 1) && hasRow(primary, 2); }, 30s));
}

TEST_F(RejoinTest, RewindRejoinsAKilledPrimaryInPlaceInATlsOnlyCluster) {
  int primary = startCluster("", /*tlsOnly=*/true);
  ASSERT_GE(primary, 0);
  int sync = h_->indexWithRole("sync");
  const std::string P = h_->peer(primary).id, S = h_->peer(sync).id;
  ASSERT_TRUE(h_->sql(primary, "CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)").ok());
  const std::string dataDir = h_->peer(primary).pg->options.dataDir;
  const ino_t before = inode(dataDir);

  h_->killAgent(primary);
  h_->killPostgres(primary);
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 90s));
  ASSERT_TRUE(h_->sql(sync, "INSERT INTO t VALUES (2)").ok());
  h_->startAgent(primary);
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto s = h_->zkState();
        return s && s->primary.id == S && containsPeer(s->async, P) && !containsPeer(s->deposed, P) &&
               streams(primary);
      },
      180s))
      << h_->logTail(primary, 80);
  EXPECT_EQ(inode(dataDir), before) << "copied, not rewound";
  const std::string log = dugong::testing::fileText(h_->peer(primary).logPath);
  EXPECT_NE(log.find("pg_rewind discarded the WAL from"), std::string::npos);
  EXPECT_NE(log.find("left deposed: rejoin " + P + " (automatic, rejoin: rewind)"), std::string::npos);
  EXPECT_TRUE(h_->waitFor([&] { return hasRow(primary, 1) && hasRow(primary, 2); }, 30s));
  // TLS everywhere: pg_hba has no line without it, and both standbys' replication
  // connections (the chain primary -> sync -> async) run over TLS, none without.
  EXPECT_EQ(h_->intColumn(sync, "SELECT count(*) FROM pg_hba_file_rules WHERE type = 'host'"), std::set<int>{0});
  const auto replicationConnections = [&](const std::string& ssl) {
    int n = 0;
    for (int i = 0; i < h_->size(); ++i) {
      for (int c : h_->intColumn(i, "SELECT count(*) FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid) "
                                    "WHERE s.ssl = " + ssl + " AND r.state = 'streaming'")) {
        n += c;
      }
    }
    return n;
  };
  EXPECT_TRUE(h_->waitFor([&] { return replicationConnections("true") == 2; }, 30s));
  EXPECT_EQ(replicationConnections("false"), 0);
}

}  // namespace
}  // namespace dugong::e2e
