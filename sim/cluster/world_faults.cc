// The cluster simulator's faults and the operator's actions (world_internal.h).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

// ---------------------------------------------------------------- faults and operator

void World::runFault(const Fault& f) {
  ++faultsRun_;
  ++faultsRunByKind_[static_cast<size_t>(f.kind)];
  Node& nd = node(f.peer);
  switch (f.kind) {
    case FaultKind::kCrashPeer:
      if (!nd.up) return trace('F', [&] { return std::string(f.describe() + ": already down"); });
      return crashPeer(f.peer, f.duration);
    case FaultKind::kCrashAfterWrite:
      trace('F', [&] { return std::string(f.describe() + ": armed"); });
      crashAfterWrite_.emplace_back(static_cast<int64_t>(f.variant % 200), f.duration);
      return;
    case FaultKind::kCrashPgAfterFence:
      trace('F', [&] { return std::string(f.describe() + ": armed"); });
      crashPgAfterFence_.push_back({static_cast<int64_t>(f.variant % 100), f.duration,
                                    (f.variant / 100) % 2 ? 200 + static_cast<int64_t>(f.variant / 200) % 3000 : 0});
      return;
    case FaultKind::kRestartPrimaryLateSync:
      return restartPrimaryLateSync(f);
    case FaultKind::kCutSyncCrashPrimary:
      return cutSyncCrashPrimary(f);
    case FaultKind::kFlapSync:
      return flapSync(f);
    case FaultKind::kCrashAgent:
      if (!nd.up) return trace('F', [&] { return std::string(f.describe() + ": already down"); });
      return crashAgent(f.peer, f.duration);
    case FaultKind::kExpireSession:
      if (zk_.client(f.peer).session == 0) return trace('F', [&] { return std::string(f.describe() + ": no session"); });
      trace('F', [&] { return std::string(f.describe()); });
      nd.faultExpiredAt = now_;
      return zk_.expire(zk_.client(f.peer).session, "expired by the fault scheduler");
    case FaultKind::kPartitionZk:
      return zk_.partition(f.peer, f.duration);
    case FaultKind::kCutOffFollower:
      // Without a lease nothing sees it before the expiry (the follower keeps answering
      // pings): the lease is what makes it survivable.
      if (!sc_.lease) return trace('F', [&] { return std::string(f.describe() + ": skipped, no leases"); });
      trace('F', [&] { return std::string(f.describe() + ": its ZooKeeper server is cut off from the leader"); });
      return zk_.cutOffFollower(f.peer, f.duration);
    case FaultKind::kLeaderChange:
      return zk_.leaderChange(f.duration);
    case FaultKind::kQuorumLoss:
      return quorumLoss(f);
    case FaultKind::kCrashPostgres: {
      // One that outlasts the withdrawal bound hits the primary: its withdrawal is what
      // it exercises (the sync takes over while that postgres cannot run).
      const int primary = primaryAndSync().first;
      const int n = f.duration >= kWithdrawAfterMs && primary >= 0 ? primary : f.peer;
      if (!node(n).up) return trace('F', [&] { return std::string(f.describe() + ": agent down"); });
      return fleet_.crash(n, f.duration);
    }
    case FaultKind::kSlowPostgres:
      trace('F', [&] { return std::string(f.describe()); });
      nd.pg.slowUntil = now_ + f.duration;
      return;
    case FaultKind::kDelayNotifications:
    {
      simworld::ZkClient& c = zk_.client(f.peer);
      c.slowNotifyUntil = now_ + f.duration;
      c.slowNotifyMs = 100 + static_cast<int64_t>(f.variant % 2500);
      return trace('F', [&] { return std::string(f.describe() + ", " + std::to_string(c.slowNotifyMs) + " ms late"); });
    }
    case FaultKind::kStallReplication:
      trace('F', [&] { return std::string(f.describe()); });
      nd.pg.stalledUntil = now_ + f.duration;
      return;
    case FaultKind::kFreeze:
      return opFreeze();
    case FaultKind::kUnfreeze:
      return opUnfreeze();
    case FaultKind::kPromoteValid:
      return opPromote(true, f.variant);
    case FaultKind::kPromoteInvalid:
      return opPromote(false, f.variant);
    case FaultKind::kRebuildDeposed:
      return opRebuild(f.variant);
  }
}

