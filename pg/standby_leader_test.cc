// The adapter's standby leader (docs/decisions/0083-standby-cluster.md 3.1, 4.1) on real
// postgres: made from a `hosts` source by pg_basebackup, it streams from the source's
// writable host through the multi-host primary_conninfo it renders (P5), and follows the
// source's promotion without a restart (P1), as does the sync cascading from it.
#include <string>

#include <gtest/gtest.h>

#include "pg/controller.h"
#include "pg/testing/pg_test_cluster.h"
#include "tests/support/test_env.h"

namespace dugong::pg {
namespace {
using namespace std::chrono_literals;
using testing::PgTestCluster;
using testing::PgTestNode;

constexpr auto kLeaderDeadline = 90s;

SourceEndpoint hostsOf(const std::vector<const PgTestNode*>& nodes) {
  SourceEndpoint e;
  e.kind = SourceKind::kHosts;
  for (const PgTestNode* n : nodes) e.hosts.push_back(HostPort{"127.0.0.1", n->port});
  return e;
}

// "port/timeline" of the server `n`'s WAL receiver streams from, "" when not streaming.
std::string leaderStreamsFrom(const PgTestNode& n) {
  auto r = n.sql("SELECT sender_port, received_tli FROM pg_stat_wal_receiver WHERE status = 'streaming'");
  if (!r || r->rows.empty()) return "";
  return r->rows[0][0].value_or("?") + "/" + r->rows[0][1].value_or("?");
}

bool holdsRow(const PgTestNode& n, int id) {
  return n.value("SELECT count(*) FROM t WHERE id = " + std::to_string(id)) == "1";
}

// a: a plain primary; b: its standby, listed first in the source. The standby leader l,
// with no data directory, is copied from a (the writable host) and streams from it; s,
// its sync, cascades from l. a stopped and b promoted: l and s follow b onto timeline 2
// with the same postmasters, and stay in recovery throughout. No slot on the source.
TEST(StandbyLeaderTest, AMultiHostSourceFollowsTheWritableHost) {
  PgTestCluster cluster("dugong-pg-leader");
  PgTestNode& a = cluster.addNode("src-a");
  PgTestNode& b = cluster.addNode("src-b");
  PgTestNode& l = cluster.addNode("peer-l");
  PgTestNode& s = cluster.addNode("peer-s");
  PgController ca(a.options), cb(b.options), cl(l.options), cs(s.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(b.identity)).ok);
  auto r = cb.apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return ca.pollWritable(); }, kLeaderDeadline));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");

  const PgConfig leader = PgConfig::standbyLeader(hostsOf({&b, &a}), true);
  r = cl.apply(leader);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.online);
  const std::string onA = std::to_string(a.port) + "/1";
  ASSERT_TRUE(testing::eventually([&] { return leaderStreamsFrom(l) == onA; }, kLeaderDeadline))
      << leaderStreamsFrom(l) << " (a " << a.port << ", b " << b.port << ")";
  EXPECT_NE(l.value("SELECT conninfo FROM pg_stat_wal_receiver").find("target_session_attrs=primary"),
            std::string::npos);
  EXPECT_EQ(l.value("SHOW primary_slot_name"), "");
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%peer_l%'"), "0");
  ASSERT_TRUE(testing::eventually([&] { return holdsRow(l, 1); }, kLeaderDeadline));
  EXPECT_EQ(l.value("SELECT system_identifier FROM pg_control_system()"),
            a.value("SELECT system_identifier FROM pg_control_system()"));

  r = cs.apply(PgConfig::standby(PgRole::kSync, l.identity, l.identity));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return holdsRow(s, 1); }, kLeaderDeadline));

  // Applied again, unchanged: a reload, the same postmaster.
  const auto lPid = l.postmasterPid(), sPid = s.postmasterPid();
  ASSERT_TRUE(lPid && sPid);
  r = cl.apply(leader);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(l.postmasterPid(), lPid);

  // The source fails over: a stopped, b promoted and written to.
  ASSERT_TRUE(ca.apply(PgConfig::none()).ok);
  r = cb.apply(PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return cb.pollWritable(); }, kLeaderDeadline));
  ASSERT_EQ(b.value("INSERT INTO t VALUES (2)"), "");
  const std::string onB = std::to_string(b.port) + "/2";
  EXPECT_TRUE(testing::eventually([&] { return leaderStreamsFrom(l) == onB; }, kLeaderDeadline)) << leaderStreamsFrom(l);
  EXPECT_TRUE(testing::eventually([&] { return holdsRow(l, 2) && holdsRow(s, 2); }, kLeaderDeadline));
  EXPECT_EQ(l.postmasterPid(), lPid) << "restarted";
  EXPECT_EQ(s.postmasterPid(), sPid) << "restarted";
  EXPECT_EQ(l.value("SELECT pg_is_in_recovery()"), "t");
  EXPECT_EQ(s.value("SELECT pg_is_in_recovery()"), "t");
  EXPECT_EQ(l.value("SELECT received_tli FROM pg_stat_wal_receiver"), "2");
}

