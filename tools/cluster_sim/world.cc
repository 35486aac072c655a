#include "tools/cluster_sim/world.h"
#include "agent/scheduled_timer.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "agent/driver.h"
#include "statemachine/peer.h"
#include "tools/sim_world/rng.h"
#include "tools/sim_world/sim_coordinator.h"
#include "tools/sim_world/sim_postgres.h"
#include "tools/sim_world/trace_sink.h"
#include "tools/sim_world/wal.h"
#include "tools/sim_world/event_queue.h"
#include "tools/sim_world/operator_actions.h"
#include "tools/sim_world/zookeeper.h"

namespace dugong::clustersim {

using simworld::describeConfig;
using simworld::PgServer;
using simworld::Rng;

std::string TraceLine::format() const {
  char head[32];
  std::snprintf(head, sizeof head, "[%4lld.%03lld] %c ", static_cast<long long>(t / 1000),
                static_cast<long long>(t % 1000), kind);
  return head + text;
}

namespace {

constexpr int64_t kReplicationTickMs = 10;
constexpr int64_t kOperatorQuietTickMs = 1000;
constexpr int64_t kSettleAfterConvergedMs = 3000;
constexpr int64_t kHealthIntervalMs = 1000;   // the pg adapter's health check
constexpr int64_t kWithdrawAfterMs = 8000;    // health.withdrawAfterSeconds of the simulated agents
// A withdrawn peer whose postgres serves again rejoins within one health check; an
// operation in flight (a state write, a transition, a WAL read) ends within this.
constexpr int64_t kRejoinBoundMs = 3 * kHealthIntervalMs;
constexpr int64_t kInFlightBoundMs = 30000;
// postgres.repairStandbyAfterSeconds of the simulated agents (production: 60 s; the
// simulated cluster runs on shorter timeouts throughout).
constexpr int64_t kRepairAfterMs = 3000;
constexpr int64_t kWritablePollMs = 200;      // the pg adapter's writablePollInterval
constexpr int64_t kTimingCheckMs = 100;       // granularity of the seconds-long liveness bounds
// The agents' production defaults for what the environment does on their behalf.
constexpr int64_t kHandoverWaitMs = 5000;      // switchover.handoverWaitMs
constexpr int64_t kSyncReplaceAfterMs = 2000;  // sync.replaceAfterMs
constexpr int64_t kUpstreamPollMs = 50;        // the adapter's awaitUpstreamStop poll

// How long ZooKeeper takes in the simulated cluster (a seeded range each).
simworld::ZkModel clusterZkModel(int64_t sessionTimeoutMs, int64_t tickTimeMs, bool lease) {
  return simworld::ZkModel{.connect = {20, 300}, .delivery = {1, 30}, .toServer = {2, 25}, .slowWritePermille = 50,
                           .slowToServer = {100, 1500}, .fromServer = {2, 25}, .expiryNoticed = {5, 60},
                           .reconnect = {20, 200}, .retryConnectMs = 500, .sessionTimeoutMs = sessionTimeoutMs,
                           .tickTimeMs = tickTimeMs,
                           .leaseIntervalMs = lease ? std::clamp<int64_t>(sessionTimeoutMs / 10, 50, 1000) : 0};
}

// Peers are named node<N> (N from 1): their index, or -1 for anything else.
int nodeNamed(const std::string& id) {
  if (id.size() < 5 || id.compare(0, 4, "node") != 0) return -1;
  int n = 0;
  for (size_t i = 4; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9' || n > 1000) return -1;
    n = n * 10 + (id[i] - '0');
  }
  return n >= 1 ? n - 1 : -1;
}

// How long the pg adapter's steps take in the simulated cluster (a seeded range each).
simworld::PgModel clusterPgModel() {
  return simworld::PgModel{.init = {20, 300}, .fence = {2, 20}, .walRead = {2, 20}, .syncSample = {3, 3}, .reload = {5, 60},
                           .restart = {80, 900}, .slowReload = {200, 1500}, .slowRestart = {1500, 7000},
                           .promoteStream = {5, 40}, .writes = {5, 60}, .shutDown = {80, 900}, .rejoin = {300, 1500},
                           .upstreamPoll = {2, 10}, .writableWrite = {5, 60}, .upstreamPollMs = kUpstreamPollMs,
                           .healthIntervalMs = kHealthIntervalMs, .repairAfterMs = kRepairAfterMs,
                           .writablePollMs = kWritablePollMs};
}

class World;

// One simulated host's environment for its agent's driver (agent/env.h): the world's
// virtual clock, a client of the simulated ZooKeeper ensemble, the local simulated
// postgres (tools/sim_world/sim_postgres.h), and the trace as the log. One per
// incarnation of the agent.
class NodeEnv final : public agent::Clock, public agent::LogSink {
 public:
  NodeEnv(World& world, int n, uint64_t incarnation);

  EpochMs wallMs() const override;
  int64_t monotonicMs() const override;
  std::unique_ptr<agent::Timer> newTimer() override;
  void post(std::function<void()> fn) override;