// The primary dies and comes back on a new session a little after its old one expired,
// while its sync, stalled, learns of that expiry only later: a takeover can then be
// decided on news older than the primary's return.
void World::restartPrimaryLateSync(const Fault& f) {
  const auto [primary, sync] = primaryAndSync();
  if (primary < 0 || sync < 0 || !node(primary).up) {
    return trace('F', [&] { return std::string(f.describe() + ": no running primary with a sync"); });
  }
  trace('F', [&] { return f.describe() + ": " + state_->primary.id + " dies, " + state_->sync->id + " hears late"; });
  simworld::ZkClient& c = zk_.client(sync);
  c.slowNotifyUntil = now_ + sc_.sessionTimeoutMs + f.duration + 4000;
  c.slowNotifyMs = f.duration + 300 + static_cast<int64_t>(f.variant % 1500);
  crashPeer(primary, sc_.sessionTimeoutMs + f.duration);
}

// The primary replaces a sync cut off from ZooKeeper whose postgres still streams (and
// so acknowledges the primary's commits), and its postgres dies right after that fence
// while its own connection drops: the write of the new generation lands or not, and is
// answered "connection loss" either way.
void World::cutSyncCrashPrimary(const Fault& f) {
  const auto [primary, sync] = primaryAndSync();
  if (primary < 0 || sync < 0 || !node(primary).up || zk_.client(sync).partitioned) {
    return trace('F', [&] { return std::string(f.describe() + ": no running primary with a sync in reach"); });
  }
  // Or the primary's postgres runs on, and the primary is cut off as ZooKeeper applies
  // the write that replaces the sync, until after its agent has noticed (2/3 of the
  // session timeout) and shut postgres down (a sixth more), but back on the same
  // session: a write of unknown outcome that landed, whose fence must outlive the
  // resumption of writes.
  const bool runsOn = (f.variant >> 32) % 2 == 1;
  trace('F', [&] {
    return f.describe() + ": " + state_->sync->id + " cut off, " + state_->primary.id + " armed" +
           (runsOn ? " (cut off at its write; its postgres runs on)" : "");
  });
  // The old sync stays cut off (its postgres streaming) until well after the primary is
  // back.
  int64_t syncCut = f.duration;
  if (runsOn) {
    const int64_t t = sc_.sessionTimeoutMs;
    const int64_t spread = std::max<int64_t>(1, t / 6 - 300);
    cutAfterWrite_.push_back({primary, 5 * t / 6 + 50 + static_cast<int64_t>(f.variant / 200) % spread});
    syncCut = std::max<int64_t>(syncCut, 2 * t + 6000);
  } else {
    crashPgAfterFence_.push_back({static_cast<int64_t>(f.variant % 100), 100 + static_cast<int64_t>(f.variant / 100) % 3000,
                                  200 + static_cast<int64_t>(f.variant / 200) % 3000, primary});
  }
  zk_.partition(sync, syncCut);
}

// The sync goes (its session expired: in reality a pause of its agent), comes back, and
// goes again while the primary's slow postgres carries out what the sync's return asked
// for: its postgres streams on throughout, and acknowledges the primary's commits.
void World::flapSync(const Fault& f) {
  const auto [primary, sync] = primaryAndSync();
  if (primary < 0 || sync < 0 || !node(primary).up || zk_.client(sync).session == 0) {
    return trace('F', [&] { return std::string(f.describe() + ": no running primary with a sync in session"); });
  }
  trace('F', [&] { return f.describe() + ": " + state_->sync->id + " goes, " + state_->primary.id + "'s postgres slow"; });
  node(primary).pg.slowUntil = now_ + f.duration + 3000;
  auto expireSync = [this, sync] {
    if (zk_.client(sync).session == 0) return;
    node(sync).faultExpiredAt = now_;
    zk_.expire(zk_.client(sync).session, "expired by the fault scheduler");
  };
  expireSync();
  after(f.duration, expireSync);
}

void World::crashPeer(int n, int64_t downFor) {
  Node& nd = node(n);
  trace('F', [&] { return std::string(nd.identity.id + " crashes (agent and postgres); restarts in " + std::to_string(downFor) + " ms"); });
  fleet_.kill(n);
  stopAgent(n);
  restartAgentAfter(n, downFor);
}

