#include "tools/cluster_sim/world.h"
#include "agent/scheduled_timer.h"
#include "statemachine/overloaded.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "agent/driver.h"
#include "statemachine/peer.h"
#include "tools/cluster_sim/rng.h"
#include "tools/cluster_sim/wal.h"
#include "tools/sim_world/event_queue.h"
#include "tools/sim_world/operator_actions.h"
#include "tools/sim_world/zookeeper.h"

namespace dugong::clustersim {

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
constexpr int64_t kUpstreamPollMs = 50;        // the adapter's awaitUpstreamStop poll

// A simulated postgres: its data directory (WAL, set up or not) survives crashes; the
// process (running, configuration, waiting commits) does not.
struct SimPostgres {
  Wal wal;
  bool setUp = false;
  bool running = false;
  bool transitioning = false;  // an ApplyPgConfig is being carried out
  bool reloading = false;      // ... by a reload that keeps serving (primary -> primary)
  bool crashedInTransition = false;
  bool standbySignal = false;  // last ran as a standby (a data directory that follows)
  int64_t brokenUntil = 0;     // crashed, and will not start again until then
  // The adapter's view of a standby that cannot follow (pg/controller.cc healthCheck):
  // not streaming since, with evidence in its log (its upstream's timeline forked
  // before its position); and the repair its next standby apply carries out.
  int64_t cannotFollowSince = -1;
  bool repairFor = false;
  bool repairing = false;  // the apply in progress repairs (stop, pg_rewind, start)
  PgConfig config;             // what it runs with
  // A primary fenced for a new sync (config.downstream): the sync it had, which commits
  // also wait for until the next apply (the adapter's FIRST 2 of both).
  std::optional<PeerIdentity> alsoSync;
  int64_t generationTag = 0;   // the generation its agent saw when making it primary
  // The adapter's managed configuration (pg/controller.cc): a primary with a sync is
  // read-only until its writable poll saw the sync stream synchronously up to the WAL
  // position of the poll's first look; a primary that was writable stays writable when
  // its sync changes. Survives crashes (it is a file).
  bool readOnly = true;
  // Stopped writes (the adapter's stopWrites/shutDownWrites, in its managed
  // configuration): new sessions are read-only; until resumeWrites or the next apply.
  bool writesStopped = false;
  bool writablePending = false;  // the poll waits for pendingSync to catch up
  std::string pendingSync;
  std::optional<size_t> pendingTarget;
  bool applyReadOnly = true;     // what the apply in progress will leave
  // The adapter's two workers share the apply lock: the poll's write of the
  // configuration holds it (a fence or an apply waits), a fence or an apply holds it
  // (the poll skips its turn). The query worker runs WAL reads and the poll in turn.
  int64_t applyLockedUntil = 0;
  int64_t queryBusyUntil = 0;
  bool pollScheduled = false;
  bool promoting = false;      // a running standby being promoted: serves reads meanwhile
  std::vector<WalMark> waiting;  // primary: commits written, not yet acknowledged
  int64_t stalledUntil = 0;    // as a standby, receives nothing until then
  int64_t slowUntil = 0;       // transitions are slow until then
  uint64_t epoch = 0;          // bumps on every crash and transition
  // Identifies a run of postgres (the adapter reports the postmaster's start time):
  // changes on every start, never on a reload or a promotion.
  uint64_t instance = 1;

  bool serving() const { return running && (!transitioning || reloading); }
  bool isStandby() const { return config.role == PgRole::kSync || config.role == PgRole::kAsync; }
};

class World;

// One simulated host's environment for its agent's driver (agent/env.h): the world's
// virtual clock, a client of the simulated ZooKeeper ensemble, the local simulated
// postgres, and the trace as the log. One per incarnation of the agent.
class NodeEnv final : public agent::Clock,
                      public agent::Coordinator,
                      public agent::Postgres,
                      public agent::LogSink {
 public:
  NodeEnv(World& world, int n, uint64_t incarnation) : w_(world), n_(n), inc_(incarnation) {}

  EpochMs wallMs() const override;
  int64_t monotonicMs() const override;
  std::unique_ptr<agent::Timer> newTimer() override;
  void post(std::function<void()> fn) override;

  Result<bool> join(agent::CoordinatorCallbacks callbacks) override;
  void leave() override;
  void putClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                       std::function<void(StateWriteFinished)> done) override;
  agent::CoordinatorStatus status() const override;

  void init(std::function<void(PgInitialized)> done) override;
  void apply(const PgConfig& config, std::function<void(PgConfigApplied)> done) override;
  void fence(const std::optional<PeerIdentity>& newSync, std::function<void(PgFenced)> done) override;
  void readWal(std::function<void(WalPositionRead)> done) override;
  void startHealthCheck(std::function<void(bool, const std::string&)> onChange) override;
  void stopHealthCheck() override;
  // As the adapter's health check reports: no postmaster at all (crashed, killed, or
  // stopped), as opposed to one that is starting or reloading.
  bool postmasterGone() const override { return gone; }
  void stopWrites(std::function<void(Result<int>)> done) override;
  void resumeWrites(std::function<void(Result<bool>)> done) override;
  void shutDownWrites(std::function<void(Result<bool>)> done) override;
  void awaitUpstreamStop(int64_t timeoutMs, std::function<void(bool)> done) override;
  void rejoin(const PeerIdentity& primary, agent::RejoinPolicy policy,
              std::function<void(agent::RejoinFinished)> done) override;

  void write(LogLevel level, const std::string& line) override;

  // What the world needs to answer, exactly once.
  bool member = false;
  agent::CoordinatorCallbacks callbacks;
  uint64_t writeSerial = 0;
  std::function<void(StateWriteFinished)> pendingWrite;
  int64_t writeSince = 0;
  std::function<void(PgConfigApplied)> pendingApply;
  int transitions = 0;  // applies and fences in flight
  int64_t transitionSince = 0;
  int walReads = 0;
  int64_t walReadSince = 0;
  std::function<void(bool, const std::string&)> onHealth;
  uint64_t healthSerial = 0;
  int lastHealthy = -1;
  bool gone = false;  // the last health check found no postmaster
  std::string lastFatal;

 private:
  void beginTransition(const char* what);
  // Runs `fn` once the adapter's apply lock is free, holding it for `latency` ms;
  // nothing runs if the agent is gone.
  template <class F>
  void underApplyLock(int64_t latency, F fn);
  void pollUpstream(int64_t deadline, bool sawStream, std::function<void(bool)> done);
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
  // The agent's ZooKeeper client.
  uint64_t session = 0;          // 0: none
  bool zkReady = false;          // ZkInitialized was sent for this session
  bool connecting = false;
  bool partitioned = false;
  uint64_t partitionSerial = 0;
  bool needResync = false;       // missed notifications while partitioned
  bool lossReported = false;     // the client told the driver its connection was lost
  // When ZooKeeper last named it primary (a new primary in the state), and when the fault
  // scheduler last expired its session: an expiry that the client's silence did not
  // cause (in reality a pause of the whole agent), which the shutdown at
  // sessionTimeout/6 cannot guard against for the rest of that primaryship.
  int64_t becamePrimaryAt = -1;
  int64_t faultExpiredAt = -1;
  int64_t zkNextDelivery = 0;    // keeps what one client hears in order
  int64_t slowNotifyUntil = 0;
  int64_t slowNotifyMs = 0;
  SimPostgres pg;
};

struct ZkSession {
  int node = 0;
  bool alive = true;
  bool connected = true;
  uint64_t disconnects = 0;
};


class World {
  friend class NodeEnv;

