// The adapter against real postgres instances, started as the postgres user on loopback.
#include "pg/adapter.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "pg/command.h"
#include "pg/controller.h"
#include "pg/managed_conf.h"
#include "pg/replication_slots.h"
#include "pg/plan/standby_names.h"
#include "pg/testing/pg_test_cluster.h"
#include "pg/testing/test_certs.h"
#include "pg/wal_dir.h"
#include "tests/support/tcp_proxy.h"

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

  WalPositionRead readWal(PgAdapter& a) {
    std::optional<WalPositionRead> result;
    a.readWal([&](WalPositionRead r) { result = r; });
    EXPECT_TRUE(testing::runUntil(loop_, [&] { return result.has_value(); }, kConditionDeadline));
    return result.value_or(WalPositionRead{std::nullopt, "no answer"});
  }

  WalPosition wal(PgAdapter& a) {
    WalPositionRead r = readWal(a);
    EXPECT_TRUE(r.position) << r.error;
    return r.position.value_or(WalPosition());
  }

  PgRejoined rejoin(PgAdapter& a, const PeerIdentity& primary, RejoinLimit limit) {
    std::optional<PgRejoined> result;
    a.rejoin(primary, limit, [&](PgRejoined r) { result = r; });
    EXPECT_TRUE(testing::runUntil(loop_, [&] { return result.has_value(); }, kApplyDeadline));
    return result.value_or(PgRejoined{false, false, "", "no answer"});
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
  // `a` the primary, `b` its sync, streaming, and `a` writable.
  static void startPrimaryWithSync(const PgTestNode& a, PgController& ca, const PgTestNode& b, PgController& cb) {
    ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(b.identity)).ok);
    auto r = cb.apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity));
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_TRUE(testing::eventually([&] { return ca.pollWritable() && streamsFrom(a, b); }, 60s));
  }

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
  auto r = apply(pa, PgConfig::firstPrimary(b.identity));
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

  // The async cascades from the sync, rebuilt from the primary. It reaches the sync
  // through a proxy that can be cut, as a dead host is.
  dugong::testing::TcpProxy toB("127.0.0.1", b.port);
  PeerIdentity bViaProxy = b.identity;
  bViaProxy.pgUrl = "tcp://postgres@127.0.0.1:" + std::to_string(toB.port()) + "/postgres";
  r = apply(pc, PgConfig::standby(PgRole::kAsync, bViaProxy, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(eventually([&] { return streamsFrom(b, c); }));
  ASSERT_EQ(a.value("INSERT INTO t VALUES (2, 'two')"), "");
  EXPECT_TRUE(eventually([&] { return b.value("SELECT v FROM t WHERE id = 2") == "two"; }));
  EXPECT_TRUE(eventually([&] { return c.value("SELECT v FROM t WHERE id = 2") == "two"; }));
  // A standby that has replayed all it received lags by nothing, however long ago the
  // last transaction was (operator review P4: an idle cluster's lag grew).
  ASSERT_TRUE(eventually([&] {
    PgStatus s = status(pc);
    return s.receiveLsn && s.receiveLsn == s.replayLsn;
  }));
  EXPECT_EQ(status(pc).replayLagSeconds, std::optional<double>(0.0)) << status(pc).toJson().dump();
  // A paused replay is in the status (dugong-adm verify reports it).
  EXPECT_FALSE(status(pc).replayPaused);
  ASSERT_EQ(c.value("SELECT pg_wal_replay_pause()"), "");
  EXPECT_TRUE(status(pc).replayPaused);
  ASSERT_EQ(c.value("SELECT pg_wal_replay_resume()"), "");
  EXPECT_FALSE(status(pc).replayPaused);
  // A receiver counts as streaming once it has streamed steadily for a moment
  // (WalReceiverWatch), so the status is read until it does.
  ASSERT_TRUE(eventually([&] { return status(pc).walReceiverStatus == "streaming"; })) << status(pc).toJson().dump();
  PgStatus sc = status(pc);
  EXPECT_TRUE(sc.inRecovery);
  EXPECT_EQ(sc.upstream, std::optional<std::string>("peer-b"));
  PgStatus sb = status(pb);
  ASSERT_EQ(sb.replication.size(), 1u);
  EXPECT_EQ(sb.replication[0].applicationName, "peer-c");
  EXPECT_EQ(sb.replication[0].syncState, "async");
  EXPECT_EQ(sb.replication[0].state, "streaming");
  EXPECT_TRUE(sb.replication[0].flushLsn && WalPosition::parse(*sb.replication[0].flushLsn).ok())
      << status(pb).toJson().dump();

  // WAL positions: the primary is never behind its standbys; a write moves it forward,
  // and the standbys reach it.
  // Downstream first: the primary writes WAL of its own now and then (standby snapshots),
  // so a standby read after it could be ahead of an earlier primary read.
  WalPosition wc = wal(pc);
  WalPosition wb = wal(pb);
  WalPosition wa = wal(pa);
  EXPECT_GE(wa, wb);
  EXPECT_GE(wb, wc);
  ASSERT_EQ(a.value("INSERT INTO t VALUES (3, 'three')"), "");
  WalPosition wa2 = wal(pa);
  EXPECT_GT(wa2, wa);
  EXPECT_TRUE(eventually([&] { return wal(pb) >= wa2 && wal(pc) >= wa2; }));
  EXPECT_EQ(WalPosition::parse(a.value("SELECT pg_current_wal_lsn()")).value() >= wa2, true);
  // The primary's view of its sync (the sync-acknowledgement watch's sample): streaming,
  // flushed at least to the last commit, nothing waiting.
  Result<SyncStandbyView> view = Error{"no answer"};
  pa.syncStandby("peer-b", [&](Result<SyncStandbyView> v) { view = std::move(v); });
  ASSERT_TRUE(eventually([&] { return view.ok(); })) << view.error();
  EXPECT_TRUE(view->streaming);
  ASSERT_TRUE(view->flushed);
  EXPECT_GE(*view->flushed, wa2);
  EXPECT_EQ(view->waitingCommits, 0);

  // Without its sync, a commit waits instead of succeeding.
  r = apply(pb, PgConfig::none());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.online);
  EXPECT_FALSE(b.postmasterPid().has_value());
  std::string blocked;
  std::thread writer([&] { blocked = a.value("INSERT INTO t VALUES (4, 'four')", 8s); });
  bool sawWait = testing::eventually(
      [&] { return a.value("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") == "1"; }, 6s);
  // And as the watch samples it: no walsender, one commit waiting.
  view = Error{"no answer"};
  pa.syncStandby("peer-b", [&](Result<SyncStandbyView> v) { view = std::move(v); });
  EXPECT_TRUE(eventually([&] { return view.ok(); })) << view.error();
  if (view.ok()) {
    EXPECT_FALSE(view->streaming);
    EXPECT_FALSE(view->flushed);
    EXPECT_EQ(view->waitingCommits, 1);
  }
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

  // Re-point the async at the primary: a reload, same postmaster, no rebuild. Its old
  // upstream answers nothing (cut): its slot there is dropped off the switch's path,
  // retried until the old upstream answers again.
  pid_t cPid = c.postmasterPid().value_or(0);
  ino_t cData = inode(c.options.dataDir);
  const std::string cSlotOnB =
      "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slotNameFor("peer-c") + "'";
  ASSERT_EQ(b.value(cSlotOnB), "1");
  toB.cut();
  r = apply(pc, PgConfig::standby(PgRole::kAsync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(eventually([&] { return streamsFrom(a, c); }));
  EXPECT_EQ(c.postmasterPid().value_or(-1), cPid);
  EXPECT_EQ(inode(c.options.dataDir), cData);
  EXPECT_EQ(b.value(cSlotOnB), "1");  // the old upstream could not be reached
  toB.heal();
  EXPECT_TRUE(eventually([&] { return b.value(cSlotOnB) == "0"; }));

  // The primary goes away; the sync is promoted without a restart, with the async as
  // its new sync (re-pointed again, across the timeline switch).
  r = apply(pa, PgConfig::none());
  ASSERT_TRUE(r.ok) << r.error;
  pid_t bPid = b.postmasterPid().value_or(0);
  r = apply(pb, PgConfig::firstPrimary(c.identity));
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

  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key, v text); INSERT INTO t VALUES (1, 'both')"), "");
  ASSERT_TRUE(eventually([&] { return b.value("SELECT v FROM t WHERE id = 1") == "both"; }));

  // The sync stops; the primary's next commit is written locally but never acknowledged.
  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  std::string blocked = a.value("INSERT INTO t VALUES (2, 'lost')", 1s);
  ASSERT_NE(blocked.find("timed out"), std::string::npos) << blocked;
  // Visible locally once the cancel sent at the timeout has ended the commit's wait (a
  // moment later: until then the commit is not visible to other sessions).
  ASSERT_TRUE(testing::eventually([&] { return a.value("SELECT v FROM t WHERE id = 2") == "lost"; }, 10s));

  // The sync takes over alone (one-node-write mode) and writes on its new timeline.
  auto r = apply(pb, PgConfig::firstPrimary(std::nullopt));
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

// A primary killed with SIGKILL after writes its sync never got is
// rewound in place (crash recovery finished first, without clients), not copied in full.
TEST_F(AdapterTest, KilledDivergedExPrimaryIsRewoundNotCopied) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);

  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key, v text); INSERT INTO t VALUES (1, 'both')"), "");
  ASSERT_TRUE(eventually([&] { return b.value("SELECT v FROM t WHERE id = 1") == "both"; }));

  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  std::string blocked = a.value("INSERT INTO t VALUES (2, 'lost')", 1s);
  ASSERT_NE(blocked.find("timed out"), std::string::npos) << blocked;
  // Visible locally once the cancel sent at the timeout has ended the commit's wait (a
  // moment later: until then the commit is not visible to other sessions).
  ASSERT_TRUE(testing::eventually([&] { return a.value("SELECT v FROM t WHERE id = 2") == "lost"; }, 10s));
  ASSERT_TRUE(a.signalPostmaster(SIGKILL));

  auto r = apply(pb, PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(writable(b));
  ASSERT_EQ(b.value("INSERT INTO t VALUES (3, 'new timeline')"), "");

  ino_t before = inode(a.options.dataDir);
  r = apply(pa, PgConfig::standby(PgRole::kSync, b.identity, b.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(inode(a.options.dataDir), before) << "pg_rewind works in place; pg_basebackup makes a new directory";
  EXPECT_FALSE(std::filesystem::exists(a.options.dataDir + ".dugong-old"));
  EXPECT_TRUE(inRecovery(a));
  EXPECT_TRUE(eventually([&] { return a.value("SELECT v FROM t WHERE id = 3") == "new timeline"; }));
  EXPECT_EQ(a.value("SELECT count(*) FROM t WHERE id = 2"), "0");
  EXPECT_EQ(a.value("SELECT string_agg(id || v, ',' ORDER BY id) FROM t"),
            b.value("SELECT string_agg(id || v, ',' ORDER BY id) FROM t"));
  EXPECT_TRUE(eventually([&] { return streamsFrom(b, a); }));
}

// A promoted sync keeps its WAL for the primary it replaced, in that peer's slot, so that
// with dugong's default wal_keep_size (0; PostgreSQL 15's pg_rewind copies whatever the
// source keeps) a killed, diverged ex-primary is rewound and streams even after the new
// primary has checkpointed past the fork: without the slot, the segment where its new
// timeline begins would be gone, and the rewound standby could never stream.
TEST_F(AdapterTest, PromotedSyncKeepsTheWalItsDeposedPrimaryNeedsToRejoin) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  for (PgTestNode* n : {&a, &b}) n->options.settings.erase("wal_keep_size");  // dugong's default
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_EQ(a.value("SHOW wal_keep_size"), "0");
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key, v text); INSERT INTO t VALUES (1, 'both')"), "");
  ASSERT_TRUE(eventually([&] { return b.value("SELECT v FROM t WHERE id = 1") == "both"; }));

  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  ASSERT_EQ(a.value("SET synchronous_commit = local; INSERT INTO t VALUES (2, 'lost')"), "");
  ASSERT_TRUE(a.signalPostmaster(SIGKILL));
  auto r = apply(pb, PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;

  // The slot, named after the deposed peer, reserves from before the fork.
  const std::string slot = slotNameFor(a.id);
  const std::string held = b.value("SELECT pg_walfile_name(restart_lsn) FROM pg_replication_slots WHERE slot_name = '" +
                                   slot + "' AND NOT active");
  EXPECT_EQ(held.rfind("0000000", 0), 0u) << "no slot for the deposed peer: " << held;
  ASSERT_TRUE(writable(b));
  for (int i = 3; i < 8; ++i) {
    ASSERT_EQ(b.value("INSERT INTO t VALUES (" + std::to_string(i) + ", 'new timeline'); SELECT pg_switch_wal(); "
                      "CHECKPOINT"),
              "");
  }
  // Checkpointed past the fork; the segment where the new timeline begins is kept.
  const std::string forkSegment =
      b.value("SELECT pg_walfile_name(split_part(pg_read_file('pg_wal/00000002.history'), E'\\t', 2)::pg_lsn)");
  ASSERT_EQ(forkSegment.rfind("00000002", 0), 0u) << forkSegment;
  if (held.size() == forkSegment.size()) {
    EXPECT_LE(held.substr(8), forkSegment.substr(8));
  }
  EXPECT_EQ(b.value("SELECT count(*) FROM pg_ls_waldir() WHERE name = '" + forkSegment + "'"), "1");
  EXPECT_NE(b.value("SELECT pg_walfile_name(pg_current_wal_lsn())"), forkSegment);

  ino_t before = inode(a.options.dataDir);
  r = apply(pa, PgConfig::standby(PgRole::kSync, b.identity, b.identity));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(inode(a.options.dataDir), before) << "pg_rewind works in place; pg_basebackup makes a new directory";
  EXPECT_TRUE(eventually([&] { return streamsFrom(b, a); }));
  EXPECT_EQ(b.value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "' AND active"), "1");
  EXPECT_TRUE(eventually([&] { return a.value("SELECT count(*) FROM t") == "6"; }));
  EXPECT_EQ(a.value("SELECT count(*) FROM t WHERE id = 2"), "0");
}