// The agent alone dies; its postgres runs on as it was (a primary stays writable, and
// acknowledges what its sync receives). Its ZooKeeper session expires unless the agent
// is back in time. The agent's watchdog (agent/watchdog.h) outlives it if armed (the
// applied role was primary) and asks postgres for a fast shutdown between a quarter and
// a half of the session timeout after the death, whatever runs there by then; or, if the
// agent had lost its connection as primary, by a sixth of the session timeout after the
// loss (when the agent would have), within a 24th (its poll then).
void World::crashAgent(int n, int64_t downFor) {
  const bool armed = node(n).driver->appliedRole() == Role::kPrimary;
  const int64_t lostAt = node(n).primaryConnectionLostAt;
  const int64_t leaseEnd = node(n).leaseDeadline;
  trace('F', [&] {
    return std::string(node(n).identity.id + "'s agent dies, its postgres runs on; the agent restarts in " +
                       std::to_string(downFor) + " ms" + (armed ? "; its watchdog is armed" : ""));
  });
  stopAgent(n);
  restartAgentAfter(n, downFor);
  if (!armed) return;
  const int64_t t = sc_.sessionTimeoutMs;
  int64_t delay = rngAgent_.between(t / 4 + 1, t / 2);
  if (lostAt >= 0) delay = std::min(delay, std::max<int64_t>(0, lostAt + t / 6 - now_) + rngAgent_.between(0, t / 24));
  // At the lease's end (the watchdog sleeps until then).
  if (leaseEnd >= 0) delay = std::min(delay, std::max<int64_t>(0, leaseEnd - now_));
  after(delay, [this, n] {
    trace('F', [&] { return node(n).identity.id + "'s watchdog: its agent died as primary; fast shutdown of postgres"; });
    fleet_.kill(n);
  });
}

void World::restartAgentAfter(int n, int64_t downFor) {
  node(n).restartPending = true;
  after(downFor, [this, n] {
    if (!node(n).up && node(n).restartPending) startAgent(n);
  });
}

// A postgres crash in the middle of a takeover, between its fence and its state write
// (or just after), as an armed crash-pg-after-fence fault says: the agent lives on, and
// its health logic must not undo the fence by restarting postgres as it was before.
void World::crashPgAfterFence(int n) {
  auto armed = std::find_if(crashPgAfterFence_.begin(), crashPgAfterFence_.end(),
                            [n](const CrashAfterFence& c) { return c.onlyNode < 0 || c.onlyNode == n; });
  if (armed == crashPgAfterFence_.end()) return;
  const CrashAfterFence crash = *armed;
  crashPgAfterFence_.erase(armed);
  uint64_t inc = node(n).incarnation;
  after(crash.delay, [this, n, inc, crash] {
    if (!alive(n, inc)) return;
    trace('F', [&] { return std::string(node(n).identity.id + "'s postgres dies right after its fence"); });
    fleet_.crash(n, crash.brokenFor);
    // Its connection to ZooKeeper may drop at the same moment: a state write in flight
    // then lands or not, and is answered "connection loss" either way.
    if (crash.cutFor > 0) zk_.partition(n, crash.cutFor);
  });
}

// A death right after a state write: the writer of a new generation dies before it has
// acted on it (or just after), as an armed crash-after-write fault says.
void World::crashAfterWrite(const std::string& writer) {
  int n = nodeOf(writer);
  if (n < 0 || crashAfterWrite_.empty()) return;
  auto [delay, downFor] = crashAfterWrite_.front();
  crashAfterWrite_.erase(crashAfterWrite_.begin());
  uint64_t inc = node(n).incarnation;
  after(delay, [this, n, inc, downFor] {
    if (!alive(n, inc)) return;
    trace('F', [&] { return std::string(node(n).identity.id + " dies right after its state write"); });
    crashPeer(n, downFor);
  });
}

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

void World::beginQuietPhase() {
  quiet_ = true;
  quietStart_ = now_;
  trace('Q', [&] { return std::string("faults stop; healing everything; the cluster must be read-write within " +
                 std::to_string(sc_.convergeBoundMs) + " ms"); });
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    Node& nd = node(n);
    nd.pg.slowUntil = 0;
    nd.pg.stalledUntil = 0;
    nd.pg.brokenUntil = 0;
    zk_.client(n).slowNotifyUntil = 0;
    if (zk_.client(n).partitioned) zk_.heal(n);
    if (!nd.up) startAgent(n);
  }
  after(0, [this] { operatorQuietTick(); });
}

void World::operatorQuietTick() {
  if (state_ && state_->frozen()) {
    opUnfreeze();
  } else if (state_ && !state_->deposed.empty()) {
    opRebuild(0);
  }
  after(kOperatorQuietTickMs, [this] { operatorQuietTick(); });
}

}  // namespace dugong::clustersim::world_internal
