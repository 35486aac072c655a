// The cluster simulator's world: the loop (run), the nodes (their agents started and
// stopped), each node's environment (NodeEnv), and the hooks through which the simulated
// ZooKeeper and postgres hand events to the drivers and tell the checks what happened.
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim {

std::string TraceLine::format() const {
  char head[32];
  std::snprintf(head, sizeof head, "[%4lld.%03lld] %c ", static_cast<long long>(t / 1000),
                static_cast<long long>(t % 1000), kind);
  return head + text;
}

namespace world_internal {

void World::record(char kind, std::string text) {
  TraceLine line{now_, kind, std::move(text)};
  auto feed = [this](unsigned char c) {
    hash_ ^= c;
    hash_ *= 1099511628211ULL;
  };
  for (int shift = 0; shift < 64; shift += 8) feed(static_cast<unsigned char>(static_cast<uint64_t>(now_) >> shift));
  feed(static_cast<unsigned char>(kind));
  for (char c : line.text) feed(static_cast<unsigned char>(c));
  trace_.push_back(std::move(line));
}

// ---------------------------------------------------------------- peers

void World::startAgent(int n) {
  Node& nd = node(n);
  if (nd.up) return;
  nd.up = true;
  nd.restartPending = false;
  ++nd.incarnation;
  zk_.agentStarts(n);
  nd.withdrawnServingSince = -1;
  nd.awaitingSince = -1;
  nd.wronglyDeposedSince = -1;
  trace('F', [&] { return std::string(nd.identity.id + " agent starts (incarnation " + std::to_string(nd.incarnation) + ")"); });
  nd.env = std::make_unique<NodeEnv>(*this, n, nd.incarnation);
  driver::DriverOptions o;
  o.identity = nd.identity;
  o.withdrawAfterMs = kWithdrawAfterMs;
  o.handoverWaitMs = kHandoverWaitMs;
  o.rejoin = sc_.rejoinRewind ? RejoinPolicy::kRewind : RejoinPolicy::kFollow;
  o.syncReplaceAfterMs = kSyncReplaceAfterMs;
  o.quorum = true;  // as the agent (0089)
  if (sc_.standby) o.standbySource = simworld::SimSource::standbySource();
  nd.primaryConnectionLostAt = -1;
  o.onPrimaryConnectionLoss = [this, n](bool lost) { node(n).primaryConnectionLostAt = lost ? now_ : -1; };
  nd.leaseDeadline = -1;
  o.lease.tickTimeMs = sc_.tickTimeMs;
  o.onLeaseDeadline = [this, n](int64_t deadline) { node(n).leaseDeadline = deadline; };
  nd.watchdogPrimary = false;
  o.onPrimaryApplyStarting = [this, n] { node(n).watchdogPrimary = true; };
  o.onRoleApplied = [this, n](Role, Role applied) { node(n).watchdogPrimary = applied == Role::kPrimary; };
  o.failsafe = sc_.failsafe && !nd.failsafeOff;
  o.failsafeDurationMs = sc_.sessionTimeoutMs;
  // The record of earlier promises, held whatever this start's configuration (as the
  // agent's Agent::earlierPromiseMs): none yet is a record of none.
  o.earlierPromiseMs = 0;
  if (nd.promiseUntil >= 0) {
    const int64_t from = nd.rebootedSincePromise ? nd.promiseRecordedAt : hostClock(n);
    o.earlierPromiseMs = std::max<int64_t>(0, nd.promiseUntil - from);
  }
  o.recordPromise = [this, n](int64_t until) -> Result<bool> {
    Node& recorded = node(n);
    recorded.promiseUntil = until;
    recorded.promiseRecordedAt = hostClock(n);
    recorded.rebootedSincePromise = false;
    return true;
  };
  nd.driver = std::make_unique<driver::Runner>(
      driver::Env{*nd.env, nd.env->hostCoordinator, nd.env->postgres, *nd.env, nd.env.get()}, o);
  NodeEnv* env = nd.env.get();
  nd.driver->onFatal([this, n, env] {
    checker_.fail(now_, "fatal", node(n).identity.id + " reported a fatal error: " + env->lastFatal);
  });
  nd.driver->start();
}

// The agent stops (crash or operator); its ZooKeeper session is left to expire unless
// closed by the caller. A crash of a suspended host ends its suspend (a fault that would
// kill only the agent leaves a suspended host alone: nothing runs there).
void World::stopAgent(int n) {
  Node& nd = node(n);
  nd.up = false;
  nd.pg.adapterGone();
  nd.driver.reset();
  nd.env.reset();
  ++nd.incarnation;
  zk_.agentStops(n);
  resumeHost(n);
}

std::string World::describeEvent(const Event& ev) const {
  return dugong::describeEvent(ev, [this](const StateNode& s) -> std::string {
    if (!s.exists) return "none";
    auto it = summaryOfVersion_.find(s.version);
    return "v" + std::to_string(s.version) + (it == summaryOfVersion_.end() ? "" : " " + it->second);
  });
}


void World::intoDriver(int n, const Event& ev, const std::function<void()>& call) {
  Node& nd = node(n);
  trace('E', [&] { return std::string(nd.identity.id + " <- " + describeEvent(ev)); });
  call();
  if (!node(n).driver) return;
  if (const auto& s = node(n).driver->peer().clusterState()) {
    checker_.onPeerView(now_, nd.identity.id, nd.incarnation, s->generation);
  }
}

// ---------------------------------------------------------------- the agents' environment

NodeEnv::NodeEnv(World& world, int n, uint64_t incarnation)
    : coordinator(world.zk_, n),
      hostCoordinator(world, n, coordinator),
      postgres(world.fleet_, n, world.postgresHooks(n)),
      w_(world),
      n_(n),
      inc_(incarnation) {}

// What the node's postgres adapter reports goes into its driver, checked.
simworld::SimPostgresHooks World::postgresHooks(int n) {
  simworld::SimPostgresHooks h;
  h.deliver = [this, n](const Event& ev, const std::function<void()>& call) { intoDriver(n, ev, call); };
  h.violation = [this](const std::string& invariant, const std::string& detail) {
    checker_.fail(now_, invariant, detail);
  };
  h.fenced = [this, n] { crashPgAfterFence(n); };
  h.quorumFenced = [this, n](const std::vector<std::string>& members) { stepFenced(n, members); };
  h.applyStarting = [this, n](const PgConfig& cfg) {
    if (cfg.role == PgRole::kPrimary && node(n).driver->peer().clusterState()) {
      node(n).generationTag = node(n).driver->peer().clusterState()->generation;
    }
  };
  return h;
}

EpochMs NodeEnv::wallMs() const { return w_.wall(); }
int64_t NodeEnv::monotonicMs() const { return w_.hostClock(n_); }

std::unique_ptr<driver::Timer> NodeEnv::newTimer() { return std::make_unique<HostTimer>(w_, n_); }

// ---------------------------------------------------------------- the hosts' clocks

// A host's clocks at world time t (decision 0070). CLOCK_MONOTONIC stands still while the
// host is suspended; CLOCK_BOOTTIME, on which the agent compares its deadlines (the lease,
// the failsafe's permission, the promise it holds, the watchdog's end of the lease), runs
// on through a suspend: seen from the host, it jumps by the span as the host resumes.
int64_t World::hostClockAt(int n, int64_t t) const {
  int64_t suspended = 0;
  for (const auto& [from, until] : node(n).suspends) suspended += std::clamp(t, from, until) - from;
  const int64_t monotonic = t - suspended;
  return monotonic + suspended;  // CLOCK_BOOTTIME
}

void HostTimer::start(int64_t delayMs, std::function<void()> fired) {
  const uint64_t serial = ++*serial_;
  w_.atHostClock(n_, w_.hostClock(n_) + delayMs,
                 [live = std::weak_ptr<uint64_t>(serial_), serial, fired = std::move(fired)] {
                   auto s = live.lock();
                   if (s && *s == serial) fired();
                 });
}

Result<bool> HostCoordinator::join(driver::CoordinatorCallbacks callbacks) {
  // Quorum mode: the agent's configuration `replication` is stepped into the driver after
  // each news of the state (agent/daemon_env.cc ZkCoordinator::join).
  if (w_.sc_.quorumK > 0) {
    const ReplicationWanted wanted{ReplicationMode::kQuorum, w_.sc_.quorumK, w_.sc_.quorumSize};
    callbacks.onEvent = [wanted, onEvent = std::move(callbacks.onEvent)](Event event) {
      const bool news = std::holds_alternative<ZkInitialized>(event) || std::holds_alternative<ClusterStateChanged>(event);
      onEvent(std::move(event));
      if (news) onEvent(wanted);
    };
  }
  if (w_.source_) {
    // A standby seed: the source's observation after each news of the state, as
    // ZkCoordinator::join delivers it (agent/daemon_env.cc).
    deliver_ = std::make_shared<std::function<void(Event)>>(std::move(callbacks.onEvent));
    callbacks.onEvent = [this, deliver = deliver_](Event event) {
      const auto* init = std::get_if<ZkInitialized>(&event);
      const auto* changed = std::get_if<ClusterStateChanged>(&event);
      const bool news = init || changed;
      if (news) followSource(init ? init->state : changed->state);
      (*deliver)(std::move(event));
      if (news && sourceSeen_) {
        w_.trace('E', [&] { return w_.node(n_).identity.id + " <- " + w_.describeEvent(*sourceSeen_); });
        (*deliver)(*sourceSeen_);
      }
    };
  }
  if (callbacks.onLease) {
    callbacks.onLease = [&w = w_, n = n_, onLease = std::move(callbacks.onLease)](driver::CoordinatorLease lease) {
      lease.sentAtMs = w.hostClockAt(n, lease.sentAtMs);
      onLease(lease);
    };
  }
  return client_.join(std::move(callbacks));
}

// ZkCoordinator::followSource: starts (or stops) reading the source when the state heard
// names a dugong source (or no longer does).
void HostCoordinator::followSource(const StateNode& node) {
  bool follows = false;
  if (node.exists) {
    auto state = ClusterState::parse(node.data, ClusterState::Formats::kSyncAndStandby);
    follows = state && state->standby && state->standby->source.kind == SourceKind::kDugong;
  }
  if (follows == following_) return;
  following_ = follows;
  ++followSerial_;
  sourceSeen_.reset();
  lastKey_.clear();
  lastGood_.clear();
  since_.clear();
  if (!follows) return;
  // The source watch's thread connects first (zk::Client::connect), then reads.
  const uint64_t serial = followSerial_;
  w_.atHostClock(n_, w_.hostClock(n_) + w_.rngSource_.between(20, 300),
                 [this, alive = std::weak_ptr<bool>(alive_), serial] {
                   if (!alive.expired()) lookAtSource(serial);
                 });
}

// One read of the source's ensemble (zk/source_watch.cc SourceWatch::run): the state
// node and the election's children, or the error of a read that times out (2 s) while the
// source is cut off from this host; then the next read a second later.
void HostCoordinator::lookAtSource(uint64_t serial) {
  if (serial != followSerial_) return;
  const simworld::SimSource& src = *w_.source_;
  const bool reachable = !src.isCut() && !src.gone() && !w_.node(n_).suspended;
  const int64_t took = reachable ? w_.rngSource_.between(4, 50) : 2000;
  SourceObservation seen;
  std::string data;  // the state's bytes read, for the comparison with the previous read
  if (reachable) {
    data = src.stateNode().data();
    // What zk::observeSource makes of the two reads (sim/ may not link zk/): the state as
    // the agents parse it, and whether its primary holds an election node.
    seen.reachable = true;
    auto parsed = ClusterState::parse(data, ClusterState::Formats::kSyncAndStandby);
    if (parsed) {
      seen.state = ObservedSourceState::of(parsed.value());
      seen.primaryPresent = src.present(parsed->primary.id);
    } else {
      seen.lastSeen = "its cluster state cannot be read: " + parsed.error();
    }
  }
  w_.atHostClock(n_, w_.hostClock(n_) + took,
                 [this, alive = std::weak_ptr<bool>(alive_), serial, reachable, seen = std::move(seen),
                  data = std::move(data)]() mutable {
                   if (alive.expired() || serial != followSerial_) return;
                   if (!reachable) {
                     if (since_.empty()) since_ = formatIso8601(w_.wall());
                     seen.lastSeen = "unreachable since " + since_ + ": connection timed out" +
                                     (lastGood_.empty() ? "" : "; last seen " + lastGood_);
                   } else {
                     since_.clear();
                   }
                   sourceSeen(std::move(seen), data);
                   w_.atHostClock(n_, w_.hostClock(n_) + 1000, [this, alive, serial] {
                     if (!alive.expired()) lookAtSource(serial);
                   });
                 });
}

void HostCoordinator::sourceSeen(SourceObservation seen, const std::string& data) {
  if (seen.reachable && seen.state) {
    lastGood_ = "its primary " + seen.state->primary + ", generation " + std::to_string(seen.state->generation);
  }
  const std::string key = std::string(seen.reachable ? "1" : "0") + data + (seen.primaryPresent ? "p" : "-");
  if (!lastKey_.empty() && key == lastKey_) return;
  lastKey_ = key;
  SourceObserved named;
  named.seen = std::move(seen);
  named.cluster = "standby";
  named.root = "/dugong/standby";
  sourceSeen_ = named;
  if (!deliver_) return;  // left: stepped with the next news of the state
  auto deliver = deliver_;
  w_.intoDriver(n_, named, [&] { (*deliver)(named); });
}

void NodeEnv::post(std::function<void()> fn) {
  int n = n_;
  uint64_t inc = inc_;
  // The world outlives every node's environment; this one may be gone (a crashed peer)
  // when the callback runs, so the lambda holds the world, not `this`.
  w_.after(0, [&w = w_, n, inc, fn = std::move(fn)] {
    if (w.alive(n, inc)) fn();
  });
}

void NodeEnv::write(LogLevel level, const std::string& line) {
  if (level == LogLevel::kError && line.rfind("fatal: ", 0) == 0) lastFatal = line.substr(7);
  w_.trace(level == LogLevel::kDebug ? 'D' : 'L', [&] { return w_.node(n_).identity.id + ": " + line; });
}

// ---------------------------------------------------------------- ZooKeeper

// What ZooKeeper tells a node goes into its driver; the checks see every membership
// change and every state written.
simworld::ZkHooks World::zkHooks() {
  simworld::ZkHooks h;
  h.deliver = [this](int n, const Event& ev, const std::function<void()>& call) { intoDriver(n, ev, call); };
  h.identityOf = [this](const std::string& id) -> const PeerIdentity& { return node(nodeOf(id)).identity; };
  h.activeChanged = [this](const std::vector<std::string>& before, const std::vector<std::string>& after) {
    for (const Node& nd : nodes_) {
      const std::string& id = nd.identity.id;
      bool was = std::find(before.begin(), before.end(), id) != before.end();
      bool is = std::find(after.begin(), after.end(), id) != after.end();
      auto& intervals = absences_[id];
      if (was && !is) intervals.push_back({now_, kForever});
      if (!was && is) intervals.back().second = now_;
    }
  };
  h.admit = [this](const std::string& writer, const std::string& data) {
    auto parsed = ClusterState::parse(data, sc_.standby ? ClusterState::Formats::kSyncAndStandby
                                                        : ClusterState::Formats::kSyncAndQuorum);
    if (!parsed) {
      checker_.fail(now_, "invalid-write", writer + " wrote an invalid cluster state: " + parsed.error());
      return false;
    }
    admitted_ = std::move(parsed).value();
    return true;
  };
  h.writerWal = [this](int n) -> std::optional<WalPosition> { return node(n).pg.wal.position(); };
  h.written = [this](const std::string& writer, int64_t issuedAt, std::optional<WalPosition> writerWal,
                     const std::string& reason) { stateWritten(writer, issuedAt, writerWal, reason); };
  h.violation = [this](const std::string& invariant, const std::string& detail) { checker_.fail(now_, invariant, detail); };
  h.reportPublished = [this](int n) { reportPublished(n); };
  return h;
}

void World::stateWritten(const std::string& writer, int64_t issuedAt, std::optional<WalPosition> writerWal,
                         const std::string& reason) {
  // The state it replaces moves into the record: state_ takes the new one next.
  StateWrite sw{now_, issuedAt, writer, std::move(state_), *admitted_, writerWal};
  state_ = std::move(admitted_);
  admitted_.reset();
  primaryOfGeneration_.emplace(state_->generation, state_->primary.id);
  const int previousPrimary = statePrimary_;
  statePrimary_ = nodeOf(state_->primary.id);
  if (statePrimary_ >= 0 && statePrimary_ != previousPrimary) node(statePrimary_).becamePrimaryAt = now_;
  const int32_t version = zk_.state().version();
  std::string summary;
  if (opts_.trace) {
    summary = summarizeState(*state_).dump();
    summaryOfVersion_[version] = summary;
  }
  trace('Z', [&] {
    return "state v" + std::to_string(version) + " written by " + writer + ": " + summary + " (" + reason + ")";
  });
  bool newGeneration = !sw.before || sw.before->generation != state_->generation;
  checker_.onStateWrite(sw);
  checkQuorumWrite(newGeneration);
  standbyStateWritten(sw.before, writer);
  if (newGeneration && sw.before && sw.before->hasPromote()) promotedGenerations_.insert(state_->generation);
  if (newGeneration) crashAfterWrite(writer);
  if (newGeneration) cutAfterWrite(writer);
}

// ---------------------------------------------------------------- the run

// The primary of the state refuses to run on data a restore-stale-sync fault put in
// place of its own: its history forked off before the generation's initWal, and the
// commits it lacks are on peers that the state machine never makes primary by itself
// (only the sync takes over). The peer halts and says what an operator can do.
std::optional<std::string> World::haltedOnAReplacedCopy() const {
  if (!state_ || statePrimary_ < 0) return std::nullopt;
  const Node& p = node(statePrimary_);
  if (!p.up || !p.restoredFromStaleCopy) return std::nullopt;
  auto halted = p.driver->peer().haltReason();
  if (!halted) return std::nullopt;
  return p.identity.id + " " + *halted;
}

RunResult World::run() {
  trace('Q', [&] { return std::string("seed " + std::to_string(sc_.seed) + ": " + std::to_string(sc_.peers) + " peers, session timeout " +
                 std::to_string(sc_.sessionTimeoutMs) + " ms, tickTime " + std::to_string(sc_.tickTimeMs) +
                 (sc_.lease ? (sc_.failsafe ? " ms, leases, failsafe" : " ms, leases") : " ms, no leases") +
                 (sc_.rejoinRewind ? ", rejoin: rewind" : "") +
                 (sc_.quorumK > 0 ? ", quorum ANY " + std::to_string(sc_.quorumK) + " of " + std::to_string(sc_.quorumSize)
                                  : std::string()) +
                 (sc_.standby ? ", a standby cluster of a scripted dugong source" : "") +
                 ", faults for " + std::to_string(sc_.faultPhaseMs) + " ms"); });
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    after(rngAgent_.between(0, 500), [this, n] { startAgent(n); });
  }
  for (const Fault& f : sc_.faults) {
    if (opts_.onlyFaults && !opts_.onlyFaults->count(f.index)) continue;
    faultsPlanned_.push_back(f.index);
    at(f.at, [this, f] { runFault(f); });
  }
  q_.every(kReplicationTickMs, [this] {
    replicate();
    return kReplicationTickMs;
  });
  q_.every(100, [this] {
    clientTick();
    return rngClient_.between(15, 60);
  });
  at(sc_.faultPhaseMs, [this] { beginQuietPhase(); });

  const int64_t deadline = sc_.faultPhaseMs + sc_.convergeBoundMs;
  while (!q_.empty()) {
    q_.runNext(now_);
    if (checker_.ok()) checkStep();
    if (!checker_.ok()) break;
    if (convergedAt_ && now_ >= *convergedAt_ + kSettleAfterConvergedMs && !deposedNotRejoined()) break;
    if (now_ > deadline &&
        (leftToAnOperator_ = haltedOnAReplacedCopy())) {
      trace('Q', [&] { return "not read-write, left to an operator: " + *leftToAnOperator_; });
      break;
    }
    if (now_ > deadline && convergedAt_) {
      checker_.fail(now_, "deposed-not-rejoined",
                    *deposedNotRejoined() + " is still deposed " + std::to_string(sc_.convergeBoundMs) +
                        " ms after the faults stopped, although its agent runs on its data directory with rejoin: "
                        "rewind; " + diagnose());
      break;
    }
    if (now_ > deadline) {
      checker_.fail(now_, "liveness",
                    std::string(state_ && state_->standby ? "a standby cluster not following its source's upstream "
                                                          : "not read-write ") +
                        std::to_string(sc_.convergeBoundMs) + " ms after the faults stopped; " + diagnose());
      break;
    }
  }

  RunResult r;
  r.seed = sc_.seed;
  r.ok = checker_.ok();
  if (!r.ok) {
    r.violation = checker_.violations().front();
    trace('V', [&] { return std::string(r.violation->invariant + ": " + r.violation->detail); });
  }
  r.trace = std::move(trace_);
  r.traceHash = hash_;
  r.acks = checker_.acks();
  r.generations = state_ ? state_->generation : 0;
  r.faultsRun = faultsRun_;
  r.faultsRunByKind = faultsRunByKind_;
  r.faultsPlanned = faultsPlanned_;
  if (convergedAt_) r.convergedAfterMs = *convergedAt_ - quietStart_;
  r.leftToAnOperator = leftToAnOperator_;
  r.virtualMs = now_;
  return r;
}

}  // namespace world_internal

using world_internal::World;


RunResult runScenario(const Scenario& scenario, const WorldOptions& options) {
  World world(scenario, options);
  return world.run();
}

}  // namespace dugong::clustersim