// A planned switchover. The sync waits for its upstream's stop, and the primary stops
// cleanly while its sync streams (the sync receives everything, the shutdown checkpoint
// included); the sync has reserved WAL for the primary it replaces during that wait, off
// the takeover's path. Then the sync is promoted: the ex-primary follows the new timeline
// as it is, without a rewind or a copy.
TEST_F(AdapterTest, CleanlyStoppedExPrimaryRejoinsThePromotedSyncAsItIs) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key, v text); INSERT INTO t VALUES (1, 'before')"), "");
  ASSERT_TRUE(eventually([&] { return streamsFrom(a, b); }));

  std::optional<bool> ended;
  pb.awaitUpstreamStop(30s, [&](bool e) { ended = e; });
  const std::string slot = "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slotNameFor(a.identity.id) + "'";
  ASSERT_TRUE(eventually([&] { return b.value(slot) == "1"; })) << "no WAL reserved for " << a.identity.id << " during the wait";
  ASSERT_TRUE(apply(pa, PgConfig::none()).ok);
  ASSERT_TRUE(eventually([&] { return ended.has_value(); }));
  EXPECT_TRUE(*ended) << "the stream did not end";
  auto r = apply(pb, PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(b.value("INSERT INTO t VALUES (2, 'new timeline')"), "");

  ino_t before = inode(a.options.dataDir);
  PgRejoined j = rejoin(pa, b.identity, RejoinLimit::kFollowOnly);
  ASSERT_TRUE(j.ok) << j.error;
  EXPECT_FALSE(j.rewound);
  EXPECT_EQ(inode(a.options.dataDir), before);
  EXPECT_TRUE(inRecovery(a));
  EXPECT_TRUE(eventually([&] { return a.value("SELECT v FROM t WHERE id = 2") == "new timeline"; }));
  EXPECT_TRUE(eventually([&] { return streamsFrom(b, a); }));
}

// A primary that wrote what its sync never got: following only is refused and changes
// nothing; rejoin with rewinding allowed discards exactly that and reports the range.
TEST_F(AdapterTest, DivergedExPrimaryIsRejoinedOnlyWhenARewindIsAllowed) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key, v text); INSERT INTO t VALUES (1, 'both')"), "");
  ASSERT_TRUE(eventually([&] { return b.value("SELECT v FROM t WHERE id = 1") == "both"; }));
  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  std::string blocked = a.value("INSERT INTO t VALUES (2, 'lost')", 1s);
  ASSERT_NE(blocked.find("timed out"), std::string::npos) << blocked;
  ASSERT_TRUE(apply(pa, PgConfig::none()).ok);
  auto r = apply(pb, PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(b.value("INSERT INTO t VALUES (3, 'new timeline')"), "");

  ino_t before = inode(a.options.dataDir);
  PgRejoined refused = rejoin(pa, b.identity, RejoinLimit::kFollowOnly);
  EXPECT_FALSE(refused.ok);
  EXPECT_FALSE(refused.rewound);
  EXPECT_NE(refused.error.find("cannot follow without discarding"), std::string::npos) << refused.error;
  EXPECT_FALSE(a.postmasterPid().has_value()) << "postgres was started";
  EXPECT_EQ(inode(a.options.dataDir), before);

  PgRejoined j = rejoin(pa, b.identity, RejoinLimit::kRewind);
  ASSERT_TRUE(j.ok) << j.error;
  EXPECT_TRUE(j.rewound);
  EXPECT_NE(j.discarded.find("0/"), std::string::npos) << j.discarded;
  EXPECT_EQ(inode(a.options.dataDir), before) << "pg_rewind works in place";
  EXPECT_TRUE(eventually([&] { return a.value("SELECT v FROM t WHERE id = 3") == "new timeline"; }));
  EXPECT_EQ(a.value("SELECT count(*) FROM t WHERE id = 2"), "0");
  EXPECT_TRUE(eventually([&] { return streamsFrom(b, a); }));
}

