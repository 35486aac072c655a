// Quorum commit under a member's faults, with real agents, ZooKeeper and postgres (issue 42,
// docs/decisions/0079-quorum-commit.md section 8, "Phase 4 as built"). Label full.
//
// - A member's postgres hung (every process of it stopped), its link to the primary cut
//   (every packet dropped, the connection left open), its host killed (agent, watchdog and
//   postmaster): each time the writes go on through the other member, with no new
//   generation, and no acknowledged row is lost.
// - The primary killed while the members hold different WAL: the links of members[0]
//   (the member a tie goes to) and, with k = 2, of members[1] are held, so that commits
//   are acknowledged by the others only; the takeover must pick a member that has every
//   acknowledged commit. With 3 peers and ANY 1 (2 members), and with 5 peers and ANY 2
//   (4 members).
// The longest time between two acknowledgements around each fault is printed, never
// asserted (a benchmark's number, reported in 0079).
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "statemachine/cluster_state.h"
#include "tests/e2e/careful_writer.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/loopback_cut.h"

namespace dugong::e2e {
namespace {

using namespace std::chrono_literals;

struct QuorumShape {
  int peers;
  int k;
  int size;
};

class QuorumFaults : public ::testing::TestWithParam<QuorumShape> {
 protected:
  void startCluster(const QuorumShape& shape) {
    HarnessOptions o;
    o.cluster = "quorumfaults";
    o.peers = shape.peers;
    o.extraConfig = "replication:\n  mode: quorum\n  k: " + std::to_string(shape.k) +
                    "\n  size: " + std::to_string(shape.size) + "\n";
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    ASSERT_GE(h_->waitForHealthyCluster(shape.peers - 1, 240s), 0) << h_->describe();
    auto s = waitForQuorum(shape, 180s);
    ASSERT_TRUE(s) << "the primary does not run ANY " << shape.k << " of " << shape.size << " members\n"
                   << h_->zkStateText();
    state_ = *s;
    primary_ = h_->indexOf(state_.primary.id);
    ASSERT_TRUE(h_->sql(primary_, "CREATE TABLE acked (id int PRIMARY KEY)").ok());
    writer_ = std::make_unique<CarefulWriter>(h_->multiHostConninfo());
    ASSERT_TRUE(h_->waitFor([&] { return writer_->ackedSince(1) >= 10; }, 60s)) << "the writer gets no acknowledgement";
  }
  void TearDown() override {
    cuts_.clear();
    for (pid_t pid : stopped_) ::kill(pid, SIGCONT);
    if (writer_) writer_->stop();
    if (HasFailure() && h_) std::cerr << h_->describe() << "state: " << h_->zkStateText() << "\n";
  }

  // The state in ZooKeeper, read as quorum mode reads it (format 2).
  std::optional<ClusterState> state() { return h_->zkState(ClusterState::Formats::kSyncAndQuorum); }
  std::string one(int peer, const std::string& query) {
    auto r = h_->sql(peer, query, 2s);
    return r && r->rows.size() == 1 && r->rows[0][0] ? *r->rows[0][0] : "";
  }
  bool streamsTo(int primary, int standby) {
    return one(primary, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND application_name = '" +
                            h_->peer(standby).id + "'") == "1";
  }
  // A format-2 state of the shape's k and size, run by its primary's postgres with every
  // member streaming and acknowledging: each has flushed what the primary had written when
  // it was first seen streaming (a stream just back from a cut can show 'streaming' while
  // its TCP connection still waits out a retransmission backoff).
  std::optional<ClusterState> waitForQuorum(const QuorumShape& shape, std::chrono::milliseconds timeout) {
    std::optional<ClusterState> s;
    const std::string any = "ANY " + std::to_string(shape.k) + " (";
    const bool ok = h_->waitFor(
        [&] {
          s = state();
          if (!s || !s->quorum || s->quorum->k != shape.k ||
              s->quorum->members.size() != static_cast<size_t>(shape.size)) {
            return false;
          }
          const int primary = h_->indexOf(s->primary.id);
          if (one(primary, "SHOW synchronous_standby_names").rfind(any, 0) != 0) return false;
          const std::string written = one(primary, "SELECT pg_current_wal_lsn()");
          for (const auto& m : s->quorum->members) {
            if (!streamsTo(primary, h_->indexOf(m.id))) return false;
          }
          for (const auto& m : s->quorum->members) {
            if (one(primary, "SELECT flush_lsn >= '" + written +
                                 "'::pg_lsn FROM pg_stat_replication WHERE application_name = '" + m.id + "'") != "t") {
              return false;
            }
          }
          return true;
        },
        timeout);
    return ok ? s : std::nullopt;
  }
  int member(size_t i) { return h_->indexOf(state_.quorum->members.at(i).id); }

