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
  agent::DriverOptions o;
  o.identity = nd.identity;
  o.withdrawAfterMs = kWithdrawAfterMs;
  o.handoverWaitMs = kHandoverWaitMs;
  o.rejoin = agent::RejoinPolicy::kFollow;
  o.syncReplaceAfterMs = kSyncReplaceAfterMs;
  nd.primaryConnectionLostAt = -1;
  o.onPrimaryConnectionLoss = [this, n](bool lost) { node(n).primaryConnectionLostAt = lost ? now_ : -1; };
  nd.leaseDeadline = -1;
  o.lease.tickTimeMs = sc_.tickTimeMs;
  o.onLeaseDeadline = [this, n](int64_t deadline) { node(n).leaseDeadline = deadline; };
  o.failsafe = sc_.failsafe;
  o.failsafeDurationMs = sc_.sessionTimeoutMs;
  nd.driver = std::make_unique<agent::Driver>(
      agent::Env{*nd.env, nd.env->coordinator, nd.env->postgres, *nd.env, nd.env.get()}, o);
  NodeEnv* env = nd.env.get();
  nd.driver->onFatal([this, n, env] {
    checker_.fail(now_, "fatal", node(n).identity.id + " reported a fatal error: " + env->lastFatal);
  });
  nd.driver->start();
}

// The agent stops (crash or operator); its ZooKeeper session is left to expire unless
// closed by the caller.
void World::stopAgent(int n) {
  Node& nd = node(n);
  nd.up = false;
  nd.pg.adapterGone();
  nd.driver.reset();
  nd.env.reset();
  ++nd.incarnation;
  zk_.agentStops(n);
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
    : coordinator(world.zk_, n), postgres(world.fleet_, n, world.postgresHooks(n)), w_(world), n_(n), inc_(incarnation) {}

// What the node's postgres adapter reports goes into its driver, checked.
simworld::SimPostgresHooks World::postgresHooks(int n) {
  simworld::SimPostgresHooks h;
  h.deliver = [this, n](const Event& ev, const std::function<void()>& call) { intoDriver(n, ev, call); };
  h.violation = [this](const std::string& invariant, const std::string& detail) {
    checker_.fail(now_, invariant, detail);
  };
  h.fenced = [this, n] { crashPgAfterFence(n); };
  h.applyStarting = [this, n](const PgConfig& cfg) {
    if (cfg.role == PgRole::kPrimary && node(n).driver->peer().clusterState()) {
      node(n).generationTag = node(n).driver->peer().clusterState()->generation;
    }
  };
  return h;
}

EpochMs NodeEnv::wallMs() const { return w_.wall(); }
int64_t NodeEnv::monotonicMs() const { return w_.now_; }


std::unique_ptr<agent::Timer> NodeEnv::newTimer() {
  return std::make_unique<agent::ScheduledTimer>([this](int64_t delay, std::function<void()> fn) { w_.after(delay, std::move(fn)); });
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
    auto parsed = ClusterState::parse(data);
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
  return h;
}

void World::stateWritten(const std::string& writer, int64_t issuedAt, std::optional<WalPosition> writerWal,
                         const std::string& reason) {
  StateWrite sw{now_, issuedAt, writer, state_, *admitted_, writerWal};
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
  if (newGeneration && sw.before && sw.before->hasPromote()) promotedGenerations_.insert(state_->generation);
  if (newGeneration) crashAfterWrite(writer);
  if (newGeneration) cutAfterWrite(writer);
}

void World::cutAfterWrite(const std::string& writer) {
  const int n = nodeOf(writer);
  auto armed =
      std::find_if(cutAfterWrite_.begin(), cutAfterWrite_.end(), [n](const CutAfterWrite& c) { return c.node == n; });
  if (armed == cutAfterWrite_.end()) return;
  const int64_t cutFor = armed->cutFor;
  cutAfterWrite_.erase(armed);
  after(0, [this, n, cutFor] {
    trace('F', [&] { return std::string(node(n).identity.id + " is cut off as ZooKeeper applies its write"); });
    zk_.partition(n, cutFor);
  });
}

bool World::wasAbsent(const std::string& id, int64_t from, int64_t to) const {
  auto it = absences_.find(id);
  if (it == absences_.end()) return true;
  for (const auto& [a, b] : it->second) {
    if (a <= to && b > from) return true;
  }
  return false;
}

// ---------------------------------------------------------------- postgres

bool World::writable(int n) const {
  const Node& nd = node(n);
  const PgServer& pg = nd.pg;
  // Commits are accepted whenever the adapter made it writable; they wait for the sync.
  return nd.up && pg.serving() && !pg.promoting && pg.config.role == PgRole::kPrimary && !pg.readOnly &&
         !pg.writesStopped;
}

void World::replicate() {
  fleet_.stream();
  // Primaries acknowledge what their sync has.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    PgServer& pg = node(n).pg;
    if (pg.waiting.empty() || !node(n).up || !pg.serving() || pg.config.role != PgRole::kPrimary) continue;
    size_t acked = 0;
    if (pg.config.downstream && attachedSync(n)) {
      const Wal& sync = node(nodeOf(pg.config.downstream->id)).pg.wal;
      while (acked < pg.waiting.size() && sync.contains(pg.waiting[acked])) ++acked;
      if (pg.alsoSync) {  // fenced: the sync it had must have it too
        int also = nodeOf(pg.alsoSync->id);
        if (also < 0 || !fleet_.streamsFrom(also, n)) {
          acked = 0;
        } else {
          const Wal& other = node(also).pg.wal;
          size_t both = 0;
          while (both < acked && other.contains(pg.waiting[both])) ++both;
          acked = both;
        }
      }
    }
    if (!pg.config.downstream || opts_.testingAckBeforeSync) acked = pg.waiting.size();
    if (acked == 0) continue;
    // ack() leaves `waiting` as it is; what it acknowledged goes after (or on a violation).
    auto ackedEnd = pg.waiting.begin() + static_cast<std::ptrdiff_t>(acked);
    for (auto it = pg.waiting.begin(); it != ackedEnd; ++it) {
      ack(n, *it);
      if (!checker_.ok()) break;
    }
    pg.waiting.erase(pg.waiting.begin(), ackedEnd);
    if (!checker_.ok()) return;
  }
}

