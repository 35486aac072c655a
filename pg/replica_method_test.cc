// The replica methods (pg/replica_method.cc) against real postgres and pgBackRest: a
// stanza that holds another database system than the upstream's is not restored (the
// next method, pg_basebackup, makes the standby), and one of the upstream's own system is
// (the standby then keeps pgBackRest's restore_command) and streams; a rebuild over an
// old data directory restores --delta into a copy of it; and the bootstrap from a backup
// (pg/backup_bootstrap.cc) refuses another system's backup without changing anything.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "pg/controller.h"
#include "pg/pgbackrest.h"
#include "pg/testing/backed_up_primary.h"
#include "pg/testing/pg_test_cluster.h"
#include "tests/support/test_env.h"

namespace dugong::pg {
namespace {

using namespace std::chrono_literals;
using testing::PgTestCluster;
using testing::PgTestNode;

class ReplicaMethodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.makePgBackRestDirs();
  }
  std::map<std::string, std::string> backupSection(const std::string& stanza, bool archive) const {
    auto section = testing::repositoryOptions(cluster_);
    section["archive"] = archive ? "on" : "off";
    section["stanza"] = stanza;
    section["replica-methods"] = "pgbackrest,basebackup";
    return section;
  }
  // A primary of its own database system that archives into `stanza`, with a full backup.
  PgController& backedUpPrimary(PgTestNode& node, const std::string& stanza) {
    controllers_.push_back(std::make_unique<PgController>(node.options));
    EXPECT_EQ(testing::startArchivingPrimary(cluster_, *controllers_.back(), stanza,
                                             {{"replica-methods", "pgbackrest,basebackup"}}),
              "");
    EXPECT_EQ(testing::takeFullBackup(cluster_, node, stanza), "");
    return *controllers_.back();
  }
  // A new standby of `upstream` made with the replica methods of `stanza`.
  PgConfigApplied newStandby(PgTestNode& node, const PgTestNode& upstream, const std::string& stanza) {
    controllers_.push_back(std::make_unique<PgController>(node.options));
    controllers_.back()->noteBackupSection(backupSection(stanza, false));
    return controllers_.back()->apply(PgConfig::standby(PgRole::kAsync, upstream.identity, upstream.identity));
  }
  static std::string systemId(const PgTestNode& n) {
    return n.value("SELECT system_identifier::text FROM pg_control_system()");
  }
  // The restores pgBackRest logged for `stanza` (its command lines), in order.
  std::vector<std::string> restoreCommands(const std::string& stanza) const {
    std::vector<std::string> out;
    std::istringstream in(dugong::testing::fileText(cluster_.dir() + "/log/" + stanza + "-restore.log"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("restore command begin") != std::string::npos) out.push_back(line);
    }
    return out;
  }
  // Every path under `dir` with its size and modification time.
  static std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> snapshot(const std::string& dir) {
    std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      out[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
    }
    return out;
  }

  PgTestCluster cluster_{"dugong-replica-method"};
  std::vector<std::unique_ptr<PgController>> controllers_;
  void TearDown() override { cluster_.stopAll(); }
};

TEST_F(ReplicaMethodTest, AnotherSystemsStanzaIsNotRestoredAndTheUpstreamsOwnIs) {
  PgTestNode& a = cluster_.addNode("a");
  PgTestNode& x = cluster_.addNode("x", PgTestCluster::System::kOwn);
  backedUpPrimary(a, "sa");
  backedUpPrimary(x, "sx");
  ASSERT_NE(systemId(a), systemId(x));
  ASSERT_EQ(a.value("CREATE TABLE t AS SELECT 1 AS i"), "");

  // The stanza of x's system: not restored; pg_basebackup from a made the standby.
  PgTestNode& b = cluster_.addNode("b");
  auto r = newStandby(b, a, "sx");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(systemId(b), systemId(a));
  EXPECT_EQ(dugong::testing::fileText(b.options.dataDir + "/postgresql.auto.conf").find("archive-get"), std::string::npos);

  // The stanza of a's own system: restored, then it streams from a.
  PgTestNode& c = cluster_.addNode("c");
  r = newStandby(c, a, "sa");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(systemId(c), systemId(a));
  EXPECT_NE(dugong::testing::fileText(c.options.dataDir + "/postgresql.auto.conf").find("archive-get"), std::string::npos);
  EXPECT_TRUE(testing::eventually([&] { return c.value("SELECT count(*) FROM t") == "1"; }, 60s));
  EXPECT_TRUE(testing::eventually(
      [&] { return c.value("SELECT status FROM pg_stat_wal_receiver") == "streaming"; }, 60s));
}

