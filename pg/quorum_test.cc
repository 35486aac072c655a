// Quorum commit on PostgreSQL 15 itself (docs/decisions/0079-quorum-commit.md, "Facts"
// P1 and P4): a primary with two streaming standbys under `ANY 1 (s1, s2)`, set by
// PgController::reloadQuorum. What 0079 rests on, shown on the real server: each member
// shows sync_state 'quorum'; a commit is acknowledged through either member while the
// other's WAL receiver is stopped; with both stopped it waits (wait_event SyncRep) and is
// released when one comes back; pg_stat_replication's flush_lsn is each standby's own
// (the member sample reads it per member); a reload that lowers k releases a commit that
// waited under the higher k. The agent's member sample (PgController::quorumMembers) reads
// the same per-member flush positions in one look.
#include <signal.h>

#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pg/controller.h"
#include "pg/plan/standby_names.h"
#include "pg/testing/pg_test_cluster.h"
#include "statemachine/wal_position.h"

namespace dugong::pg {
namespace {
using namespace std::chrono_literals;
using testing::PgTestCluster;
using testing::PgTestNode;

// Stops a standby's WAL receiver (SIGSTOP): it neither receives, flushes nor replies, as
// a hung standby; continued when asked, and at the latest at the end of the scope.
class StoppedReceiver {
 public:
  explicit StoppedReceiver(const PgTestNode& standby) : standby_(standby) {}
  ~StoppedReceiver() { resume(); }
  StoppedReceiver(const StoppedReceiver&) = delete;
  StoppedReceiver& operator=(const StoppedReceiver&) = delete;
  bool stop() {
    const std::string pid = standby_.value("SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'");
    if (pid.empty() || pid.rfind("ERROR", 0) == 0) return false;
    pid_ = static_cast<pid_t>(std::stol(pid));
    return ::kill(pid_, SIGSTOP) == 0;
  }
  void resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
    pid_ = 0;
  }

 private:
  const PgTestNode& standby_;
  pid_t pid_ = 0;
};

class QuorumPgTest : public ::testing::Test {
 protected:
  // Runs `sql` on `node` on a thread of its own (a commit that may wait).
  struct Waiter {
    std::string result = "not run";
    std::thread thread;
    Waiter(const PgTestNode& node, const std::string& sql, std::chrono::milliseconds timeout)
        : thread([this, &node, sql, timeout] { result = node.value(sql, timeout); }) {}
    ~Waiter() {
      if (thread.joinable()) thread.join();
    }
    Waiter(const Waiter&) = delete;
    Waiter& operator=(const Waiter&) = delete;
    std::string join() {
      thread.join();
      return result;
    }
  };

  static bool streamsFrom(const PgTestNode& upstream, const PgTestNode& standby) {
    return upstream.value("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND "
                          "application_name = '" + standby.id + "'") == "1";
  }
  // "sync_state/sync_priority" of `standby`'s walsender on `primary`.
  static std::string syncStateOf(const PgTestNode& primary, const PgTestNode& standby) {
    return primary.value("SELECT sync_state || '/' || sync_priority FROM pg_stat_replication WHERE application_name = '" +
                         standby.id + "'");
  }
  static WalPosition flushOf(const PgTestNode& primary, const PgTestNode& standby) {
    auto flush = WalPosition::parse(
        primary.value("SELECT flush_lsn FROM pg_stat_replication WHERE application_name = '" + standby.id + "'"));
    return flush ? flush.value() : WalPosition();
  }
  static bool commitWaitsForReplication(const PgTestNode& primary) {
    return primary.value("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") == "1";
  }