 public:
  World(const Scenario& scenario, const WorldOptions& options)
      : sc_(scenario),
        opts_(options),
        checker_([this](const std::string& id, int64_t from, int64_t to) { return wasAbsent(id, from, to); },
                 options.checkTakeoverRules) {
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
      absences_[n.identity.id].push_back({0, kForever});
      nodes_.push_back(std::move(n));
    }
  }

  RunResult run();

 private:
  static constexpr int64_t kForever = INT64_MAX;

  // ---- event loop ----
  void at(int64_t t, simworld::Task fn) { q_.at(t, std::move(fn)); }
  void after(int64_t delay, simworld::Task fn) { q_.after(delay, std::move(fn)); }
  EpochMs wall() const { return sc_.start + now_; }
  // Traces a line built by `text` (a callable), only when the run keeps a trace: the
  // strings are never built for the seeds that pass unwatched.
  template <class Text>
  void trace(char kind, const Text& text) {
    if (opts_.trace) record(kind, text());
  }
  void record(char kind, std::string text);

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
  // Peers are named node<N> (N from 1); -1 for anything else.
  int nodeOf(const std::string& id) const {
    if (id.size() < 5 || id.compare(0, 4, "node") != 0) return -1;
    int n = 0;
    for (size_t i = 4; i < id.size(); ++i) {
      if (id[i] < '0' || id[i] > '9' || n > 1000) return -1;
      n = n * 10 + (id[i] - '0');
    }
    return n >= 1 && n <= static_cast<int>(nodes_.size()) ? n - 1 : -1;
  }

  // ---- ZooKeeper ----
  void connectZk(int n, uint64_t inc);
  void disconnectSession(uint64_t sid, const std::string& why);
  void expireSession(uint64_t sid, const std::string& why);
  void closeSessionOf(int n);
  void recomputeActive();
  PeerList activePeers() const;
  StateNode stateNode() const { return zk_.node(); }
  // Runs `fn` on n's client, after what the client heard before (per-client order).
  template <class F>
  void zkSchedule(int n, F fn);
  void zkDeliver(int n, Event ev);
  void answerWrite(int n, uint64_t serial, StateWriteFinished r);
  void notifyAll(bool state);
  void zkWrite(int n, uint64_t serial, const ClusterState& state, int32_t expectedVersion, const std::string& reason);
  StateWriteFinished cas(const std::string& writer, const std::string& data, int32_t expectedVersion,
                         int64_t issuedAt, std::optional<WalPosition> writerWal, const std::string& reason);
  void partition(int n, int64_t duration);
  void heal(int n);
  bool wasAbsent(const std::string& id, int64_t from, int64_t to) const;

  // ---- postgres ----
  void pgApply(int n, const PgConfig& cfg);
  void finishApply(int n, uint64_t inc, PgConfig cfg);
  void pgStop(int n);
  void cleanStop(int n);
  bool streamsFrom(int standby, int upstream) const;
  void hostileCommit(int n);
  void pgCrash(int n, int64_t brokenFor);
  void replicate();
  void healthCheck(int n, uint64_t inc, uint64_t serial);
  void schedulePoll(int n);
  void pollWritable(int n, uint64_t inc, uint64_t epoch);
  void crashAfterWrite(const std::string& writer);
  void crashPgAfterFence(int n);
  bool attachedSync(int primary) const;
  bool writable(int n) const;
  void clientTick();
  void ack(int n, const WalMark& mark);

  // ---- faults and operator ----
  void runFault(const Fault& f);
  void crashPeer(int n, int64_t downFor);
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
  std::vector<Node> nodes_;
  std::vector<TraceLine> trace_;
  uint64_t hash_ = 1469598103934665603ULL;

  // ZooKeeper server state.
  std::map<uint64_t, ZkSession> sessions_;
  simworld::ZkElection election_;
  uint64_t nextSession_ = 1;
  std::vector<int> active_;  // node indices in session order, one entry per peer
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> absences_;
  simworld::ZkStateNode zk_;
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
  };
  std::vector<CrashAfterFence> crashPgAfterFence_;

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
  nd.session = 0;
  nd.zkReady = false;
  nd.connecting = false;
  nd.lossReported = false;
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
  nd.driver = std::make_unique<agent::Driver>(agent::Env{*nd.env, *nd.env, *nd.env, *nd.env}, o);
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
  // The adapter's workers go with the agent: no transition, lock or poll is left.
  nd.pg.transitioning = false;
  nd.pg.reloading = false;
  nd.pg.promoting = false;
  nd.pg.writablePending = false;
  nd.pg.applyLockedUntil = 0;
  nd.pg.queryBusyUntil = 0;
  nd.pg.cannotFollowSince = -1;
  nd.pg.repairFor = false;
  nd.pg.repairing = false;
  nd.driver.reset();
  nd.env.reset();
  ++nd.incarnation;
  nd.zkReady = false;
  nd.connecting = false;
  if (nd.session != 0) {
    auto it = sessions_.find(nd.session);
    if (it != sessions_.end() && it->second.alive) disconnectSession(nd.session, "its client is gone");
    nd.session = 0;
  }
}

std::string World::describeEvent(const Event& ev) const {
  auto stateText = [this](const StateNode& s) -> std::string {
    if (!s.exists) return "none";
    auto it = summaryOfVersion_.find(s.version);
    return "v" + std::to_string(s.version) + (it == summaryOfVersion_.end() ? "" : " " + it->second);
  };
  auto peers = [](const PeerList& l) {
    std::string s = "[";
    for (size_t i = 0; i < l.size(); ++i) s += (i ? "," : "") + l[i].id;
    return s + "]";
  };
  return std::visit(
      Overloaded{
          [&](const ZkInitialized& e) { return "zk-initialized active " + peers(e.active) + " state " + stateText(e.state); },
          [&](const ActivePeersChanged& e) { return "active " + peers(e.active); },
          [&](const ClusterStateChanged& e) { return "state " + stateText(e.state); },
          [&](const PgInitialized& e) {
            return std::string("pg-initialized online=") + (e.online ? "1" : "0") + " setUp=" + (e.setUp ? "1" : "0");
          },
          [&](const PgConfigApplied& e) {
            return std::string("pg-applied ") + (e.ok ? "ok" : "error: " + e.error) + (e.online ? " online" : " offline");
          },
          [&](const PgFenced& e) { return std::string("pg-fenced ") + (e.ok ? "ok" : "error: " + e.error); },
          [&](const StateWriteFinished& e) {
            return e.ok ? "write ok v" + std::to_string(e.newVersion)
                        : "write failed: " + e.error + (e.lostRace ? " (lost race)" : "");
          },
          [&](const WalPositionRead& e) {
            return e.position ? "wal " + e.position->toString() : "wal error: " + e.error;
          },
          [&](const TimerFired& e) { return std::string("timer ") + timerName(e.id); },
      },
      ev);
}

std::string describeConfig(const PgConfig& c) {
  std::string s = pgRoleName(c.role);
  if (c.upstream) s += " from " + c.upstream->id;
  if (c.downstream) s += " sync " + c.downstream->id;
  if (c.restorePeer) s += " restore " + c.restorePeer->id;
  return s;
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

Result<bool> NodeEnv::join(agent::CoordinatorCallbacks cb) {
  callbacks = std::move(cb);
  member = true;
  Node& nd = w_.node(n_);
  nd.connecting = true;
  int n = n_;
  uint64_t inc = inc_;
  w_.after(w_.rngAgent_.between(20, 300), [&w = w_, n, inc] { w.connectZk(n, inc); });
  return true;
}

void NodeEnv::leave() {
  if (!member) return;
  member = false;
  callbacks = {};
  Node& nd = w_.node(n_);
  w_.trace('A', [&] { return std::string(nd.identity.id + " -> leave ZooKeeper"); });
  w_.closeSessionOf(n_);
  nd.connecting = false;
  nd.zkReady = false;
  if (pendingWrite) {
    uint64_t serial = writeSerial;
    post([this, n = n_, serial] { w_.answerWrite(n, serial, StateWriteFinished{false, "left ZooKeeper", false, -1}); });
  }
}

void NodeEnv::putClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                              std::function<void(StateWriteFinished)> done) {
  if (pendingWrite) w_.checker_.fail(w_.now_, "two-writes", w_.node(n_).identity.id + " wrote while a write was in flight");
  pendingWrite = std::move(done);
  writeSince = w_.now_;
  uint64_t serial = ++writeSerial;
  if (!member) {
    post([this, n = n_, serial] {
      w_.answerWrite(n, serial, StateWriteFinished{false, "not a member of the ZooKeeper cluster", false, -1});
    });
    return;
  }
  w_.zkWrite(n_, serial, state, expectedVersion, reason);
}

