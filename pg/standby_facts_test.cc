// Two facts about PostgreSQL 15 that the standby cluster's design rests on
// (docs/decisions/0083-standby-cluster.md, "Facts", P5 and P7), held on real postgres:
// a standby whose primary_conninfo lists several hosts streams from the writable one and
// follows it to the next one after a promotion; pg_rewind takes a standby as its source.
// dugong's controller only sets the servers up (initdb, pg_basebackup, roles); what is
// tested is postgres' own behaviour, configured by hand as an operator would.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pg/command.h"
#include "pg/controller.h"
#include "pg/sql.h"
#include "pg/testing/pg_test_cluster.h"
#include "tests/support/test_env.h"

namespace dugong::pg {
namespace {
using namespace std::chrono_literals;
using testing::PgTestCluster;
using testing::PgTestNode;

constexpr auto kFactDeadline = 90s;

// Runs one of postgres' programs as the postgres user.
CommandResult runAsPostgres(const PgTestNode& n, const std::string& program, std::vector<std::string> args,
                            std::map<std::string, std::string> env = {}) {
  CommandSpec spec;
  spec.argv = {n.options.binDir + "/" + program};
  for (auto& a : args) spec.argv.push_back(std::move(a));
  spec.runAsUser = n.options.osUser;
  spec.env = std::move(env);
  spec.timeout = 120s;
  return runCommand(spec);
}

// A replication connection string as a standby's primary_conninfo holds it: the
// replication role, its password, this standby's name; `hosts` the ports on 127.0.0.1.
std::string replicationConninfo(const PgTestNode& standby, const std::vector<const PgTestNode*>& hosts,
                                const std::string& targetSessionAttrs) {
  std::string hostList, portList;
  for (const PgTestNode* h : hosts) {
    hostList += (hostList.empty() ? "" : ",") + std::string("127.0.0.1");
    portList += (portList.empty() ? "" : ",") + std::to_string(h->port);
  }
  std::map<std::string, std::string> p = {{"host", hostList},
                                          {"port", portList},
                                          {"user", standby.options.replicationUser},
                                          {"password", standby.options.replicationPassword.value_or("")},
                                          {"application_name", standby.id},
                                          {"connect_timeout", "5"}};
  if (!targetSessionAttrs.empty()) p["target_session_attrs"] = targetSessionAttrs;
  return buildConninfo(p);
}

// Points a running standby at `conninfo`, with no slot, by ALTER SYSTEM (postgresql.auto.conf
// is read after dugong.conf) and a reload: PostgreSQL 13+ restarts the WAL receiver on a
// change of primary_conninfo.
void pointAt(const PgTestNode& standby, const std::string& conninfo) {
  ASSERT_EQ(standby.value("ALTER SYSTEM SET primary_conninfo = " + quoteLiteral(conninfo)), "");
  ASSERT_EQ(standby.value("ALTER SYSTEM SET primary_slot_name = ''"), "");
  ASSERT_EQ(standby.value("SELECT pg_reload_conf()"), "t");
}

// The port of the server this standby's WAL receiver streams from, and on which timeline
// ("port/timeline"), or "" when it is not streaming.
std::string streamsFrom(const PgTestNode& standby) {
  auto r = standby.sql("SELECT sender_port, received_tli FROM pg_stat_wal_receiver WHERE status = 'streaming'");
  if (!r || r->rows.empty()) return "";
  return r->rows[0][0].value_or("?") + "/" + r->rows[0][1].value_or("?");
}

std::string at(const PgTestNode& upstream, int timeline) {
  return std::to_string(upstream.port) + "/" + std::to_string(timeline);
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

bool has(const PgTestNode& n, int id) {
  return n.value("SELECT count(*) FROM t WHERE id = " + std::to_string(id)) == "1";
}

// P5 and P1. c lists b (a standby) first and a (the primary) second, with
// target_session_attrs=read-write; d the same with target_session_attrs=primary. Both
// skip b and stream from a. a is stopped (a fast shutdown: its walsenders send
// everything first) and b is promoted: both reconnect to b by themselves, on its new
// timeline, without a restart. Then b turns read-only by default (as a dugong primary
// is until its sync has caught up): `read-write` refuses it ("session is read-only"),
// `primary` does not.
TEST(StandbyFacts, AMultiHostStandbyStreamsFromTheWritableHostAndFollowsItsPromotion) {
  PgTestCluster cluster("dugong-pg-facts");
  PgTestNode& a = cluster.addNode("peer-a");
  PgTestNode& b = cluster.addNode("peer-b");
  PgTestNode& c = cluster.addNode("peer-c");
  PgTestNode& d = cluster.addNode("peer-d");
  PgController ca(a.options), cb(b.options), cc(c.options), cd(d.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(b.identity)).ok);
  auto r = cb.apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return ca.pollWritable(); }, kFactDeadline));
  for (PgController* s : {&cc, &cd}) {
    r = s->apply(PgConfig::standby(PgRole::kAsync, a.identity, a.identity));
    ASSERT_TRUE(r.ok) << r.error;
  }
  pointAt(c, replicationConninfo(c, {&b, &a}, "read-write"));
  pointAt(d, replicationConninfo(d, {&b, &a}, "primary"));
  const auto cPid = c.postmasterPid(), dPid = d.postmasterPid();
  ASSERT_TRUE(cPid && dPid);
  // The conninfo in use is the new one (the receiver was restarted), and it chose a.
  ASSERT_TRUE(testing::eventually(
      [&] {
        return streamsFrom(c) == at(a, 1) && streamsFrom(d) == at(a, 1) &&
               c.value("SELECT conninfo FROM pg_stat_wal_receiver").find("target_session_attrs=read-write") !=
                   std::string::npos &&
               d.value("SELECT conninfo FROM pg_stat_wal_receiver").find("target_session_attrs=primary") !=
                   std::string::npos;
      },
      kFactDeadline))
      << "c: " << streamsFrom(c) << " d: " << streamsFrom(d) << " (a " << a.port << ", b " << b.port << ")";
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");
  ASSERT_TRUE(testing::eventually([&] { return has(c, 1) && has(d, 1); }, kFactDeadline));

  ASSERT_TRUE(ca.apply(PgConfig::none()).ok);  // a fast shutdown
  ASSERT_FALSE(a.postmasterPid().has_value());
  r = cb.apply(PgConfig::firstPrimary(std::nullopt));  // promoted, alone: writable at once
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return cb.pollWritable(); }, kFactDeadline));
  ASSERT_EQ(b.value("SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)"), "00000002");
  ASSERT_EQ(b.value("INSERT INTO t VALUES (2)"), "");
  EXPECT_TRUE(testing::eventually([&] { return streamsFrom(c) == at(b, 2) && streamsFrom(d) == at(b, 2); }, kFactDeadline))
      << "c: " << streamsFrom(c) << " d: " << streamsFrom(d);
  EXPECT_TRUE(testing::eventually([&] { return has(c, 2) && has(d, 2); }, kFactDeadline));
  EXPECT_EQ(c.postmasterPid(), cPid) << "restarted";
  EXPECT_EQ(d.postmasterPid(), dPid) << "restarted";

  // A primary that is read-only by default: only `primary` takes it.
  ASSERT_EQ(b.value("ALTER SYSTEM SET default_transaction_read_only = on"), "");
  ASSERT_EQ(b.value("SELECT pg_reload_conf()"), "t");
  ASSERT_TRUE(testing::eventually([&] { return b.value("SHOW default_transaction_read_only") == "on"; }, kFactDeadline));
  const std::string dSender = b.value("SELECT pid FROM pg_stat_replication WHERE application_name = 'peer-d'");
  // c may have been refused by b already, while b was a standby (a and b both refused it).
  const size_t refusedBefore = occurrences(dugong::testing::fileText(c.options.logPath()), "session is read-only");
  ASSERT_EQ(b.value("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication WHERE application_name IN "
                    "('peer-c', 'peer-d')"),
            "2");
  EXPECT_TRUE(testing::eventually(
      [&] {
        const std::string now = b.value("SELECT pid FROM pg_stat_replication WHERE application_name = 'peer-d' AND "
                                        "state = 'streaming'");
        return !now.empty() && now != dSender;
      },
      kFactDeadline))
      << "d (target_session_attrs=primary) did not reconnect to a primary that is read-only by default";
  EXPECT_TRUE(testing::eventually(
      [&] { return occurrences(dugong::testing::fileText(c.options.logPath()), "session is read-only") > refusedBefore; }, kFactDeadline))
      << "c (target_session_attrs=read-write) did not refuse a primary that is read-only by default";
  EXPECT_EQ(streamsFrom(c), "");
}

