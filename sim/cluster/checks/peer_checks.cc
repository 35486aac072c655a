// The checks of every step on each peer and its driver (deposed yet writable, withdrawn
// yet serving, stuck in flight, stuck deposed) and on the current primary's WAL; the
// diagnosis printed with a liveness failure; the absences from the election that the
// InvariantChecker (checks/invariants.h) asks about.
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

bool World::wasAbsent(const std::string& id, int64_t from, int64_t to) const {
  auto it = absences_.find(id);
  if (it == absences_.end()) return true;
  for (const auto& [a, b] : it->second) {
    if (a <= to && b > from) return true;
  }
  return false;
}

void World::checkStep() {
  // Only a granted promise is checked against the reach (checkPromise), and a peer
  // whose failsafe is off grants none: without it, the reach is not worth noting at
  // every step.
  if (sc_.failsafe) noteZooKeeperReachAtStep();
  // Per peer, every kTimingCheckMs: an acknowledgement by a deposed peer is caught
  // when it happens (onAck), and the other bounds are seconds long.
  const bool timingCheck = now_ >= nextTimingCheck_;
  if (timingCheck) nextTimingCheck_ = now_ + kTimingCheckMs;
  for (size_t i = 0; timingCheck && i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    Node& nd = node(n);
    if (!nd.up) continue;
    // Until its postgres stops, a deposed peer may still take commits; it must not be
    // able to acknowledge one (no sync streams from it, or it is not writable).
    if (nd.driver->peer().role() == Role::kDeposed && writable(n) && canAcknowledge(n)) {
      checker_.onDeposedWritable(now_, nd.identity.id);
    }
    // A withdrawn peer rejoins once its postgres answers again (a fresh connection too,
    // as the agent's health check opens one), unless its agent is stopped (it acts once
    // it continues: the bound runs from then). One that withdrew keeping the fence of a
    // takeover joins again after withdrawAfterMs whatever its health (driver/health.cc):
    // its postgres, fenced, is not restarted, so a standby that cannot follow its
    // upstream stays unhealthy until the state it then reads reconfigures it.
    if (nd.driver->withdrawn() && !nd.driver->paused() && nd.pg.serving() &&
        now_ >= nd.pg.refusesNewConnectionsUntil) {
      if (nd.withdrawnServingSince < 0) nd.withdrawnServingSince = now_;
      const int64_t bound = nd.driver->peer().keepsFence() ? kWithdrawAfterMs + kRejoinBoundMs : kRejoinBoundMs;
      if (now_ - nd.withdrawnServingSince > bound) {
        checker_.fail(now_, "withdrawn-stuck",
                      nd.identity.id + " stays withdrawn although its postgres has answered for " +
                          std::to_string(now_ - nd.withdrawnServingSince) + " ms");
      }
    } else {
      nd.withdrawnServingSince = -1;
    }
    // No peer stays in an in-flight step forever.
    const NodeEnv& env = *nd.env;
    auto stuck = [&](bool pending, int64_t since, const char* what) {
      if (pending && now_ - since > kInFlightBoundMs) {
        checker_.fail(now_, "stuck-in-flight",
                      nd.identity.id + ": " + what + " in flight for " + std::to_string(now_ - since) + " ms");
      }
    };
    stuck(env.coordinator.writePending(), env.coordinator.writeSince(), "a state write");
    stuck(env.postgres.transitions() > 0, env.postgres.transitionSince(), "a postgres transition");
    stuck(env.postgres.walReads() > 0, env.postgres.walReadSince(), "a WAL read");
    const Peer& peer = nd.driver->peer();
    if (!peer.awaitingCompletion()) {
      nd.awaitingSince = -1;
    } else if (nd.awaitingSince < 0) {
      nd.awaitingSince = now_;
    }
    stuck(nd.awaitingSince >= 0, nd.awaitingSince, "a step its state machine waits for");
    // A rebuilt peer (taken out of `deposed`) gets a fresh state machine.
    bool wronglyDeposed = peer.role() == Role::kDeposed && state_ && !containsPeer(state_->deposed, nd.identity.id);
    if (!wronglyDeposed) {
      nd.wronglyDeposedSince = -1;
    } else if (nd.wronglyDeposedSince < 0) {
      nd.wronglyDeposedSince = now_;
    } else if (now_ - nd.wronglyDeposedSince > kInFlightBoundMs) {
      checker_.fail(now_, "stuck-deposed",
                    nd.identity.id + " still acts as deposed " + std::to_string(now_ - nd.wronglyDeposedSince) +
                        " ms after it was taken out of deposed");
    }
  }
  if (!state_) return;
  if (source_ && timingCheck) checkStandby();
  if (state_->standby) {
    // A standby cluster is never read-write: it converges once it follows its source.
    if (quiet_ && !convergedAt_ && !state_->frozen() && standbyFollowing()) {
      convergedAt_ = now_;
      trace('Q', [&] { return "following the source again after " + std::to_string(now_ - quietStart_) +
                              " ms, standby leader " + state_->primary.id; });
    }
    return;
  }
  int p = statePrimary_;
  const PgServer& pg = node(p).pg;
  if (pg.serving() && pg.config.role == PgRole::kPrimary) {
    checker_.checkCurrentPrimary(now_, state_->primary.id, pg.wal);
    checker_.checkPrimaryHistory(now_, state_->primary.id, pg.wal, *state_);
  }
  if (quiet_ && !convergedAt_ && ackedSinceQuiet_ && !state_->frozen() && writable(p)) {
    convergedAt_ = now_;
    trace('Q', [&] { return std::string("read-write again after " + std::to_string(now_ - quietStart_) + " ms, primary " +
                   state_->primary.id); });
  }
}

std::string World::diagnose() const {
  std::string s = "state: " + (state_ ? summarizeState(*state_).dump() : std::string("none"));
  for (const Node& nd : nodes_) {
    s += "\n    " + nd.identity.id + ": ";
    if (!nd.up) {
      s += "agent down";
    } else {
      nlohmann::json j = nd.driver->peer().inspect();
      s += "role " + j["role"].get<std::string>() + ", pending " + j["pending"].dump();
      if (nd.driver->withdrawn()) s += ", withdrawn";
      if (!nd.driver->healthy()) s += ", postgres unhealthy";
      if (j.contains("halted")) s += ", halted: " + j["halted"].get<std::string>();
    }
    s += std::string("; postgres ") + (nd.pg.running ? "running " : "stopped ") + describeConfig(nd.pg.config) +
         ", WAL " + std::to_string(nd.pg.wal.size()) + (writable(static_cast<int>(&nd - nodes_.data())) ? ", writable" : "");
    const simworld::ZkClient& c = zk_.look(static_cast<int>(&nd - nodes_.data()));
    s += c.session ? "; session " + std::to_string(c.session) : "; no session";
    if (c.partitioned) s += ", partitioned";
  }
  return s;
}

}  // namespace dugong::clustersim::world_internal