// A timeline fork under a running standby. c streams from a and has a
// row that b (a's sync, stopped) never got; b is promoted and c is pointed at it: c
// answers SELECT 1 but can never stream. The health check reports it (with the log's
// evidence, also in the status), and the next apply repairs it by pg_rewind.
TEST_F(AdapterTest, StandbyPastATimelineForkIsReportedAndRepaired) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgTestNode& c = cluster_.addNode("peer-c");
  c.options.repairStandbyAfter = 1s;
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  PgAdapter& pc = adapterFor(c);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  // Writable first: becoming writable drops the slots of peers not streaming yet.
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_TRUE(apply(pc, PgConfig::standby(PgRole::kAsync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return streamsFrom(a, c); }));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key, v text); INSERT INTO t VALUES (1, 'all')"), "");
  ASSERT_TRUE(eventually([&] { return b.value("SELECT v FROM t WHERE id = 1") == "all"; }));

  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  ASSERT_EQ(a.value("SET synchronous_commit = local; INSERT INTO t VALUES (2, 'c only')"), "");
  ASSERT_TRUE(eventually([&] { return c.value("SELECT v FROM t WHERE id = 2") == "c only"; }));
  ASSERT_TRUE(apply(pa, PgConfig::none()).ok);
  auto r = apply(pb, PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(b.value("INSERT INTO t VALUES (3, 'new timeline')"), "");

  r = apply(pc, PgConfig::standby(PgRole::kAsync, b.identity, b.identity));  // a reload: it stays past the fork
  ASSERT_TRUE(r.ok) << r.error;
  // Positions do not tell the two apart, timelines do: the promoted sync is on timeline
  // 2 from where it was promoted, and the standby past the fork still on timeline 1
  // there (the initWal check of a takeover, statemachine/peer.cc).
  WalPositionRead rb = readWal(pb);
  WalPositionRead rc = readWal(pc);
  ASSERT_TRUE(rb.position && rb.history) << rb.error;
  ASSERT_TRUE(rc.position && rc.history) << rc.error;
  EXPECT_EQ(rb.history->timeline, 2);
  ASSERT_EQ(rb.history->ancestors.size(), 1u);
  EXPECT_EQ(rb.history->ancestors[0].timeline, 1);
  const WalPosition fork = rb.history->ancestors[0].end;
  EXPECT_GT(*rc.position, fork);
  EXPECT_EQ(rc.history->timeline, 1);
  EXPECT_EQ(rc.history->timelineAt(fork), rb.history->timelineAt(fork));
  EXPECT_NE(rc.history->timelineAt(*rc.position), rb.history->timelineAt(*rc.position));
  std::vector<std::pair<bool, std::string>> changes;
  pc.startHealthCheck([&](bool healthy, const std::string& detail) { changes.emplace_back(healthy, detail); });
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return !changes.empty() && !changes.back().first; }, 60s))
      << "a standby that cannot follow its upstream looks healthy";
  EXPECT_NE(changes.back().second.find("cannot follow its upstream peer-b"), std::string::npos) << changes.back().second;
  EXPECT_EQ(c.value("SELECT 1"), "1");
  PgStatus st = status(pc);
  ASSERT_TRUE(st.streamProblem.has_value());
  EXPECT_NE(st.streamProblem->find("not streaming from peer-b"), std::string::npos) << *st.streamProblem;

  const WalPosition pastTheFork = *rc.position;  // on timeline 1, the WAL c is about to lose
  ino_t before = inode(c.options.dataDir);
  r = apply(pc, PgConfig::standby(PgRole::kAsync, b.identity, b.identity));  // the agent's restart
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(inode(c.options.dataDir), before) << "copied, not rewound";
  EXPECT_TRUE(eventually([&] { return c.value("SELECT v FROM t WHERE id = 3") == "new timeline"; }));
  EXPECT_EQ(c.value("SELECT count(*) FROM t WHERE id = 2"), "0");
  EXPECT_TRUE(eventually([&] { return streamsFrom(b, c); }));
  EXPECT_TRUE(testing::runUntil(loop_, [&] { return changes.back().first; }, 30s)) << "still unhealthy";
  pc.stopHealthCheck();
  // Repaired, it follows timeline 2.
  rc = readWal(pc);
  ASSERT_TRUE(rc.position && rc.history) << rc.error;
  EXPECT_EQ(rc.history->timeline, 2);
  EXPECT_EQ(rc.history->ancestors, rb.history->ancestors);

  // A primary runs only on data that holds its generation's history (pg/plan/transition.h).
  // b, promoted at the fork, holds timeline 1 up to it and timeline 2 after it.
  PgConfig asPrimary = PgConfig::primary(std::nullopt);
  asPrimary.initWal = fork;
  asPrimary.initTimeline = 1;
  r = apply(pb, asPrimary);
  EXPECT_TRUE(r.ok) << r.error;
  asPrimary.initWal = *rb.position;
  asPrimary.initTimeline = 2;
  r = apply(pb, asPrimary);
  EXPECT_TRUE(r.ok) << r.error;
  // c, on timeline 2 since its repair, is not the primary of a generation that began past
  // the fork on timeline 1: it lacks what that generation acknowledged. Stopped, kept.
  asPrimary.initWal = pastTheFork;
  asPrimary.initTimeline = 1;
  r = apply(pc, asPrimary);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.refused);
  EXPECT_FALSE(r.online);
  EXPECT_NE(r.error.find("holds another history than the cluster's"), std::string::npos) << r.error;
  EXPECT_EQ(inode(c.options.dataDir), before);
}

// An async copied from the primary before its upstream, the sync, was copied: the sync
// never had the WAL the async needs next ("requested WAL segment ... has already been
// removed"). Its WAL receiver is refused every 200 ms (wal_retrieve_retry_interval), and
// each refused receiver shows 'streaming' for a few milliseconds. It is never reported
// streaming, and the health check finds that it cannot follow (no clock is reset by each
// refused receiver), at once since the copy is new and waiting cannot help, and the next
// apply repairs it. Seen in CI (SwitchoverUnderAPromise): an async that never streamed counted as
// streaming by /replica, and never repaired.
TEST_F(AdapterTest, AStandbyWhoseUpstreamNeverHadItsWalIsNotStreamingAndIsRepaired) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgTestNode& c = cluster_.addNode("peer-c");
  // Not the general wait: a copy refused by the upstream that was copied after it is
  // repaired within seconds (nothing else would ever let it stream).
  c.options.repairStandbyAfter = 3600s;
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  PgAdapter& pc = adapterFor(c);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  // c is copied from a to stream from b, which is not set up yet.
  auto r = apply(pc, PgConfig::standby(PgRole::kAsync, b.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  // a moves on by three segments; then b is copied, and has none of them.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(a.value("CHECKPOINT"), "");
    ASSERT_FALSE(a.value("SELECT pg_switch_wal()").empty());
  }
  r = apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(eventually([&] { return streamsFrom(a, b); }));
  ASSERT_TRUE(eventually([&] {
    std::stringstream log;
    log << std::ifstream(c.options.logPath()).rdbuf();
    return log.str().find("has already been removed") != std::string::npos;
  })) << "c's receiver is not refused by b";
  int streaming = 0;
  for (int i = 0; i < 300; ++i) {
    streaming += status(pc).walReceiverStatus == "streaming";
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(streaming, 0) << "a standby refused every 200 ms was reported streaming";
  std::vector<std::pair<bool, std::string>> changes;
  pc.startHealthCheck([&](bool healthy, const std::string& detail) { changes.emplace_back(healthy, detail); });
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return !changes.empty() && !changes.back().first; }, 60s))
      << "a standby whose upstream never had its WAL looks healthy";
  EXPECT_NE(changes.back().second.find("has already been removed"), std::string::npos) << changes.back().second;
  r = apply(pc, PgConfig::standby(PgRole::kAsync, b.identity, a.identity));  // the agent's restart
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(eventually([&] { return streamsFrom(b, c); }));
}

TEST_F(AdapterTest, KilledPostgresIsReportedUnhealthyAndRestartedByTheNextApply) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgAdapter& pa = adapterFor(a);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(std::nullopt)).ok);
  EXPECT_TRUE(writable(a));  // one-node-write mode: writable alone
  std::vector<bool> changes;
  pa.startHealthCheck([&](bool healthy, const std::string&) { changes.push_back(healthy); });
  ASSERT_TRUE(eventually([&] { return !changes.empty(); }));
  EXPECT_EQ(changes, std::vector<bool>{true});

  EXPECT_FALSE(pa.postmasterGone());
  ASSERT_TRUE(a.signalPostmaster(SIGKILL));
  ASSERT_TRUE(eventually([&] { return changes.size() >= 2; }));
  EXPECT_EQ(changes[1], false);
  EXPECT_TRUE(pa.postmasterGone()) << "a killed postmaster is reported gone, so the driver restarts it at once";
  PgInitialized i = init(pa);
  EXPECT_TRUE(i.setUp);
  EXPECT_FALSE(i.online);

  auto r = apply(pa, PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.online);
  ASSERT_TRUE(eventually([&] { return changes.size() >= 3; }));
  EXPECT_EQ(changes[2], true);
  EXPECT_FALSE(pa.postmasterGone());
  EXPECT_EQ(a.value("SELECT 1"), "1");
  pa.stopHealthCheck();
}