  // A primary `a` with every standby of `standbys` streaming from it (base backups of
  // it), the first as its sync, writable.
  PgController& primaryWithStandbys(PgTestNode& a, const std::vector<PgTestNode*>& standbys) {
    PgController& primary = controllers_.emplace_back(a.options);
    EXPECT_TRUE(primary.apply(PgConfig::firstPrimary(standbys.at(0)->identity)).ok);
    for (PgTestNode* s : standbys) {
      const PgRole role = s == standbys.front() ? PgRole::kSync : PgRole::kAsync;
      EXPECT_TRUE(controllers_.emplace_back(s->options).apply(PgConfig::standby(role, a.identity, a.identity)).ok);
    }
    EXPECT_TRUE(testing::eventually(
        [&] {
          if (!primary.pollWritable()) return false;
          for (PgTestNode* s : standbys) {
            if (!streamsFrom(a, *s)) return false;
          }
          return true;
        },
        60s));
    return primary;
  }

  PgTestCluster cluster_{"dugong-pg-quorum"};
  std::deque<PgController> controllers_;  // destroyed before the cluster
};

TEST_F(QuorumPgTest, AnyOneOfTwoAcknowledgesThroughEitherMemberAndWaitsOnlyWithoutBoth) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& s1 = cluster_.addNode("peer-s1");
  PgTestNode& s2 = cluster_.addNode("peer-s2");
  PgController& ca = primaryWithStandbys(a, {&s1, &s2});
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key)"), "");

  // ANY 1 (s1, s2): verified exactly (the setting, every walsender's priority), and
  // postgres shows each member as 'quorum' with priority 1 (P1).
  auto q = ca.reloadQuorum(StandbyQuorum{1, {"peer-s1", "peer-s2"}});
  ASSERT_TRUE(q.ok()) << q.error();
  EXPECT_EQ(a.value("SHOW synchronous_standby_names"), "ANY 1 (\"peer-s1\", \"peer-s2\")");
  EXPECT_EQ(syncStateOf(a, s1), "quorum/1");
  EXPECT_EQ(syncStateOf(a, s2), "quorum/1");
  ASSERT_EQ(a.value("INSERT INTO t VALUES (1)"), "");

  // s1 hung: a commit is acknowledged through s2 alone. The primary's flush_lsn for each
  // member is that standby's own: s1's stays where it stopped, s2's is past the commit.
  {
    StoppedReceiver hung(s1);
    ASSERT_TRUE(hung.stop());
    const WalPosition before = WalPosition::parse(a.value("SELECT pg_current_wal_lsn()")).value();
    EXPECT_EQ(a.value("INSERT INTO t VALUES (2)", 20s), "");
    EXPECT_LE(flushOf(a, s1), before);
    EXPECT_GT(flushOf(a, s2), before);
    EXPECT_EQ(syncStateOf(a, s1), "quorum/1");  // still a candidate: it streams, it only says nothing
    // The member sample (PgController::quorumMembers, the agent's member watch) shows the
    // same in one look: s2 streams with its flush past the commit; s1's flush, while its
    // walsender lasts (until wal_sender_timeout), stays at or before it; a name no standby
    // has, no walsender.
    auto seen = ca.quorumMembers({"peer-s1", "peer-s2", "peer-x"});
    ASSERT_TRUE(seen.ok()) << seen.error();
    EXPECT_TRUE(seen->members.at("peer-s2").streaming);
    ASSERT_TRUE(seen->members.at("peer-s2").flushed);
    EXPECT_GT(*seen->members.at("peer-s2").flushed, before);
    if (seen->members.at("peer-s1").flushed) {
      EXPECT_LE(*seen->members.at("peer-s1").flushed, before);
    }
    EXPECT_FALSE(seen->members.at("peer-x").streaming);
    EXPECT_FALSE(seen->members.at("peer-x").flushed);
  }
  ASSERT_TRUE(testing::eventually([&] { return s1.value("SELECT count(*) FROM t WHERE id = 2") == "1"; }, 60s));
  // Both streaming again and idle: the sample shows each member caught up with the
  // primary's flush position.
  EXPECT_TRUE(testing::eventually(
      [&] {
        auto look = ca.quorumMembers({"peer-s1", "peer-s2"});
        if (!look) return false;
        for (const auto& [name, m] : look->members) {
          if (!m.streaming || m.flushed != look->primaryFlushed) return false;
        }
        return true;
      },
      60s));

  // Both hung: a commit waits for replication, and is released when one comes back.
  {
    StoppedReceiver hung1(s1);
    StoppedReceiver hung2(s2);
    ASSERT_TRUE(hung1.stop());
    ASSERT_TRUE(hung2.stop());
    Waiter commit(a, "INSERT INTO t VALUES (3)", 60s);
    EXPECT_TRUE(testing::eventually([&] { return commitWaitsForReplication(a); }, 20s));
    EXPECT_EQ(a.value("SELECT count(*) FROM t WHERE id = 3"), "0");  // not visible while it waits
    hung2.resume();
    EXPECT_EQ(commit.join(), "");
    EXPECT_TRUE(testing::eventually([&] { return s2.value("SELECT count(*) FROM t WHERE id = 3") == "1"; }, 60s));
  }

  // ANY 2 (s1, s2) with s2 hung: a commit waits; a reload to ANY 1 releases it (P4: a
  // weakening reload releases what waited, so a weakening step is written first).
  ASSERT_TRUE(testing::eventually([&] { return streamsFrom(a, s1) && streamsFrom(a, s2); }, 60s));
  q = ca.reloadQuorum(StandbyQuorum{2, {"peer-s1", "peer-s2"}});
  ASSERT_TRUE(q.ok()) << q.error();
  // A walsender's k is its own copy, not shown anywhere (P3): as a raise's fence does
  // (0079 5.2 step 2), the walsenders are ended, and the members stream again through
  // walsenders started after the new setting was seen, which start with it.
  const std::string seen = a.value("SELECT clock_timestamp()");
  ASSERT_EQ(a.value("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication"), "2");
  ASSERT_TRUE(testing::eventually(
      [&] {
        return a.value("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'quorum' "
                       "AND backend_start > '" + seen + "'") == "2";
      },
      60s));
  {
    StoppedReceiver hung(s2);
    ASSERT_TRUE(hung.stop());
    Waiter commit(a, "INSERT INTO t VALUES (4)", 60s);
    EXPECT_TRUE(testing::eventually([&] { return commitWaitsForReplication(a); }, 20s));
    q = ca.reloadQuorum(StandbyQuorum{1, {"peer-s1", "peer-s2"}});
    ASSERT_TRUE(q.ok()) << q.error();
    EXPECT_EQ(commit.join(), "");
  }

  // A fence for a new sync (sync mode's takeover) replaces the quorum: commits wait for
  // the new sync and the sync of the last apply.
  PgFenced f = ca.fence(s2.identity);
  ASSERT_TRUE(f.ok) << f.error;
  EXPECT_TRUE(waitsForAll(a.value("SHOW synchronous_standby_names"), {"peer-s2", "peer-s1"}))
      << a.value("SHOW synchronous_standby_names");

  // The state machine's apply of a quorum primary (PgConfig::quorum, the daemon's) runs
  // ANY k of its members; a primary that was writable stays writable, its commits now
  // acknowledged by any one member.
  PgConfig quorumPrimary = PgConfig::primary(std::nullopt);
  quorumPrimary.quorum = Quorum{1, {s1.identity, s2.identity}};
  PgConfigApplied applied = ca.apply(quorumPrimary);
  ASSERT_TRUE(applied.ok) << applied.error;
  EXPECT_EQ(a.value("SHOW synchronous_standby_names"), "ANY 1 (\"peer-s1\", \"peer-s2\")");
  EXPECT_TRUE(ca.pollWritable());
  {
    StoppedReceiver hung(s2);
    ASSERT_TRUE(hung.stop());
    EXPECT_EQ(a.value("INSERT INTO t VALUES (5)", 20s), "");
  }
}

