// A standby cluster following a dugong source cluster across the source's failover (issue
// 43's first "done when"; docs/decisions/0083-standby-cluster.md section 3.3): two
// clusters of 3 peers, each with its own ZooKeeper, on loopback. The standby cluster's
// source is the source cluster's three hosts (`standby.source: hosts://a,b,c`: the
// writable one is followed). A careful writer writes to the source throughout.
// - The source's primary host killed (agent, watchdog, postmaster): the source's sync
//   takes over, and the standby cluster follows its new primary, without a copy
//   (pg_rewind allowed: an asynchronous follower of the old primary may have received a
//   little more than the sync did). The time from the kill until a row written on the new
//   source primary is on the standby leader is printed.
// - The standby leader's host killed: its sync becomes standby leader and keeps following.
// - Every row the source acknowledged is, in the end, on every running standby peer, and
//   no standby peer ever answers /primary 200.
// Label full (two clusters: about two minutes).
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "tests/e2e/careful_writer.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class StandbySourceFailover : public ::testing::Test {
 protected:
  void TearDown() override {
    if (writer_) writer_->stop();
    if (HasFailure()) {
      if (source_) std::cerr << "the source cluster:\n" << source_->describe();
      if (standby_) std::cerr << "the standby cluster:\n" << standby_->describe();
    }
  }
  // The standby leader (its /standby-leader answers 200), or -1.
  int standbyLeader() {
    for (int i = 0; i < standby_->size(); ++i) {
      if (standby_->agentRunning(i) && standby_->httpStatus(i, "/standby-leader") == 200) return i;
    }
    return -1;
  }
  bool holds(int peer, int id) {
    auto r = standby_->sql(peer, "SELECT count(*) FROM acked WHERE id = " + std::to_string(id), 2s);
    return r && !r->rows.empty() && r->rows[0][0] == "1";
  }
  // How many times a peer's agent ran pg_basebackup so far (its log).
  size_t copies(int peer) {
    const std::string log = dugong::testing::fileText(standby_->peer(peer).logPath);
    size_t n = 0;
    for (size_t at = log.find("pg_basebackup finished"); at != std::string::npos;
         at = log.find("pg_basebackup finished", at + 1)) {
      ++n;
    }
    return n;
  }
  void expectNoStandbyPeerWritable() {
    for (int i = 0; i < standby_->size(); ++i) {
      if (!standby_->agentRunning(i)) continue;
      EXPECT_NE(standby_->httpStatus(i, "/primary"), 200) << standby_->peer(i).id;
    }
  }

  std::unique_ptr<Harness> source_;
  std::unique_ptr<Harness> standby_;
  std::unique_ptr<CarefulWriter> writer_;
};

TEST_F(StandbySourceFailover, TheStandbyClusterFollowsTheSourcesNewPrimaryWithoutACopy) {
  HarnessOptions so;
  so.cluster = "site-a";
  so.ownZooKeeper = true;
  source_ = std::make_unique<Harness>(so);
  source_->startAll();
  const int sourcePrimary = source_->waitForHealthyCluster(2, 180s);
  ASSERT_GE(sourcePrimary, 0) << source_->describe();
  ASSERT_TRUE(source_->sql(sourcePrimary, "CREATE TABLE acked (id int PRIMARY KEY)").ok());
  writer_ = std::make_unique<CarefulWriter>(source_->multiHostConninfo());
  ASSERT_TRUE(source_->waitFor([&] { return writer_->ackedSince(1) >= 10; }, 60s));

  std::string hosts;
  for (int i = 0; i < source_->size(); ++i) {
    hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(source_->peer(i).pg->port);
  }
  HarnessOptions bo;
  bo.cluster = "site-b";
  bo.ownZooKeeper = true;
  bo.extraConfig = "standby:\n  source: hosts://" + hosts + "\n";
  standby_ = std::make_unique<Harness>(bo);
  standby_->startAll();
  int leader = -1;
  ASSERT_TRUE(standby_->waitFor([&] { return (leader = standbyLeader()) >= 0; }, 240s)) << "no standby leader";
  const int early = writer_->nextId() - 1;
  for (int i = 0; i < standby_->size(); ++i) {
    ASSERT_TRUE(standby_->waitFor([&] { return holds(i, early); }, 180s)) << standby_->peer(i).id << " lacks row " << early;
  }
  expectNoStandbyPeerWritable();
  std::vector<size_t> copiesBefore;
  for (int i = 0; i < standby_->size(); ++i) copiesBefore.push_back(copies(i));

  // 1. The source's primary host killed: its sync takes over; the standby cluster follows.
  const auto killed = Clock::now();
  source_->killAgentAndWatchdog(sourcePrimary);
  source_->killPostgres(sourcePrimary);
  int newSourcePrimary = -1;
  ASSERT_TRUE(source_->waitFor(
      [&] { return (newSourcePrimary = source_->writablePrimary()) >= 0 && newSourcePrimary != sourcePrimary; }, 120s))
      << "the source does not fail over";
  const int afterFailover = writer_->nextId();
  ASSERT_TRUE(source_->waitFor([&] { return writer_->ackedSince(afterFailover) >= 1; }, 60s));
  const int probe = *writer_->acked().lower_bound(afterFailover);
  ASSERT_TRUE(standby_->waitFor([&] { return holds(leader, probe); }, 120s))
      << "the standby leader does not receive what the new source primary wrote\n"
      << standby_->logTail(leader, 60);
  std::cout << "[standby] the source's primary " << source_->peer(sourcePrimary).id << " killed; "
            << source_->peer(newSourcePrimary).id << " took over; the standby leader " << standby_->peer(leader).id
            << " held a row written on it "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count()
            << " ms after the kill" << std::endl;
  for (int i = 0; i < standby_->size(); ++i) {
    EXPECT_TRUE(standby_->waitFor([&] { return holds(i, probe); }, 120s)) << standby_->peer(i).id << " lacks row " << probe;
    EXPECT_EQ(copies(i), copiesBefore[static_cast<size_t>(i)]) << standby_->peer(i).id << " was copied again";
  }
  expectNoStandbyPeerWritable();

  // 2. The standby leader's host killed: its sync becomes standby leader and follows on.
  standby_->killAgentAndWatchdog(leader);
  standby_->killPostgres(leader);
  int nextLeader = -1;
  ASSERT_TRUE(standby_->waitFor([&] { return (nextLeader = standbyLeader()) >= 0 && nextLeader != leader; }, 120s))
      << "no new standby leader";
  const int afterLeaderLoss = writer_->nextId();
  ASSERT_TRUE(source_->waitFor([&] { return writer_->ackedSince(afterLeaderLoss) >= 1; }, 60s));
  writer_->stop();
  const std::set<int> acked = writer_->acked();
  for (int i = 0; i < standby_->size(); ++i) {
    if (i == leader) continue;
    ASSERT_TRUE(standby_->waitFor([&] { return holds(i, *acked.rbegin()); }, 120s))
        << standby_->peer(i).id << " lacks the last acknowledged row";
    const std::set<int> present = standby_->intColumn(i, "SELECT id FROM acked");
    size_t missing = 0;
    for (int id : acked) missing += present.count(id) == 0;
    EXPECT_EQ(missing, 0u) << missing << " of " << acked.size() << " rows the source acknowledged are not on "
                           << standby_->peer(i).id;
  }
  expectNoStandbyPeerWritable();
}

}  // namespace
}  // namespace dugong::e2e
