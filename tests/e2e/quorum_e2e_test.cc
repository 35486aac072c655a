// Quorum commit with real agents, ZooKeeper and postgres (docs/decisions/0079-quorum-commit.md,
// "Phase 3 as built"): three peers whose agents run `replication: {mode: quorum, k: 1,
// size: 2}`. The cluster is set up in sync mode and its primary moves it to `ANY 1 (s1,
// s2)` by steps (a re-encoding, then an add), under a careful writer (careful_writer.h).
//
// What is asserted:
// - one member's postmaster killed (SIGKILL; its agent restarts it): rows are acknowledged
//   while that member has no walsender on the primary (in sync mode commits would wait for
//   it), no new generation is written, and the member streams again;
// - that member's host killed (agent, watchdog, postmaster): rows are acknowledged, the
//   primary removes it from the set (a fenced membership step, 0079 5.2) with no new
//   generation, and adds it back once its agent runs again and it streams;
// - then the primary's host killed (agent, watchdog, postmaster): a member takes over in
//   one new generation (its takeover reports counted and checked in ZooKeeper), and every
//   acknowledged row is on it.
// - what the operator sees: GET /quorum on the primary (the set, k, each member's flush),
//   /sync on each member, /state's peer.quorum.
// The longest time between two acknowledgements around each fault is printed, never
// asserted (a benchmark's number: 0079 "Numbers").
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "ops/http_client.h"
#include "statemachine/cluster_state.h"
#include "tests/e2e/careful_writer.h"
#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {
namespace {

using namespace std::chrono_literals;

class QuorumE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    HarnessOptions o;
    o.cluster = "quorum";
    o.extraConfig = "replication:\n  mode: quorum\n  k: 1\n  size: 2\n";
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    ASSERT_GE(h_->waitForHealthyCluster(2, 180s), 0) << h_->describe();
  }
  void TearDown() override {
    if (HasFailure() && h_) std::cerr << h_->describe() << "format-2 state: " << h_->zkStateText() << "\n";
  }

  // The state in ZooKeeper, read as quorum mode reads it (format 2).
  std::optional<ClusterState> state() { return h_->zkState(ClusterState::Formats::kSyncAndQuorum); }
  int indexOf(const PeerIdentity& p) { return h_->indexOf(p.id); }
  bool streamsTo(int primary, int standby) {
    auto r = h_->sql(primary, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND application_name = '" +
                                  h_->peer(standby).id + "'",
                     2s);
    return r && r->rows.size() == 1 && r->rows[0][0] == std::string("1");
  }
  // Waits for a format-2 state of `members` members with k = 1, run by the primary's
  // postgres (ANY 1 (...) with every member streaming).
  std::optional<ClusterState> waitForQuorum(size_t members, std::chrono::milliseconds timeout) {
    std::optional<ClusterState> s;
    const bool ok = h_->waitFor(
        [&] {
          s = state();
          if (!s || !s->quorum || s->quorum->k != 1 || s->quorum->members.size() != members) return false;
          const int primary = indexOf(s->primary);
          auto names = h_->sql(primary, "SHOW synchronous_standby_names", 2s);
          if (!names || names->rows.empty() || !names->rows[0][0] || names->rows[0][0]->rfind("ANY 1 (", 0) != 0) {
            return false;
          }
          for (const auto& m : s->quorum->members) {
            if (!streamsTo(primary, indexOf(m))) return false;
          }
          return true;
        },
        timeout);
    return ok ? s : std::nullopt;
  }
  std::set<int> rowsOn(int peer) { return h_->intColumn(peer, "SELECT id FROM acked"); }

  std::unique_ptr<Harness> h_;
};

