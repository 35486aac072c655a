// Faults of ZooKeeper as a peer sees it: expire-session, partition-zk,
// cut-off-follower, leader-change, delay-notifications, and quorum-loss (with the
// links between the primary and its sync that it may cut, network.cc).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

void World::expireSession(const Fault& f) {
  if (zk_.client(f.peer).session == 0) return trace('F', [&] { return std::string(f.describe() + ": no session"); });
  trace('F', [&] { return std::string(f.describe()); });
  node(f.peer).faultExpiredAt = now_;
  zk_.expire(zk_.client(f.peer).session, "expired by the fault scheduler");
}

void World::partitionZk(const Fault& f) { zk_.partition(f.peer, f.duration); }

// Without a lease nothing sees it before the expiry (the follower keeps answering
// pings): the lease is what makes it survivable.
void World::cutOffFollower(const Fault& f) {
  if (!sc_.lease) return trace('F', [&] { return std::string(f.describe() + ": skipped, no leases"); });
  trace('F', [&] { return std::string(f.describe() + ": its ZooKeeper server is cut off from the leader"); });
  zk_.cutOffFollower(f.peer, f.duration);
}

void World::leaderChange(const Fault& f) { zk_.leaderChange(f.duration); }

void World::delayNotifications(const Fault& f) {
  simworld::ZkClient& c = zk_.client(f.peer);
  c.slowNotifyUntil = now_ + f.duration;
  c.slowNotifyMs = 100 + static_cast<int64_t>(f.variant % 2500);
  trace('F', [&] { return std::string(f.describe() + ", " + std::to_string(c.slowNotifyMs) + " ms late"); });
}

// Now and then (a bit of the fault's variant) the sync's agent restarts within `window`
// ms, after the promises it may have given, with the failsafe turned off in its
// configuration one time in two: what it recorded holds all the same (review of 2f035ac,
// finding 1).
void World::restartSyncAgentWithin(const Fault& f, int sync, int64_t window) {
  if ((f.variant >> 32) % 2 != 0 || window <= 0) return;
  const int64_t at = static_cast<int64_t>((f.variant >> 8) % static_cast<uint64_t>(window));
  const int64_t downFor = 200 + static_cast<int64_t>((f.variant >> 24) % static_cast<uint64_t>(sc_.sessionTimeoutMs / 2));
  const bool failsafeOff = (f.variant >> 33) % 2 == 0;
  after(at, [this, sync, downFor, failsafeOff] {
    if (!node(sync).up || node(sync).suspended) return;
    if (failsafeOff && sc_.failsafe) node(sync).failsafeOff = true;
    crashAgent(sync, downFor);
  });
}

void World::quorumLoss(const Fault& f) {
  const auto roles = primaryAndSync();  // by name: clang 14 captures no structured binding
  const int primary = roles.first;
  const int sync = roles.second;
  const int64_t t = sc_.sessionTimeoutMs;
  const uint64_t how = f.variant % 5;
  const bool pair = primary >= 0 && sync >= 0;
  if (how == 4) {
    if (!pair) return trace('F', [&] { return f.describe() + ": no primary with a sync"; });
    // The sync is cut off first (its own lease over by the time the primary asks), then
    // the primary; the sync is back first, the primary later.
    const int64_t lead = rngNet_.between(0, t);
    const int64_t syncCut = lead + rngNet_.between(t / 2, 3 * t);
    trace('F', [&] { return f.describe() + ": " + state_->sync->id + " then " + state_->primary.id; });
    zk_.partition(sync, syncCut);
    after(lead, [this, primary, syncCut, lead, t] { zk_.partition(primary, syncCut - lead + rngNet_.between(t / 2, 3 * t)); });
    restartSyncAgentWithin(f, sync, syncCut);
    return;
  }
  trace('F', [&] { return f.describe(); });
  zk_.leaderChange(f.duration);
  if (!pair) return;
  if (how == 1 || how == 3) {
    const int64_t from = rngNet_.between(0, f.duration);
    const int64_t until = now_ + from + rngNet_.between(t / 2, 2 * t + f.duration / 2);
    after(from, [this, primary, sync, until] {
      trace('F', [&] {
        return "the link between " + node(primary).identity.id + " and " + node(sync).identity.id + " is cut for " +
               std::to_string(until - now_) + " ms";
      });
      cutLink(primary, sync, until);
      node(sync).pg.stalledUntil = std::max(node(sync).pg.stalledUntil, until);
    });
  }
  if (how == 2 || how == 3) {
    // Just before the election ends, the primary's client loses its way back: it stays
    // cut off (the heal that ends the election is for another serial) for a while more.
    const int64_t more = rngNet_.between(t / 2, 3 * t);
    after(f.duration - 1, [this, primary, more] {
      simworld::ZkClient& c = zk_.client(primary);
      if (!c.partitioned) return;
      const uint64_t serial = ++c.partitionSerial;
      trace('F', [&] {
        return c.id + " stays cut off from ZooKeeper for " + std::to_string(more) + " ms after the quorum is back";
      });
      after(more, [this, primary, serial] {
        if (zk_.client(primary).partitionSerial == serial) zk_.heal(primary);
      });
    });
    restartSyncAgentWithin(f, sync, f.duration);
  }
}

}  // namespace dugong::clustersim::world_internal