  void write(LogLevel level, const std::string& line) override;

  simworld::SimCoordinator coordinator;
  simworld::SimPostgres postgres;
  std::string lastFatal;

 private:
  World& w_;
  int n_;
  uint64_t inc_;
};

struct Node {
  PeerIdentity identity;
  std::unique_ptr<NodeEnv> env;          // the agent's environment, while it runs
  std::unique_ptr<agent::Driver> driver; // the agent's logic: the code that ships
  int64_t withdrawnServingSince = -1;
  int64_t awaitingSince = -1;          // its state machine waits for a completion
  int64_t wronglyDeposedSince = -1;    // deposed in its view, not in ZooKeeper's
  bool up = false;               // the agent runs
  uint64_t incarnation = 0;      // bumps on every start and stop of the agent
  bool restartPending = false;
  // When ZooKeeper last named it primary (a new primary in the state), and when the fault
  // scheduler last expired its session: an expiry that the client's silence did not
  // cause (in reality a pause of the whole agent), which the shutdown at
  // sessionTimeout/6 cannot guard against for the rest of that primaryship.
  int64_t becamePrimaryAt = -1;
  int64_t faultExpiredAt = -1;
  int64_t primaryConnectionLostAt = -1;  // what the agent tells its watchdog (-1: connected)
  int64_t leaseDeadline = -1;            // the lease's end the agent tells its watchdog (-1: none)
  simworld::PgServer pg;
  int64_t generationTag = 0;  // the generation its agent saw when making its postgres primary
};



// The trace (simworld::TraceSink): trace(kind, text) builds and records a line only
// when the run keeps a trace; the strings are never built for the seeds that pass
// unwatched.
class World final : public simworld::TraceSink {
  friend class NodeEnv;

 public:
  World(const Scenario& scenario, const WorldOptions& options)
      : simworld::TraceSink(options.trace),
        sc_(scenario),
        opts_(options),
        checker_([this](const std::string& id, int64_t from, int64_t to) { return wasAbsent(id, from, to); },
                 options.checkTakeoverRules),
        fleet_(q_, rngPg_, rngAgent_, *this, clusterPgModel(), nodeNamed),
        zk_(q_, rngZk_, rngAgent_, *this, clusterZkModel(scenario.sessionTimeoutMs, scenario.tickTimeMs, scenario.lease), zkHooks()) {
    Rng root(scenario.seed ^ 0x5eed5eed5eed5eedULL);
    rngZk_ = root.fork(1);
    rngPg_ = root.fork(2);
    rngClient_ = root.fork(3);
    rngOp_ = root.fork(4);
    rngAgent_ = root.fork(5);
    for (int i = 0; i < scenario.peers; ++i) {
      Node n;
      std::string num = std::to_string(i + 1);
      n.identity.id = "node" + num;
      n.identity.ip = "10.0.0." + num;
      n.identity.pgUrl = "tcp://postgres@10.0.0." + num + ":5432/postgres";
      n.identity.zoneId = n.identity.id;
      n.pg.id = n.identity.id;
      absences_[n.identity.id].push_back({0, kForever});
      nodes_.push_back(std::move(n));
    }
    for (Node& n : nodes_) {
      fleet_.add(n.pg);
      zk_.addHost(n.identity.id);
    }
  }

  // The agents go first: their adapters and clients deregister from the host's postgres
  // and ZooKeeper client.
  ~World() override {
    for (Node& n : nodes_) {
      n.driver.reset();
      n.env.reset();
    }
  }

  RunResult run();

 private:
  static constexpr int64_t kForever = INT64_MAX;

  // ---- event loop ----
  void at(int64_t t, simworld::Task fn) { q_.at(t, std::move(fn)); }
  void after(int64_t delay, simworld::Task fn) { q_.after(delay, std::move(fn)); }
  EpochMs wall() const { return sc_.start + now_; }
  void record(char kind, std::string text) override;

  // ---- peers ----
  void startAgent(int n);
  void stopAgent(int n);
  // Runs `call` (which hands `ev` to n's driver), traced, then checks n's view.
  void intoDriver(int n, const Event& ev, const std::function<void()>& call);
  const Peer* peerOf(int n) const { return node(n).driver ? &node(n).driver->peer() : nullptr; }
  std::string describeEvent(const Event& ev) const;
  bool alive(int n, uint64_t inc) const { return nodes_[static_cast<size_t>(n)].up && node(n).incarnation == inc; }
  Node& node(int n) { return nodes_[static_cast<size_t>(n)]; }
  const Node& node(int n) const { return nodes_[static_cast<size_t>(n)]; }
  // The node of peer `id` (nodeNamed), -1 for none.
  int nodeOf(const std::string& id) const {
    const int n = nodeNamed(id);
    return n < static_cast<int>(nodes_.size()) ? n : -1;
  }

  // ---- ZooKeeper (tools/sim_world/sim_coordinator.h) ----
  simworld::ZkHooks zkHooks();
  void stateWritten(const std::string& writer, int64_t issuedAt, std::optional<WalPosition> writerWal,
                    const std::string& reason);
  bool wasAbsent(const std::string& id, int64_t from, int64_t to) const;