void World::clientTick() {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    if (node(n).up && node(n).pg.writesStopped && node(n).pg.serving() && node(n).pg.config.role == PgRole::kPrimary) {
      // After BEGIN READ WRITE, a session commits on it all the same.
      if (rngClient_.chance(300)) localCommit(n);
      continue;
    }
    if (!writable(n)) continue;
    // A writable primary acknowledges a synchronous_commit = local commit without any
    // standby, as a writes-stopped one does after BEGIN READ WRITE.
    if (rngClient_.chance(30)) localCommit(n);
    if (!rngClient_.chance(600)) continue;
    uint64_t id = ++nextCommit_;
    WalMark m = node(n).pg.wal.append(id);
    node(n).pg.waiting.push_back(m);
    trace('C', [&] { return std::string("commit c" + std::to_string(id) + " on " + node(n).identity.id); });
  }
}

// A commit with synchronous_commit = local, acknowledged without any standby: on a
// writable primary, or on a writes-stopped one after BEGIN READ WRITE. The agent shuts
// such a primary down before its session can expire, so no such commit is acknowledged
// once another peer may have taken over (a newer generation names another primary).
void World::localCommit(int n) {
  Node& nd = node(n);
  uint64_t id = ++nextCommit_;
  nd.pg.wal.append(id);
  trace('C', [&] {
    return std::string("local commit c" + std::to_string(id) + " on " + (nd.pg.writesStopped ? "writes-stopped " : "") +
                       nd.identity.id);
  });
  if (nd.faultExpiredAt >= 0 && nd.faultExpiredAt >= nd.becamePrimaryAt) return;
  // A takeover by a promote request does not wait for the old primary's session: an
  // operator's switchover, which the old primary carries out (it stops postgres) only if
  // it hears of it; the shutdown guards against expiry-based takeovers only.
  int64_t led = 0;
  for (const auto& [g, leader] : primaryOfGeneration_) {
    if (leader == nd.identity.id) led = g;
  }
  if (promotedGenerations_.upper_bound(led) != promotedGenerations_.end()) return;
  if (state_ && (state_->primary.id != nd.identity.id || containsPeer(state_->deposed, nd.identity.id))) {
    checker_.fail(now_, "local-ack-after-takeover",
                  nd.identity.id + " acknowledged c" + std::to_string(id) +
                      (nd.pg.writesStopped ? " (BEGIN READ WRITE, synchronous_commit = local) with its writes stopped"
                                           : " (synchronous_commit = local)") +
                      ", after generation " +
                      std::to_string(state_->generation) + " made " + state_->primary.id + " the primary");
  }
}