// A postmaster that runs but does not answer (here: stopped by SIGSTOP) is unhealthy but
// not gone: the driver gives it the restart grace.
TEST_F(AdapterTest, APostmasterThatDoesNotAnswerIsUnhealthyButNotGone) {
  PgTestNode& a = cluster_.addNode("peer-a");
  a.options.queryTimeout = std::chrono::milliseconds(1000);
  PgAdapter& pa = adapterFor(a);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(std::nullopt)).ok);
  std::vector<bool> changes;
  pa.startHealthCheck([&](bool healthy, const std::string&) { changes.push_back(healthy); });
  ASSERT_TRUE(eventually([&] { return !changes.empty(); }));
  ASSERT_TRUE(a.signalPostmaster(SIGSTOP));
  const bool unhealthy = eventually([&] { return changes.size() >= 2; });
  const bool gone = pa.postmasterGone();
  ASSERT_TRUE(a.signalPostmaster(SIGCONT));
  ASSERT_TRUE(unhealthy);
  EXPECT_FALSE(changes[1]);
  EXPECT_FALSE(gone);
  ASSERT_TRUE(eventually([&] { return changes.size() >= 3; }));
  pa.stopHealthCheck();
}

TEST_F(AdapterTest, ReplicationWithPasswordAuthentication) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  for (PgTestNode* n : {&a, &b}) n->options.replicationPassword = "s3cret 'quoted'";
  PgAdapter& pa = adapterFor(a);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_hba_file_rules WHERE 'replication' = ANY(database) AND "
                    "auth_method = 'scram-sha-256'"),
            "1");
  // A standby without the password cannot rebuild from the primary.
  PgTestNode& c = cluster_.addNode("peer-c");
  c.options.replicationPassword = "not the password";
  r_ = apply(adapterFor(c), PgConfig::standby(PgRole::kAsync, a.identity, a.identity));
  EXPECT_FALSE(r_.ok);
  EXPECT_NE(r_.error.find("password"), std::string::npos) << r_.error;
  // With it, it can, and it streams.
  r_ = apply(adapterFor(b), PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r_.ok) << r_.error;
  EXPECT_TRUE(eventually([&] { return writable(a); }));
  EXPECT_TRUE(streamsFrom(a, b));
}

// TLS only (pg/tls.h): pg_hba is hostssl for TCP, replication and the rebuild's
// pg_basebackup run over TLS verified up to the host name, and a peer given the wrong CA
// refuses the upstream and says why.
TEST_F(AdapterTest, TlsOnlyClusterAndAWrongCaRefused) {
  auto certs = testing::makeTestCerts(cluster_.dir() + "/certs", "cluster", "postgres");
  ASSERT_TRUE(certs.ok()) << certs.error();
  auto other = testing::makeTestCerts(cluster_.dir() + "/certs", "other", "postgres");
  ASSERT_TRUE(other.ok()) << other.error();
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgTestNode& c = cluster_.addNode("peer-c");
  for (PgTestNode* n : {&a, &b, &c}) {
    n->options.tls.certFile = certs->certFile;
    n->options.tls.keyFile = certs->keyFile;
    n->options.tls.caFile = certs->caFile;
    n->options.tls.hostsslOnly = true;
    n->options.tls.sslmode = "verify-full";
  }
  c.options.tls.rootCertFile = other->caFile;
  PgAdapter& pa = adapterFor(a);
  r_ = apply(pa, PgConfig::firstPrimary(b.identity));
  ASSERT_TRUE(r_.ok) << r_.error;
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_hba_file_rules WHERE type = 'host'"), "0");
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_hba_file_rules WHERE type = 'hostssl'"), "4");
  EXPECT_EQ(a.value("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"), "t");
  auto plain = runQuery(a.conninfo() + " sslmode=disable", "SELECT 1", 5s);
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.error().find("no encryption"), std::string::npos) << plain.error();

  r_ = apply(adapterFor(b), PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r_.ok) << r_.error;
  EXPECT_TRUE(eventually([&] { return writable(a); }));
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid) WHERE s.ssl AND "
                    "r.application_name = 'peer-b' AND r.state = 'streaming'"),
            "1");

  r_ = apply(adapterFor(c), PgConfig::standby(PgRole::kAsync, a.identity, a.identity));
  EXPECT_FALSE(r_.ok);
  EXPECT_NE(r_.error.find("certificate verify failed"), std::string::npos) << r_.error;
}

// Runs a pg_ctl command on a node's data directory as the postgres user, as an operator would.
CommandResult pgCtl(const PgTestNode& n, std::vector<std::string> args) {
  CommandSpec spec;
  spec.argv = {n.options.binDir + "/pg_ctl", "-D", n.options.dataDir, "-l", n.options.logPath(), "-w", "-t", "60"};
  for (auto& a : args) spec.argv.push_back(std::move(a));
  spec.runAsUser = n.options.osUser;
  spec.timeout = 90s;
  return runCommand(spec);
}

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_F(AdapterTest, SecureByDefault) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pa = adapterFor(a);
  // The bootstrap sets the superuser's password (it used to fail: pg_hba asked for the
  // password over TCP before one was set).
  r_ = apply(pa, PgConfig::firstPrimary(b.identity));
  ASSERT_TRUE(r_.ok) << r_.error;
  ASSERT_TRUE(apply(adapterFor(b), PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));

  // trust only on the Unix socket.
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_hba_file_rules WHERE auth_method = 'trust' AND type <> 'local'"), "0");
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_hba_file_rules WHERE auth_method = 'scram-sha-256'"), "4");
  const std::string host = "host=127.0.0.1 port=" + std::to_string(a.port) + " dbname=postgres ";
  const std::string repl = host + "user=dugong_repl replication=true ";
  auto noPassword = runQuery(repl, "IDENTIFY_SYSTEM", 5s);
  ASSERT_FALSE(noPassword.ok());
  EXPECT_NE(noPassword.error().find("no password supplied"), std::string::npos) << noPassword.error();
  auto wrong = runQuery(repl + "password=guess", "IDENTIFY_SYSTEM", 5s);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().find("password authentication failed"), std::string::npos) << wrong.error();
  auto right = runQuery(repl + buildConninfo({{"password", testing::kTestReplicationPassword}}), "IDENTIFY_SYSTEM", 5s);
  EXPECT_TRUE(right.ok()) << right.error();
  auto superNoPassword = runQuery(host + "user=postgres", "SELECT 1", 5s);
  ASSERT_FALSE(superNoPassword.ok());
  EXPECT_NE(superNoPassword.error().find("no password supplied"), std::string::npos) << superNoPassword.error();

  // The replication role: REPLICATION and what pg_rewind needs, nothing more.
  EXPECT_EQ(a.value("SELECT rolsuper::text || rolreplication::text || rolcreaterole::text || rolcreatedb::text || "
                    "rolbypassrls::text FROM pg_roles WHERE rolname = 'dugong_repl'"),
            "falsetruefalsefalsefalse");
  EXPECT_EQ(a.value("SELECT string_agg(r.rolname, ',') FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid "
                    "JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = 'dugong_repl'"),
            "pg_checkpoint");

  // No password reaches the logs, as text.
  for (const PgTestNode* n : {&a, &b}) {
    std::string log = readAll(n->options.logPath());
    EXPECT_EQ(log.find(testing::kTestSuperuserPassword), std::string::npos);
    EXPECT_EQ(log.find(testing::kTestReplicationPassword), std::string::npos);
  }
}

TEST_F(AdapterTest, PasswordlessReplicationIsRefusedUnlessLoopbackAndAllowed) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgOptions o = a.options;
  o.replicationPassword.reset();
  o.replicationCidr = "10.0.0.0/24";
  auto created = PgAdapter::create(loop_, o);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().find("replicationCidr 10.0.0.0/24 reaches beyond loopback, and replicationPassword "
                                 "(or replicationPasswordFile) is not set"),
            std::string::npos)
      << created.error();
  o.allowTrust = true;  // trust is never extended beyond loopback
  EXPECT_FALSE(PgAdapter::create(loop_, o).ok());
  o.replicationCidr = "127.0.0.1/32";
  o.allowTrust = false;
  created = PgAdapter::create(loop_, o);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().find("or set allowTrust: true"), std::string::npos) << created.error();
  o.allowTrust = true;
  EXPECT_TRUE(PgAdapter::create(loop_, o).ok());
  o.replicationCidr = "10.0.0.0/24";
  o.replicationPassword = "given";
  o.allowTrust = false;
  EXPECT_TRUE(PgAdapter::create(loop_, o).ok());
  EXPECT_TRUE(isLoopbackCidr("127.0.0.0/8"));
  EXPECT_TRUE(isLoopbackCidr("::1/128"));
  EXPECT_FALSE(isLoopbackCidr("0.0.0.0/0"));
  EXPECT_FALSE(isLoopbackCidr("127.0.0.0/7"));
  EXPECT_FALSE(isLoopbackCidr("128.0.0.1/32"));
}

