// The isolated primary end to end: real ZooKeeper, postgres and agents, with
// passwords; the primary's agent is cut off from ZooKeeper by a proxy while its postgres
// stays reachable. Timing is measured and printed, not asserted (bench/partition_bench).
#include <gtest/gtest.h>

#include <iostream>

#include "statemachine/time_format.h"
#include "tests/e2e/partition_scenario.h"

namespace dugong::e2e {
namespace {

TEST(Partition, AnIsolatedPrimaryStopsWritesAndClientsReachTheNewPrimaryWithoutLoss) {
  PartitionCluster cluster;
  PartitionOutcome o = cluster.run();
  Harness& h = cluster.harness();
  ASSERT_TRUE(o.error.empty()) << o.error << "\n" << h.describe();
  std::cout << "partition: new primary written through the read-write URL "
            << o.timeToNewPrimary->count() << " ms after the cut (session timeout "
            << h.options().sessionTimeoutMs << " ms); /primary 503 on the old primary after "
            << (o.timeToNotWritable ? std::to_string(o.timeToNotWritable->count()) + " ms" : "never") << "; rows "
            << o.carefulAcked.size() << " careful, " << o.localAcked.size() << " local, " << o.hostileAcked.size()
            << " hostile acknowledged; cut at "
            << formatIso8601(o.cutWallMs) << "\n";
  EXPECT_NE(o.newPrimary, o.oldPrimary);
  EXPECT_TRUE(o.timeToNotWritable.has_value()) << "the old primary kept answering /primary with 200";
  EXPECT_EQ(h.httpStatus(o.oldPrimary, "/primary"), 503);
  EXPECT_FALSE(o.carefulAcked.empty());
  EXPECT_FALSE(o.localAcked.empty());
  EXPECT_TRUE(o.carefulLost.empty()) << o.carefulLost.size() << " acknowledged careful rows lost, first "
                                     << *o.carefulLost.begin();
  EXPECT_TRUE(o.localLost.empty()) << o.localLost.size()
                                   << " rows acknowledged with synchronous_commit = local lost, first "
                                   << *o.localLost.begin();
  EXPECT_FALSE(o.hostileAcked.empty());
  EXPECT_TRUE(o.hostileLost.empty()) << o.hostileLost.size()
                                     << " rows acknowledged to BEGIN READ WRITE + synchronous_commit = local lost, first "
                                     << *o.hostileLost.begin();
  // The partition heals: the old primary learns it was deposed and stops its postgres.
  cluster.proxy(o.oldPrimary).heal();
  EXPECT_TRUE(h.waitFor([&] { return h.role(o.oldPrimary) == "deposed"; }, std::chrono::seconds(60)))
      << h.logTail(o.oldPrimary);
  if (HasFailure()) std::cerr << h.describe() << h.logTail(o.oldPrimary);
}

}  // namespace
}  // namespace dugong::e2e
