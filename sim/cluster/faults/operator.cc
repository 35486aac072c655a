// The operator's actions, as faults of the plan (freeze, unfreeze, promote-valid,
// promote-invalid, rebuild-deposed) and in the quiet phase (undo a freeze, rebuild the
// deposed): each a test-and-set of the cluster state through the operator's own rules
// (sim/world/operator_actions.h), as dugong-adm does.
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

void World::operatorWrite(ClusterState next, const std::string& what) {
  if (!zk_.hasLeader()) {
    return trace('O', [&] { return "operator: " + what + " failed: ZooKeeper has no leader (no quorum)"; });
  }
  trace('O', [&] { return std::string("operator: " + what); });
  zk_.cas("operator", next.serialize(), zk_.state().version(), now_, std::nullopt, what);
}

void World::opFreeze() {
  if (!state_) return trace('O', [&] { return std::string("operator: freeze skipped, no cluster state"); });
  operatorWrite(simworld::frozenState(*state_, {{"date", formatIso8601(wall())}, {"reason", "cluster-sim operator"}}),
                "freeze");
}

void World::opUnfreeze() {
  if (!state_ || !state_->frozen()) return trace('O', [&] { return std::string("operator: unfreeze skipped, not frozen"); });
  operatorWrite(simworld::unfrozenState(*state_), "unfreeze");
}

void World::opPromote(bool valid, uint64_t variant) {
  if (!state_ || !state_->sync) return trace('O', [&] { return std::string("operator: promote skipped, no cluster with a sync"); });
  const ClusterState& s = *state_;
  nlohmann::json req;
  std::string expire = formatIso8601(wall() + rngOp_.between(2000, 10000));
  if (valid) {
    uint64_t choices = 1 + s.async.size();
    uint64_t pick = variant % choices;
    if (pick == 0) {
      req = {{"id", s.sync->id}, {"role", "sync"}, {"generation", s.generation}, {"expireTime", expire}};
    } else {
      size_t i = pick - 1;
      req = {{"id", s.async[i].id},
             {"role", "async"},
             {"asyncIndex", i},
             {"generation", s.generation},
             {"expireTime", expire}};
    }
  } else {
    const std::string someAsync = s.async.empty() ? s.primary.id : s.async[0].id;
    switch (variant % 6) {
      case 0:  // a generation that is not the current one
        req = {{"id", s.sync->id}, {"role", "sync"}, {"generation", s.generation - 1}, {"expireTime", expire}};
        break;
      case 1:  // expired
        req = {{"id", s.sync->id},
               {"role", "sync"},
               {"generation", s.generation},
               {"expireTime", formatIso8601(wall() - 1000)}};
        break;
      case 2:  // asyncIndex pointing at someone else
        req = {{"id", s.sync->id},
               {"role", "async"},
               {"asyncIndex", 0},
               {"generation", s.generation},
               {"expireTime", expire}};
        break;
      case 3:  // "sync" naming a peer that is not the sync
        req = {{"id", someAsync}, {"role", "sync"}, {"generation", s.generation}, {"expireTime", expire}};
        break;
      case 4:  // asyncIndex out of range
        req = {{"id", someAsync},
               {"role", "async"},
               {"asyncIndex", s.async.size() + 1},
               {"generation", s.generation},
               {"expireTime", expire}};
        break;
      default:  // bad schema
        req = {{"id", s.sync->id}, {"role", "primary"}, {"generation", "soon"}};
        break;
    }
  }
  std::string what = std::string(valid ? "valid" : "invalid") + " promote request " + req.dump();
  operatorWrite(simworld::promoteState(s, std::move(req)), what);
}

// Like `dugong-adm rebuild`, run on the deposed peer beside its agent (live or not):
// apply an async configuration streaming from the primary through the pg adapter's
// own rules (rebuild what cannot follow), then take the peer out of `deposed`. The
// live agent sees that and starts a fresh state machine. For a deposed peer whose
// agent is not in ZooKeeper, the operator may instead `dugong-adm reap` it (variant).
void World::opRebuild(uint64_t variant) {
  if (!state_ || state_->deposed.empty()) return trace('O', [&] { return std::string("operator: rebuild skipped, nobody is deposed"); });
  const ClusterState& s = *state_;
  const PeerIdentity target = s.deposed[variant % s.deposed.size()];
  int x = nodeOf(target.id);
  int p = nodeOf(s.primary.id);
  const std::vector<std::string> active = zk_.election().active();
  if ((variant >> 8) % 3 == 0 && !zk_.election().holds(target.id)) {
    auto reaped = simworld::reapedState(s, target.id, active);
    if (reaped) return operatorWrite(std::move(reaped).value(), "reap " + target.id);
  }
  if (auto allowed = simworld::rebuildAllowed(s, target.id, active); !allowed) {
    return trace('O', [&] { return "operator: rebuild of " + target.id + " refused: " + allowed.error(); });
  }
  if (x < 0 || p < 0 || !node(p).pg.running) {
    return trace('O', [&] { return std::string("operator: rebuild of " + target.id + " postponed, the primary's postgres is not running"); });
  }
  if (!zk_.hasLeader()) {
    return trace('O', [&] { return "operator: rebuild of " + target.id + " postponed, ZooKeeper has no leader"; });
  }
  PgServer& pg = node(x).pg;
  if (pg.transitioning) {
    return trace('O', [&] { return std::string("operator: rebuild of " + target.id + " failed, its agent is reconfiguring postgres"); });
  }
  trace('O', [&] { return std::string("operator: rebuild " + target.id + " from " + s.primary.id); });
  fleet_.rebuildAsStandby(x, p, s.primary);
  operatorWrite(simworld::rebuiltState(s, target.id).value(), "remove rebuilt " + target.id + " from deposed");
}

bool World::rejoinsByItself(const std::string& id) const {
  const int x = nodeOf(id);
  return sc_.rejoinRewind && x >= 0 && node(x).up && node(x).pg.setUp;
}

std::optional<std::string> World::deposedNotRejoined() const {
  if (!state_) return std::nullopt;
  for (const auto& p : state_->deposed) {
    if (rejoinsByItself(p.id)) return p.id;
  }
  return std::nullopt;
}

void World::operatorQuietTick() {
  if (state_ && state_->frozen()) {
    opUnfreeze();
  } else if (state_ && !state_->deposed.empty()) {
    // A deposed peer that rejoins by itself is left to its agent (the run checks that it
    // does: `deposed-not-rejoined`); the operator rebuilds the others.
    for (size_t i = 0; i < state_->deposed.size(); ++i) {
      if (!rejoinsByItself(state_->deposed[i].id)) {
        opRebuild(i);
        break;
      }
    }
  }
  after(kOperatorQuietTickMs, [this] { operatorQuietTick(); });
}

}  // namespace dugong::clustersim::world_internal
