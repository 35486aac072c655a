// The adapter against real postgres instances, started as the postgres user on loopback.
#include "pg/adapter.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "pg/testing/pg_test_cluster.h"

namespace dugong::pg {
namespace {
using namespace std::chrono_literals;
using testing::PgTestCluster;
using testing::PgTestNode;

constexpr auto kApplyDeadline = 180s;
constexpr auto kConditionDeadline = 60s;

// One adapter per node on a shared io_context, with blocking helpers for the tests.
class AdapterTest : public ::testing::Test {
 protected:
  PgAdapter& adapterFor(PgTestNode& node) {
    auto created = PgAdapter::create(loop_, node.options);
    EXPECT_TRUE(created.ok()) << created.error();
    adapters_.push_back(std::move(created).value());
    return *adapters_.back();
  }

  PgConfigApplied apply(PgAdapter& a, const PgConfig& config) {
    std::optional<PgConfigApplied> result;
    a.apply(config, [&](PgConfigApplied r) { result = r; });
    EXPECT_TRUE(testing::runUntil(loop_, [&] { return result.has_value(); }, kApplyDeadline));
    return result.value_or(PgConfigApplied{false, "no answer", false});
  }

  PgInitialized init(PgAdapter& a) {
    std::optional<PgInitialized> result;
    a.init([&](PgInitialized r) { result = r; });
    EXPECT_TRUE(testing::runUntil(loop_, [&] { return result.has_value(); }, kApplyDeadline));
    return result.value_or(PgInitialized{});
  }

  WalPosition wal(PgAdapter& a) {
    std::optional<WalPositionRead> result;
    a.readWal([&](WalPositionRead r) { result = r; });
    EXPECT_TRUE(testing::runUntil(loop_, [&] { return result.has_value(); }, kConditionDeadline));
    EXPECT_TRUE(result && result->position) << (result ? result->error : "no answer");
    return result && result->position ? *result->position : WalPosition();
  }

  PgStatus status(PgAdapter& a) {
    std::optional<PgStatus> result;
    a.status([&](PgStatus r) { result = r; });
    EXPECT_TRUE(testing::runUntil(loop_, [&] { return result.has_value(); }, kConditionDeadline));
    return result.value_or(PgStatus{});
  }

  // Runs the loop (the primary's sync check lives there) until `condition` holds.
  bool eventually(const std::function<bool()>& condition) {
    return testing::runUntil(loop_, condition, kConditionDeadline);
  }

  static bool writable(const PgTestNode& n) { return n.value("SHOW default_transaction_read_only") == "off"; }
  static bool inRecovery(const PgTestNode& n) { return n.value("SELECT pg_is_in_recovery()") == "t"; }
  static bool streamsFrom(const PgTestNode& upstream, const PgTestNode& standby) {
    return upstream.value("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND "
                          "application_name = '" + standby.id + "'") == "1";
  }
  static ino_t inode(const std::string& path) {
    struct stat st{};
    ::stat(path.c_str(), &st);
    return st.st_ino;
  }

  PgTestCluster cluster_{"dugong-pg-test"};
  boost::asio::io_context loop_;
  std::vector<std::unique_ptr<PgAdapter>> adapters_;  // destroyed before the cluster
  PgConfigApplied r_;

  void TearDown() override { adapters_.clear(); }
};

TEST_F(AdapterTest, PrimaryWithSyncAndCascadingAsyncThroughPromotion) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgTestNode& c = cluster_.addNode("peer-c");
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  PgAdapter& pc = adapterFor(c);

  PgInitialized fresh = init(pa);
  EXPECT_FALSE(fresh.setUp);
  EXPECT_FALSE(fresh.online);