agent::CoordinatorStatus NodeEnv::status() const {
  const Node& nd = w_.node(n_);
  return agent::CoordinatorStatus{member, nd.session != 0 && !nd.partitioned, nd.zkReady,
                                  static_cast<int64_t>(nd.session), "", ""};
}

void NodeEnv::init(std::function<void(PgInitialized)> done) {
  int n = n_;
  uint64_t inc = inc_;
  w_.after(w_.rngAgent_.between(20, 300), [this, &w = w_, n, inc, done = std::move(done)] {
    if (!w.alive(n, inc)) return;
    PgInitialized e{w_.node(n).pg.running, w_.node(n).pg.setUp};
    w_.intoDriver(n, e, [&] { done(e); });
  });
}

// A peer never applies two postgres transitions at once (DESIGN.md): the world checks
// what the driver asks for.
void NodeEnv::beginTransition(const char* what) {
  if (transitions > 0) {
    w_.checker_.fail(w_.now_, "two-transitions",
                     w_.node(n_).identity.id + " asked postgres for a " + what + " while a transition was in flight");
  }
  ++transitions;
  transitionSince = w_.now_;
}

void NodeEnv::apply(const PgConfig& config, std::function<void(PgConfigApplied)> done) {
  beginTransition("reconfiguration");
  pendingApply = std::move(done);
  w_.pgApply(n_, config);
}

void NodeEnv::fence(const std::optional<PeerIdentity>& newSync, std::function<void(PgFenced)> done) {
  beginTransition("fence");
  const std::string& id = w_.node(n_).identity.id;
  w_.trace('A', [&] { return std::string(id + " -> fence" + (newSync ? " (commits wait for " + newSync->id + ")" : "")); });
  int n = n_;
  uint64_t inc = inc_;
  // The fence takes the apply lock (waiting for a poll that writes the configuration),
  // rewrites the configuration and reloads; the poll skips its turns meanwhile.
  SimPostgres& p = w_.node(n).pg;
  int64_t end = std::max(w_.now_, p.applyLockedUntil) + w_.rngPg_.between(2, 20);
  p.applyLockedUntil = end;
  w_.at(end, [this, &w = w_, n, inc, newSync, done = std::move(done)] {
    if (!w.alive(n, inc)) return;
    SimPostgres& pg = w_.node(n).pg;
    PgFenced r;
    if (pg.transitioning) {
      r.error = "postgres is in a transition";
    } else {
      r.ok = true;  // a stopped postgres acknowledges nothing
      r.instance = pg.running ? pg.instance : 0;
      if (pg.running && pg.config.role == PgRole::kPrimary) {
        // A reload: commits wait for it, and for the sync it had (kept when fenced again
        // for the same new sync).
        if (pg.config.downstream && newSync && pg.config.downstream->id != newSync->id) {
          pg.alsoSync = pg.config.downstream;
        } else if (!pg.config.downstream) {
          pg.alsoSync.reset();
        }
        pg.config.downstream = newSync;
        pg.writablePending = false;      // and it stays as writable as it is until the next apply
      } else if (pg.running && pg.isStandby()) {
        pg.config.upstream.reset();  // stops streaming
      }
    }
    --transitions;
    if (r.ok) w.crashPgAfterFence(n);
    w_.intoDriver(n, r, [&] { done(r); });
  });
}

void NodeEnv::readWal(std::function<void(WalPositionRead)> done) {
  w_.trace('A', [&] { return std::string(w_.node(n_).identity.id + " -> read WAL"); });
  ++walReads;
  walReadSince = w_.now_;
  int n = n_;
  uint64_t inc = inc_;
  // On the adapter's query worker, after whatever it is doing (a poll's write).
  SimPostgres& p = w_.node(n).pg;
  int64_t end = std::max(w_.now_, p.queryBusyUntil) + w_.rngPg_.between(2, 20);
  p.queryBusyUntil = end;
  w_.at(end, [this, &w = w_, n, inc, done = std::move(done)] {
    if (!w.alive(n, inc)) return;
    const SimPostgres& pg = w_.node(n).pg;
    WalPositionRead r;
    if (pg.serving()) {
      r.position = pg.wal.position();
      r.instance = pg.instance;
    } else {
      r.error = "postgres is not running";
    }
    --walReads;
    w_.intoDriver(n, r, [&] { done(r); });
  });
}

void NodeEnv::startHealthCheck(std::function<void(bool, const std::string&)> onChange) {
  onHealth = std::move(onChange);
  lastHealthy = -1;
  uint64_t serial = ++healthSerial;
  int n = n_;
  uint64_t inc = inc_;
  w_.after(0, [&w = w_, n, inc, serial] { w.healthCheck(n, inc, serial); });
}

void NodeEnv::stopHealthCheck() {
  onHealth = nullptr;
  ++healthSerial;
}

template <class F>
void NodeEnv::underApplyLock(int64_t latency, F fn) {
  SimPostgres& p = w_.node(n_).pg;
  const int64_t end = std::max(w_.now_, p.applyLockedUntil) + latency;
  p.applyLockedUntil = end;
  int n = n_;
  uint64_t inc = inc_;
  w_.at(end, [&w = w_, n, inc, fn = std::move(fn)] {
    if (w.alive(n, inc)) fn();
  });
}

// The adapter's stopWrites: under the apply lock, a running primary's new sessions
// become read-only and every client session is terminated (commits waiting for the
// sync fail: never acknowledged).
void NodeEnv::stopWrites(std::function<void(Result<int>)> done) {
  w_.trace('A', [&] { return std::string(w_.node(n_).identity.id + " -> stop writes"); });
  underApplyLock(w_.rngPg_.between(5, 60), [this, done = std::move(done)] {
    SimPostgres& pg = w_.node(n_).pg;
    int terminated = 0;
    if (pg.serving() && pg.config.role == PgRole::kPrimary) {
      pg.writesStopped = true;
      terminated = static_cast<int>(pg.waiting.size());
      pg.waiting.clear();
      w_.trace('P', [&] { return std::string(w_.node(n_).identity.id + " postgres: writes stopped"); });
    }
    done(terminated);
  });
}

void NodeEnv::resumeWrites(std::function<void(Result<bool>)> done) {
  w_.trace('A', [&] { return std::string(w_.node(n_).identity.id + " -> resume writes"); });
  underApplyLock(w_.rngPg_.between(5, 60), [this, done = std::move(done)] {
    SimPostgres& pg = w_.node(n_).pg;
    if (pg.writesStopped) w_.trace('P', [&] { return std::string(w_.node(n_).identity.id + " postgres: writes resumed"); });
    pg.writesStopped = false;
    done(true);
  });
}