  // ---- postgres (tools/sim_world/sim_postgres.h) and the client ----
  simworld::SimPostgresHooks postgresHooks(int n);
  void localCommit(int n);
  void replicate();
  void crashAfterWrite(const std::string& writer);
  void cutAfterWrite(const std::string& writer);
  void crashPgAfterFence(int n);
  bool attachedSync(int primary) const { return fleet_.attachedSync(primary); }
  bool writable(int n) const;
  void clientTick();
  void ack(int n, const WalMark& mark);

  // ---- faults and operator ----
  void runFault(const Fault& f);
  void crashPeer(int n, int64_t downFor);
  void crashAgent(int n, int64_t downFor);
  void restartAgentAfter(int n, int64_t downFor);
  // The nodes the state names primary and sync (-1 for none).
  std::pair<int, int> primaryAndSync() const {
    return {state_ ? nodeOf(state_->primary.id) : -1, state_ && state_->sync ? nodeOf(state_->sync->id) : -1};
  }
  void restartPrimaryLateSync(const Fault& f);
  void cutSyncCrashPrimary(const Fault& f);
  void flapSync(const Fault& f);
  void operatorWrite(ClusterState next, const std::string& what);
  void opFreeze();
  void opUnfreeze();
  void opPromote(bool valid, uint64_t variant);
  void opRebuild(uint64_t variant);
  void beginQuietPhase();
  void operatorQuietTick();

  // ---- checks ----
  void checkStep();
  std::string diagnose() const;

  const Scenario& sc_;
  WorldOptions opts_;
  InvariantChecker checker_;
  Rng rngZk_{0}, rngPg_{0}, rngClient_{0}, rngOp_{0}, rngAgent_{0};

  simworld::EventQueue q_;
  int64_t now_ = 0;  // q_.now(), kept here for brevity
  simworld::PgFleet fleet_;  // every node's postgres
  simworld::ZkEnsemble zk_;  // the ZooKeeper ensemble and every node's client (outlives the nodes)
  std::vector<Node> nodes_;
  std::vector<TraceLine> trace_;
  uint64_t hash_ = 1469598103934665603ULL;

  // What the checks keep of ZooKeeper.
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> absences_;
  std::optional<ClusterState> admitted_;  // the state of the write being made
  std::optional<ClusterState> state_;
  int statePrimary_ = -1;  // node index of state_->primary
  std::map<int64_t, std::string> primaryOfGeneration_;
  std::set<int64_t> promotedGenerations_;  // declared while a promote request was in the state
  std::map<int32_t, std::string> summaryOfVersion_;

  // Client.
  uint64_t nextCommit_ = 0;

  // crash-after-write faults armed: restart delays of the next new-generation writers.
  std::vector<std::pair<int64_t, int64_t>> crashAfterWrite_;  // (delay after the write, down for)
  struct CrashAfterFence {
    int64_t delay;     // after the fence
    int64_t brokenFor;
    int64_t cutFor;    // cut off from ZooKeeper at the crash for this long (0: not)
    int onlyNode = -1; // the fence of this node only (-1: the next fence of any)
  };
  std::vector<CrashAfterFence> crashPgAfterFence_;
  // Peers to cut off from ZooKeeper as it applies their next new generation, and for how
  // long: the answer is lost (cut-sync-crash-primary, its postgres running on).
  struct CutAfterWrite {
    int node;
    int64_t cutFor;
  };
  std::vector<CutAfterWrite> cutAfterWrite_;

  // Phases.
  int faultsRun_ = 0;
  std::vector<int> faultsRunByKind_ = std::vector<int>(kFaultKinds, 0);
  std::vector<int> faultsPlanned_;
  bool quiet_ = false;
  int64_t quietStart_ = 0;
  bool ackedSinceQuiet_ = false;
  std::optional<int64_t> convergedAt_;
  int64_t nextTimingCheck_ = 0;
  bool done_ = false;
};

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
  nd.driver = std::make_unique<agent::Driver>(agent::Env{*nd.env, nd.env->coordinator, nd.env->postgres, *nd.env}, o);
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
      // Without a lease nothing sees it before the expiry (safety review of fcef921,
      // finding 3): the lease is what makes it survivable.
      if (!sc_.lease) return trace('F', [&] { return std::string(f.describe() + ": skipped, no leases"); });
      trace('F', [&] { return std::string(f.describe() + ": its ZooKeeper server is cut off from the leader"); });
      return zk_.cutOffFollower(f.peer, f.duration);
    case FaultKind::kLeaderChange:
      return zk_.leaderChange(f.duration);
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

// ---------------------------------------------------------------- checks and the run

void World::checkStep() {
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
                 (sc_.lease ? " ms, leases" : " ms, no leases") + ", faults for " + std::to_string(sc_.faultPhaseMs) +
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

}  // namespace

RunResult runScenario(const Scenario& scenario, const WorldOptions& options) {
  World world(scenario, options);
  return world.run();
}

}  // namespace dugong::clustersim