// A standby seed's faults of its scripted source (docs/decisions/0083-standby-cluster.md
// 8.2; sim/world/sim_source.h): the source fails over, switches over, replaces its sync,
// is cut off from this cluster's hosts and healed, goes for good before the operator's
// promote-cluster --source-gone, or is demoted before the operator's planned
// promote-cluster (0083 5.3); and the operator's wrong --source-gone while the source is
// writable and in sight (0083 6.1 N2: refused). The existing faults hit the standby
// cluster's peers as they hit a normal cluster's (its leader is the state's primary).
#include <algorithm>

#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

void World::sourceFault(const Fault& f) {
  if (!source_) return;
  auto skipped = [&](const char* why) {
    trace('F', [&] { return std::string(faultName(f.kind)) + " skipped: " + why; });
  };
  if (source_->gone()) return skipped("the source site is gone");
  if (now_ < wrongSourceGoneUntil_ && f.kind != FaultKind::kSourceSyncReplaced) {
    // A source between primaries, cut off, gone or demoted while a wrong --source-gone is
    // in the state would make that request the operator's mistake against a source the
    // leader cannot see (0083 7.1; its site fence, 7.2, is not built): not drawn.
    return skipped("a wrong --source-gone is pending");
  }
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
    case FaultKind::kPlannedPromoteCluster:
      return plannedPromoteCluster(f);
    case FaultKind::kWrongSourceGone:
      return wrongSourceGone(f);
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
  after(static_cast<int64_t>(f.variant % 4000), [this] { opPromoteCluster(true); });
}

StandbySource World::thisCluster() {
  StandbySource s = simworld::SimSource::standbySource();
  s.cluster = "standby";  // as HostCoordinator::sourceSeen names this cluster
  s.zookeeper = {HostPort{"zk", 2181}};
  s.root = "/dugong/standby";
  return s;
}

// The planned switch of sites (0083 5.3): the source is demoted toward this cluster (its
// state a standby state with demotedAt, its writes ended), then the operator runs
// promote-cluster without --source-gone `variant` % 3000 ms later; the leader must have
// replayed demotedAt before it promotes. With a `duration`, the leader's stream from the
// source is held that long from half of it before the demotion (a slow link between the
// sites): the leader then sees the demoted state before it has received the source's last
// commits and its checkpoint.
void World::plannedPromoteCluster(const Fault& f) {
  if (std::none_of(nodes_.begin(), nodes_.end(), [](const Node& nd) { return nd.pg.setUp; })) {
    return trace('F', [&] {
      return std::string("planned-promote-cluster skipped: no peer of the standby cluster has copied the source yet");
    });
  }
  if (!state_ || !state_->standby) {
    return trace('F', [&] { return std::string("planned-promote-cluster skipped: not a standby cluster"); });
  }
  int64_t demoteIn = 0;
  if (f.duration > 0 && statePrimary_ >= 0) {
    PgServer& pg = node(statePrimary_).pg;
    pg.stalledUntil = std::max(pg.stalledUntil, now_ + f.duration);
    demoteIn = f.duration / 2;
    trace('F', [&] { return node(statePrimary_).identity.id + "'s stream from the source held for " +
                            std::to_string(f.duration) + " ms"; });
  }
  after(demoteIn, [this, delay = static_cast<int64_t>(f.variant % 3000)] {
    if (source_->gone() || !source_->demote(thisCluster())) {
      return trace('F', [&] { return std::string("planned-promote-cluster skipped: the source cannot be demoted now"); });
    }
    after(delay, [this] { opPromoteCluster(false); });
  });
}

// The operator's mistake (0083 6.1 N2): promote-cluster --source-gone while the source is
// alive, writable and in sight of the agents (settled for 4 s: every agent's look, once a
// second with a 2 s timeout, shows it; the leader's last look shows its primary, its host
// not suspended). The request lands as if dugong-adm had judged an
// older observation (or it was written by hand); the leader must refuse it on its own look,
// and two-writable-sites holds. The request expires 10 s later; until 5 s after that the
// source's own faults that would hide its primary are skipped (sourceFault). The case of
// a source alive but cut off is the site fence's (0083 7.2, not built): not drawn.
void World::wrongSourceGone(const Fault& f) {
  (void)f;
  auto skipped = [&](const std::string& why) {
    trace('F', [&] { return "wrong-source-gone skipped: " + why; });
  };
  if (!state_ || !state_->standby) return skipped("not a standby cluster");
  if (state_->standby->hasPromote()) return skipped("a promote-cluster request is in the state");
  if (source_->demotedAt()) return skipped("the source is demoted");
  const auto writable = source_->writablePrimary();
  if (source_->isCut() || source_->failingOver() || !writable || !source_->present(*writable)) {
    return skipped("the source has no writable primary in sight now");
  }
  if (now_ - source_->changedAt() < 4000) return skipped("the source changed less than 4 s ago");
  if (!zk_.hasLeader()) return skipped("ZooKeeper has no leader (no quorum)");
  // The leader's agent sees it so too (not a look that failed while its host was suspended).
  if (statePrimary_ >= 0) {
    const Node& leader = node(statePrimary_);
    const auto& seen = leader.env ? leader.env->hostCoordinator.lastSourceSeen() : std::nullopt;
    if (leader.suspended || (seen && (!seen->seen.reachable || !seen->seen.primaryPresent))) {
      return skipped("the leader's last look does not show the source's primary");
    }
  }
  constexpr int64_t kExpiresMs = 10000;
  wrongSourceGoneUntil_ = now_ + kExpiresMs + 5000;
  ClusterState next = *state_;
  next.standby->promote = {{"by", "operator@cluster-sim"},
                           {"sourceGone", true},
                           {"generation", state_->generation},
                           {"expireTime", formatIso8601(wall() + kExpiresMs)}};
  operatorWrite(std::move(next), "promote-cluster --source-gone (wrong: the source's primary " + *writable +
                                     " is writable and in sight)");
}

// dugong-adm refuses while the leader's last sample still shows the source, and its
// request may be refused by the leader or expire: the operator asks again every 2 s while
// the cluster is a standby cluster with no request in its state.
void World::opPromoteCluster(bool sourceGone) {
  if (!state_ || !state_->standby) {
    return trace('O', [&] { return std::string("operator: promote-cluster done or skipped, not a standby cluster"); });
  }
  after(2000, [this, sourceGone] { opPromoteCluster(sourceGone); });
  if (state_->standby->hasPromote()) return;
  ClusterState next = *state_;
  next.standby->promote = {{"by", "operator@cluster-sim"},
                           {"sourceGone", sourceGone},
                           {"generation", state_->generation},
                           {"expireTime", formatIso8601(wall() + 30000)}};
  promoteClusterAsked_ = true;
  operatorWrite(std::move(next), sourceGone ? "promote-cluster --source-gone" : "promote-cluster");
}

}  // namespace dugong::clustersim::world_internal