// Only a new standby cluster's first leader makes its data directory from the source: a
// leader of a later generation that finds none refuses (the peer halts), and a source of
// another database system is refused too. Nothing is changed either way.
TEST(StandbyLeaderTest, ALeaderRefusesWhatItMustNotMakeOrFollow) {
  PgTestCluster cluster("dugong-pg-leader");
  PgTestNode& a = cluster.addNode("src-a");
  PgTestNode& other = cluster.addNode("other", PgTestCluster::System::kOwn);
  PgTestNode& l = cluster.addNode("peer-l");
  PgController ca(a.options), co(other.options), cl(l.options);
  auto r = cl.apply(PgConfig::standbyLeader(hostsOf({&a}), false));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.refused);
  EXPECT_NE(r.error.find("a standby leader of a later generation found no data directory"), std::string::npos)
      << r.error;

  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_TRUE(co.apply(PgConfig::firstPrimary(std::nullopt)).ok);
  r = cl.apply(PgConfig::standbyLeader(hostsOf({&a}), true));
  ASSERT_TRUE(r.ok) << r.error;
  const auto pid = l.postmasterPid();
  r = cl.apply(PgConfig::standbyLeader(hostsOf({&other}), false));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.refused);
  EXPECT_NE(r.error.find("and the source serves another one"), std::string::npos) << r.error;
  EXPECT_EQ(l.postmasterPid(), pid);
  EXPECT_EQ(l.value("SELECT pg_is_in_recovery()"), "t");
}

// A dugong source's leader with no source peer chosen (0083 "Phase 7 as built"): a
// restarted agent (a new controller on the same data directory) that has not read the
// source keeps streaming from the source peer it followed, with the same postmaster; a
// sync of the standby cluster that becomes leader with none chosen stops streaming from
// the old leader (a peer of its own cluster) and stays in recovery with no
// primary_conninfo; both then follow the source peer named.
TEST(StandbyLeaderTest, ADugongSourcesLeaderWithNoSourcePeerChosenKeepsTheLastOrNone) {
  PgTestCluster cluster("dugong-pg-leader");
  PgTestNode& a = cluster.addNode("src-a");
  PgTestNode& l = cluster.addNode("peer-l");
  PgTestNode& s = cluster.addNode("peer-s");
  PgController ca(a.options), cs(s.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_TRUE(testing::eventually([&] { return ca.pollWritable(); }, kLeaderDeadline));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");
  const StandbySource siteA = *parseSourceUrl("dugong://127.0.0.1:2181/dugong/siteA");
  {
    PgController cl(l.options);
    auto r = cl.apply(PgConfig::standbyLeader(dugongEndpoint(siteA, a.identity), true));
    ASSERT_TRUE(r.ok) << r.error;
  }
  const std::string onA = std::to_string(a.port) + "/1";
  ASSERT_TRUE(testing::eventually([&] { return leaderStreamsFrom(l) == onA; }, kLeaderDeadline));
  const auto pid = l.postmasterPid();
  PgController restarted(l.options);
  auto r = restarted.apply(PgConfig::standbyLeader(dugongEndpoint(siteA, std::nullopt), false));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.online);
  EXPECT_EQ(l.postmasterPid(), pid);
  ASSERT_EQ(a.value("INSERT INTO t VALUES (2)"), "");
  EXPECT_TRUE(testing::eventually([&] { return holdsRow(l, 2); }, kLeaderDeadline)) << "still streaming from a";
  EXPECT_EQ(leaderStreamsFrom(l), onA);

  r = cs.apply(PgConfig::standby(PgRole::kSync, l.identity, l.identity));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return holdsRow(s, 2); }, kLeaderDeadline));
  r = cs.apply(PgConfig::standbyLeader(dugongEndpoint(siteA, std::nullopt), false));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(s.value("SHOW primary_conninfo"), "");
  EXPECT_EQ(s.value("SELECT pg_is_in_recovery()"), "t");
  EXPECT_TRUE(holdsRow(s, 2));
  r = cs.apply(PgConfig::standbyLeader(dugongEndpoint(siteA, a.identity), false));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(a.value("INSERT INTO t VALUES (3)"), "");
  EXPECT_TRUE(testing::eventually([&] { return holdsRow(s, 3); }, kLeaderDeadline));
  EXPECT_EQ(s.value("SELECT pg_is_in_recovery()"), "t");
}

