// A standby seed's faults of its scripted source (docs/decisions/0083-standby-cluster.md
// 8.2; sim/world/sim_source.h): the source fails over, switches over, replaces its sync,
// is cut off from this cluster's hosts and healed, or goes for good before the operator's
// promote-cluster --source-gone. The existing faults hit the standby cluster's peers as
// they hit a normal cluster's (its leader is the state's primary).
#include <algorithm>

#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

void World::sourceFault(const Fault& f) {
  if (!source_) return;
  auto skipped = [&](const char* why) {
    trace('F', [&] { return std::string(faultName(f.kind)) + " skipped: " + why; });
  };
  if (source_->gone()) return skipped("the source site is gone");
  switch (f.kind) {
    case FaultKind::kSourceFailover:
      if (!source_->failover()) skipped("the source cannot fail over now");
      return;
    case FaultKind::kSourceSwitchover:
      if (!source_->switchover()) skipped("the source cannot switch over now");
      return;
    case FaultKind::kSourceSyncReplaced:
      if (!source_->replaceSync()) skipped("the source cannot replace its sync now");
      return;
    case FaultKind::kSourceCut:
      trace('F', [&] { return "the source is cut off from this cluster's hosts for " + std::to_string(f.duration) + " ms"; });
      source_->cut();
      after(f.duration, [this] { healSource(); });
      return;
    case FaultKind::kPromoteCluster:
      return promoteCluster(f);
    default:
      return;
  }
}

void World::healSource() {
  if (!source_ || !source_->isCut() || source_->gone()) return;
  source_->heal();
  trace('F', [&] { return std::string("source-heal: the source is reachable again"); });
}

// The source site goes (its hosts and its ensemble), then the operator runs
// promote-cluster --source-gone: dugong-adm writes standby.promote (its own refusals
// pass: the source does not answer), the leader carries it out.
void World::promoteCluster(const Fault& f) {
  // A site lost before the standby cluster holds any copy of it leaves nothing to promote
  // (no design survives it; 0083 "Phase 7 as built"): not a fault the runs inject.
  if (std::none_of(nodes_.begin(), nodes_.end(), [](const Node& nd) { return nd.pg.setUp; })) {
    return trace('F', [&] {
      return std::string("promote-cluster skipped: no peer of the standby cluster has copied the source yet");
    });
  }
  // The site goes mid-stream: a leader behind its source peer may have received the
  // first bytes of a record whose rest never comes (a received position inside a record,
  // past where its replay, and its promotion, end).
  for (Node& nd : nodes_) {
    PgServer& pg = nd.pg;
    if (!pg.serving() || pg.config.role != PgRole::kStandbyLeader || !pg.config.upstream) continue;
    const int u = source_->hostOf(pg.config.upstream->id);
    if (u < 0 || fleet_.server(u).wal.size() <= pg.wal.size() || !rngSource_.chance(500)) continue;
    pg.partialBytes = pg.wal.recordBytes() / 2;
    trace('F', [&] { return nd.identity.id + " received part of a record from " + pg.config.upstream->id + " as the source went"; });
  }
  source_->stopForGood();
  after(static_cast<int64_t>(f.variant % 4000), [this] { opPromoteCluster(); });
}

// dugong-adm refuses while the leader's last sample still shows the source, and its
// request may be refused by the leader or expire: the operator asks again every 2 s while
// the cluster is a standby cluster with no request in its state.
void World::opPromoteCluster() {
  if (!state_ || !state_->standby) {
    return trace('O', [&] { return std::string("operator: promote-cluster done or skipped, not a standby cluster"); });
  }
  after(2000, [this] { opPromoteCluster(); });
  if (state_->standby->hasPromote()) return;
  ClusterState next = *state_;
  next.standby->promote = {{"by", "operator@cluster-sim"},
                           {"sourceGone", true},
                           {"generation", state_->generation},
                           {"expireTime", formatIso8601(wall() + 30000)}};
  promoteClusterAsked_ = true;
  operatorWrite(std::move(next), "promote-cluster --source-gone");
}

}  // namespace dugong::clustersim::world_internal