// Role none, also for a deposed ex-primary: a manual start cannot accept writes, and
// the data directory is still checked for divergence before it follows anyone.
TEST_F(AdapterTest, RoleNoneLeavesNoWritableConfiguration) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");
  ASSERT_TRUE(eventually([&] { return b.value("SELECT count(*) FROM t") == "1"; }));
  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  ASSERT_NE(a.value("INSERT INTO t VALUES (2)", 1s).find("timed out"), std::string::npos);  // only local

  ASSERT_TRUE(apply(pa, PgConfig::none()).ok);
  EXPECT_FALSE(a.postmasterPid().has_value());
  auto started = pgCtl(a, {"start"});
  ASSERT_TRUE(started.ok()) << started.output;
  EXPECT_EQ(a.value("SELECT pg_is_in_recovery()"), "t");
  EXPECT_NE(a.value("BEGIN READ WRITE; SET LOCAL synchronous_commit = local; INSERT INTO t VALUES (3); COMMIT")
                .find("during recovery"),
            std::string::npos);
  ASSERT_TRUE(pgCtl(a, {"stop", "-m", "fast"}).ok());

  // The sync takes over alone; the ex-primary (row 2 only it has) must be rewound or
  // rebuilt when it follows, although standby.signal is there.
  ASSERT_TRUE(apply(pb, PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_EQ(b.value("INSERT INTO t VALUES (4)"), "");
  r_ = apply(pa, PgConfig::standby(PgRole::kAsync, b.identity, b.identity));
  ASSERT_TRUE(r_.ok) << r_.error;
  EXPECT_TRUE(eventually([&] { return a.value("SELECT count(*) FROM t WHERE id = 4") == "1"; }));
  EXPECT_EQ(a.value("SELECT count(*) FROM t WHERE id = 2"), "0");
}

// A primary that was told none (an agent restart, a withdrawal) and then primary
// again resumes without a promotion: same timeline.
TEST_F(AdapterTest, PrimaryAfterNoneResumesWithoutPromotion) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgAdapter& pa = adapterFor(a);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_TRUE(apply(pa, PgConfig::none()).ok);
  r_ = apply(pa, PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r_.ok) << r_.error;
  EXPECT_EQ(status(pa).timeline, std::optional<int>(1));
  EXPECT_TRUE(writable(a));
  EXPECT_EQ(a.value("SELECT pg_is_in_recovery()"), "f");
}

// A standby that falls further behind than wal_keep_size catches up through its slot.
TEST_F(AdapterTest, LaggingStandbyCatchesUpThroughItsSlot) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  for (PgTestNode* n : {&a, &b}) n->options.settings["wal_keep_size"] = "0";
  a.options.dropInactiveSlotAfter = 0s;  // dropped at the first sight (the delay: below)
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kAsync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return streamsFrom(a, b); }));
  const std::string slot = slotNameFor("peer-b");
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "' AND active"), "1");
  ASSERT_EQ(a.value("CREATE TABLE t (id int)"), "");

  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  std::string behind = b.value("SELECT 1");  // stopped: b is not reachable
  ASSERT_NE(behind.find("ERROR"), std::string::npos);
  const std::string firstSegment = a.value("SELECT pg_walfile_name(pg_current_wal_lsn())");
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(a.value("INSERT INTO t VALUES (" + std::to_string(i) + "); SELECT pg_switch_wal(); CHECKPOINT"), "");
  }
  // Without the slot, the segment b needs would be gone now (wal_keep_size is 0).
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_ls_waldir() WHERE name = '" + firstSegment + "'"), "1");
  EXPECT_NE(a.value("SELECT wal_status FROM pg_replication_slots WHERE slot_name = '" + slot + "'"), "lost");

  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kAsync, a.identity, a.identity)).ok);
  EXPECT_TRUE(eventually([&] { return b.value("SELECT count(*) FROM t") == "8"; })) << readAll(b.options.logPath());

  // Moving to another upstream drops the slot on the old one; a primary drops the
  // inactive slots of peers that are not its sync.
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_replication_slots"), "1");
  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(std::nullopt)).ok);
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_replication_slots"), "0");
}

// The slot of a peer that is not the sync is kept while it has been inactive for less than
// dropInactiveSlotAfter (a peer being rebuilt creates it before it streams), then dropped.
TEST_F(AdapterTest, APrimaryDropsTheInactiveSlotOfAnotherPeerOnlyAfterADelay) {
  PgTestNode& a = cluster_.addNode("peer-a");
  a.options.dropInactiveSlotAfter = 2s;
  PgController ca(a.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(std::nullopt)).ok);
  const std::string slot = slotNameFor("peer-rebuilt");
  ASSERT_EQ(a.value("SELECT 'created' FROM pg_create_physical_replication_slot('" + slot + "', true)"), "created");
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(std::nullopt)).ok);  // first seen inactive: kept
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'"), "1");
  std::this_thread::sleep_for(2500ms);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(std::nullopt)).ok);  // inactive for longer than 2 s: dropped
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'"), "0");
}

// A standby whose slot its upstream dropped (a primary drops the inactive slots of the
// peers that are not its sync, e.g. while a deposed peer is being rebuilt) is refused by
// the upstream for good: "replication slot ... does not exist". Its health check sees
// that and creates the slot again, and the standby streams again.
TEST_F(AdapterTest, AStandbyWhoseSlotTheUpstreamDroppedCreatesItAgain) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgController ca(a.options);
  PgController cb(b.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_TRUE(cb.apply(PgConfig::standby(PgRole::kAsync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return streamsFrom(a, b); }));
  const std::string slot = slotNameFor(b.id);
  // Dropped between two connections of the standby, as an inactive slot is: the
  // walsender is ended and the slot dropped in one server-side block, since the standby
  // connects again within wal_retrieve_retry_interval (200 ms), less than a round trip of
  // this test's client takes on a loaded machine (the CI's sanitizer build).
  bool dropped = false;
  std::string last;
  ASSERT_TRUE(eventually([&] {
    if (dropped) return true;
    last = a.value("DO $$ BEGIN PERFORM pg_terminate_backend(active_pid, 2000) FROM pg_replication_slots WHERE "
                   "slot_name = '" + slot + "' AND active; PERFORM pg_drop_replication_slot('" + slot + "'); END $$");
    return dropped = last.empty();
  })) << last;
  ASSERT_TRUE(eventually([&] { return readAll(b.options.logPath()).find("\"" + slot + "\" does not exist") !=
                                      std::string::npos; }));
  EXPECT_TRUE(eventually([&] {
    (void)cb.healthCheck();
    return streamsFrom(a, b);
  })) << readAll(b.options.logPath());
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "' AND active"), "1");
}