// P7. a, the primary, writes a row (2) that its sync b never receives, and stops; b is
// promoted and writes row 3; c, a standby cascading from b, follows b onto timeline 2.
// pg_rewind with --source-server pointing at c (a standby) rewinds a in place: a, started
// as a standby of c, has rows 1 and 3, not 2, on timeline 2.
TEST(StandbyFacts, ADivergedPrimaryIsRewoundFromAStandbySource) {
  PgTestCluster cluster("dugong-pg-facts");
  PgTestNode& a = cluster.addNode("peer-a");
  PgTestNode& b = cluster.addNode("peer-b");
  PgTestNode& c = cluster.addNode("peer-c");
  PgController ca(a.options), cb(b.options), cc(c.options);
  ASSERT_TRUE(ca.apply(PgConfig::firstPrimary(b.identity)).ok);
  auto r = cb.apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return ca.pollWritable(); }, kFactDeadline));
  r = cc.apply(PgConfig::standby(PgRole::kAsync, b.identity, a.identity));
  ASSERT_TRUE(r.ok) << r.error;
  pointAt(c, replicationConninfo(c, {&b}, ""));  // no slot: b's promotion would drop it
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");
  ASSERT_TRUE(testing::eventually([&] { return has(c, 1); }, kFactDeadline));

  ASSERT_TRUE(cb.apply(PgConfig::none()).ok);
  ASSERT_EQ(a.value("SET synchronous_commit = local; INSERT INTO t VALUES (2)"), "");
  ASSERT_TRUE(ca.apply(PgConfig::none()).ok);  // cleanly, past the fork to come
  r = cb.apply(PgConfig::firstPrimary(std::nullopt));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(testing::eventually([&] { return cb.pollWritable(); }, kFactDeadline));
  ASSERT_EQ(b.value("INSERT INTO t VALUES (3)"), "");
  ASSERT_TRUE(testing::eventually([&] { return has(c, 3) && streamsFrom(c) == at(b, 2); }, kFactDeadline));
  ASSERT_EQ(c.value("SELECT pg_is_in_recovery()"), "t");

  // pg_rewind takes the source's timeline from its pg_control (the greater of its last
  // checkpoint's and its minimum recovery point's), which a standby updates only at a
  // restartpoint (or a buffer write): a standby that has replayed no checkpoint record of
  // the new timeline may still say timeline 1, and pg_rewind then answers "source and
  // target cluster are on the same timeline; no rewind required" about a diverged target
  // (seen on this test's first run). So: a checkpoint on b, replayed by c, then a
  // restartpoint on c (what CHECKPOINT does on a standby).
  ASSERT_EQ(b.value("CHECKPOINT"), "");
  const std::string checkpointed = b.value("SELECT pg_current_wal_lsn()");
  ASSERT_TRUE(testing::eventually(
      [&] { return c.value("SELECT pg_last_wal_replay_lsn() >= '" + checkpointed + "'::pg_lsn") == "t"; }, kFactDeadline));
  ASSERT_EQ(c.value("CHECKPOINT"), "");
  ASSERT_EQ(c.value("SELECT timeline_id FROM pg_control_checkpoint()"), "2");

  struct stat before{};
  ASSERT_EQ(::stat(a.options.dataDir.c_str(), &before), 0);
  const std::string source = buildConninfo({{"host", "127.0.0.1"},
                                            {"port", std::to_string(c.port)},
                                            {"user", a.options.replicationUser},
                                            {"dbname", "postgres"}});
  CommandResult rewind =
      runAsPostgres(a, "pg_rewind",
                    {"--target-pgdata", a.options.dataDir, "--source-server", source},
                    {{"PGPASSWORD", a.options.replicationPassword.value_or("")}});
  ASSERT_TRUE(rewind.ok()) << rewind.describe() << "\n" << rewind.output;
  EXPECT_NE(rewind.output.find("servers diverged at WAL location"), std::string::npos) << rewind.output;
  EXPECT_NE(rewind.output.find("on timeline 1"), std::string::npos) << rewind.output;
  EXPECT_NE(rewind.output.find("Done!"), std::string::npos) << rewind.output;

  // Start a as a standby of c. pg_rewind copied c's configuration files (c's port among
  // them): postgresql.auto.conf, read last, sets a's own.
  {
    std::ofstream conf(a.options.dataDir + "/postgresql.auto.conf", std::ios::app);
    conf << "port = " << a.port << "\n"
         << "primary_conninfo = " << quoteLiteral(replicationConninfo(a, {&c}, "")) << "\n"
         << "primary_slot_name = ''\n";
    std::ofstream signal(a.options.dataDir + "/standby.signal");
  }
  const struct passwd* pw = ::getpwnam(a.options.osUser.c_str());
  ASSERT_NE(pw, nullptr);
  ASSERT_EQ(::chown((a.options.dataDir + "/standby.signal").c_str(), pw->pw_uid, pw->pw_gid), 0);
  CommandResult started = runAsPostgres(
      a, "pg_ctl", {"start", "-D", a.options.dataDir, "-l", a.options.logPath(), "-w", "-t", "60"});
  ASSERT_TRUE(started.ok()) << started.output << dugong::testing::fileText(a.options.logPath());
  EXPECT_TRUE(testing::eventually([&] { return streamsFrom(a) == at(c, 2); }, kFactDeadline)) << streamsFrom(a);
  EXPECT_TRUE(testing::eventually([&] { return has(a, 3); }, kFactDeadline));
  EXPECT_TRUE(has(a, 1));
  EXPECT_FALSE(has(a, 2));
  struct stat after{};
  ASSERT_EQ(::stat(a.options.dataDir.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "pg_rewind works in place";
}

}  // namespace
}  // namespace dugong::pg