// The adapter's shutDownWrites: a running primary is stopped (pg_ctl stop -m fast: its
// client sessions go at once, its walsenders send what they have first).
void NodeEnv::shutDownWrites(std::function<void(Result<bool>)> done) {
  w_.trace('A', [&] { return std::string(w_.node(n_).identity.id + " -> shut postgres down"); });
  SimPostgres& p = w_.node(n_).pg;
  const int64_t start = std::max(w_.now_, p.applyLockedUntil);
  const int64_t latency = w_.rngPg_.between(80, 900);
  p.applyLockedUntil = start + latency;
  int n = n_;
  uint64_t inc = inc_;
  w_.at(start, [&w = w_, n, inc] {
    SimPostgres& pg = w.node(n).pg;
    if (!w.alive(n, inc) || !pg.serving() || pg.config.role != PgRole::kPrimary) return;
    pg.writesStopped = true;
    w.trace('P', [&] { return std::string(w.node(n).identity.id + " postgres shuts down: writes stopped for good"); });
    w.cleanStop(n);
  });
  w_.at(start + latency, [&w = w_, n, inc, done = std::move(done)] {
    if (w.alive(n, inc)) done(true);
  });
}

// The adapter's awaitUpstreamStop: polls its WAL receiver; true once a stream it saw
// has ended (its upstream stopped, after sending all of its WAL), false when there was
// no stream, or still one at the deadline.
void NodeEnv::awaitUpstreamStop(int64_t timeoutMs, std::function<void(bool)> done) {
  w_.trace('A', [&] { return std::string(w_.node(n_).identity.id + " -> wait for the upstream's WAL stream to end"); });
  pollUpstream(w_.now_ + timeoutMs, false, std::move(done));
}

void NodeEnv::pollUpstream(int64_t deadline, bool sawStream, std::function<void(bool)> done) {
  int n = n_;
  uint64_t inc = inc_;
  w_.after(w_.rngPg_.between(2, 10), [this, &w = w_, n, inc, deadline, sawStream, done = std::move(done)]() mutable {
    if (!w.alive(n, inc)) return;
    const SimPostgres& pg = w.node(n).pg;
    if (!pg.serving() || !pg.isStandby()) {
      w.trace('P', [&] { return std::string(w.node(n).identity.id + " not waiting for the upstream: not a standby"); });
      return done(false);
    }
    const int u = pg.config.upstream ? w.nodeOf(pg.config.upstream->id) : -1;
    const bool streaming = u >= 0 && w.streamsFrom(n, u);
    if (!streaming) {
      w.trace('P', [&] {
        return std::string(w.node(n).identity.id + (sawStream ? " the upstream's WAL stream ended"
                                                              : " not waiting for the upstream: no WAL stream"));
      });
      return done(sawStream);
    }
    if (w.now_ >= deadline) return done(false);
    w.after(kUpstreamPollMs, [this, &w, n, inc, deadline, done = std::move(done)]() mutable {
      if (w.alive(n, inc)) pollUpstream(deadline, true, std::move(done));
    });
  });
}

// The adapter's rejoin (pg/controller.cc): under the apply lock, the stopped ex-primary
// becomes an async standby of `primary` without a copy: as it is when its WAL is a
// prefix of the primary's (pg_rewind's "no rewind required"), rewound with kRewind;
// otherwise nothing changes.
void NodeEnv::rejoin(const PeerIdentity& primary, agent::RejoinPolicy policy,
                     std::function<void(agent::RejoinFinished)> done) {
  beginTransition("rejoin");
  w_.trace('A', [&] { return std::string(w_.node(n_).identity.id + " -> rejoin as a standby of " + primary.id); });
  underApplyLock(w_.rngPg_.between(300, 1500), [this, primary, policy, done = std::move(done)] {
    Node& nd = w_.node(n_);
    SimPostgres& pg = nd.pg;
    --transitions;
    agent::RejoinFinished r;
    const int p = w_.nodeOf(primary.id);
    if (!pg.setUp) {
      r.error = "the data directory is not set up";
    } else if (pg.running || pg.transitioning) {
      r.error = "postgres is running";
    } else if (p < 0 || !w_.node(p).pg.running) {
      r.error = "cannot reach " + primary.id + " to compare with";
    } else {
      const Wal& source = w_.node(p).pg.wal;
      const bool follows = !pg.wal.divergedFrom(source) && pg.wal.size() <= source.size();
      if (!follows && policy != agent::RejoinPolicy::kRewind) {
        r.error = "it cannot follow without discarding WAL";
      } else {
        if (!follows) {
          r.rewound = true;
          r.discarded = std::to_string(pg.wal.rewindTo(source)) + " records";
        }
        pg.config = PgConfig::standby(PgRole::kAsync, primary, primary);
        pg.running = true;
        pg.standbySignal = true;
        pg.readOnly = true;
        pg.writesStopped = false;
        pg.writablePending = false;
        pg.waiting.clear();
        pg.cannotFollowSince = -1;
        ++pg.instance;
        ++pg.epoch;
        r.ok = true;
      }
    }
    w_.trace('P', [&] {
      return std::string(nd.identity.id + " postgres rejoin " + (r.ok ? "done" : "refused: " + r.error) +
                         (r.rewound ? " (rewound, " + r.discarded + " discarded)" : ""));
    });
    done(r);
  });
}

// The pg adapter's health check: SELECT 1 every health interval; the driver hears of
// the first result and of every change.
void World::healthCheck(int n, uint64_t inc, uint64_t serial) {
  if (!alive(n, inc) || node(n).env->healthSerial != serial) return;
  NodeEnv& env = *node(n).env;
  SimPostgres& pg = node(n).pg;
  // A standby that has not streamed for repairStandbyAfter, with its log saying why it
  // cannot, is unhealthy: the driver's health restart then repairs it.
  const bool cannotFollow = pg.serving() && pg.isStandby() && pg.cannotFollowSince >= 0 &&
                            now_ - pg.cannotFollowSince >= kRepairAfterMs;
  if (cannotFollow) pg.repairFor = true;
  const bool healthy = pg.serving() && !cannotFollow;
  const bool gone = !pg.running && !pg.transitioning;
  const bool goneNow = gone && !env.gone;  // reported again, as the adapter does
  env.gone = gone;
  after(kHealthIntervalMs, [this, n, inc, serial] { healthCheck(n, inc, serial); });
  if (env.lastHealthy == static_cast<int>(healthy) && !goneNow) return;
  env.lastHealthy = healthy;
  trace('P', [&] {
    return std::string(node(n).identity.id + " health check: postgres " +
                       (healthy ? "answers" : cannotFollow ? "cannot follow its upstream" : "does not answer"));
  });
  env.onHealth(healthy, healthy ? "" : cannotFollow ? "this standby cannot follow its upstream" : "postgres is not running");
}

// ---------------------------------------------------------------- ZooKeeper

void World::connectZk(int n, uint64_t inc) {
  if (!alive(n, inc) || !node(n).env->member) return;
  Node& nd = node(n);
  if (nd.partitioned) {  // cannot reach the ensemble: keep trying
    after(500, [this, n, inc] { connectZk(n, inc); });
    return;
  }
  nd.connecting = false;
  uint64_t sid = nextSession_++;
  sessions_[sid] = ZkSession{n, true, true, 0};
  nd.session = sid;
  nd.needResync = false;
  uint64_t seq = election_.join(sid, nd.identity.id);
  trace('Z', [&] { return std::string(nd.identity.id + " session " + std::to_string(sid) + " established, election node " +
                 std::to_string(seq)); });
  recomputeActive();
  nd.zkReady = true;
  zkDeliver(n, ZkInitialized{stateNode(), activePeers()});
}

// The session's client stopped talking to ZooKeeper: unless it reconnects, the server
// expires the session after its timeout.
void World::disconnectSession(uint64_t sid, const std::string& why) {
  ZkSession& s = sessions_.at(sid);
  s.connected = false;
  uint64_t d = ++s.disconnects;
  after(sc_.sessionTimeoutMs, [this, sid, d, why] {
    auto i = sessions_.find(sid);
    if (i != sessions_.end() && i->second.alive && !i->second.connected && i->second.disconnects == d) {
      expireSession(sid, why);
    }
  });
}