// A standby whose data directory has files (diverged from its upstream, no rewind
// allowed) is rebuilt from a copy of it, restore --delta; so is one whose earlier attempt
// was interrupted (the old directory aside, an incomplete copy in place, which goes).
TEST_F(ReplicaMethodTest, ARebuildOverAnOldDataDirectoryRestoresDeltaIntoACopyOfIt) {
  PgTestNode& a = cluster_.addNode("a");
  backedUpPrimary(a, "sa");
  ASSERT_EQ(a.value("CREATE TABLE t AS SELECT 1 AS i"), "");
  PgTestNode& c = cluster_.addNode("c");
  auto r = newStandby(c, a, "sa");
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return c.value("SELECT count(*) FROM t") == "1"; }, 60s));
  ASSERT_EQ(restoreCommands("sa").size(), 1u);
  EXPECT_EQ(restoreCommands("sa")[0].find("--delta"), std::string::npos) << "a new peer: an empty directory";

  // c diverges: promoted, it writes a row a never gets; a writes on.
  auto promoted = controllers_.back()->apply(PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(promoted.ok) << promoted.error;
  ASSERT_TRUE(testing::eventually([&] { return c.value("INSERT INTO t VALUES (2)") == ""; }, 30s));
  ASSERT_EQ(a.value("INSERT INTO t VALUES (3)"), "");
  c.options.useRewind = false;
  r = newStandby(c, a, "sa");
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(restoreCommands("sa").size(), 2u);
  EXPECT_NE(restoreCommands("sa")[1].find("--delta"), std::string::npos) << restoreCommands("sa")[1];
  EXPECT_TRUE(testing::eventually([&] { return c.value("SELECT string_agg(i::text, ',' ORDER BY i) FROM t") == "1,3"; },
                                  60s))
      << c.value("SELECT string_agg(i::text, ',' ORDER BY i) FROM t");
  EXPECT_TRUE(testing::eventually(
      [&] { return c.value("SELECT status FROM pg_stat_wal_receiver") == "streaming"; }, 60s));
  EXPECT_FALSE(std::filesystem::exists(c.options.dataDir + ".dugong-old")) << "removed once the new one runs";

  // An interrupted attempt: the old directory aside, an incomplete copy with the marker.
  c.forceStop();
  std::filesystem::rename(c.options.dataDir, c.options.dataDir + ".dugong-old");
  std::filesystem::create_directories(c.options.dataDir + "/base");
  std::ofstream(c.options.dataDir + "/base/leftover") << "half a copy";
  std::ofstream(c.options.dataDir + ".dugong-incomplete") << "pgbackrest restore\n";
  ASSERT_EQ(a.value("INSERT INTO t VALUES (4)"), "");
  r = newStandby(c, a, "sa");
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(restoreCommands("sa").size(), 3u);
  EXPECT_NE(restoreCommands("sa")[2].find("--delta"), std::string::npos) << restoreCommands("sa")[2];
  EXPECT_FALSE(std::filesystem::exists(c.options.dataDir + "/base/leftover"));
  EXPECT_FALSE(std::filesystem::exists(c.options.dataDir + ".dugong-incomplete"));
  EXPECT_TRUE(testing::eventually(
      [&] { return c.value("SELECT string_agg(i::text, ',' ORDER BY i) FROM t") == "1,3,4"; }, 60s));
}

// A bootstrap from a backup of another database system than the data directory's or
// the sync's is refused (an operator's decision: the peer halts), and nothing changes;
// one of the sync's own system restores.
TEST_F(ReplicaMethodTest, ABootstrapFromAnotherSystemsBackupIsRefusedAndChangesNothing) {
  PgTestNode& a = cluster_.addNode("a");
  PgTestNode& x = cluster_.addNode("x", PgTestCluster::System::kOwn);
  backedUpPrimary(a, "sa");
  backedUpPrimary(x, "sx");
  const std::string systemA = systemId(a);
  const std::string systemX = systemId(x);
  ASSERT_NE(systemA, systemX);
  auto bootstrapping = [&](PgTestNode& n, const std::string& stanza) -> PgController& {
    n.options.bootstrapMethod = "pgbackrest";
    n.options.bootstrapStanza = stanza;
    n.options.bootstrapRepo = BackupSettings::parse(backupSection(stanza, false))->options;
    controllers_.push_back(std::make_unique<PgController>(n.options));
    return *controllers_.back();
  };

  // b's data directory holds its own system (an interrupted operation left the marker,
  // so it does not count as set up): a's backup would overwrite it.
  PgTestNode& b = cluster_.addNode("b", PgTestCluster::System::kOwn);
  {
    PgController own(b.options);
    auto applied = own.apply(PgConfig::firstPrimary(std::nullopt));
    ASSERT_TRUE(applied.ok) << applied.error;
  }
  const std::string systemB = systemId(b);
  b.forceStop();
  std::ofstream(b.options.dataDir + ".dugong-incomplete") << "rewind\n";
  const auto before = snapshot(b.options.dataDir);
  auto r = bootstrapping(b, "sa").apply(PgConfig::firstPrimary(std::nullopt));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.refused) << r.error;
  EXPECT_NE(r.error.find(systemA), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(systemB), std::string::npos) << r.error;
  EXPECT_EQ(snapshot(b.options.dataDir), before);

  // d is empty, but its sync a serves another system than x's backup.
  PgTestNode& d = cluster_.addNode("d");
  r = bootstrapping(d, "sx").apply(PgConfig::firstPrimary(a.identity));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.refused) << r.error;
  EXPECT_NE(r.error.find(systemA), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(systemX), std::string::npos) << r.error;
  EXPECT_FALSE(std::filesystem::exists(d.options.dataDir + "/PG_VERSION"));
  EXPECT_EQ(restoreCommands("sx").size(), 0u);

  // With x as its sync (x's own system), the same bootstrap restores.
  r = bootstrapping(d, "sx").apply(PgConfig::firstPrimary(x.identity));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(systemId(d), systemX);
}

}  // namespace
}  // namespace dugong::pg