// A membership step's fence (PgController::fenceQuorum, 0079 5.2), on postgres itself: a
// removal reloads the smaller set and holds once a remaining member has flushed the
// primary's position, with the removed member hung; a raise of k ends the members'
// walsenders and holds once both stream again through walsenders started after the
// reload; a step whose new set cannot catch up fails at its bound, and the state's rule,
// applied again, acknowledges commits as before.
TEST_F(QuorumPgTest, AStepsFenceHoldsOnceTheNewRuleIsCaughtUpAndFailsAtItsBoundWhenItCannotBe) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& s1 = cluster_.addNode("peer-s1");
  PgTestNode& s2 = cluster_.addNode("peer-s2");
  PgController& ca = primaryWithStandbys(a, {&s1, &s2});
  PgConfig state = PgConfig::primary(std::nullopt);  // the state's rule: ANY 1 (s1, s2)
  state.quorum = Quorum{1, {s1.identity, s2.identity}};
  PgConfigApplied applied = ca.apply(state);
  ASSERT_TRUE(applied.ok) << applied.error;
  ASSERT_EQ(a.value("CREATE TABLE t (id int primary key)"), "");
  ASSERT_TRUE(testing::eventually([&] { return streamsFrom(a, s1) && streamsFrom(a, s2); }, 60s));

  // s2 hung and removed: the fence holds through s1; s2's walsender no longer counts.
  {
    StoppedReceiver hung(s2);
    ASSERT_TRUE(hung.stop());
    ASSERT_EQ(a.value("INSERT INTO t VALUES (1)", 20s), "");
    PgFenced f = ca.fenceQuorum(StandbyQuorum{1, {"peer-s1"}}, false, 20s);
    ASSERT_TRUE(f.ok) << f.error;
    EXPECT_EQ(a.value("SHOW synchronous_standby_names"), "ANY 1 (\"peer-s1\")");
    const std::string s2State = syncStateOf(a, s2);
    EXPECT_TRUE(s2State.empty() || s2State == "async/0") << s2State;
  }

  // Both back in the set (a weakening reload), then k raised to 2: the fence ends both
  // walsenders (from k = 1), and holds once both stream through new ones.
  ASSERT_TRUE(ca.reloadQuorum(StandbyQuorum{1, {"peer-s1", "peer-s2"}}).ok());
  ASSERT_TRUE(testing::eventually([&] { return streamsFrom(a, s1) && streamsFrom(a, s2); }, 60s));
  const std::string before = a.value("SELECT clock_timestamp()");
  PgFenced raised = ca.fenceQuorum(StandbyQuorum{2, {"peer-s1", "peer-s2"}}, false, 30s);
  ASSERT_TRUE(raised.ok) << raised.error;
  EXPECT_EQ(a.value("SHOW synchronous_standby_names"), "ANY 2 (\"peer-s1\", \"peer-s2\")");
  EXPECT_EQ(a.value("SELECT count(*) FROM pg_stat_replication WHERE backend_start <= '" + before + "'"), "0");
  EXPECT_EQ(a.value("INSERT INTO t VALUES (2)", 20s), "");

  // Back to ANY 1 (s1, s2); s2 hung and WAL written that it lacks: a step to ANY 1 (s2)
  // cannot catch up, and fails at its bound. The state's rule applied again: commits are
  // acknowledged through s1 as before.
  ASSERT_TRUE(ca.reloadQuorum(StandbyQuorum{1, {"peer-s1", "peer-s2"}}).ok());
  ASSERT_TRUE(testing::eventually([&] { return streamsFrom(a, s1) && streamsFrom(a, s2); }, 60s));
  {
    StoppedReceiver hung(s2);
    ASSERT_TRUE(hung.stop());
    ASSERT_EQ(a.value("INSERT INTO t VALUES (3)", 20s), "");
    PgFenced f = ca.fenceQuorum(StandbyQuorum{1, {"peer-s2"}}, false, 1s);
    EXPECT_FALSE(f.ok);
    EXPECT_NE(f.error.find("gave up"), std::string::npos) << f.error;
    applied = ca.apply(state);
    ASSERT_TRUE(applied.ok) << applied.error;
    EXPECT_EQ(a.value("SHOW synchronous_standby_names"), "ANY 1 (\"peer-s1\", \"peer-s2\")");
    EXPECT_EQ(a.value("INSERT INTO t VALUES (4)", 20s), "");
  }
}

}  // namespace
}  // namespace dugong::pg