void World::expireSession(uint64_t sid, const std::string& why) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end() || !it->second.alive) return;
  it->second.alive = false;
  int n = it->second.node;
  trace('Z', [&] { return std::string(node(n).identity.id + " session " + std::to_string(sid) + " expired (" + why + ")"); });
  election_.leave(sid);
  recomputeActive();
  Node& nd = node(n);
  if (nd.up && nd.session == sid) {
    nd.zkReady = false;
    if (!nd.partitioned) {  // the client hears of it at once and starts a new session
      uint64_t inc = nd.incarnation;
      after(rngZk_.between(5, 60), [this, n, inc, sid] {
        if (!alive(n, inc) || node(n).session != sid) return;
        node(n).session = 0;
        node(n).connecting = true;
        after(rngZk_.between(20, 200), [this, n, inc] { connectZk(n, inc); });
      });
    }
  }
}

void World::closeSessionOf(int n) {
  Node& nd = node(n);
  if (nd.session == 0) return;
  auto it = sessions_.find(nd.session);
  if (it != sessions_.end() && it->second.alive) {
    it->second.alive = false;
    trace('Z', [&] { return std::string(nd.identity.id + " session " + std::to_string(nd.session) + " closed"); });
    uint64_t sid = nd.session;
    election_.leave(sid);
    recomputeActive();
  }
  nd.session = 0;
}

void World::recomputeActive() {
  std::vector<int> next;
  for (const std::string& id : election_.active()) next.push_back(nodeOf(id));
  if (next == active_) return;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    bool was = std::find(active_.begin(), active_.end(), n) != active_.end();
    bool is = std::find(next.begin(), next.end(), n) != next.end();
    auto& intervals = absences_[node(n).identity.id];
    if (was && !is) intervals.push_back({now_, kForever});
    if (!was && is) intervals.back().second = now_;
  }
  active_ = std::move(next);
  std::string s = "active [";
  for (size_t i = 0; i < active_.size(); ++i) s += (i ? "," : "") + node(active_[i]).identity.id;
  trace('Z', [&] { return std::string(s + "]"); });
  notifyAll(false);
}

PeerList World::activePeers() const {
  PeerList l;
  for (int n : active_) l.push_back(node(n).identity);
  return l;
}

bool World::wasAbsent(const std::string& id, int64_t from, int64_t to) const {
  auto it = absences_.find(id);
  if (it == absences_.end()) return true;
  for (const auto& [a, b] : it->second) {
    if (a <= to && b > from) return true;
  }
  return false;
}

template <class F>
void World::zkSchedule(int n, F fn) {
  Node& nd = node(n);
  int64_t delay = rngZk_.between(1, 30);
  if (now_ < nd.slowNotifyUntil) delay += nd.slowNotifyMs;
  int64_t t = std::max(now_ + delay, nd.zkNextDelivery);
  nd.zkNextDelivery = t;
  uint64_t inc = nd.incarnation;
  at(t, [this, n, inc, fn = std::move(fn)] {
    if (alive(n, inc)) fn();
  });
}

void World::zkDeliver(int n, Event ev) {
  uint64_t sid = node(n).session;
  zkSchedule(n, [this, n, sid, e = std::move(ev)] {
    NodeEnv& env = *node(n).env;
    if (node(n).session != sid || !env.member) return;
    intoDriver(n, e, [&] { env.callbacks.onEvent(e); });
  });
}

void World::answerWrite(int n, uint64_t serial, StateWriteFinished r) {
  if (!node(n).up) return;
  NodeEnv& env = *node(n).env;
  if (env.writeSerial != serial || !env.pendingWrite) return;
  auto done = std::move(env.pendingWrite);
  env.pendingWrite = nullptr;
  intoDriver(n, r, [&] { done(r); });
}

void World::notifyAll(bool state) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    Node& nd = node(n);
    if (!nd.up || !nd.zkReady || nd.session == 0) continue;
    if (nd.partitioned) {
      nd.needResync = true;
      continue;
    }
    if (state) {
      zkDeliver(n, ClusterStateChanged{stateNode()});
    } else {
      zkDeliver(n, ActivePeersChanged{activePeers()});
    }
  }
}

void World::zkWrite(int n, uint64_t serial, const ClusterState& state, int32_t expectedVersion,
                    const std::string& reason) {
  Node& nd = node(n);
  trace('A', [&] { return std::string(nd.identity.id + " -> write generation " + std::to_string(state.generation) + " expecting v" +
                 std::to_string(expectedVersion) + ": " + reason); });
  uint64_t sid = nd.session;
  int64_t issued = now_;
  WalPosition wal = nd.pg.wal.position();
  auto sit = sessions_.find(sid);
  bool sessionAlive = sit != sessions_.end() && sit->second.alive;
  if (!sessionAlive || nd.partitioned) {
    StateWriteFinished r{false, sessionAlive ? "connection loss" : "session expired", false, -1};
    zkSchedule(n, [this, n, serial, r] { answerWrite(n, serial, r); });
    return;
  }
  std::string data = state.serialize();
  std::string writer = nd.identity.id;
  // Most writes reach the leader in milliseconds; some wait behind a slow quorum (a
  // disk sync, a leader election) while the writer's postgres goes on.
  int64_t toServer = rngZk_.chance(50) ? rngZk_.between(100, 1500) : rngZk_.between(2, 25);
  after(toServer, [this, n, serial, sid, issued, wal, data, expectedVersion, reason, writer] {
    auto it = sessions_.find(sid);
    // A request sent just before a partition may or may not have reached the server.
    bool reached = it != sessions_.end() && it->second.alive && (it->second.connected || rngZk_.chance(500));
    StateWriteFinished res{false, "connection loss", false, -1};
    if (reached) res = cas(writer, data, expectedVersion, issued, wal, reason);
    after(rngZk_.between(2, 25), [this, n, serial, sid, res] {
      if (!node(n).up) return;
      StateWriteFinished r = res;
      auto i = sessions_.find(sid);
      if (node(n).session != sid || i == sessions_.end() || !i->second.alive) {
        r = StateWriteFinished{false, "session expired", false, -1};
      } else if (node(n).partitioned) {
        r = StateWriteFinished{false, "connection loss", false, -1};  // it may have been applied
      }
      zkSchedule(n, [this, n, serial, r] { answerWrite(n, serial, r); });
    });
  });
}

StateWriteFinished World::cas(const std::string& writer, const std::string& data, int32_t expectedVersion,
                              int64_t issuedAt, std::optional<WalPosition> writerWal, const std::string& reason) {
  if (!zk_.accepts(expectedVersion)) {
    trace('Z', [&] { return std::string("write by " + writer + " expecting v" + std::to_string(expectedVersion) + " lost the race (at v" +
                   std::to_string(zk_.version()) + ")"); });
    return StateWriteFinished{false, "bad version", true, -1};
  }
  auto parsed = ClusterState::parse(data);
  if (!parsed) {
    checker_.fail(now_, "invalid-write", writer + " wrote an invalid cluster state: " + parsed.error());
    return StateWriteFinished{false, "invalid", false, -1};
  }
  StateWrite sw{now_, issuedAt, writer, state_, parsed.value(), writerWal};
  zk_.put(data);
  state_ = std::move(parsed).value();
  primaryOfGeneration_.emplace(state_->generation, state_->primary.id);
  const int previousPrimary = statePrimary_;
  statePrimary_ = nodeOf(state_->primary.id);
  if (statePrimary_ >= 0 && statePrimary_ != previousPrimary) node(statePrimary_).becamePrimaryAt = now_;
  std::string summary;
  if (opts_.trace) {
    summary = summarizeState(*state_).dump();
    summaryOfVersion_[zk_.version()] = summary;
  }
  trace('Z', [&] { return std::string("state v" + std::to_string(zk_.version()) + " written by " + writer + ": " + summary + " (" + reason +
                 ")"); });
  bool newGeneration = !sw.before || sw.before->generation != state_->generation;
  checker_.onStateWrite(sw);
  notifyAll(true);
  if (newGeneration && sw.before && sw.before->hasPromote()) promotedGenerations_.insert(state_->generation);
  if (newGeneration) crashAfterWrite(writer);
  return StateWriteFinished{true, "", false, zk_.version()};
}

