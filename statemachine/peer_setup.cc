// A peer with no cluster state yet (peer.h): waiting for the peers' data states, and the
// choice of who sets the cluster up from the data they hold (or a new standby cluster).
#include <algorithm>
#include <map>

#include "statemachine/peer.h"

namespace dugong {
namespace {

// Generation 1 of a new cluster: `self` its primary (its standby leader with a source),
// `others` after it, sync first.
ClusterState firstState(const PeerIdentity& self, const PeerList& others, const std::optional<StandbySource>& source) {
  ClusterState s;
  s.generation = 1;
  s.primary = self;
  s.sync = others.front();
  s.async.assign(others.begin() + 1, others.end());
  if (source) s.standby = StandbyMode{*source, std::nullopt, nullptr};
  return s;
}

}  // namespace

void Peer::evaluateNoState() {
  if (role_ != Role::kUnassigned) {
    log(LogLevel::kInfo, std::string("role ") + roleName(role_) + " -> unassigned (no cluster state yet)");
    role_ = Role::kUnassigned;
  }
  if (opts_.setupFromData && !opts_.singleton) return evaluateSetupFromData();
  if (pgSetUp_) {
    return blocked("no cluster state, but this peer's postgres was set up before; not setting up a new "
                   "cluster over existing data (an operator must restore the state or clear the data)",
                   false);
  }
  if (opts_.singleton) {
    ClusterState s;
    s.generation = 1;
    s.primary = opts_.self;
    s.oneNodeWriteMode = true;
    s.freeze = {{"date", formatIso8601(now_)}, {"reason", "one-node-write mode set up by " + opts_.self.id}};
    return writeState(std::move(s), "set up a one-node-write-mode cluster with this peer as primary");
  }
  const PeerList& active = *active_;
  if (active.size() < 2) return blocked("no cluster state; waiting for a second peer to set up the cluster", false);
  if (!isSelf(active[0])) {
    return blocked("no cluster state; " + active[0].id + " is first in session order and sets up the cluster", false);
  }
  auto others = withSyncFirst(PeerList(active.begin() + 1, active.end()));
  if (!others) return blocked("no cluster state; every other peer is tagged nofailover: none can be the sync", false);
  writeState(firstState(opts_.self, *others, opts_.standbySource), "initial setup: " + opts_.self.id + (opts_.standbySource ? " is standby leader" : " is primary") +
                               ", " + others->front().id + " is sync" + standbySetup());
}

// A cluster with no state (new, or its state lost) is set up from what the present
// peers' data directories hold, never over data the cluster may need (rule 8).
void Peer::evaluateSetupFromData() {
  const PeerList& active = *active_;
  if (active.size() < 2) return blocked("no cluster state; waiting for a second peer to set up the cluster", false);
  PeerList silent, holding, empty;
  for (const auto& p : active) {
    auto it = dataStates_.find(p.id);
    if (it == dataStates_.end()) {
      silent.push_back(p);
    } else {
      (it->second.setUp ? holding : empty).push_back(p);
    }
  }
  if (!silent.empty()) {
    return blocked("no cluster state; waiting for " + peerIdList(silent) +
                       " to publish what its data directory holds (it does once its postgres is stopped)",
                   false);
  }
  if (holding.empty()) {
    if (!isSelf(active[0])) {
      return blocked("no cluster state and no present peer holds data; " + active[0].id +
                         " is first in session order and sets up a new cluster",
                     false);
    }
    auto others = withSyncFirst(PeerList(active.begin() + 1, active.end()));
    if (!others) return blocked("no cluster state; every other peer is tagged nofailover: none can be the sync", false);
    return writeState(firstState(opts_.self, *others, opts_.standbySource), "initial setup of a new cluster (no present peer holds data): " + opts_.self.id +
                                        (opts_.standbySource ? " is standby leader, " : " is primary, ") +
                                        others->front().id + " is sync" + standbySetup());
  }
  if (!setupWaitSince_) setupWaitSince_ = now_;  // the first time a present peer holds data
  std::map<std::string, PeerList> systems;
  for (const auto& p : holding) systems[dataStates_.at(p.id).systemId].push_back(p);
  if (systems.size() > 1) {
    std::string which;
    for (const auto& [system, ps] : systems) which += (which.empty() ? "" : "; ") + peerIdList(ps) + " hold system " + system;
    return blocked("no cluster state, and the present peers hold different database systems (" + which +
                       "): nobody sets the cluster up. An operator must choose: stop the agents of the peers whose "
                       "data is not wanted and move their data directories away (or start them with another "
                       "cluster name); the cluster is then set up from the rest",
                   false);
  }
  const EpochMs until = *setupWaitSince_ + opts_.setupWaitMs;
  if (now_ < until) {
    startTimer(TimerId::kRetryEvaluation, until - now_);
    return blocked("no cluster state; " + peerIdList(holding) + " hold data of system " + systems.begin()->first +
                       ": waiting " + std::to_string(opts_.setupWaitMs) +
                       " ms for more peers to come back before setting the cluster up from the most advanced WAL",
                   false);
  }
  // The most advanced first (session order among equals), then the empty peers.
  PeerList order = holding;
  std::stable_sort(order.begin(), order.end(), [&](const PeerIdentity& a, const PeerIdentity& b) {
    return dataStates_.at(a.id).aheadOf(dataStates_.at(b.id));
  });
  const PeerDataState& best = dataStates_.at(order[0].id);
  // Histories, not only timeline numbers: the most advanced must hold every other
  // holder's WAL, or have left its timeline at a promotion.
  PeerList diverged;
  for (const auto& p : holding) {
    if (!best.keeps(dataStates_.at(p.id))) diverged.push_back(p);
  }
  if (!diverged.empty()) {
    return blocked("no cluster state; " + order[0].id + " holds the most advanced WAL (" + best.describe() +
                       "), but the WAL history of " + peerIdList(diverged) +
                       " diverged from it other than at a promotion of its timeline: nobody sets the cluster up. "
                       "An operator must choose: stop the agents of the peers whose data is not wanted and move "
                       "their data directories away; the cluster is then set up from the rest",
                   false);
  }
  if (!isSelf(order[0])) {
    return blocked("no cluster state; " + order[0].id + " holds the most advanced WAL (" + best.describe() +
                       ") and sets the cluster up",
                   false);
  }
  order.insert(order.end(), empty.begin(), empty.end());
  auto others = withSyncFirst(PeerList(order.begin() + 1, order.end()));
  if (!others) return blocked("no cluster state; every other peer is tagged nofailover: none can be the sync", false);
  ClusterState s = firstState(opts_.self, *others, opts_.standbySource);
  s.initWal = best.wal;
  writeState(std::move(s), "setup from the most advanced data: " + opts_.self.id + " (" + best.describe() +
                               (opts_.standbySource ? ") is standby leader, " : ") is primary, ") + others->front().id +
                               " is sync; peers holding data: " + peerIdList(holding) + standbySetup());
}

}  // namespace dugong