  // A brand-new primary: initdb with checksums, read-only until its sync has caught up.
  auto r = apply(pa, PgConfig::primary(b.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.online);
  EXPECT_EQ(a.value("SHOW data_checksums"), "on");
  EXPECT_EQ(a.value("SHOW synchronous_standby_names"), "\"peer-b\"");
  EXPECT_EQ(a.value("SHOW synchronous_commit"), "on");
  EXPECT_FALSE(writable(a));
  EXPECT_NE(a.value("CREATE TABLE t (id int primary key, v text)").find("read-only transaction"), std::string::npos);
  PgStatus sa = status(pa);
  EXPECT_TRUE(sa.online);
  EXPECT_TRUE(sa.readOnly);
  EXPECT_TRUE(sa.waitingForSync);
  EXPECT_FALSE(sa.inRecovery);
  EXPECT_EQ(sa.timeline, std::optional<int>(1));
  EXPECT_EQ(sa.toJson()["role"], "primary");
  PgInitialized again = init(pa);
  EXPECT_TRUE(again.setUp);
  EXPECT_TRUE(again.online);

  // The sync: rebuilt from the primary (empty data directory), then streaming.
  r = apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(inRecovery(b));
  ASSERT_TRUE(eventually([&] { return writable(a); })) << status(pa).toJson().dump();
  EXPECT_EQ(a.value("SELECT sync_state FROM pg_stat_replication WHERE application_name = 'peer-b'"), "sync");
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key, v text)"), "");
  ASSERT_EQ(a.value("INSERT INTO t VALUES (1, 'one')"), "");
  EXPECT_FALSE(status(pa).waitingForSync);