void World::partition(int n, int64_t duration) {
  Node& nd = node(n);
  if (nd.partitioned) return;
  nd.partitioned = true;
  uint64_t serial = ++nd.partitionSerial;
  trace('F', [&] { return std::string(nd.identity.id + " cut off from ZooKeeper for " + std::to_string(duration) + " ms"); });
  auto it = sessions_.find(nd.session);
  if (nd.session != 0 && it != sessions_.end() && it->second.alive) {
    disconnectSession(nd.session, "no heartbeat within the session timeout");
    // ZooKeeper's client reports the lost connection once the server has been silent
    // for 2/3 of the session timeout (CoordinatorConnection).
    uint64_t sid = nd.session;
    uint64_t inc = nd.incarnation;
    after(sc_.sessionTimeoutMs * 2 / 3, [this, n, inc, serial, sid] {
      Node& x = node(n);
      if (!alive(n, inc) || x.partitionSerial != serial || x.session != sid || !x.zkReady || !x.env->member) return;
      x.lossReported = true;
      trace('Z', [&] { return std::string(x.identity.id + " client: connection to ZooKeeper lost"); });
      x.env->callbacks.onConnection(agent::CoordinatorConnection{false, static_cast<int64_t>(sid), sc_.sessionTimeoutMs});
    });
  }
  after(duration, [this, n, serial] {
    if (node(n).partitionSerial == serial) heal(n);
  });
}

void World::heal(int n) {
  Node& nd = node(n);
  if (!nd.partitioned) return;
  nd.partitioned = false;
  ++nd.partitionSerial;
  trace('F', [&] { return std::string(nd.identity.id + " reaches ZooKeeper again"); });
  if (!nd.up) return;
  auto it = sessions_.find(nd.session);
  if (nd.session != 0 && it != sessions_.end() && it->second.alive) {
    it->second.connected = true;
    ++it->second.disconnects;
    if (std::exchange(nd.lossReported, false) && nd.env->member) {
      uint64_t sid = nd.session;
      zkSchedule(n, [this, n, sid] {
        Node& x = node(n);
        if (x.session != sid || !x.env->member) return;
        trace('Z', [&] { return std::string(x.identity.id + " client: connected again, same session"); });
        x.env->callbacks.onConnection(agent::CoordinatorConnection{true, static_cast<int64_t>(sid), sc_.sessionTimeoutMs});
      });
    }
    if (nd.needResync && nd.zkReady) {  // the watches fire for what changed meanwhile
      nd.needResync = false;
      zkDeliver(n, ActivePeersChanged{activePeers()});
      zkDeliver(n, ClusterStateChanged{stateNode()});
    }
    return;
  }
  if (nd.connecting || !nd.env->member) return;  // its retry loop reconnects, or it left
  // The session expired while cut off: the client learns it now and starts a new one.
  uint64_t inc = nd.incarnation;
  nd.session = 0;
  nd.zkReady = false;
  nd.connecting = true;
  after(rngZk_.between(20, 200), [this, n, inc] { connectZk(n, inc); });
}

// ---------------------------------------------------------------- postgres

void World::pgApply(int n, const PgConfig& cfg) {
  Node& nd = node(n);
  SimPostgres& pg = nd.pg;
  trace('A', [&] { return std::string(nd.identity.id + " -> apply postgres " + describeConfig(cfg)); });
  if (now_ < pg.applyLockedUntil) {  // the poll is writing the configuration: wait for the apply lock
    uint64_t inc = nd.incarnation;
    at(pg.applyLockedUntil, [this, n, inc, cfg] {
      if (alive(n, inc)) pgApply(n, cfg);
    });
    return;
  }
  // A new synchronous standby of a primary, or a new upstream of a running standby, is
  // a reload; a running standby is promoted without a restart (it serves reads and,
  // until the reload that clears its upstream, streams meanwhile); anything else
  // restarts.
  // A standby apply after the health check found that it cannot follow repairs it:
  // stop, pg_rewind (else pg_basebackup), start; the adapter forgets the repair either way.
  const bool standbyRole = cfg.role == PgRole::kSync || cfg.role == PgRole::kAsync;
  pg.repairing = standbyRole && std::exchange(pg.repairFor, false);
  bool reload = pg.serving() && !pg.repairing &&
                ((pg.config.role == PgRole::kPrimary && cfg.role == PgRole::kPrimary) ||
                 (pg.isStandby() && standbyRole));
  bool promotion = pg.serving() && pg.isStandby() && cfg.role == PgRole::kPrimary;
  // What the adapter leaves (applyPrimary): read-only until the sync caught up, unless
  // it was a writable primary and is not in recovery.
  bool inRecovery = pg.serving() ? pg.isStandby() : pg.standbySignal;
  bool wasWritablePrimary = pg.config.role == PgRole::kPrimary && !pg.readOnly;
  pg.applyReadOnly = cfg.downstream.has_value() && (inRecovery || !wasWritablePrimary);
  pg.writablePending = false;
  pg.transitioning = true;
  pg.reloading = reload || promotion;
  pg.promoting = promotion;
  pg.crashedInTransition = false;
  uint64_t epoch = ++pg.epoch;
  uint64_t inc = nd.incarnation;
  if (!reload && !promotion) {  // restart: stops serving and streaming now
    cleanStop(n);
  }
  if (promotion) {
    after(rngPg_.between(5, 40), [this, n, inc, epoch] {
      SimPostgres& p = node(n).pg;
      if (!alive(n, inc) || p.epoch != epoch || !p.config.upstream) return;
      p.config.upstream.reset();
      trace('P', [&] { return std::string(node(n).identity.id + " postgres stops streaming: promoting"); });
    });
  }
  if (cfg.role == PgRole::kPrimary && nd.driver->peer().clusterState()) {
    pg.generationTag = nd.driver->peer().clusterState()->generation;
  }
  // A reload (new synchronous standby) takes milliseconds; a restart or a promotion
  // takes longer. The apply holds the apply lock throughout.
  bool slow = now_ < pg.slowUntil;
  int64_t latency = reload ? (slow ? rngPg_.between(200, 1500) : rngPg_.between(5, 60))
                           : (slow ? rngPg_.between(1500, 7000) : rngPg_.between(80, 900));
  pg.applyLockedUntil = now_ + latency;
  after(latency, [this, n, inc, cfg] { finishApply(n, inc, cfg); });
}