  // Every process of a peer's postgres: the postmaster and its children.
  std::vector<pid_t> postgresProcesses(int peer) {
    std::vector<pid_t> out;
    auto postmaster = h_->peer(peer).pg->postmasterPid();
    if (!postmaster) return out;
    out.push_back(*postmaster);
    const std::string parent = std::to_string(*postmaster);
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string pid, comm, st, ppid;
      // comm is "(postgres)" for every postgres process, with no space in it.
      if (stat >> pid >> comm >> st >> ppid && ppid == parent) out.push_back(static_cast<pid_t>(std::stol(pid)));
    }
    return out;
  }
  // The connection of `standby`'s WAL receiver to the primary, cut.
  void cutLink(int standby) {
    const std::string port = one(primary_, "SELECT client_port FROM pg_stat_replication WHERE application_name = '" +
                                               h_->peer(standby).id + "'");
    ASSERT_FALSE(port.empty()) << h_->peer(standby).id << " has no walsender on the primary";
    std::string whyNot;
    auto cut = dugong::testing::LoopbackCut::make(std::stoi(port), h_->peer(primary_).pg->port, &whyNot);
    ASSERT_TRUE(cut) << "cannot cut " << h_->peer(standby).id << "'s link: " << whyNot;
    cuts_.push_back(std::move(cut));
  }

  // A fault of one member: `start` begins it, `end` ends it (or nothing). While it lasts,
  // rows are acknowledged by the other member(s); no new generation is written.
  void memberFault(const std::string& what, int victim, const std::function<void()>& start,
                   const std::function<void()>& end) {
    // Straight to the primary: a multi-host string that lists a hung member first waits
    // out its connect timeout on every row, which is the client's routing, not a commit
    // waiting.
    // Its connection kept, as an application's pool keeps it (a new connection per row
    // adds a login, 50-100 ms here, to every gap).
    CarefulWriter gap(h_->peer(primary_).pg->conninfo(), nextGapIds_, CarefulWriter::Connections::kKept);
    const int gapIds = nextGapIds_;
    nextGapIds_ += 1000000;
    ASSERT_TRUE(h_->waitFor([&] { return gap.ackedSince(gapIds) >= 3; }, 60s)) << what << ": no acknowledgement before";
    // The control: the same writer's longest gap over 3 s with no fault, on this host now.
    gap.resetLongestGap();
    std::this_thread::sleep_for(3s);
    const auto control = gap.longestGap();
    const std::string flushedBefore = one(primary_, "SELECT pg_current_wal_lsn()");
    gap.resetLongestGap();
    const auto began = std::chrono::steady_clock::now();
    start();
    const int fromId = gap.nextId();
    // 3 s of writes during the fault: more than the 2 s a primary's sync watch gives a
    // sync-mode standby before replacing it, so that a stall would show.
    std::this_thread::sleep_for(3s);
    const size_t ackedDuring = gap.ackedSince(fromId);
    // The victim received nothing written since the fault began... (it may have been
    // sent some before the packets were dropped: compared with the position at the start)
    const std::string victimFlush =
        one(primary_, "SELECT coalesce(flush_lsn::text, 'none') FROM pg_stat_replication WHERE application_name = '" +
                          h_->peer(victim).id + "'");
    if (end) end();
    // The gap spans the fault only once a row is acknowledged after it.
    EXPECT_TRUE(h_->waitFor([&] { return gap.ackedSince(fromId) > ackedDuring; }, 60s)) << what << ": no write after";
    gap.stop();
    acked_.merge(gap.acked());
    std::cout << "[quorum] " << what << " (" << h_->peer(victim).id << "): " << ackedDuring
              << " rows acknowledged in 3 s; longest gap between acknowledgements " << gap.longestGap().count()
              << " ms, ending "
              << (gap.longestGapEnd() ? std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                           *gap.longestGapEnd() - began)
                                                           .count())
                                      : std::string("?"))
              << " ms after the fault began (3 s before it, no fault: " << control.count()
              << " ms) (the victim's flush position on the primary " << (victimFlush.empty() ? "gone" : victimFlush)
              << ", the primary's at the start " << flushedBefore << ")" << std::endl;
    EXPECT_GT(ackedDuring, 10u) << what << ": writes stalled";
    auto after = state();
    ASSERT_TRUE(after);
    EXPECT_EQ(after->generation, state_.generation) << what << ": a new generation was written";
    EXPECT_EQ(after->primary.id, state_.primary.id) << what;
  }

  // Every acknowledged row is on `peer`.
  void everyAcknowledgedRowIsOn(int peer) {
    std::set<int> acked = acked_;
    acked.merge(writer_->acked());
    const std::set<int> present = h_->intColumn(peer, "SELECT id FROM acked");
    size_t lost = 0;
    for (int id : acked) lost += present.count(id) == 0;
    EXPECT_EQ(lost, 0u) << lost << " of " << acked.size() << " acknowledged rows are not on " << h_->peer(peer).id;
  }

  std::unique_ptr<Harness> h_;
  ClusterState state_;
  int primary_ = -1;
  std::unique_ptr<CarefulWriter> writer_;
  std::set<int> acked_;
  int nextGapIds_ = 1000000;
  std::vector<std::unique_ptr<dugong::testing::LoopbackCut>> cuts_;
  std::vector<pid_t> stopped_;
};