  // The async cascades from the sync, rebuilt from the primary.
  r = apply(pc, PgConfig::standby(PgRole::kAsync, b.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(eventually([&] { return streamsFrom(b, c); }));
  ASSERT_EQ(a.value("INSERT INTO t VALUES (2, 'two')"), "");
  EXPECT_TRUE(eventually([&] { return b.value("SELECT v FROM t WHERE id = 2") == "two"; }));
  EXPECT_TRUE(eventually([&] { return c.value("SELECT v FROM t WHERE id = 2") == "two"; }));
  PgStatus sc = status(pc);
  EXPECT_TRUE(sc.inRecovery);
  EXPECT_EQ(sc.upstream, std::optional<std::string>("peer-b"));
  EXPECT_EQ(sc.walReceiverStatus, std::optional<std::string>("streaming"));
  PgStatus sb = status(pb);
  ASSERT_EQ(sb.replication.size(), 1u);
  EXPECT_EQ(sb.replication[0].applicationName, "peer-c");
  EXPECT_EQ(sb.replication[0].syncState, "async");

  // WAL positions: the primary is never behind its standbys; a write moves it forward,
  // and the standbys reach it.
  WalPosition wa = wal(pa);
  WalPosition wb = wal(pb);
  WalPosition wc = wal(pc);
  EXPECT_GE(wa, wb);
  EXPECT_GE(wb, wc);
  ASSERT_EQ(a.value("INSERT INTO t VALUES (3, 'three')"), "");
  WalPosition wa2 = wal(pa);
  EXPECT_GT(wa2, wa);
  EXPECT_TRUE(eventually([&] { return wal(pb) >= wa2 && wal(pc) >= wa2; }));
  EXPECT_EQ(WalPosition::parse(a.value("SELECT pg_current_wal_lsn()")).value() >= wa2, true);

  // Without its sync, a commit waits instead of succeeding.
  r = apply(pb, PgConfig::none());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.online);
  EXPECT_FALSE(b.postmasterPid().has_value());
  std::string blocked;
  std::thread writer([&] { blocked = a.value("INSERT INTO t VALUES (4, 'four')", 8s); });
  bool sawWait = testing::eventually(
      [&] { return a.value("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") == "1"; }, 6s);
  writer.join();
  EXPECT_TRUE(sawWait) << "the commit should wait for the sync";
  EXPECT_NE(blocked.find("timed out"), std::string::npos) << blocked;
  // The sync comes back (a stopped standby: started, no rebuild) and commits flow again.
  ino_t bData = inode(b.options.dataDir);
  r = apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(inode(b.options.dataDir), bData);
  ASSERT_EQ(a.value("INSERT INTO t VALUES (5, 'five')", 60s), "");
  EXPECT_TRUE(eventually([&] { return streamsFrom(b, c); }));

  // Re-point the async at the primary: a reload, same postmaster, no rebuild.
  pid_t cPid = c.postmasterPid().value_or(0);
  ino_t cData = inode(c.options.dataDir);
  r = apply(pc, PgConfig::standby(PgRole::kAsync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(eventually([&] { return streamsFrom(a, c); }));
  EXPECT_EQ(c.postmasterPid().value_or(-1), cPid);
  EXPECT_EQ(inode(c.options.dataDir), cData);

  // The primary goes away; the sync is promoted without a restart, with the async as
  // its new sync (re-pointed again, across the timeline switch).
  r = apply(pa, PgConfig::none());
  ASSERT_TRUE(r.ok) << r.error;
  pid_t bPid = b.postmasterPid().value_or(0);
  r = apply(pb, PgConfig::primary(c.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(b.postmasterPid().value_or(-1), bPid);
  EXPECT_FALSE(inRecovery(b));
  r = apply(pc, PgConfig::standby(PgRole::kSync, b.identity, b.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(c.postmasterPid().value_or(-1), cPid);
  ASSERT_TRUE(eventually([&] { return writable(b); })) << status(pb).toJson().dump();
  ASSERT_EQ(b.value("INSERT INTO t VALUES (6, 'six')"), "");
  EXPECT_TRUE(eventually([&] { return c.value("SELECT v FROM t WHERE id = 6") == "six"; }));
  EXPECT_EQ(inode(c.options.dataDir), cData);
  EXPECT_EQ(status(pb).timeline, std::optional<int>(2));
  EXPECT_TRUE(eventually([&] { return status(pc).timeline == std::optional<int>(2); }));

  // The ex-primary comes back as an async: its data directory can follow (it stopped
  // cleanly after its sync had everything), so it streams without a rebuild.
  ino_t aData = inode(a.options.dataDir);
  r = apply(pa, PgConfig::standby(PgRole::kAsync, c.identity, b.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(eventually([&] { return streamsFrom(c, a); }));
  EXPECT_TRUE(eventually([&] { return a.value("SELECT v FROM t WHERE id = 6") == "six"; }));
  EXPECT_EQ(inode(a.options.dataDir), aData);
}

// A primary that wrote WAL its sync never got (commit cancelled while waiting) is
// deposed; the promoted sync writes on. The ex-primary must be rebuilt to follow.
class RebuildTest : public AdapterTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RebuildTest, DivergedExPrimaryIsRebuilt) {
  bool useRewind = GetParam();
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  a.options.useRewind = useRewind;
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);

  ASSERT_TRUE(apply(pa, PgConfig::primary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key, v text); INSERT INTO t VALUES (1, 'both')"), "");
  ASSERT_TRUE(eventually([&] { return b.value("SELECT v FROM t WHERE id = 1") == "both"; }));

  // The sync stops; the primary's next commit is written locally but never acknowledged.
  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  std::string blocked = a.value("INSERT INTO t VALUES (2, 'lost')", 1s);
  ASSERT_NE(blocked.find("timed out"), std::string::npos) << blocked;
  ASSERT_EQ(a.value("SELECT v FROM t WHERE id = 2"), "lost");  // visible locally only

  // The sync takes over alone (one-node-write mode) and writes on its new timeline.
  auto r = apply(pb, PgConfig::primary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(writable(b));
  ASSERT_EQ(b.value("INSERT INTO t VALUES (3, 'new timeline')"), "");

  // The deposed primary is told to follow: it must be rebuilt.
  ino_t before = inode(a.options.dataDir);
  r = apply(pa, PgConfig::standby(PgRole::kSync, b.identity, b.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(inRecovery(a));
  EXPECT_TRUE(eventually([&] { return a.value("SELECT v FROM t WHERE id = 3") == "new timeline"; }));
  EXPECT_EQ(a.value("SELECT count(*) FROM t WHERE id = 2"), "0");
  EXPECT_TRUE(eventually([&] { return streamsFrom(b, a); }));
  if (useRewind) {
    EXPECT_EQ(inode(a.options.dataDir), before) << "pg_rewind works in place";
  } else {
    EXPECT_NE(inode(a.options.dataDir), before) << "pg_basebackup makes a new directory";
  }
  EXPECT_FALSE(std::filesystem::exists(a.options.dataDir + ".dugong-old"));
}

INSTANTIATE_TEST_SUITE_P(ByRewindAndByBasebackup, RebuildTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "PgRewind" : "PgBasebackup"; });

TEST_F(AdapterTest, KilledPostgresIsReportedUnhealthyAndRestartedByTheNextApply) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgAdapter& pa = adapterFor(a);
  ASSERT_TRUE(apply(pa, PgConfig::primary(std::nullopt)).ok);
  EXPECT_TRUE(writable(a));  // one-node-write mode: writable alone
  std::vector<bool> changes;
  pa.startHealthCheck([&](bool healthy, const std::string&) { changes.push_back(healthy); });
  ASSERT_TRUE(eventually([&] { return !changes.empty(); }));
  EXPECT_EQ(changes, std::vector<bool>{true});

  ASSERT_TRUE(a.signalPostmaster(SIGKILL));
  ASSERT_TRUE(eventually([&] { return changes.size() >= 2; }));
  EXPECT_EQ(changes[1], false);
  PgInitialized i = init(pa);
  EXPECT_TRUE(i.setUp);
  EXPECT_FALSE(i.online);

  auto r = apply(pa, PgConfig::primary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.online);
  ASSERT_TRUE(eventually([&] { return changes.size() >= 3; }));
  EXPECT_EQ(changes[2], true);
  EXPECT_EQ(a.value("SELECT 1"), "1");
  pa.stopHealthCheck();
}

TEST_F(AdapterTest, ReplicationWithPasswordAuthentication) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  for (PgTestNode* n : {&a, &b}) n->options.replicationPassword = "s3cret 'quoted'";
  PgAdapter& pa = adapterFor(a);
  ASSERT_TRUE(apply(pa, PgConfig::primary(b.identity)).ok);
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_hba_file_rules WHERE 'replication' = ANY(database) AND "
                    "auth_method = 'scram-sha-256'"),
            "1");
  // A standby without the password cannot rebuild from the primary.
  PgTestNode& c = cluster_.addNode("peer-c");
  r_ = apply(adapterFor(c), PgConfig::standby(PgRole::kAsync, a.identity, a.identity));
  EXPECT_FALSE(r_.ok);
  EXPECT_NE(r_.error.find("password"), std::string::npos) << r_.error;
  // With it, it can, and it streams.
  r_ = apply(adapterFor(b), PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r_.ok) << r_.error;
  EXPECT_TRUE(eventually([&] { return writable(a); }));
  EXPECT_TRUE(streamsFrom(a, b));
}

TEST_F(AdapterTest, BadConfigurationGivesClearErrors) {
  PgTestNode& a = cluster_.addNode("peer-a");

  PgOptions o = a.options;
  o.binDir = "/nonexistent/postgresql/bin";
  auto created = PgAdapter::create(loop_, o);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().find("binDir /nonexistent/postgresql/bin is not a directory"), std::string::npos)
      << created.error();

  o = a.options;
  o.osUser = "no-such-user-dugong";
  created = PgAdapter::create(loop_, o);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().find("osUser 'no-such-user-dugong' does not exist"), std::string::npos);

  o.osUser = "root";
  created = PgAdapter::create(loop_, o);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().find("refuses to run as root"), std::string::npos);

  // An occupied port: the apply fails with a message naming it, and nothing runs.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(a.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  PgAdapter& pa = adapterFor(a);
  auto r = apply(pa, PgConfig::primary(std::nullopt));
  ::close(fd);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.online);
  EXPECT_NE(r.error.find("port " + std::to_string(a.port) + " on 127.0.0.1 is already in use"), std::string::npos)
      << r.error;

  // A standby whose restore peer is unreachable: a clear error, and no data directory
  // is left behind pretending to be set up.
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pb = adapterFor(b);
  r = apply(pb, PgConfig::standby(PgRole::kAsync, a.identity, a.identity));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("pg_basebackup from peer-a"), std::string::npos) << r.error;
  EXPECT_FALSE(init(pb).setUp);

  // A malformed peer URL.
  PeerIdentity broken = a.identity;
  broken.pgUrl = "postgres://nowhere";
  r = apply(pb, PgConfig::standby(PgRole::kAsync, broken, broken));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("tcp://"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace dugong::pg
