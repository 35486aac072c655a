// A ZooKeeper outage that every peer sees, without the sync's promise
// (`zookeeper.failsafe: off`; with it, writes go on: ZooKeeperMaintenance's quorum loss):
// writes stop (no peer can know whether another took over), and once ZooKeeper is back,
// with every peer back within a session timeout, the cluster resumes as it was: no new
// generation, no sync change.
#include <gtest/gtest.h>

#include <iostream>
#include <thread>

#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {
namespace {

TEST(ZooKeeperOutage, WithoutTheSyncsPromiseWritesStopAndTheClusterResumesUnchanged) {
  HarnessOptions o;
  o.cluster = "outage";
  o.ownZooKeeper = true;  // killed and started again
  o.sessionTimeoutMs = 3000;
  o.zkConfig += "  failsafe: off\n";
  Harness h(o);
  h.startAll();
  const int primary = h.waitForHealthyCluster(1, std::chrono::seconds(180));
  ASSERT_GE(primary, 0) << h.describe();
  ASSERT_TRUE(h.sql(primary, "CREATE TABLE before_outage (id int); INSERT INTO before_outage VALUES (1)").ok());
  const auto before = h.zkState();
  ASSERT_TRUE(before.has_value());

  h.zookeeper().kill(0);
  const auto outageStart = std::chrono::steady_clock::now();
  // Writes stop: the primary stops advertising itself and accepts no write.
  EXPECT_TRUE(h.waitFor([&] { return h.httpStatus(primary, "/primary") == 503; }, std::chrono::seconds(20)))
      << h.logTail(primary);
  EXPECT_TRUE(h.waitFor([&] { return !h.sql(primary, "INSERT INTO before_outage VALUES (2)", std::chrono::seconds(3)).ok(); },
                        std::chrono::seconds(20)))
      << "the primary still accepts writes during the outage\n" << h.logTail(primary);
  // Longer than a session timeout.
  std::this_thread::sleep_until(outageStart + std::chrono::milliseconds(2 * o.sessionTimeoutMs));
  EXPECT_NE(h.httpStatus(primary, "/primary"), 200) << "advertised as writable during the outage";
  h.zookeeper().start(0);

  // Back: the same primary is writable again, with the same sync, in the same generation.
  // (One streaming replica is waited for: the async's streaming is not what this tests.)
  const int after = h.waitForHealthyCluster(1, std::chrono::seconds(120));
  ASSERT_EQ(after, primary) << h.describe();
  // Settled: give a needless takeover or sync replacement the time to happen.
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * o.sessionTimeoutMs));
  const auto now = h.zkState();
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->generation, before->generation) << "a new generation after an outage every peer came back from";
  EXPECT_EQ(now->primary.id, before->primary.id);
  ASSERT_TRUE(now->sync.has_value());
  EXPECT_EQ(now->sync->id, before->sync->id) << "the sync was replaced after the outage";
  EXPECT_TRUE(now->deposed.empty());
  EXPECT_EQ(h.writablePrimary(), primary);
  auto ids = h.intColumn(primary, "SELECT id FROM before_outage");
  EXPECT_TRUE(ids.count(1)) << "the row written before the outage is gone";
  EXPECT_TRUE(h.sql(primary, "INSERT INTO before_outage VALUES (3)", std::chrono::seconds(30)).ok());
  if (HasFailure()) std::cerr << h.describe() << h.logTail(primary, 80);
}

}  // namespace
}  // namespace dugong::e2e
