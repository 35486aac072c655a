// The replica methods (pg/replica_method.cc) against real postgres and pgBackRest: a
// stanza that holds another database system than the upstream's is not restored (the
// next method, pg_basebackup, makes the standby), and one of the upstream's own system is
// (the standby then keeps pgBackRest's restore_command) and streams.
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "pg/controller.h"
#include "pg/pgbackrest.h"
#include "pg/testing/pg_test_cluster.h"

namespace dugong::pg {
namespace {

using namespace std::chrono_literals;
using testing::PgTestCluster;
using testing::PgTestNode;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ReplicaMethodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const passwd* pw = ::getpwnam("postgres");
    for (const std::string sub : {"/repo", "/log", "/lock"}) {
      std::filesystem::create_directories(cluster_.dir() + sub);
      if (pw) (void)::chown((cluster_.dir() + sub).c_str(), pw->pw_uid, pw->pw_gid);
    }
  }
  std::map<std::string, std::string> backupSection(const std::string& stanza, bool archive) const {
    return {{"archive", archive ? "on" : "off"},
            {"stanza", stanza},
            {"replica-methods", "pgbackrest,basebackup"},
            {"repo1-path", cluster_.dir() + "/repo"},
            {"log-path", cluster_.dir() + "/log"},
            {"lock-path", cluster_.dir() + "/lock"}};
  }
  // A primary of its own database system that archives into `stanza`, with a full backup.
  PgController& backedUpPrimary(PgTestNode& node, const std::string& stanza) {
    controllers_.push_back(std::make_unique<PgController>(node.options));
    PgController& c = *controllers_.back();
    ClusterConfig config;
    config.backup = backupSection(stanza, true);
    EXPECT_TRUE(c.applyClusterConfig(config));
    auto applied = c.apply(PgConfig::primary(std::nullopt));
    EXPECT_TRUE(applied.ok) << applied.error;
    for (const auto& [command, extra] : std::vector<std::pair<std::string, std::vector<std::string>>>{
             {"stanza-create", {}}, {"backup", {"--type=full", "--start-fast"}}}) {
      auto r = runPgBackRest(pgBackRestArgv(stanza, BackupSettings::parse(config.backup)->options, node.options,
                                            command, extra),
                             node.options, 300s);
      EXPECT_TRUE(r.ok()) << command << ": " << r.output;
    }
    return c;
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

  PgTestCluster cluster_{"dugong-replica-method"};
  std::vector<std::unique_ptr<PgController>> controllers_;
  void TearDown() override { cluster_.stopAll(); }
};

TEST_F(ReplicaMethodTest, AnotherSystemsStanzaIsNotRestoredAndTheUpstreamsOwnIs) {
  PgTestNode& a = cluster_.addNode("a");
  PgTestNode& x = cluster_.addNode("x");
  backedUpPrimary(a, "sa");
  backedUpPrimary(x, "sx");
  ASSERT_NE(systemId(a), systemId(x));
  ASSERT_EQ(a.value("CREATE TABLE t AS SELECT 1 AS i"), "");

  // The stanza of x's system: not restored; pg_basebackup from a made the standby.
  PgTestNode& b = cluster_.addNode("b");
  auto r = newStandby(b, a, "sx");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(systemId(b), systemId(a));
  EXPECT_EQ(readFile(b.options.dataDir + "/postgresql.auto.conf").find("archive-get"), std::string::npos);

  // The stanza of a's own system: restored, then it streams from a.
  PgTestNode& c = cluster_.addNode("c");
  r = newStandby(c, a, "sa");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(systemId(c), systemId(a));
  EXPECT_NE(readFile(c.options.dataDir + "/postgresql.auto.conf").find("archive-get"), std::string::npos);
  EXPECT_TRUE(testing::eventually([&] { return c.value("SELECT count(*) FROM t") == "1"; }, 60s));
  EXPECT_TRUE(testing::eventually(
      [&] { return c.value("SELECT status FROM pg_stat_wal_receiver") == "streaming"; }, 60s));
}

}  // namespace
}  // namespace dugong::pg
