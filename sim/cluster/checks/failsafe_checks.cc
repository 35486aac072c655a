// The checks of the failsafe (driver/failsafe.h) against the world's ground truth: a
// sync promises a primary not to take over only while its ZooKeeper client cannot
// confirm a round trip through a leader (promise-while-reaching-zookeeper).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

// The ground truth checkPromise compares a promise with: when each host's ZooKeeper
// client last could not confirm a round trip through the leader (noted at every step).
void World::noteZooKeeperReach() {
  const size_t hosts = nodes_.size();
  if (zkUnreachableAt_.size() != hosts) {
    zkUnreachableAt_.assign(hosts, 0);
    reachUnreachableUntil_.assign(hosts, 0);
  }
  const simworld::ZkEnsemble& zk = zk_;  // a look: not counted as a change
  int64_t quietFrom = 0;
  for (size_t i = 0; i < hosts; ++i) {
    const simworld::ZkClient& c = zk.look(static_cast<int>(i));
    // Unreachable with no leader, cut off or with no session ready, or while what it hears
    // comes late: in order, a backlog of late deliveries delays the answers too (late:
    // now < slowNotifyUntil or nextDelivery > now + 50).
    const bool cut = c.partitioned || !c.ready || c.session == 0;
    const int64_t until =
        cut ? kForever : std::max({zk.leaderlessUntil(), c.slowNotifyUntil, c.nextDelivery - 50});
    if (now_ < until) zkUnreachableAt_[i] = now_;
    reachUnreachableUntil_[i] = until;
    quietFrom = std::max(quietFrom, until);
  }
  reachQuietFrom_ = quietFrom;
}

// The same at a step, from what the last look saw while the clients stay as they were
// (most steps are replication or client ticks, which change none): each client is
// unreachable until the time that look found.
void World::noteZooKeeperReachAtStep() {
  if (zk_.changes() != reachChangesSeen_) {
    noteZooKeeperReach();
    reachChangesSeen_ = zk_.changes();
    return;
  }
  if (now_ >= reachQuietFrom_) return;
  for (size_t i = 0; i < zkUnreachableAt_.size(); ++i) {
    if (now_ < reachUnreachableUntil_[i]) zkUnreachableAt_[i] = now_;
  }
}

// A promise is given only by a peer that cannot reach ZooKeeper (docs/design.md
// "Quorum loss: the sync's promise"): not by one whose client has confirmed round
// trips through a leader for two intervals and their latency.
void World::checkPromise(int target, const std::string& asker, const driver::FailsafeAnswer& a) {
  noteZooKeeperReach();
  const int64_t reachedFor = now_ - zkUnreachableAt_[static_cast<size_t>(target)];
  if (a.granted && reachedFor > 2 * leaseIntervalFor(sc_.sessionTimeoutMs) + 100) {
    checker_.fail(now_, "promise-while-reaching-zookeeper",
                  node(target).identity.id + " promised " + asker + " not to take over although it has reached the " +
                      "ZooKeeper leader for " + std::to_string(reachedFor) + " ms");
  }
}

}  // namespace dugong::clustersim::world_internal
