// The operator's actions, as faults of the plan (freeze, unfreeze, promote-valid,
// promote-invalid, rebuild-deposed, raise-max-connections) and in the quiet phase (undo a freeze, rebuild the
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
  if (auto error = fleet_.rebuildAsStandby(x, p, s.primary); !error.empty()) {
    return trace('O', [&] { return "operator: rebuild of " + target.id + " failed, postgres does not start: " + error; });
  }
  operatorWrite(simworld::rebuiltState(s, target.id).value(), "remove rebuilt " + target.id + " from deposed");
}

// The operator raises max_connections in the cluster configuration, which every host
// takes but the host of `f.peer` (it overrides the setting with its own, lower value in
// its dugong.yaml: the operator's to order, docs/day2.md), then runs `dugong-adm restart
// --rolling` as for a raise (tools/adm/commands_restart.cc): the asyncs from the end of
// the chain, then the sync, each restarted in place and streaming again before the next,
// then a switchover to the sync (a promote request). The new primary runs, and records
// in its WAL, the higher value: a standby start below it must be raised to it
// (pg::hotStandbyStartSettings).
void World::raiseMaxConnections(const Fault& f) {
  long raised = 0;
  for (const Node& nd : nodes_) raised = std::max(raised, nd.pg.ownMaxConnections);
  raised += 20 * static_cast<long>(1 + f.variant % 3);
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    if (i != f.peer) node(i).pg.ownMaxConnections = raised;
  }
  trace('O', [&] {
    return "operator: max_connections = " + std::to_string(raised) + " cluster-wide (" + node(f.peer).identity.id +
           " keeps its own " + std::to_string(node(f.peer).pg.ownMaxConnections) + "); restart --rolling";
  });
  if (!state_ || !state_->sync) {
    return trace('O', [&] { return std::string("operator: rolling restart refused: no sync in the cluster state"); });
  }
  std::vector<std::string> order;  // the end of the chain first
  for (auto it = state_->async.rbegin(); it != state_->async.rend(); ++it) order.push_back(it->id);
  order.push_back(state_->sync->id);
  std::vector<std::string> asked = order;
  asked.push_back(state_->primary.id);
  for (const auto& id : asked) {
    const int x = nodeOf(id);
    if (x < 0 || !node(x).up) {
      return trace('O', [&] { return "operator: rolling restart refused: the agent of " + id + " does not answer"; });
    }
  }
  rollingRestartStep(order, 0, state_->sync->id);
}

void World::rollingRestartStep(const std::vector<std::string>& order, size_t i, const std::string& sync) {
  if (i == order.size()) {
    // The switchover, once the promote request's own checks pass (dugong-adm waits).
    if (!state_ || !state_->sync || state_->sync->id != sync || state_->frozen()) {
      return trace('O', [&] { return "operator: rolling restart stops: not switching over to the sync " + sync; });
    }
    nlohmann::json req = {{"id", sync},
                          {"role", "sync"},
                          {"generation", state_->generation},
                          {"expireTime", formatIso8601(wall() + 10000)}};
    return operatorWrite(simworld::promoteState(*state_, std::move(req)),
                         "switch over to the sync " + sync + " (rolling restart)");
  }
  const std::string& id = order[i];
  const int x = nodeOf(id);
  PgServer& pg = node(x).pg;
  if (!node(x).up || !pg.serving() || !pg.isStandby()) {
    return trace('O', [&] { return "operator: rolling restart stops: " + id + " is not running as a standby"; });
  }
  trace('O', [&] { return "operator: restart postgres on " + id + " (rolling restart)"; });
  fleet_.restartInPlace(x, [this, order, i, sync](const std::string& error) {
    if (!error.empty()) {
      return trace('O', [&] { return "operator: rolling restart stops: " + order[i] + ": " + error; });
    }
    rollingRestartWait(order, i, sync, now_ + 30000);
  });
}

void World::rollingRestartWait(const std::vector<std::string>& order, size_t i, const std::string& sync,
                               int64_t deadline) {
  const int x = nodeOf(order[i]);
  const PgServer& pg = node(x).pg;
  const int u = pg.config.upstream ? nodeOf(pg.config.upstream->id) : -1;
  if (u >= 0 && fleet_.streamsFrom(x, u)) return rollingRestartStep(order, i + 1, sync);
  if (now_ >= deadline) {
    return trace('O', [&] { return "operator: rolling restart stops: " + order[i] + " is not streaming again"; });
  }
  after(200, [this, order, i, sync, deadline] { rollingRestartWait(order, i, sync, deadline); });
}

// Not a peer whose agent halted on a refusal (its data directory replaced by a copy off
// the cluster's history, while it was the primary): it waits for the operator's rebuild,
// as its log says.
bool World::rejoinsByItself(const std::string& id) const {
  const int x = nodeOf(id);
  return sc_.rejoinRewind && x >= 0 && node(x).up && node(x).pg.setUp && !node(x).driver->peer().haltReason();
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
