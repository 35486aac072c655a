// The checks of the failsafe (driver/failsafe.h) against the world's ground truth: a
// sync promises a primary not to take over only while its ZooKeeper client cannot
// confirm a round trip through a leader (promise-while-reaching-zookeeper).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

// The ground truth checkPromise compares a promise with: when each host's ZooKeeper
// client last could not confirm a round trip through the leader (noted at every step).
void World::noteZooKeeperReach() {
  if (zkUnreachableAt_.size() != nodes_.size()) zkUnreachableAt_.assign(nodes_.size(), 0);
  const bool leader = zk_.hasLeader();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const simworld::ZkClient& c = zk_.client(static_cast<int>(i));
    // What it hears comes in order: a backlog of late deliveries delays the answers too.
    const bool late = now_ < c.slowNotifyUntil || c.nextDelivery > now_ + 50;
    if (!leader || c.partitioned || !c.ready || c.session == 0 || late) zkUnreachableAt_[i] = now_;
  }
}

// A promise is given only by a peer that cannot reach ZooKeeper (docs/design.md
// "Quorum loss: the sync's promise"): not by one whose client has confirmed round
// trips through a leader for two intervals and their latency.
void World::checkPromise(int target, const std::string& asker, const agent::FailsafeAnswer& a) {
  noteZooKeeperReach();
  const int64_t reachedFor = now_ - zkUnreachableAt_[static_cast<size_t>(target)];
  if (a.granted && reachedFor > 2 * leaseIntervalFor(sc_.sessionTimeoutMs) + 100) {
    checker_.fail(now_, "promise-while-reaching-zookeeper",
                  node(target).identity.id + " promised " + asker + " not to take over although it has reached the " +
                      "ZooKeeper leader for " + std::to_string(reachedFor) + " ms");
  }
}

}  // namespace dugong::clustersim::world_internal