// The primary's catch-up poll and a fence, interleaved deterministically: the poll has
// read the configuration and decided to make the primary writable when the fence for
// a new sync starts. The fence must win: commits wait for the new sync.
TEST_F(AdapterTest, CatchUpPollCannotUndoAFence) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgTestNode& c = cluster_.addNode("peer-c");
  PgController ca(a.options);
  PgController cb(b.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(cb.apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  std::atomic<bool> fenceDone{false};
  std::optional<PgFenced> fenced;
  std::thread fencer;
  ca.setTestHook([&](const std::string& point) {
    if (point != "pollWritable:beforeWrite" || fencer.joinable()) return;
    fencer = std::thread([&] {
      fenced = ca.fence(c.identity);
      fenceDone = true;
    });
    // Without serialization the fence finishes here, before the poll writes.
    testing::eventually([&] { return fenceDone.load(); }, 5s);
  });
  ASSERT_TRUE(testing::eventually([&] { return ca.pollWritable(); }, 60s));
  fencer.join();
  ASSERT_TRUE(fenced && fenced->ok) << (fenced ? fenced->error : "no fence");
  EXPECT_TRUE(waitsForAll(a.value("SHOW synchronous_standby_names"), {"peer-c", "peer-b"}))
      << a.value("SHOW synchronous_standby_names");
  // And the fence is still verified when the WAL position is read.
  WalPositionRead w = ca.readWal();
  EXPECT_TRUE(w.position.has_value()) << w.error;
}

// A primary fenced for a new sync makes commits wait for the new sync AND the current
// one until its next apply: the takeover's state write may land or not, and whichever
// of the two is the sync afterwards must hold every commit acknowledged meanwhile.
TEST_F(AdapterTest, AFencedPrimaryWaitsForTheNewSyncAndTheCurrentOne) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgTestNode& c = cluster_.addNode("peer-c");
  PgController ca(a.options);
  PgController cb(b.options);
  PgController cc(c.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(cb.apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(cc.apply(PgConfig::standby(PgRole::kAsync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return ca.pollWritable() && streamsFrom(a, b) && streamsFrom(a, c); }));
  PgFenced f = ca.fence(c.identity);
  ASSERT_TRUE(f.ok) << f.error;
  EXPECT_TRUE(waitsForAll(a.value("SHOW synchronous_standby_names"), {"peer-c", "peer-b"}))
      << a.value("SHOW synchronous_standby_names");
  EXPECT_TRUE(eventually([&] {
    return a.value("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == "2";
  })) << "both walsenders must release commits together";
  WalPositionRead w = ca.readWal();
  EXPECT_TRUE(w.position.has_value()) << w.error;
  // Fenced again for another new sync (the takeover changed its target, no apply in
  // between): commits still wait for the sync of the last apply, peer-b, whatever lands.
  PgTestNode& d = cluster_.addNode("peer-d");
  PgController cd(d.options);
  ASSERT_TRUE(cd.apply(PgConfig::standby(PgRole::kAsync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return streamsFrom(a, d); }));
  f = ca.fence(d.identity);
  ASSERT_TRUE(f.ok) << f.error;
  EXPECT_TRUE(waitsForAll(a.value("SHOW synchronous_standby_names"), {"peer-d", "peer-b"}))
      << a.value("SHOW synchronous_standby_names");
  // The next apply names one sync again.
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(c.identity)).ok);
  EXPECT_TRUE(waitsForExactly(a.value("SHOW synchronous_standby_names"), "peer-c"));
}

// A fenced standby's fence holds until its configuration changes again: a WAL read
// after a fence verifies it, and refuses when streaming came back.
TEST_F(AdapterTest, StandbyFenceIsVerifiedWhenTheWalIsRead) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgController ca(a.options);
  PgController cb(b.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(cb.apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(testing::eventually([&] { return streamsFrom(a, b); }, 60s));
  PgFenced f = cb.fence(std::nullopt);
  ASSERT_TRUE(f.ok) << f.error;
  EXPECT_EQ(b.value("SELECT count(*) FROM pg_stat_wal_receiver"), "0");
  WalPositionRead w = cb.readWal();
  ASSERT_TRUE(w.position.has_value()) << w.error;
  EXPECT_EQ(w.instance, f.instance);
  // Someone points it at the primary again behind the adapter's back.
  ASSERT_EQ(b.value("ALTER SYSTEM SET primary_conninfo = " +
                    quoteLiteral(buildConninfo({{"host", "127.0.0.1"},
                                                {"port", std::to_string(a.port)},
                                                {"user", "dugong_repl"},
                                                {"password", testing::kTestReplicationPassword},
                                                {"application_name", "peer-b"}}))),
            "");
  ASSERT_EQ(b.value("SELECT pg_reload_conf()"), "t");
  ASSERT_TRUE(testing::eventually([&] { return streamsFrom(a, b); }, 30s));
  w = cb.readWal();
  EXPECT_FALSE(w.position.has_value());
  EXPECT_NE(w.error.find("the fence no longer holds"), std::string::npos) << w.error;
  // The next apply lifts the fence.
  ASSERT_TRUE(cb.apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  EXPECT_TRUE(cb.readWal().position.has_value());
}

// A host's death: its postmaster and every process it started, SIGKILLed at once.
void killHost(const PgTestNode& n) {
  const std::optional<pid_t> postmaster = n.postmasterPid();
  ASSERT_TRUE(postmaster.has_value());
  std::vector<pid_t> children;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent == *postmaster) children.push_back(static_cast<pid_t>(std::stol(name)));
  }
  ::kill(*postmaster, SIGKILL);
  for (pid_t child : children) ::kill(child, SIGKILL);
}

// Long records (1 MB each) in one transaction on `a`, so that no commit waits for `b`:
// `b` receives what `a` has flushed (at segment ends, and from its WAL writer), which ends
// inside a record. Once `b` has received 16 MB past what it replayed, `a`'s host dies.
void longRecordsUntilTheHostDies(const PgTestNode& a, const PgTestNode& b) {
  std::thread load([&] {
    const std::string out = a.value(
        "DO $$ BEGIN FOR i IN 1..2000 LOOP PERFORM pg_logical_emit_message(true, 'x', repeat('x', 1000000)); "
        "END LOOP; END $$",
        120s);
    std::cout << "the load ended: " << (out.empty() ? "done before the host's death" : out) << "\n";
  });
  const bool behind = testing::eventually(
      [&] {
        return b.value("SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) > 16000000") ==
               "t";
      },
      60s);
  killHost(a);
  load.join();
  ASSERT_TRUE(behind) << "b received no WAL past its replay position";
}

// Fences `b`, reads its initWal, promotes it as the takeover does, and checks that
// initWal is not past the new timeline's fork, and that the same primary configuration
// applies again (an agent restart, a health restart).
void takeOverAndCheckTheFork(PgController& cb, const PgTestNode& b) {
  PgFenced f = cb.fence(std::nullopt);
  ASSERT_TRUE(f.ok) << f.error;
  auto received = WalPosition::parse(b.value("SELECT pg_last_wal_receive_lsn()"));
  ASSERT_TRUE(received.ok()) << received.error();
  WalPositionRead w = cb.readWal();
  ASSERT_TRUE(w.position && w.history) << w.error;
  EXPECT_EQ(w.history->timeline, 1);
  const WalPosition initWal = *w.position;

  // initTimeline as the state machine records it (statemachine/peer.cc).
  PgConfig asPrimary = PgConfig::primary(std::nullopt);
  asPrimary.initWal = initWal;
  asPrimary.initTimeline = w.history->timelineAt(initWal);
  PgConfigApplied r = cb.apply(asPrimary);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(b.value("SELECT pg_is_in_recovery()"), "f");

  auto promoted = readNewestTimelineHistory(b.options.dataDir + "/pg_wal");
  ASSERT_TRUE(promoted.ok()) << promoted.error();
  ASSERT_EQ(promoted->timeline, 2) << promoted->describe();
  ASSERT_EQ(promoted->ancestors.size(), 1u) << promoted->describe();
  const WalPosition fork = promoted->ancestors[0].end;
  std::cout << "received " << received->toString() << ", initWal " << initWal.toString() << ", fork "
            << fork.toString()
            << (*received > fork ? " (received past the fork: the case)"
                                 : " (the kill landed on a record boundary: this run does not show the case)")
            << "\n";
  EXPECT_LE(initWal, fork) << "initWal past the new timeline's fork";
  EXPECT_EQ(promoted->timelineAt(initWal), asPrimary.initTimeline) << promoted->describe();
  r = cb.apply(asPrimary);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.refused);
}

// Safety review 2f035ac, finding 2: a fenced sync whose replay lags (here a
// recovery_min_apply_delay on its host) reads as initWal where its replay ends, never
// what it received: its primary died in the middle of long records, and what it
// received ends inside one. The promotion starts the new timeline at the end of the last
// complete record, so an initWal past it was on the new timeline in the promoted history,
// and every later apply of the same primary configuration was refused ("holds another
// history than the cluster's").
TEST_F(AdapterTest, AFencedStandbysWalEndsWhereReplayEndsNotPastTheFork) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  b.options.settings["recovery_min_apply_delay"] = "1h";  // its replay stops at the first commit it receives
  PgController ca(a.options);
  PgController cb(b.options);
  startPrimaryWithSync(a, ca, b, cb);
  if (HasFatalFailure()) return;
  // Acknowledged, so flushed on b; not replayed there while the delay holds.
  ASSERT_EQ(a.value("CREATE TABLE t (id int); INSERT INTO t VALUES (1)"), "");
  longRecordsUntilTheHostDies(a, b);
  if (HasFatalFailure()) return;
  takeOverAndCheckTheFork(cb, b);
  if (HasFatalFailure()) return;
  EXPECT_EQ(b.value("SELECT count(*) FROM t WHERE id = 1"), "1") << "an acknowledged commit is missing";
}

// The two ways a data directory of another database system meets a cluster: the
// ZooKeeper state was lost and a peer with an empty data directory set up a new
// cluster, or a live database's agent has the wrong cluster name. Either way the peer
// holding the data refuses to be rebuilt from the other system, changing nothing,
// until the operator's command.
TEST_F(AdapterTest, DataOfAnotherSystemIsNeverReplaced) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgTestNode& c = cluster_.addNode("peer-c", PgTestCluster::System::kOwn);
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  PgAdapter& pc = adapterFor(c);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_EQ(a.value("CREATE TABLE precious (v text); INSERT INTO precious VALUES ('the real data')"), "");
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kAsync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return b.value("SELECT count(*) FROM precious") == "1"; }));
  ASSERT_TRUE(apply(pc, PgConfig::firstPrimary(std::nullopt)).ok);  // a new, empty system
  const std::string real = a.value("SELECT system_identifier::text FROM pg_control_system()");
  const std::string other = c.value("SELECT system_identifier::text FROM pg_control_system()");
  ASSERT_NE(real, other);

  // State lost: the real primary is told to follow the new, empty one.
  pid_t aPid = a.postmasterPid().value_or(0);
  r_ = apply(pa, PgConfig::standby(PgRole::kSync, c.identity, c.identity));
  EXPECT_FALSE(r_.ok);
  EXPECT_TRUE(r_.refused) << "an operator's decision, not a failure to retry";
  EXPECT_TRUE(r_.online);
  for (const std::string& want : std::vector<std::string>{"refusing to replace the data directory " + a.options.dataDir,
                                  "database system " + real, "peer-c serves another one, " + other,
                                  "dugong-adm rebuild --config", "--discard-data"}) {
    EXPECT_NE(r_.error.find(want), std::string::npos) << want << " not in: " << r_.error;
  }
  EXPECT_EQ(a.postmasterPid().value_or(-1), aPid) << "not even stopped";
  EXPECT_EQ(a.value("SELECT v FROM precious"), "the real data");
  EXPECT_EQ(a.value("SELECT pg_is_in_recovery()"), "f");

  // Wrong cluster name: a live standby of the real cluster is told to follow the other.
  r_ = apply(pb, PgConfig::standby(PgRole::kAsync, c.identity, c.identity));
  EXPECT_FALSE(r_.ok);
  EXPECT_TRUE(r_.refused);
  EXPECT_NE(r_.error.find("database system " + real), std::string::npos) << r_.error;
  EXPECT_TRUE(streamsFrom(a, b));
  EXPECT_EQ(b.value("SELECT v FROM precious"), "the real data");

  // The operator's command replaces it.
  b.options.replaceUnknownData = true;
  r_ = apply(adapterFor(b), PgConfig::standby(PgRole::kAsync, c.identity, c.identity));
  ASSERT_TRUE(r_.ok) << r_.error;
  EXPECT_EQ(b.value("SELECT system_identifier::text FROM pg_control_system()"), other);
  EXPECT_TRUE(eventually([&] { return streamsFrom(c, b); }));
}