using QuorumOfTwo = QuorumFaults;

// 3 peers, ANY 1 (2 members): a member hung, its link cut, its host killed.
TEST_F(QuorumOfTwo, AMembersHangCutAndHostKillCostNoGenerationAndNoAcknowledgedRow) {
  const QuorumShape shape{3, 1, 2};
  startCluster(shape);
  if (HasFatalFailure()) return;
  const int a = member(0);
  const int b = member(1);

  memberFault(
      "postgres hung", a,
      [&] {
        stopped_ = postgresProcesses(a);
        ASSERT_FALSE(stopped_.empty());
        for (pid_t pid : stopped_) ::kill(pid, SIGSTOP);
      },
      [&] {
        for (pid_t pid : stopped_) ::kill(pid, SIGCONT);
        stopped_.clear();
      });
  ASSERT_TRUE(waitForQuorum(shape, 120s)) << "the set is not whole again after the hang";

  memberFault(
      "link cut", b, [&] { cutLink(b); }, [&] { cuts_.clear(); });
  ASSERT_TRUE(waitForQuorum(shape, 120s)) << "the set is not whole again after the cut";

  memberFault(
      "host killed", a,
      [&] {
        h_->killAgentAndWatchdog(a);
        h_->killPostgres(a);
      },
      [&] { h_->startAgent(a); });
  ASSERT_TRUE(waitForQuorum(shape, 180s)) << "the set is not whole again after the host came back";

  writer_->stop();
  everyAcknowledgedRowIsOn(primary_);
}

// The primary killed while the members hold different WAL: the lagging ones are those a
// tie would go to.
TEST_P(QuorumFaults, ThePrimaryKilledWhileMembersLagBehindHeldLinksLosesNoAcknowledgedRow) {
  const QuorumShape shape = GetParam();
  startCluster(shape);
  if (HasFatalFailure()) return;
  const int lagging = shape.size - shape.k;  // held members: the others acknowledge alone
  std::set<std::string> held;
  for (int i = 0; i < lagging; ++i) {
    cutLink(member(static_cast<size_t>(i)));
    held.insert(h_->peer(member(static_cast<size_t>(i))).id);
  }
  if (HasFatalFailure()) return;
  // Rows acknowledged after the links were held: on the other members only. Well within
  // the primary's wal_sender_timeout (10 s), which would end the held connections. Five:
  // under a load average of 20 (other builds and tests beside it) the writer, a new
  // connection per row, got fewer than 20 in 5 s in 2 of 4 runs, while the primary
  // replaced the held members, as it does after syncReplaceAfterMs (2 s).
  const int fromId = writer_->nextId();
  ASSERT_TRUE(h_->waitFor([&] { return writer_->ackedSince(fromId) >= 5; }, 5s)) << "writes stalled";
  const std::string end = one(primary_, "SELECT pg_current_wal_lsn()");
  for (int i = 0; i < lagging; ++i) {
    const int m = member(static_cast<size_t>(i));
    const std::string behind =
        one(primary_, "SELECT coalesce(flush_lsn < '" + end + "'::pg_lsn, true) FROM pg_stat_replication WHERE application_name = '" +
                          h_->peer(m).id + "'");
    EXPECT_EQ(behind, "t") << h_->peer(m).id << " is not behind the primary's " << end;
  }
  h_->killAgentAndWatchdog(primary_);
  h_->killPostgres(primary_);
  writer_->stop();
  std::optional<ClusterState> next;
  ASSERT_TRUE(h_->waitFor(
      [&] {
        next = state();
        return next && next->generation > state_.generation;
      },
      90s))
      << "no takeover";
  EXPECT_EQ(held.count(next->primary.id), 0u) << next->primary.id << " lagged behind a held link and took over";
  const int taker = h_->indexOf(next->primary.id);
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == taker; }, 60s)) << h_->logTail(taker);
  std::cout << "[quorum] " << shape.peers << " peers, ANY " << shape.k << " of " << shape.size << ": the primary "
            << state_.primary.id << " killed with " << lagging << " member(s) held behind; " << next->primary.id
            << " took over in generation " << next->generation << std::endl;
  everyAcknowledgedRowIsOn(taker);
  // The held members follow the new primary once their links are back (no copy needed:
  // they are behind, not diverged).
  cuts_.clear();
  for (const std::string& id : held) {
    const int m = h_->indexOf(id);
    if (m == primary_) continue;
    EXPECT_TRUE(h_->waitFor([&] { return streamsTo(taker, m); }, 120s)) << id << " does not follow " << next->primary.id
                                                                          << "\n"
                                                                          << h_->logTail(m);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuorumFaults, ::testing::Values(QuorumShape{3, 1, 2}, QuorumShape{5, 2, 4}),
                         [](const ::testing::TestParamInfo<QuorumShape>& shape) {
                           return std::to_string(shape.param.peers) + "PeersAny" + std::to_string(shape.param.k) +
                                  "Of" + std::to_string(shape.param.size);
                         });

}  // namespace
}  // namespace dugong::e2e