void World::ack(int n, const WalMark& mark) {
  Node& nd = node(n);
  int64_t gen = nd.generationTag;
  bool deposed = false;
  if (nd.driver) {
    deposed = nd.driver->peer().role() == Role::kDeposed;
    // The generation it believes it leads: the latest state it saw that names it primary.
    const auto& view = nd.driver->peer().clusterState();
    if (view && view->primary.id == nd.identity.id) gen = view->generation;
  }
  std::optional<std::string> primary;
  if (auto it = primaryOfGeneration_.find(gen); it != primaryOfGeneration_.end()) primary = it->second;
  trace('C', [&] { return std::string("ack c" + std::to_string(mark.commitId) + " by " + nd.identity.id + " (generation " +
                 std::to_string(gen) + ")"); });
  static const std::string kAlone;
  checker_.onAck(now_, nd.identity.id, gen, mark, nd.pg.wal, deposed, primary,
                 nd.pg.config.downstream ? nd.pg.config.downstream->id : kAlone);
  if (quiet_ && state_ && state_->primary.id == nd.identity.id) ackedSinceQuiet_ = true;
  // The primary of the current generation acknowledges only what that generation's sync
  // holds: if it fails, the sync takes over, and must have it (a rule that warns of a
  // lost commit before the failure that would lose it).
  if (opts_.checkTakeoverRules && state_ && state_->primary.id == nd.identity.id && state_->sync &&
      state_->sync->id != nd.identity.id) {
    const int s = nodeOf(state_->sync->id);
    if (s >= 0 && !node(s).pg.wal.contains(mark)) {
      checker_.fail(now_, "ack-without-sync",
                    nd.identity.id + " acknowledged c" + std::to_string(mark.commitId) + " as primary of generation " +
                        std::to_string(state_->generation) + " (through " +
                        (nd.pg.config.downstream ? nd.pg.config.downstream->id : std::string("no standby")) +
                        "), but that generation's sync " + state_->sync->id +
                        " does not have it: it would take over without it");
    }
  }
}

// ---------------------------------------------------------------- checks and the run

void World::checkStep() {
  noteZooKeeperReach();
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
    if (nd.driver->peer().role() == Role::kDeposed && writable(n) &&
        (!nd.pg.config.downstream || attachedSync(n))) {
      checker_.onDeposedWritable(now_, nd.identity.id);
    }
    // A withdrawn peer rejoins once its postgres answers again.
    if (nd.driver->withdrawn() && nd.pg.serving()) {
      if (nd.withdrawnServingSince < 0) nd.withdrawnServingSince = now_;
      if (now_ - nd.withdrawnServingSince > kRejoinBoundMs) {
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
  int p = statePrimary_;
  const PgServer& pg = node(p).pg;
  if (pg.serving() && pg.config.role == PgRole::kPrimary) {
    checker_.checkCurrentPrimary(now_, state_->primary.id, pg.wal);
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
    const simworld::ZkClient& c = zk_.client(static_cast<int>(&nd - nodes_.data()));
    s += c.session ? "; session " + std::to_string(c.session) : "; no session";
    if (c.partitioned) s += ", partitioned";
  }
  return s;
}

RunResult World::run() {
  trace('Q', [&] { return std::string("seed " + std::to_string(sc_.seed) + ": " + std::to_string(sc_.peers) + " peers, session timeout " +
                 std::to_string(sc_.sessionTimeoutMs) + " ms, tickTime " + std::to_string(sc_.tickTimeMs) +
                 (sc_.lease ? (sc_.failsafe ? " ms, leases, failsafe" : " ms, leases") : " ms, no leases") + ", faults for " + std::to_string(sc_.faultPhaseMs) +
                 " ms"); });
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
    now_ = q_.nextAt();
    q_.runNext();
    if (checker_.ok()) checkStep();
    if (!checker_.ok()) break;
    if (convergedAt_ && now_ >= *convergedAt_ + kSettleAfterConvergedMs) break;
    if (now_ > deadline) {
      checker_.fail(now_, "liveness",
                    "not read-write " + std::to_string(sc_.convergeBoundMs) + " ms after the faults stopped; " +
                        diagnose());
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