void World::finishApply(int n, uint64_t inc, PgConfig cfg) {
  if (!alive(n, inc)) return;  // the agent died, and postgres with it
  Node& nd = node(n);
  SimPostgres& pg = nd.pg;
  bool reload = pg.reloading && !pg.promoting;
  pg.transitioning = false;
  pg.reloading = false;
  pg.promoting = false;
  std::string error;
  if (pg.crashedInTransition) {
    error = "postgres crashed during the transition";
  } else if (cfg.role != PgRole::kNone && now_ < pg.brokenUntil) {
    error = "postgres would not start";
  } else if (cfg.role == PgRole::kPrimary) {
    if (!pg.setUp) {
      pg.setUp = true;
      trace('P', [&] { return std::string(nd.identity.id + " postgres: initdb"); });
    }
  } else if (cfg.role != PgRole::kNone && !reload) {
    // What the pg adapter does for a standby that is not running as one (applyStandby):
    // no data directory: pg_basebackup from the restore peer; one that last ran as a
    // primary, or a standby being repaired: pg_rewind from the restore peer when it
    // diverged from it (or is ahead of it: without timelines in this model, a promoted
    // peer behind it forked there); a data directory that last ran as a standby is
    // started as it is.
    const PeerIdentity* from = cfg.restorePeer ? &*cfg.restorePeer : (cfg.upstream ? &*cfg.upstream : nullptr);
    int restore = nodeOf(from ? from->id : "");
    bool running = restore >= 0 && node(restore).pg.running;
    bool mayHaveDiverged = pg.setUp && (!pg.standbySignal || pg.repairing);
    if (!pg.setUp || mayHaveDiverged) {
      const Wal* source = running ? &node(restore).pg.wal : nullptr;
      if (!source) {
        error = std::string("no usable data directory") + (pg.setUp ? " (it may not follow)" : "") +
                " and the restore peer is not running";
      } else if (!pg.setUp) {
        pg.wal = *source;
        pg.setUp = true;
        trace('P', [&] { return std::string(nd.identity.id + " postgres rebuilt from " + node(restore).identity.id + " (" +
                       std::to_string(pg.wal.size()) + " records)"); });
      } else if (pg.wal.divergedFrom(*source) || pg.wal.size() > source->size()) {
        size_t discarded = pg.wal.rewindTo(*source);
        trace('P', [&] { return std::string(nd.identity.id + " postgres rewound to follow " + node(restore).identity.id + " (" +
                       std::to_string(discarded) + " records discarded" + (pg.repairing ? ", a repair" : "") + ")"); });
      }
    }
  }
  pg.repairing = false;
  if (cfg.role != PgRole::kNone && !reload) pg.cannotFollowSince = -1;
  NodeEnv& env = *nd.env;
  --env.transitions;
  auto done = std::move(env.pendingApply);
  env.pendingApply = nullptr;
  if (!error.empty()) {
    pg.running = false;
    pg.waiting.clear();
    trace('P', [&] { return std::string(nd.identity.id + " postgres transition to " + pgRoleName(cfg.role) + " failed: " + error); });
    PgConfigApplied r{false, error, false};
    intoDriver(n, r, [&] { done(r); });
    return;
  }
  pg.config = cfg;
  pg.alsoSync.reset();
  pg.running = cfg.role != PgRole::kNone;
  pg.writesStopped = false;  // the apply rewrote the managed configuration
  pg.readOnly = cfg.role != PgRole::kPrimary || pg.applyReadOnly;
  if (cfg.role == PgRole::kPrimary && pg.readOnly) {
    pg.writablePending = true;
    pg.pendingSync = cfg.downstream->id;
    pg.pendingTarget.reset();
    schedulePoll(n);
  }
  if (cfg.role == PgRole::kPrimary) pg.standbySignal = false;
  if (cfg.role == PgRole::kSync || cfg.role == PgRole::kAsync) pg.standbySignal = true;
  trace('P', [&] { return std::string(nd.identity.id + " postgres now " + describeConfig(cfg) + (pg.running ? ", running" : ", stopped") +
                 ", WAL " + std::to_string(pg.wal.size())); });
  PgConfigApplied r{true, "", pg.running};
  intoDriver(n, r, [&] { done(r); });
}

// A clean stop of postgres (pg_ctl stop -m fast): client sessions go at once, the
// walsenders first send all WAL to the standbys streaming from it.
void World::cleanStop(int n) {
  SimPostgres& pg = node(n).pg;
  if (pg.serving() && pg.config.role == PgRole::kPrimary) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      int s = static_cast<int>(i);
      if (s != n && now_ >= node(s).pg.stalledUntil && streamsFrom(s, n)) node(s).pg.wal.copyFrom(pg.wal, SIZE_MAX);
    }
  }
  pg.running = false;
  pg.waiting.clear();
  ++pg.instance;
}

// A standby's WAL receiver streams from `upstream`.
bool World::streamsFrom(int standby, int upstream) const {
  const SimPostgres& s = node(standby).pg;
  const SimPostgres& u = node(upstream).pg;
  return s.serving() && s.isStandby() && s.config.upstream && s.config.upstream->id == node(upstream).identity.id &&
         u.serving() && !s.wal.divergedFrom(u.wal);
}

void World::pgStop(int n) {
  SimPostgres& pg = node(n).pg;
  pg.running = false;
  if (pg.transitioning) pg.crashedInTransition = true;
  pg.waiting.clear();
  ++pg.epoch;
  ++pg.instance;
}

// Postgres dies and cannot start again for `brokenFor` (e.g. its port is held): only
// the agent's health logic restarts it.
// The adapter's writable poll (pg/controller.cc pollWritable), every writablePollInterval
// on the query worker while a primary waits for its sync to catch up. It skips its turn
// while a fence or an apply holds the apply lock; its write of the configuration holds
// the lock (a fence or an apply started meanwhile waits for it).
void World::schedulePoll(int n) {
  SimPostgres& pg = node(n).pg;
  if (pg.pollScheduled) return;
  pg.pollScheduled = true;
  uint64_t inc = node(n).incarnation;
  after(kWritablePollMs, [this, n, inc] {
    SimPostgres& p = node(n).pg;
    p.pollScheduled = false;
    if (alive(n, inc)) pollWritable(n, inc, p.epoch);
  });
}

void World::pollWritable(int n, uint64_t inc, uint64_t epoch) {
  SimPostgres& pg = node(n).pg;
  if (!pg.writablePending) return;
  if (now_ < pg.applyLockedUntil || pg.transitioning || !pg.serving() || pg.config.role != PgRole::kPrimary) {
    return schedulePoll(n);
  }
  int s = nodeOf(pg.pendingSync);
  bool streams = s >= 0 && pg.config.downstream && pg.config.downstream->id == pg.pendingSync && attachedSync(n);
  if (!streams) return schedulePoll(n);
  if (!pg.pendingTarget) pg.pendingTarget = pg.wal.size();
  if (node(s).pg.wal.size() < *pg.pendingTarget) return schedulePoll(n);
  int64_t end = std::max(now_, pg.queryBusyUntil) + rngPg_.between(5, 60);
  pg.applyLockedUntil = end;
  pg.queryBusyUntil = end;
  at(end, [this, n, inc, epoch] {
    SimPostgres& p = node(n).pg;
    if (!alive(n, inc) || p.epoch != epoch || !p.writablePending) return;
    p.writablePending = false;
    p.readOnly = false;
    trace('P', [&] { return std::string(node(n).identity.id + " postgres writable: its sync " + p.pendingSync + " has caught up"); });
  });
}

void World::pgCrash(int n, int64_t brokenFor) {
  Node& nd = node(n);
  if (!nd.pg.running && !nd.pg.transitioning) return;
  trace('F', [&] { return std::string(nd.identity.id + " postgres crashes; it cannot start for " + std::to_string(brokenFor) + " ms"); });
  pgStop(n);
  nd.pg.brokenUntil = now_ + brokenFor;
}

bool World::attachedSync(int primary) const {
  const SimPostgres& p = node(primary).pg;
  if (!p.config.downstream) return false;
  int d = nodeOf(p.config.downstream->id);
  return d >= 0 && streamsFrom(d, primary);
}

bool World::writable(int n) const {
  const Node& nd = node(n);
  const SimPostgres& pg = nd.pg;
  // Commits are accepted whenever the adapter made it writable; they wait for the sync.
  return nd.up && pg.serving() && !pg.promoting && pg.config.role == PgRole::kPrimary && !pg.readOnly &&
         !pg.writesStopped;
}