// A persistent libpq connection, for sessions that must outlive one query.
struct Session {
  explicit Session(const std::string& conninfo) : conn(PQconnectdb(conninfo.c_str())) {}
  ~Session() { PQfinish(conn); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  bool ok() const { return PQstatus(conn) == CONNECTION_OK; }
  // "" on success, else the error.
  std::string exec(const std::string& sql) {
    PGresult* r = PQexec(conn, sql.c_str());
    auto st = PQresultStatus(r);
    std::string out = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? "" : "ERROR: " + std::string(PQerrorMessage(conn));
    PQclear(r);
    return out;
  }
  PGconn* conn;
};

// The isolated primary's pg side: stopping writes takes effect for every kind of
// client, and resuming restores the primary as it was.
TEST_F(AdapterTest, StopWritesLeavesNoWayToGetACommitAcknowledged) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_EQ(a.value("CREATE TABLE t (id int)"), "");
  const std::string readWrite = a.conninfo() + " target_session_attrs=read-write";
  ASSERT_TRUE(runQuery(readWrite, "SELECT 1", 5s).ok());

  // An open write transaction, a session that made itself read-write and asynchronous,
  // and (the sync stopped) a commit waiting for the sync.
  Session open(a.conninfo());
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open.exec("BEGIN; INSERT INTO t VALUES (1)"), "");
  Session local(a.conninfo());
  ASSERT_EQ(local.exec("SET synchronous_commit = local; SET default_transaction_read_only = off"), "");
  // A session over the Unix socket (a connection pooler running as the postgres user)
  // that opened a read-write transaction.
  Session socket(buildConninfo({{"host", a.options.socketPath()},
                                {"port", std::to_string(a.port)},
                                {"user", a.options.superuser},
                                {"dbname", "postgres"},
                                {"application_name", "pooler"}}));
  ASSERT_TRUE(socket.ok()) << PQerrorMessage(socket.conn);
  ASSERT_EQ(socket.exec("BEGIN READ WRITE; SET LOCAL synchronous_commit = local; INSERT INTO t VALUES (6)"), "");
  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  std::string waiting = "not finished";
  std::thread waiter([&] { waiting = a.value("INSERT INTO t VALUES (2)", 30s); });
  ASSERT_TRUE(testing::eventually(
      [&] { return a.value("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") == "1"; }, 10s));

  std::optional<Result<WritesStopped>> stopped;
  const auto t0 = std::chrono::steady_clock::now();
  pa.stopWrites([&](Result<WritesStopped> r) { stopped = std::move(r); });
  ASSERT_TRUE(eventually([&] { return stopped.has_value(); }));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  ASSERT_TRUE(stopped->ok()) << stopped->error();
  std::cout << "stopWrites took effect in " << ms.count() << " ms (" << stopped->value().terminated
            << " sessions terminated, " << stopped->value().took.count() << " ms in the controller)\n";
  waiter.join();
  EXPECT_NE(waiting.find("terminat"), std::string::npos) << waiting;  // an error, not a success
  EXPECT_NE(open.exec("COMMIT"), "");
  EXPECT_NE(local.exec("INSERT INTO t VALUES (3)"), "");
  EXPECT_NE(socket.exec("COMMIT"), "") << "a session over the Unix socket committed after writes were stopped";
  // New sessions: read-only for libpq's check, and for a synchronous_commit = local writer.
  auto rw = runQuery(readWrite, "SELECT 1", 5s);
  ASSERT_FALSE(rw.ok());
  EXPECT_NE(rw.error().find("read-only"), std::string::npos) << rw.error();
  EXPECT_NE(a.value("SET synchronous_commit = local; INSERT INTO t VALUES (4)").find("read-only transaction"),
            std::string::npos);
  EXPECT_TRUE(status(pa).writesStopped);
  EXPECT_EQ(a.value("SELECT count(*) FROM t WHERE id IN (1, 3, 4, 6)"), "0");

  // Resumed: writable again once the sync is back.
  std::optional<Result<bool>> resumed;
  pa.resumeWrites([&](Result<bool> r) { resumed = std::move(r); });
  ASSERT_TRUE(eventually([&] { return resumed.has_value(); }));
  ASSERT_TRUE(resumed->ok()) << resumed->error();
  EXPECT_FALSE(status(pa).writesStopped);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  EXPECT_TRUE(runQuery(readWrite, "SELECT 1", 5s).ok());
  EXPECT_EQ(a.value("INSERT INTO t VALUES (5)", 30s), "");
}

// What stopWrites leaves, and the shutdown that closes it once the session may have
// expired: a new session that says BEGIN READ WRITE with synchronous_commit = local
// gets its commit acknowledged on a write-stopped primary; on a shut-down one nothing
// can, a start (even manual) is read-only, an apply leaves it stopped, and once writes
// are resumed the next apply brings the primary back.
TEST_F(AdapterTest, ShutDownWritesLeavesNoSessionThatCanCommit) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  ASSERT_EQ(a.value("CREATE TABLE t (id int)"), "");
  const std::string hostile = "BEGIN READ WRITE; SET LOCAL synchronous_commit = local; INSERT INTO t VALUES (1); COMMIT";

  std::optional<Result<WritesStopped>> stopped;
  pa.stopWrites([&](Result<WritesStopped> r) { stopped = std::move(r); });
  ASSERT_TRUE(eventually([&] { return stopped.has_value(); }));
  ASSERT_TRUE(stopped->ok()) << stopped->error();
  // The hole: stopped writes are only a default.
  EXPECT_EQ(Session(a.conninfo()).exec(hostile), "");

  std::optional<Result<bool>> down;
  pa.shutDownWrites([&](Result<bool> r) { down = std::move(r); });
  ASSERT_TRUE(eventually([&] { return down.has_value(); }));
  ASSERT_TRUE(down->ok()) << down->error();
  EXPECT_FALSE(a.postmasterPid().has_value()) << "postgres still runs";
  EXPECT_NE(Session(a.conninfo()).exec(hostile), "") << "a commit was acknowledged on a shut-down primary";
  // Started by hand, it is still write-stopped.
  auto started = pgCtl(a, {"start"});
  ASSERT_TRUE(started.ok()) << started.describe() << started.output;
  EXPECT_EQ(a.value("SHOW default_transaction_read_only"), "on");
  EXPECT_NE(a.value("SET synchronous_commit = local; INSERT INTO t VALUES (3)").find("read-only transaction"),
            std::string::npos);
  ASSERT_TRUE(pgCtl(a, {"stop", "-m", "fast"}).ok());
  // An apply does not lift the shutdown: postgres stays stopped.
  auto stillDown = apply(pa, PgConfig::primary(b.identity));
  ASSERT_TRUE(stillDown.ok) << stillDown.error;
  EXPECT_FALSE(stillDown.online);
  EXPECT_FALSE(a.postmasterPid().has_value()) << "an apply started a shut-down primary";
  // Resumed, the next apply brings it back as the primary it was.
  std::optional<Result<bool>> resumed;
  pa.resumeWrites([&](Result<bool> r) { resumed = std::move(r); });
  ASSERT_TRUE(eventually([&] { return resumed.has_value(); }));
  ASSERT_TRUE(resumed->ok()) << resumed->error();
  ASSERT_TRUE(apply(pa, PgConfig::primary(b.identity)).ok);
  EXPECT_TRUE(eventually([&] { return writable(a); }));
  EXPECT_EQ(a.value("INSERT INTO t VALUES (2)", 30s), "");
}

// The shutdown wrote the managed configuration
// first and returned on its failure (a full file system, out of inodes) with postgres
// still running as a writable primary. Now the postmaster is signalled first.
TEST_F(AdapterTest, ShutDownWritesShutsThePrimaryDownEvenWhenItsConfigurationCannotBeWritten) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pa = adapterFor(a);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(a.postmasterPid().has_value());
  // The configuration's temporary file cannot be created: a directory holds its name.
  const std::string blocker = a.options.dataDir + "/" + kManagedConfName + ".dugong-tmp";
  ASSERT_TRUE(std::filesystem::create_directory(blocker));
  std::optional<Result<bool>> down;
  pa.shutDownWrites([&](Result<bool> r) { down = std::move(r); });
  ASSERT_TRUE(eventually([&] { return down.has_value(); }));
  EXPECT_TRUE(down->ok()) << down->error();
  EXPECT_FALSE(a.postmasterPid().has_value()) << "the primary still runs";
  std::filesystem::remove(blocker);
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
  auto r = apply(pa, PgConfig::firstPrimary(std::nullopt));
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