// The one default case (about a minute): a member's postgres killed, then the primary.
TEST_F(QuorumE2E, AMembersPostgresKilledCostsNoGenerationAndThePrimaryKilledLosesNoAcknowledgedRow) {
  auto s = waitForQuorum(2, 120s);
  ASSERT_TRUE(s) << "no ANY 1 of 2 members run by the primary";
  const int64_t generation = s->generation;
  const int primary = indexOf(s->primary);
  const int killed = indexOf(s->quorum->members[0]);
  const int other = indexOf(s->quorum->members[1]);
  // What the operator sees: GET /quorum on the primary names the set, k and each member's
  // flush position; /sync answers on every member; /state carries the mode, k and set.
  std::optional<nlohmann::json> quorum;
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto r = agent::httpGet("http://127.0.0.1:" + std::to_string(h_->peer(primary).httpPort) + "/quorum", 2s);
        if (!r || r->status != 200) return false;
        quorum = nlohmann::json::parse(r->body, nullptr, false);
        for (const auto& m : quorum->value("members", nlohmann::json::array())) {
          if (!m.value("streaming", false) || !m["flushLsn"].is_string()) return false;
        }
        return true;
      },
      30s))
      << "GET /quorum on the primary";
  EXPECT_EQ((*quorum)["k"], 1);
  EXPECT_EQ((*quorum)["members"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ((*quorum)["members"][i]["id"], s->quorum->members[i].id);
  for (int m : {indexOf(s->quorum->members[0]), indexOf(s->quorum->members[1])}) {
    EXPECT_TRUE(h_->waitFor([&] { return h_->httpStatus(m, "/sync") == 200; }, 30s)) << h_->peer(m).id << " /sync";
    EXPECT_EQ(h_->httpStatus(m, "/quorum"), 503);
  }
  // /metrics on the primary: the mode, k, the set, and both members acknowledging (the
  // quorum alerts of etc/prometheus/dugong-rules.yml rest on these; the ecosystem test's
  // sync-mode cluster does not serve them).
  std::string metrics;
  EXPECT_TRUE(h_->waitFor(
      [&] {
        auto r = agent::httpGet("http://127.0.0.1:" + std::to_string(h_->peer(primary).httpPort) + "/metrics", 2s);
        metrics = r && r->status == 200 ? r->body : "";
        return metrics.find("dugong_quorum_acknowledging_members 2\n") != std::string::npos;
      },
      30s))
      << metrics;
  for (const char* line : {"dugong_replication_mode{mode=\"quorum\"} 1\n", "dugong_quorum_k 1\n",
                           "dugong_quorum_members 2\n", "dugong_quorum_read_quorum 2\n"}) {
    EXPECT_NE(metrics.find(line), std::string::npos) << line;
  }
  auto shown = h_->status(primary);
  ASSERT_TRUE(shown);
  EXPECT_EQ((*shown)["peer"]["quorum"]["mode"], "quorum");
  EXPECT_EQ((*shown)["peer"]["quorum"]["k"], 1);
  EXPECT_EQ((*shown)["peer"]["quorum"]["members"].size(), 2u);
  ASSERT_TRUE(h_->sql(primary, "CREATE TABLE acked (id int PRIMARY KEY)").ok());
  CarefulWriter writer(h_->multiHostConninfo());
  ASSERT_TRUE(h_->waitFor([&] { return writer.ackedSince(1) >= 10; }, 60s)) << "the writer gets no acknowledgement";

  // 1. A member's postmaster killed: writes go on through the other member while the
  // killed one has no walsender on the primary; its agent starts it again. The agent is
  // held (SIGSTOP) until rows were acknowledged meanwhile: it restarts postgres within a
  // few hundred milliseconds, which on a loaded host can be before the writer's next row.
  {
    CarefulWriter gap(h_->multiHostConninfo(), 1000000);
    ASSERT_TRUE(h_->waitFor([&] { return gap.ackedSince(1000000) >= 3; }, 60s));
    h_->pauseAgent(killed);
    h_->killPostgres(killed);
    ASSERT_TRUE(h_->waitFor([&] { return !streamsTo(primary, killed); }, 20s)) << "the killed member still streams";
    const int fromId = writer.nextId();
    size_t ackedWhileDown = 0;
    // Read the acknowledgements first, then look at the member: those read were all
    // acknowledged while it did not stream.
    h_->waitFor(
        [&] {
          const size_t acked = writer.ackedSince(fromId);
          if (streamsTo(primary, killed)) return true;
          ackedWhileDown = acked;
          return ackedWhileDown >= 3;
        },
        20s);
    h_->resumeAgent(killed);
    const bool back = h_->waitFor([&] { return streamsTo(primary, killed); }, 120s);
    ASSERT_TRUE(back) << h_->peer(killed).id << " does not stream again\n" << h_->logTail(killed);
    ASSERT_TRUE(h_->waitFor([&] { return gap.ackedSince(gap.nextId() - 5) >= 3; }, 20s));
    gap.stop();
    std::cout << "[quorum] member " << h_->peer(killed).id << "'s postmaster killed: " << ackedWhileDown
              << " rows acknowledged while it had no walsender; longest gap between acknowledgements "
              << gap.longestGap().count() << " ms" << std::endl;
    EXPECT_GT(ackedWhileDown, 0u) << "no commit was acknowledged while the member was down";
    auto after = state();
    ASSERT_TRUE(after);
    EXPECT_EQ(after->generation, generation) << "a new generation was written for a member's failure";
    EXPECT_EQ(after->primary.id, h_->peer(primary).id);
  }

  // 2. The member's host killed (agent, watchdog, postmaster): once its session has
  // ended, the primary removes it from the set by a fenced step (reloaded, caught up,
  // then written) in the same generation, while writes go on through the other member;
  // its agent started again, it streams and is added back, still in that generation.
  {
    ASSERT_TRUE(waitForQuorum(2, 60s)) << "the set is not whole again before the member's host is killed";
    CarefulWriter gap(h_->multiHostConninfo(), 3000000);
    ASSERT_TRUE(h_->waitFor([&] { return gap.ackedSince(3000000) >= 3; }, 60s));
    const int fromId = writer.nextId();
    h_->killAgentAndWatchdog(killed);
    h_->killPostgres(killed);
    std::optional<ClusterState> without;
    ASSERT_TRUE(h_->waitFor(
        [&] {
          without = state();
          return without && without->quorum && !containsPeer(without->quorum->members, h_->peer(killed).id);
        },
        60s))
        << "the dead member " << h_->peer(killed).id << " is not removed from the set: " << h_->zkStateText() << "\n"
        << h_->logTail(primary);
    const size_t ackedUntilRemoved = writer.ackedSince(fromId);
    EXPECT_EQ(without->generation, generation) << "a new generation was written for a member's failure";
    EXPECT_EQ(without->primary.id, h_->peer(primary).id);
    EXPECT_EQ(without->quorum->members.size(), 1u);
    EXPECT_GT(ackedUntilRemoved, 0u) << "no commit was acknowledged between the kill and the removal";
    h_->startAgent(killed);
    auto back = waitForQuorum(2, 120s);
    ASSERT_TRUE(back) << h_->peer(killed).id << " is not added back: " << h_->zkStateText() << "\n" << h_->logTail(killed);
    EXPECT_EQ(back->generation, generation);
    EXPECT_TRUE(containsPeer(back->quorum->members, h_->peer(killed).id));
    gap.stop();
    std::cout << "[quorum] member " << h_->peer(killed).id << "'s host killed: removed from the set in generation "
              << without->generation << " with " << ackedUntilRemoved
              << " rows acknowledged meanwhile, added back once it streamed again; longest gap between "
                 "acknowledgements "
              << gap.longestGap().count() << " ms" << std::endl;
  }

  // 3. The primary's host killed: the members fence, report, and the one with the most
  // WAL takes over in one new generation.
  ASSERT_TRUE(waitForQuorum(2, 60s)) << "the set is not whole again before the primary's kill";
  CarefulWriter gap(h_->multiHostConninfo(), 2000000);
  ASSERT_TRUE(h_->waitFor([&] { return gap.ackedSince(2000000) >= 3; }, 60s));
  h_->killAgentAndWatchdog(primary);
  h_->killPostgres(primary);
  std::optional<ClusterState> next;
  ASSERT_TRUE(h_->waitFor(
      [&] {
        next = state();
        return next && next->generation > generation;
      },
      60s))
      << "no takeover";
  EXPECT_EQ(next->generation, generation + 1);
  EXPECT_TRUE(next->primary.id == h_->peer(killed).id || next->primary.id == h_->peer(other).id)
      << next->primary.id;
  EXPECT_TRUE(containsPeer(next->deposed, h_->peer(primary).id));
  ASSERT_TRUE(next->quorum) << "the takeover wrote a sync-mode state";
  const int taker = indexOf(next->primary);
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == taker; }, 60s)) << h_->logTail(taker);
  ASSERT_TRUE(h_->waitFor([&] { return gap.ackedSince(gap.nextId() - 5) >= 3; }, 60s));
  gap.stop();
  writer.stop();
  std::cout << "[quorum] primary " << h_->peer(primary).id << "'s host killed: " << h_->peer(taker).id
            << " took over in generation " << next->generation << "; longest gap between acknowledgements "
            << gap.longestGap().count() << " ms" << std::endl;
  const std::set<int> present = rowsOn(taker);
  size_t lost = 0;
  for (const std::set<int>& acked : {writer.acked(), gap.acked()}) {
    for (int id : acked) {
      if (!present.count(id)) ++lost;
    }
  }
  EXPECT_EQ(lost, 0u) << "acknowledged rows missing on the new primary";
  EXPECT_GT(writer.acked().size(), 10u);
}

}  // namespace
}  // namespace dugong::e2e