// The leader's lag to its source (docs/decisions/0083 3.5), as status() samples it: none
// while it streams an idle source; replay paused, the source written: received at the
// source's position, replay behind it by bytes and seconds; the receiver fenced, the
// source written: received behind and not moving while the source moves (a stall, what
// `dugong-adm verify` flags); the source stopped: the last lag measured is kept, as "at
// least", with the source's error. Each fence also tells what it saw of the source (the
// leader's own promote-cluster check): the writable host, then none.
TEST(StandbyLeaderTest, ItsLagToTheSourceIsMeasuredAndKeptWhenTheSourceStops) {
  PgTestCluster cluster("dugong-pg-leader");
  PgTestNode& a = cluster.addNode("src-a");
  PgTestNode& l = cluster.addNode("peer-l");
  PgController ca(a.options), cl(l.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(std::nullopt)).ok);
  ASSERT_TRUE(testing::eventually([&] { return ca.pollWritable(); }, kLeaderDeadline));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");
  auto r = cl.apply(PgConfig::standbyLeader(hostsOf({&a}), true));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return holdsRow(l, 1); }, kLeaderDeadline));
  EXPECT_FALSE(ca.status().source.has_value()) << "a primary has no source";

  PgStatus st;
  ASSERT_TRUE(testing::eventually(
      [&] {
        st = cl.status();
        return st.source && st.source->lagBytes == std::optional<uint64_t>(0) &&
               st.source->replayLagBytes == std::optional<uint64_t>(0) && st.source->receiving();
      },
      kLeaderDeadline))
      << (st.source ? st.source->toJson().dump() : "no source");
  EXPECT_TRUE(st.source->sourceAnswered());
  EXPECT_TRUE(st.source->sourceWal.has_value());
  EXPECT_EQ(st.source->sourceTimeline, std::optional<int64_t>(1));
  EXPECT_EQ(st.source->lagSeconds, std::optional<double>(0.0));
  EXPECT_EQ(st.source->leader.senderHost, "127.0.0.1:" + std::to_string(a.port));
  EXPECT_EQ(st.source->sourcePrimary, "127.0.0.1:" + std::to_string(a.port));
  EXPECT_EQ(st.toJson()["source"]["lagBytes"], 0);

  // Replay paused: what arrives is received, not replayed. A transaction replayed first,
  // so that the replay's age is known (none since postgres started: unknown).
  ASSERT_EQ(a.value("INSERT INTO t VALUES (0)"), "");
  ASSERT_TRUE(testing::eventually([&] { return holdsRow(l, 0); }, kLeaderDeadline));
  ASSERT_EQ(l.value("SELECT pg_wal_replay_pause()"), "");
  ASSERT_EQ(a.value("INSERT INTO t SELECT generate_series(2, 1000)"), "");
  ASSERT_TRUE(testing::eventually(
      [&] {
        st = cl.status();
        return st.source && st.source->lagBytes == std::optional<uint64_t>(0) && st.source->replayLagBytes &&
               *st.source->replayLagBytes > 0 && st.source->lagSeconds && *st.source->lagSeconds > 0.0;
      },
      kLeaderDeadline))
      << (st.source ? st.source->toJson().dump() : "no source");
  ASSERT_EQ(l.value("SELECT pg_wal_replay_resume()"), "");

  // No receiver (the fence a promotion lays): the source moves, received does not. The
  // fence asked the source once streaming stopped (the leader's own promote-cluster
  // check, 0083 6.2 step 1): a reaches it as a writable host.
  const PgFenced fenced = cl.fence(std::nullopt);
  ASSERT_TRUE(fenced.ok) << fenced.error;
  ASSERT_TRUE(fenced.source.has_value());
  EXPECT_TRUE(fenced.source->reachable);
  EXPECT_EQ(fenced.source->writableHosts, (std::vector<HostPort>{HostPort{"127.0.0.1", a.port}}));
  ASSERT_EQ(a.value("INSERT INTO t SELECT generate_series(1001, 2000)"), "");
  ASSERT_TRUE(testing::eventually(
      [&] {
        st = cl.status();
        return st.source && st.source->receivingStalledSinceMs != 0;
      },
      kLeaderDeadline))
      << (st.source ? st.source->toJson().dump() : "no source");
  EXPECT_FALSE(st.source->receiving());
  ASSERT_TRUE(st.source->lagBytes.has_value());
  const uint64_t lagBeforeStop = *st.source->lagBytes;
  EXPECT_GT(lagBeforeStop, 0u);

  // The source stopped: its last answer is kept, and the lag measured then.
  ASSERT_TRUE(ca.apply(PgConfig::none()).ok);
  st = cl.status();
  ASSERT_TRUE(st.source.has_value());
  EXPECT_FALSE(st.source->sourceAnswered());
  EXPECT_EQ(st.source->lagBytes, std::optional<uint64_t>(lagBeforeStop));
  EXPECT_EQ(st.source->describe().rfind("at least ", 0), 0u) << st.source->describe();
  EXPECT_EQ(st.source->receivingStalledSinceMs, 0) << "not known while the source does not answer";

  // Fenced again with the source stopped: no writable host reached, and why.
  const PgFenced again = cl.fence(std::nullopt);
  ASSERT_TRUE(again.ok) << again.error;
  ASSERT_TRUE(again.source.has_value());
  EXPECT_FALSE(again.source->reachable);
  EXPECT_TRUE(again.source->writableHosts.empty());
  EXPECT_NE(again.source->lastSeen.find("no host answered as a primary"), std::string::npos) << again.source->lastSeen;
}

