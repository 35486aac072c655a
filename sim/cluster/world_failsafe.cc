// The cluster simulator's part of the failsafe (driver/failsafe.h): the agents' network
// that carries a primary's request to its sync and the answer back, with delays and the
// links the faults cut, and the quorum-loss fault (world_internal.h).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

void NodeEnv::askFailsafe(const PeerIdentity& to, const agent::FailsafeRequest& request, int64_t timeoutMs,
                          std::function<void(Result<agent::FailsafeAnswer>)> done) {
  w_.askFailsafe(n_, inc_, to, request, timeoutMs, std::move(done));
}

void World::cutLink(int a, int b, int64_t until) {
  auto& u = linkCutUntil_[{std::min(a, b), std::max(a, b)}];
  u = std::max(u, until);
}

bool World::linkCut(int a, int b) const {
  auto it = linkCutUntil_.find({std::min(a, b), std::max(a, b)});
  return it != linkCutUntil_.end() && now_ < it->second;
}

// The ground truth the failsafe's check compares a promise with (see askFailsafe).
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

// Most messages take milliseconds; some wait behind a busy link or a busy agent.
int64_t World::networkDelay() { return rngNet_.chance(80) ? rngNet_.between(200, 2000) : rngNet_.between(1, 20); }

// The request reaches the asked agent unless the link is cut (or that agent is down) as
// it travels; so does the answer. The asker hears the answer or, at its bound, an error.
void World::askFailsafe(int from, uint64_t inc, const PeerIdentity& to, const agent::FailsafeRequest& request,
                        int64_t timeoutMs, std::function<void(Result<agent::FailsafeAnswer>)> done) {
  const int target = nodeOf(to.id);
  auto answered = std::make_shared<bool>(false);
  auto finish = [this, from, inc, answered, done = std::move(done)](Result<agent::FailsafeAnswer> r) {
    if (*answered) return;
    *answered = true;
    if (alive(from, inc)) done(std::move(r));
  };
  const std::string asker = node(from).identity.id;
  trace('N', [&] {
    return asker + " -> " + to.id + ": failsafe request (generation " + std::to_string(request.generation) + ", " +
           std::to_string(request.durationMs) + " ms)";
  });
  after(timeoutMs, [finish] { finish(Error{"no answer in time"}); });
  if (target < 0) return;
  after(networkDelay(), [this, from, target, request, finish, asker] {
    if (linkCut(from, target) || !node(target).up || !node(target).driver) {
      return trace('N', [&] { return "failsafe request from " + asker + " lost on its way"; });
    }
    agent::FailsafeAnswer a = node(target).driver->onFailsafeRequest(request);
    // A promise is given only by a peer that cannot reach ZooKeeper (docs/design.md
    // "Quorum loss: the sync's promise"): not by one whose client has confirmed round
    // trips through a leader for two intervals and their latency.
    noteZooKeeperReach();
    const int64_t reachedFor = now_ - zkUnreachableAt_[static_cast<size_t>(target)];
    if (a.granted && reachedFor > 2 * leaseIntervalFor(sc_.sessionTimeoutMs) + 100) {
      checker_.fail(now_, "promise-while-reaching-zookeeper",
                    node(target).identity.id + " promised " + asker + " not to take over although it has reached the " +
                        "ZooKeeper leader for " + std::to_string(reachedFor) + " ms");
    }
    trace('N', [&] {
      return node(target).identity.id + " -> " + asker + ": " + (a.granted ? "promised" : "refused") + " (" + a.reason + ")";
    });
    after(networkDelay(), [this, from, target, a, finish] {
      if (linkCut(from, target)) return trace('N', [&] { return std::string("failsafe answer lost on its way"); });
      finish(a);
    });
  });
}

void World::quorumLoss(const Fault& f) {
  const auto [primary, sync] = primaryAndSync();
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
  }
}

}  // namespace dugong::clustersim::world_internal