// A primary of an existing cluster (any generation after the first, or a cluster set up
// from data) whose data directory is missing (moved aside, or a mount point whose volume
// did not mount) refuses, so that its peer halts: no empty database system is created
// in its place, and the directory moved aside stays as it was.
TEST_F(AdapterTest, APrimaryOfAnExistingClusterNeverCreatesAMissingDataDirectory) {
  namespace fs = std::filesystem;
  PgTestNode& a = cluster_.addNode("peer-a");
  PgAdapter& pa = adapterFor(a);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_EQ(a.value("CREATE TABLE kept (id int); INSERT INTO kept VALUES (1)"), "");
  ASSERT_TRUE(apply(pa, PgConfig::none()).ok);
  const std::string dataDir = a.options.dataDir;
  const std::string moved = dataDir + ".moved";
  fs::rename(dataDir, moved);

  auto r = apply(pa, PgConfig::primary(std::nullopt));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.refused) << "the peer must halt, not retry: " << r.error;
  EXPECT_NE(r.error.find(dataDir), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("dugong-adm rebuild"), std::string::npos) << r.error;
  EXPECT_FALSE(fs::exists(dataDir)) << "a data directory was created";
  EXPECT_FALSE(a.postmasterPid().has_value());

  // An empty directory (the mount point of a volume that did not mount): the same.
  fs::create_directory(dataDir);
  r = apply(pa, PgConfig::primary(std::nullopt));
  EXPECT_TRUE(r.refused) << r.error;
  EXPECT_TRUE(fs::is_empty(dataDir)) << "something was written into the empty directory";

  // Put back, it is the primary it was, with its data.
  fs::remove(dataDir);
  fs::rename(moved, dataDir);
  r = apply(pa, PgConfig::primary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(a.value("SELECT count(*) FROM kept"), "1");
}

// The data directory left with the marker of a pg_rewind that failed before it changed
// anything is this peer's own data: a rebuild moves it aside and never removes it.
TEST_F(AdapterTest, ADataDirectoryLeftByAnUnfinishedRewindIsKeptAsideByTheRebuild) {
  namespace fs = std::filesystem;
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kAsync, a.identity, a.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);
  const std::string dataDir = b.options.dataDir;
  std::ofstream(dataDir + ".dugong-incomplete") << "rewind\n";
  std::ofstream(dataDir + "/own-data-witness") << "b's own\n";

  auto r = apply(pb, PgConfig::standby(PgRole::kAsync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(fs::path(dataDir).parent_path())) {
    if (e.path().filename().string().rfind(fs::path(dataDir).filename().string() + ".dugong-kept-", 0) == 0) {
      kept.push_back(e.path().string());
    }
  }
  ASSERT_EQ(kept.size(), 1u) << "the directory was not kept aside";
  EXPECT_TRUE(fs::exists(kept[0] + "/own-data-witness"));
  EXPECT_TRUE(fs::exists(kept[0] + "/global/pg_control"));
  EXPECT_FALSE(fs::exists(dataDir + "/own-data-witness"));
  EXPECT_FALSE(fs::exists(dataDir + ".dugong-incomplete"));
  EXPECT_TRUE(inRecovery(b));
}

// A primary promoted moments before it was killed: PostgreSQL's checkpoint after the
// promotion is spread (checkpoint_timeout long, many dirty buffers), so pg_control still
// names the old timeline and a checkpoint before the fork. The data state it publishes
// for a setup after a lost cluster state must name its new timeline and its WAL's end,
// or the deposed primary, stopped cleanly past the fork, looks more advanced, is chosen,
// and this one is rewound: its acknowledged commits discarded.
TEST_F(AdapterTest, ACrashedJustPromotedPrimaryPublishesItsNewTimelineAndItsWalEnd) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  for (PgTestNode* n : {&a, &b}) {
    n->options.settings["checkpoint_timeout"] = "1h";
    n->options.settings["max_wal_size"] = "256MB";
  }
  PgAdapter& pa = adapterFor(a);
  PgAdapter& pb = adapterFor(b);
  ASSERT_TRUE(apply(pa, PgConfig::firstPrimary(b.identity)).ok);
  ASSERT_TRUE(apply(pb, PgConfig::standby(PgRole::kSync, a.identity, a.identity)).ok);
  ASSERT_TRUE(eventually([&] { return writable(a); }));
  // Enough dirty buffers on b that its spread checkpoint after the promotion lasts.
  ASSERT_EQ(a.value("CREATE TABLE t (id int, v text); "
                    "INSERT INTO t SELECT g, repeat('x', 400) FROM generate_series(1, 20000) g",
                    60s),
            "");
  ASSERT_TRUE(eventually([&] { return b.value("SELECT count(*) FROM t") == "20000"; }));

  // b takes over; a goes on past the fork, then is stopped cleanly (the deposed primary).
  ASSERT_TRUE(apply(pb, PgConfig::primary(std::nullopt)).ok);
  ASSERT_TRUE(eventually([&] { return writable(b); }));
  ASSERT_EQ(b.value("INSERT INTO t VALUES (-1, 'acknowledged on the new timeline')"), "");
  const WalPosition bEnd = wal(pb);
  ASSERT_EQ(a.value("SET synchronous_commit = local; INSERT INTO t SELECT g, 'past the fork' FROM "
                    "generate_series(1, 2000) g"),
            "");
  ASSERT_TRUE(b.signalPostmaster(SIGKILL));
  ASSERT_TRUE(apply(pa, PgConfig::none()).ok);
  ASSERT_TRUE(apply(pb, PgConfig::none()).ok);

  auto control = [](const PgTestNode& n, const std::string& key) {
    CommandSpec spec;
    spec.argv = {n.options.binDir + "/pg_controldata", "-D", n.options.dataDir};
    spec.timeout = 30s;
    auto r = runCommand(spec);
    auto at = r.output.find(key);
    if (at == std::string::npos) return std::string();
    auto v = r.output.substr(at + key.size(), r.output.find('\n', at) - at - key.size());
    return v.substr(v.find_first_not_of(' '));
  };
  // What makes the case: b's pg_control still names the old timeline.
  ASSERT_EQ(control(b, "Latest checkpoint's TimeLineID:"), "1")
      << "the checkpoint after the promotion finished: the test does not show the case";

  auto stateOf = [&](PgAdapter& p) {
    std::optional<Result<PeerDataState>> result;
    p.dataState([&](Result<PeerDataState> r) { result = std::move(r); });
    EXPECT_TRUE(testing::runUntil(loop_, [&] { return result.has_value(); }, kApplyDeadline));
    EXPECT_TRUE(result && result->ok()) << (result ? result->error() : "no answer");
    return result && result->ok() ? result->value() : PeerDataState{};
  };
  const PeerDataState deposed = stateOf(pa);
  const PeerDataState promoted = stateOf(pb);
  std::cout << "deposed: " << deposed.describe() << "; promoted: " << promoted.describe() << "\n";
  EXPECT_EQ(deposed.timeline, 1);
  EXPECT_EQ(promoted.timeline, 2);
  EXPECT_GE(promoted.wal, bEnd) << "the published WAL ends before what b acknowledged";
  EXPECT_TRUE(promoted.aheadOf(deposed)) << "a setup would choose the deposed primary and rewind b";
  EXPECT_FALSE(deposed.aheadOf(promoted));
}

// The same, with replay held back by a read query on the sync that holds a lock replay
// needs, and standby delays of -1 (replay waits for it forever): the fenced read ends the
// client sessions (not the agent's own), and replay reaches the WAL's end.
TEST_F(AdapterTest, AFencedStandbysReadEndsTheQueriesThatHoldReplayBack) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  b.options.settings["max_standby_streaming_delay"] = "-1";
  b.options.settings["max_standby_archive_delay"] = "-1";
  PgController ca(a.options);
  PgController cb(b.options);
  startPrimaryWithSync(a, ca, b, cb);
  if (HasFatalFailure()) return;
  ASSERT_EQ(a.value("CREATE TABLE t (id int); INSERT INTO t VALUES (1)"), "");
  ASSERT_TRUE(testing::eventually([&] { return b.value("SELECT count(*) FROM t") == "1"; }, 60s));
  Session reader(b.conninfo());
  ASSERT_TRUE(reader.ok()) << PQerrorMessage(reader.conn);
  ASSERT_EQ(reader.exec("BEGIN; SELECT count(*) FROM t"), "");  // holds the table's lock, idle
  // Acknowledged (flushed on b); its replay waits for the reader's lock.
  ASSERT_EQ(a.value("ALTER TABLE t ADD COLUMN v int"), "");
  ASSERT_TRUE(testing::eventually(
      [&] { return b.value("SELECT wait_event_type FROM pg_stat_activity WHERE backend_type = 'startup'") == "Lock"; },
      60s));
  longRecordsUntilTheHostDies(a, b);
  if (HasFatalFailure()) return;
  takeOverAndCheckTheFork(cb, b);
  if (HasFatalFailure()) return;
  EXPECT_NE(reader.exec("SELECT 1"), "") << "the session that held replay back still runs";
  EXPECT_EQ(b.value("SELECT count(*) FROM information_schema.columns WHERE table_name = 't' AND column_name = 'v'"),
            "1")
      << "an acknowledged commit is missing";
}

}  // namespace
}  // namespace dugong::pg