// demote-cluster on the postgres side (docs/decisions/0083 5.2, phase 4): a, the old site's
// primary, wrote row 99 after b (its standby, the new site) was promoted and wrote row 2.
// a stopped for the demotion (role none), its WAL end is read from pg_control (its shutdown
// checkpoint, timeline 1); as standby leader of b without PgConfig::demoted it is refused
// (a former primary); with it, pg_rewind from b's writable host discards row 99, and a
// streams from b on timeline 2, in recovery, holding row 2.
TEST(StandbyLeaderTest, ADemotedPrimaryIsRewoundFromItsNewSourceAndFollowsIt) {
  PgTestCluster cluster("dugong-pg-leader");
  PgTestNode& a = cluster.addNode("site-a");
  PgTestNode& b = cluster.addNode("site-b");
  PgController ca(a.options), cb(b.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(b.identity)).ok);
  auto r = cb.apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return ca.pollWritable(); }, kLeaderDeadline));
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");
  ASSERT_TRUE(testing::eventually([&] { return holdsRow(b, 1); }, kLeaderDeadline));

  // b promoted (the other site's promote-cluster), then both written: a forks.
  r = cb.apply(PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return cb.pollWritable(); }, kLeaderDeadline));
  ASSERT_EQ(b.value("INSERT INTO t VALUES (2)"), "");
  ASSERT_EQ(a.value("SET synchronous_commit = local; INSERT INTO t VALUES (99)"), "");

  // The demotion's stop and read.
  r = ca.apply(PgConfig::none());
  ASSERT_TRUE(r.ok) << r.error;
  const WalPositionRead end = ca.readWal();
  ASSERT_TRUE(end.position.has_value()) << end.error;
  ASSERT_TRUE(end.history.has_value());
  EXPECT_EQ(end.history->timeline, 1);

  PgConfig leader = PgConfig::standbyLeader(hostsOf({&b}), false);
  r = ca.apply(leader);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.refused);
  EXPECT_NE(r.error.find("last ran as a primary"), std::string::npos) << r.error;

  leader.demoted = true;
  r = ca.apply(leader);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.online);
  ASSERT_TRUE(testing::eventually([&] { return leaderStreamsFrom(a) == std::to_string(b.port) + "/2"; },
                                  kLeaderDeadline))
      << leaderStreamsFrom(a);
  EXPECT_TRUE(holdsRow(a, 2));
  EXPECT_FALSE(holdsRow(a, 99)) << "what a wrote past the fork is discarded";
  EXPECT_EQ(a.value("SELECT pg_is_in_recovery()"), "t");
  ASSERT_EQ(b.value("INSERT INTO t VALUES (3)"), "");
  EXPECT_TRUE(testing::eventually([&] { return holdsRow(a, 3); }, kLeaderDeadline));
}

}  // namespace
}  // namespace dugong::pg
