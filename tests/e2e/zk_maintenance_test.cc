// ZooKeeper maintenance costs no writes (issue 24), end to end and short: a real 3-server
// ensemble (tickTime 200 ms), agents on the whole ensemble, session timeout 4 s. The
// ZooKeeper leader is killed (and started again), then every server is restarted in turn,
// the leader last. The primary's agent keeps its session and, under the lease, its
// postgres: no postgres restart, no new generation, and writes go on (the longest gap
// between two acknowledged rows of a writer on the primary is printed, not asserted;
// DUGONG_E2E_NO_LEASE=1 runs it as the agent was before the lease: it then fails).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {
namespace {

using Clock = std::chrono::steady_clock;

std::string postmasterStart(Harness& h, int i) {
  auto r = h.sql(i, "SELECT pg_postmaster_start_time()::text");
  return r && !r->rows.empty() ? r->rows[0][0].value_or("") : std::string("unreadable");
}

// Rows inserted on peer `primary` every 20 ms (synchronous_commit on); the longest gap
// between two acknowledgements.
class Writer {
 public:
  Writer(Harness& h, int primary) : thread_([this, &h, primary] {
    for (int id = 1; !done_; ++id) {
      if (h.sql(primary, "INSERT INTO maint VALUES (" + std::to_string(id) + ")", std::chrono::seconds(5))) {
        const auto now = Clock::now();
        std::lock_guard lock(mu_);
        if (last_) maxGap_ = std::max(maxGap_, now - *last_);
        last_ = now;
        ++acked_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }) {}
  ~Writer() { stop(); }
  void stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t maxGapMs() {
    std::lock_guard lock(mu_);
    return std::chrono::duration_cast<std::chrono::milliseconds>(maxGap_).count();
  }
  int acked() {
    std::lock_guard lock(mu_);
    return acked_;
  }

 private:
  std::mutex mu_;
  std::optional<Clock::time_point> last_;
  Clock::duration maxGap_{};
  int acked_ = 0;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(ZooKeeperMaintenance, ALeaderKillAndARollingRestartCostNoPostgresRestartAndNoGeneration) {
  HarnessOptions o;
  o.peers = 3;
  o.sessionTimeoutMs = 4000;
  o.zookeeper.servers = 3;
  // DUGONG_E2E_NO_LEASE=1: no lease (a round trip every 60 s), as the agent was before.
  const bool noLease = std::getenv("DUGONG_E2E_NO_LEASE") != nullptr;
  if (noLease) o.zkConfig = "  leaseIntervalMs: 60000\n";
  Harness h(o);
  h.startAll();
  const int primary = h.waitForHealthyCluster(2, std::chrono::seconds(180));
  ASSERT_GE(primary, 0) << h.describe();
  ASSERT_TRUE(h.sql(primary, "CREATE TABLE maint (id int PRIMARY KEY)"));
  const int64_t generation = h.zkState()->generation;
  const std::string started = postmasterStart(h, primary);
  auto& zk = h.zookeeper();

  Writer writer(h, primary);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  // The leader killed, and started again once another leads.
  const auto leader = zk.leader();
  ASSERT_TRUE(leader.has_value());
  zk.kill(*leader);
  ASSERT_TRUE(zk.waitLeader(std::chrono::seconds(60)).has_value());
  zk.start(*leader);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const int64_t killGap = writer.maxGapMs();
  // A rolling restart, the leader last.
  const auto leaderNow = zk.waitLeader(std::chrono::seconds(60));
  ASSERT_TRUE(leaderNow.has_value());
  for (int s = 0; s < zk.size(); ++s) {
    if (s != *leaderNow) zk.restart(s);
  }
  zk.restart(*leaderNow);
  ASSERT_TRUE(zk.waitLeader(std::chrono::seconds(60)).has_value());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  writer.stop();

  std::cout << "zookeeper maintenance" << (noLease ? " (no lease)" : "") << " (session 4000 ms, tickTime 200 ms): longest write gap " << killGap
            << " ms over the leader kill, " << writer.maxGapMs() << " ms over both; " << writer.acked()
            << " rows acknowledged\n";
  EXPECT_EQ(h.writablePrimary(), primary) << h.describe();
  EXPECT_EQ(h.zkState()->generation, generation) << "a new generation";
  EXPECT_EQ(postmasterStart(h, primary), started) << "the primary's postgres was restarted";
  if (HasFailure()) std::cerr << h.describe() << h.logTail(primary, 80);
}

}  // namespace
}  // namespace dugong::e2e