void World::replicate() {
  // Standbys receive WAL from their upstreams.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& nd = nodes_[i];
    SimPostgres& pg = nd.pg;
    if (!pg.serving() || !pg.isStandby() || !pg.config.upstream || now_ < pg.stalledUntil) continue;
    int u = nodeOf(pg.config.upstream->id);
    if (u < 0 || !node(u).pg.serving()) continue;
    const Wal& up = node(u).pg.wal;
    // A standby that diverged from its upstream cannot follow it (its log says so);
    // the adapter's health check notices (healthCheck).
    if (pg.wal.divergedFrom(up)) {
      if (pg.cannotFollowSince < 0) pg.cannotFollowSince = now_;
      continue;
    }
    pg.cannotFollowSince = -1;
    if (up.size() <= pg.wal.size()) continue;
    size_t max = pg.config.role == PgRole::kSync ? (rngPg_.chance(900) ? SIZE_MAX : 1)
                                                 : static_cast<size_t>(rngPg_.between(0, 6));
    pg.wal.copyFrom(up, max);
  }
  // Primaries acknowledge what their sync has.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    SimPostgres& pg = node(n).pg;
    if (pg.waiting.empty() || !node(n).up || !pg.serving() || pg.config.role != PgRole::kPrimary) continue;
    size_t acked = 0;
    if (pg.config.downstream && attachedSync(n)) {
      const Wal& sync = node(nodeOf(pg.config.downstream->id)).pg.wal;
      while (acked < pg.waiting.size() && sync.contains(pg.waiting[acked])) ++acked;
      if (pg.alsoSync) {  // fenced: the sync it had must have it too
        int also = nodeOf(pg.alsoSync->id);
        if (also < 0 || !streamsFrom(also, n)) {
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
      hostileCommit(n);
      continue;
    }
    if (!writable(n) || !rngClient_.chance(600)) continue;
    uint64_t id = ++nextCommit_;
    WalMark m = node(n).pg.wal.append(id);
    node(n).pg.waiting.push_back(m);
    trace('C', [&] { return std::string("commit c" + std::to_string(id) + " on " + node(n).identity.id); });
  }
}

// What stopped writes leave open: a session that says BEGIN READ WRITE with
// synchronous_commit = local commits, acknowledged without any standby. The agent shuts
// such a primary down before its session can expire, so no such commit is acknowledged
// once another peer may have taken over (a newer generation names another primary).
void World::hostileCommit(int n) {
  if (!rngClient_.chance(300)) return;
  Node& nd = node(n);
  uint64_t id = ++nextCommit_;
  nd.pg.wal.append(id);
  trace('C', [&] { return std::string("local commit c" + std::to_string(id) + " on writes-stopped " + nd.identity.id); });
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
                      " (BEGIN READ WRITE, synchronous_commit = local) with its writes stopped, after generation " +
                      std::to_string(state_->generation) + " made " + state_->primary.id + " the primary");
  }
}

void World::ack(int n, const WalMark& mark) {
  Node& nd = node(n);
  int64_t gen = nd.pg.generationTag;
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
    case FaultKind::kExpireSession:
      if (nd.session == 0) return trace('F', [&] { return std::string(f.describe() + ": no session"); });
      trace('F', [&] { return std::string(f.describe()); });
      nd.faultExpiredAt = now_;
      return expireSession(nd.session, "expired by the fault scheduler");
    case FaultKind::kPartitionZk:
      return partition(f.peer, f.duration);
    case FaultKind::kCrashPostgres:
      if (!nd.up) return trace('F', [&] { return std::string(f.describe() + ": agent down"); });
      return pgCrash(f.peer, f.duration);
    case FaultKind::kSlowPostgres:
      trace('F', [&] { return std::string(f.describe()); });
      nd.pg.slowUntil = now_ + f.duration;
      return;
    case FaultKind::kDelayNotifications:
      nd.slowNotifyUntil = now_ + f.duration;
      nd.slowNotifyMs = 100 + static_cast<int64_t>(f.variant % 2500);
      return trace('F', [&] { return std::string(f.describe() + ", " + std::to_string(nd.slowNotifyMs) + " ms late"); });
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

void World::crashPeer(int n, int64_t downFor) {
  Node& nd = node(n);
  trace('F', [&] { return std::string(nd.identity.id + " crashes (agent and postgres); restarts in " + std::to_string(downFor) + " ms"); });
  pgStop(n);
  stopAgent(n);
  nd.restartPending = true;
  after(downFor, [this, n] {
    if (!node(n).up && node(n).restartPending) startAgent(n);
  });
}

// A postgres crash in the middle of a takeover, between its fence and its state write
// (or just after), as an armed crash-pg-after-fence fault says: the agent lives on, and
// its health logic must not undo the fence by restarting postgres as it was before.
void World::crashPgAfterFence(int n) {
  if (crashPgAfterFence_.empty()) return;
  auto [delay, brokenFor, cutFor] = crashPgAfterFence_.front();
  crashPgAfterFence_.erase(crashPgAfterFence_.begin());
  uint64_t inc = node(n).incarnation;
  after(delay, [this, n, inc, brokenFor, cutFor] {
    if (!alive(n, inc)) return;
    trace('F', [&] { return std::string(node(n).identity.id + "'s postgres dies right after its fence"); });
    pgCrash(n, brokenFor);
    // Its connection to ZooKeeper may drop at the same moment: a state write in flight
    // then lands or not, and is answered "connection loss" either way.
    if (cutFor > 0) partition(n, cutFor);
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
  cas("operator", next.serialize(), zk_.version(), now_, std::nullopt, what);
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
  const std::vector<std::string> active = election_.active();
  if ((variant >> 8) % 3 == 0 && !election_.holds(target.id)) {
    auto reaped = simworld::reapedState(s, target.id, active);
    if (reaped) return operatorWrite(std::move(reaped).value(), "reap " + target.id);
  }
  if (auto allowed = simworld::rebuildAllowed(s, target.id, active); !allowed) {
    return trace('O', [&] { return "operator: rebuild of " + target.id + " refused: " + allowed.error(); });
  }
  if (x < 0 || p < 0 || !node(p).pg.running) {
    return trace('O', [&] { return std::string("operator: rebuild of " + target.id + " postponed, the primary's postgres is not running"); });
  }
  SimPostgres& pg = node(x).pg;
  if (pg.transitioning) {
    return trace('O', [&] { return std::string("operator: rebuild of " + target.id + " failed, its agent is reconfiguring postgres"); });
  }
  trace('O', [&] { return std::string("operator: rebuild " + target.id + " from " + s.primary.id); });
  const Wal& primary = node(p).pg.wal;
  const bool rebuilt =
      !pg.setUp || pg.wal.divergedFrom(primary) || pg.wal.size() > primary.size() || !pg.standbySignal;
  if (rebuilt) {
    pg.wal = primary;
    pg.setUp = true;
    trace('P', [&] { return std::string(target.id + " postgres rebuilt by the operator from " + s.primary.id + " (" +
                   std::to_string(pg.wal.size()) + " records)"); });
  }
  pg.waiting.clear();
  pg.readOnly = true;
  pg.writablePending = false;
  pg.config = PgConfig::standby(PgRole::kAsync, s.primary, s.primary);
  if (!pg.running || rebuilt) ++pg.instance;  // started, not reloaded
  pg.running = true;
  pg.standbySignal = true;
  ++pg.epoch;
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
    nd.slowNotifyUntil = 0;
    if (nd.partitioned) heal(n);
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
    stuck(env.pendingWrite != nullptr, env.writeSince, "a state write");
    stuck(env.transitions > 0, env.transitionSince, "a postgres transition");
    stuck(env.walReads > 0, env.walReadSince, "a WAL read");
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
  const SimPostgres& pg = node(p).pg;
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
    s += nd.session ? "; session " + std::to_string(nd.session) : "; no session";
    if (nd.partitioned) s += ", partitioned";
  }
  return s;
}

RunResult World::run() {
  trace('Q', [&] { return std::string("seed " + std::to_string(sc_.seed) + ": " + std::to_string(sc_.peers) + " peers, session timeout " +
                 std::to_string(sc_.sessionTimeoutMs) + " ms, faults for " + std::to_string(sc_.faultPhaseMs) +
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
