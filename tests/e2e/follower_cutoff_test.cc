// The primary's lease end to end: the
// primary's agent talks to a ZooKeeper follower that is cut off from its leader. The
// follower keeps answering the agent's pings for syncLimit x tickTime (4 s here, twice
// the session timeout) while the leader expires the session after 2 s and the sync takes
// over. The primary must stop acknowledging every kind of commit (synchronous_commit =
// local, BEGIN READ WRITE) before that takeover lands, and /primary must never answer
// 200 on two peers at once. DUGONG_E2E_NO_LEASE=1 runs it without the lease
// (zookeeper.lease: false), as the agent was before: it then fails.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

#include "statemachine/time_format.h"
#include "tests/e2e/partition_scenario.h"

namespace dugong::e2e {
namespace {

TEST(FollowerCutOff, APrimaryOnACutOffFollowerStopsEveryCommitBeforeTheTakeover) {
  const bool noLease = std::getenv("DUGONG_E2E_NO_LEASE") != nullptr;
  PartitionCluster cluster(2000, PartitionKind::kFollowerCutOff, noLease ? "  lease: false\n" : "");
  PartitionOutcome o = cluster.run();
  Harness& h = cluster.harness();
  ASSERT_TRUE(o.error.empty()) << o.error << "\n" << h.describe() << h.logTail(0);
  std::cout << "follower cut off" << (noLease ? " (no lease)" : "") << ": new primary written "
            << o.timeToNewPrimary->count() << " ms after the cut (session timeout 2000 ms, the follower gives up "
            << "after 4000 ms); /primary 503 on the old primary after "
            << (o.timeToNotWritable ? std::to_string(o.timeToNotWritable->count()) + " ms" : "never") << "; rows "
            << o.carefulAcked.size() << " careful, " << o.localAcked.size() << " local, " << o.hostileAcked.size()
            << " hostile acknowledged, lost " << o.carefulLost.size() << " / " << o.localLost.size() << " / "
            << o.hostileLost.size() << "; cut at " << formatIso8601(o.cutWallMs) << "\n";
  EXPECT_NE(o.newPrimary, o.oldPrimary);
  EXPECT_FALSE(o.twoWritablePrimaries) << "/primary answered 200 on two peers at once";
  EXPECT_FALSE(o.localAcked.empty());
  EXPECT_FALSE(o.hostileAcked.empty());
  EXPECT_TRUE(o.carefulLost.empty()) << o.carefulLost.size() << " acknowledged careful rows lost";
  EXPECT_TRUE(o.localLost.empty()) << o.localLost.size()
                                   << " rows acknowledged with synchronous_commit = local lost, first "
                                   << (o.localLost.empty() ? 0 : *o.localLost.begin());
  EXPECT_TRUE(o.hostileLost.empty()) << o.hostileLost.size()
                                     << " rows acknowledged to BEGIN READ WRITE + synchronous_commit = local lost";
  // The follower is back with its leader: the old primary learns it was deposed.
  h.zookeeper().healQuorumLinks(0);
  EXPECT_TRUE(h.waitFor([&] { return h.role(o.oldPrimary) == "deposed"; }, std::chrono::seconds(60)))
      << h.logTail(o.oldPrimary);
  if (HasFailure()) std::cerr << h.describe() << h.logTail(o.oldPrimary, 80);
}

}  // namespace
}  // namespace dugong::e2e
