// The cluster simulator's world, shared by its files: world.cc (the loop, the nodes and
// their environment, the hooks of the simulated ZooKeeper and postgres), client.cc
// (commits and acknowledgements), network.cc (the agents' network), faults/ (one file
// per family of faults, faults.cc runs each fault of the plan) and checks/ (the checks
// that need the world's view; checks/invariants.h holds the others). Internal to
// sim/cluster.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "driver/driver.h"
#include "statemachine/peer.h"
#include "sim/world/rng.h"
#include "sim/world/sim_coordinator.h"
#include "sim/world/sim_postgres.h"
#include "sim/world/sim_source.h"
#include "sim/world/trace_sink.h"
#include "sim/world/wal.h"
#include "sim/world/event_queue.h"
#include "sim/world/operator_actions.h"
#include "sim/world/zookeeper.h"
#include "sim/cluster/world.h"

namespace dugong::clustersim {

using simworld::describeConfig;
using simworld::PgServer;
using simworld::Rng;

namespace world_internal {

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
// The agents' leader round trips (the lease), every this long.
inline int64_t leaseIntervalFor(int64_t sessionTimeoutMs) { return std::clamp<int64_t>(sessionTimeoutMs / 10, 50, 1000); }

inline simworld::ZkModel clusterZkModel(int64_t sessionTimeoutMs, int64_t tickTimeMs, bool lease) {
  return simworld::ZkModel{.connect = {20, 300}, .delivery = {1, 30}, .toServer = {2, 25}, .slowWritePermille = 50,
                           .slowToServer = {100, 1500}, .fromServer = {2, 25}, .expiryNoticed = {5, 60},
                           .reconnect = {20, 200}, .retryConnectMs = 500, .sessionTimeoutMs = sessionTimeoutMs,
                           .tickTimeMs = tickTimeMs,
                           .leaseIntervalMs = lease ? leaseIntervalFor(sessionTimeoutMs) : 0};
}

// Peers are named node<N> (N from 1): their index, or -1 for anything else.
inline int nodeNamed(const std::string& id) {
  if (id.size() < 5 || id.compare(0, 4, "node") != 0) return -1;
  // node1 .. node9, the simulated clusters' peers: asked at every replication tick.
  if (id.size() == 5) return id[4] >= '1' && id[4] <= '9' ? id[4] - '1' : -1;
  int n = 0;
  for (size_t i = 4; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9' || n > 1000) return -1;
    n = n * 10 + (id[i] - '0');
  }
  return n >= 1 ? n - 1 : -1;
}

// How long the pg adapter's steps take in the simulated cluster (a seeded range each).
inline simworld::PgModel clusterPgModel() {
  return simworld::PgModel{.init = {20, 300}, .fence = {2, 20}, .walRead = {2, 20}, .syncSample = {3, 3}, .reload = {5, 60},
                           .restart = {80, 900}, .slowReload = {200, 1500}, .slowRestart = {1500, 7000},
                           .promoteStream = {5, 40}, .writes = {5, 60}, .shutDown = {80, 900}, .rejoin = {300, 1500},
                           .upstreamPoll = {2, 10}, .writableWrite = {5, 60}, .upstreamPollMs = kUpstreamPollMs,
                           .healthIntervalMs = kHealthIntervalMs, .repairAfterMs = kRepairAfterMs,
                           .writablePollMs = kWritablePollMs};
}

class World;

// The agent's ZooKeeper client as its driver sees it: the host's client of the simulated
// ensemble, with each lease round trip dated on the host's clock (World::hostClockAt), as
// the real client dates it on its own.
class HostCoordinator final : public driver::Coordinator {
 public:
  HostCoordinator(World& world, int n, simworld::SimCoordinator& client) : w_(world), n_(n), client_(client) {}

  Result<bool> join(driver::CoordinatorCallbacks callbacks) override;
  void leave() override {
    deliver_.reset();
    client_.leave();
  }
  void leaveKeepingMembership() override { client_.leaveKeepingMembership(); }
  void putClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                       std::function<void(StateWriteFinished)> done) override {
    sourceSeenAtWrite_ = sourceSeen_;
    client_.putClusterState(state, expectedVersion, reason, std::move(done));
  }
  driver::CoordinatorStatus status() const override { return client_.status(); }
  // What this host's agent last saw of the source (unset: nothing yet, or not following).
  const std::optional<SourceObserved>& lastSourceSeen() const { return sourceSeen_; }
  // What it had seen of the source when its agent last asked for a state write: the look
  // a leader judged a promote-cluster request on (the look may change before the write lands).
  const std::optional<SourceObserved>& sourceSeenAtLastWrite() const { return sourceSeenAtWrite_; }
  void publishDataState(const std::optional<PeerDataState>& data) override { client_.publishDataState(data); }
  void publishStreaming(bool streams) override { client_.publishStreaming(streams); }
  void putCheckedClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                              const std::vector<ElectionNodeCheck>& checks,
                              std::function<void(StateWriteFinished)> done) override {
    client_.putCheckedClusterState(state, expectedVersion, reason, checks, std::move(done));
  }
  void publishReport(const std::optional<TakeoverReport>& report, std::function<void(ReportPublished)> done) override {
    client_.publishReport(report, std::move(done));
  }

 private:
  // A standby cluster of the scripted source (sim/world/sim_source.h), as the agent's
  // ZkCoordinator::followSource reads a dugong source (agent/daemon_env.cc,
  // zk/source_watch.h): while the state it heard is a standby state of a dugong source,
  // a read-only look at the source's ensemble once a second (its state node and
  // election), an observation that differs from the previous one stepped as
  // SourceObserved, and the last one again after each ZkInitialized and
  // ClusterStateChanged.
  void followSource(const StateNode& node);
  void lookAtSource(uint64_t serial);
  void sourceSeen(SourceObservation seen, const std::string& data);

  World& w_;
  int n_;
  simworld::SimCoordinator& client_;
  std::shared_ptr<std::function<void(Event)>> deliver_;
  std::optional<SourceObserved> sourceSeen_;
  std::optional<SourceObserved> sourceSeenAtWrite_;
  bool following_ = false;
  uint64_t followSerial_ = 0;  // bumps when the following starts or stops
  std::string lastKey_, lastGood_, since_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// A timer of the driver (driver/env.h) on its host's clock: due when that clock reaches
// its reading at the start plus the delay (World::atHostClock). A restart or cancel()
// makes the earlier start a no-op.
class HostTimer final : public driver::Timer {
 public:
  HostTimer(World& world, int n) : w_(world), n_(n) {}
  void start(int64_t delayMs, std::function<void()> fired) override;
  void cancel() override { ++*serial_; }

 private:
  World& w_;
  int n_;
  std::shared_ptr<uint64_t> serial_ = std::make_shared<uint64_t>(0);
};

// One simulated host's environment for its agent's driver (driver/env.h): the world's
// virtual clock, a client of the simulated ZooKeeper ensemble, the local simulated
// postgres (sim/world/sim_postgres.h), and the trace as the log. One per
// incarnation of the agent.
class NodeEnv final : public driver::Clock, public driver::LogSink, public driver::PeerLink {
 public:
  NodeEnv(World& world, int n, uint64_t incarnation);

  EpochMs wallMs() const override;
  int64_t monotonicMs() const override;
  std::unique_ptr<driver::Timer> newTimer() override;
  void post(std::function<void()> fn) override;

  void write(LogLevel level, const std::string& line) override;

  // The failsafe's request, through the simulated network (network.cc).
  void askFailsafe(const PeerIdentity& to, const driver::FailsafeRequest& request, int64_t timeoutMs,
                   std::function<void(Result<driver::FailsafeAnswer>)> done) override;

  simworld::SimCoordinator coordinator;
  HostCoordinator hostCoordinator;  // the driver's: `coordinator`, dated on the host's clock
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
  std::unique_ptr<driver::Runner> driver; // the agent's logic: the code that ships
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
  // What the agent tells its watchdog of its role: primary from the announcement of a
  // primary's apply on, until a role other than primary is applied (agent/agent.cc).
  bool watchdogPrimary = false;
  // Its data directory was replaced by an older copy (restore-stale-sync): acknowledged
  // commits may be gone from it for good.
  bool restoredFromStaleCopy = false;
  // The agent's record of its promises (agent/promise_record.h), a file that outlives
  // the agent: until when its last promise runs, when it was recorded, and whether the
  // host has rebooted since (the time since is then unknown: the record holds in full).
  int64_t promiseUntil = -1;
  int64_t promiseRecordedAt = -1;
  bool rebootedSincePromise = false;
  // The agent runs with the failsafe off from its next start (crash-agent restarts it
  // with another configuration now and then): its dugong.yaml changed meanwhile.
  bool failsafeOff = false;
  // Its host's suspends (suspend-host), from and until (world time), the last one perhaps
  // still running (`suspended`): what the host's clocks leave out (World::hostClockAt).
  std::vector<std::pair<int64_t, int64_t>> suspends;
  bool suspended = false;
  simworld::PgServer pg;
  int64_t generationTag = 0;  // the generation its agent saw when making its postgres primary
};



// The trace (simworld::TraceSink): trace(kind, text) builds and records a line only
// when the run keeps a trace; the strings are never built for the seeds that pass
// unwatched.
class World final : public simworld::TraceSink {
  friend class NodeEnv;
  friend class HostCoordinator;
  friend class HostTimer;

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
    rngNet_ = root.fork(6);
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
    rngSource_ = root.fork(7);
    if (scenario.standby) {
      source_ = std::make_unique<simworld::SimSource>(fleet_, rngSource_, *this);
      fleet_.searchOtherHosts();
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
  template <class F>
  void at(int64_t t, F&& fn) {
    q_.at(t, std::forward<F>(fn));
  }
  template <class F>
  void after(int64_t delay, F&& fn) {
    q_.after(delay, std::forward<F>(fn));
  }
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

  // ---- the hosts' clocks (world.cc) ----
  // What n's host's clock, the one its agent's driver reads, reads at world time t.
  int64_t hostClockAt(int n, int64_t t) const;
  int64_t hostClock(int n) const { return hostClockAt(n, now_); }
  // Runs `fn` once n's host's clock reads `due`: on the queue at the world's time it
  // should (a due time past is queued as such, as `after` does), and again later while it
  // does not (a clock that did not count a suspend has not; one that stands still waits
  // for the resume).
  template <class F>
  void atHostClock(int n, int64_t due, F fn) {
    int64_t wait = due - hostClock(n);
    if (wait > 0 && node(n).suspended) wait += node(n).suspends.back().second - now_;
    after(wait, [this, n, due, fn = std::move(fn)]() mutable {
      if (hostClock(n) < due) return atHostClock(n, due, std::move(fn));
      fn();
    });
  }

  // ---- ZooKeeper (sim/world/sim_coordinator.h) ----
  simworld::ZkHooks zkHooks();
  void stateWritten(const std::string& writer, int64_t issuedAt, std::optional<WalPosition> writerWal,
                    const std::string& reason);
  bool wasAbsent(const std::string& id, int64_t from, int64_t to) const;

  // ---- postgres (sim/world/sim_postgres.h) ----
  simworld::SimPostgresHooks postgresHooks(int n);
  bool attachedSync(int primary) const { return fleet_.attachedSync(primary); }
  // Whether primary n's postgres can acknowledge a commit now: alone, through its sync, or
  // (quorum mode) through k members streaming with a sync priority.
  bool canAcknowledge(int n) {
    const PgServer& pg = node(n).pg;
    if (pg.config.quorum && pg.quorum) {
      return fleet_.memberFlushes(n, pg.quorum->members).size() >= static_cast<size_t>(pg.quorum->k);
    }
    return !pg.config.downstream || attachedSync(n);
  }

  // ---- the client (client.cc) ----
  bool writable(int n) const;
  void replicate();
  void clientTick();
  void localCommit(int n);
  void ack(int n, const WalMark& mark);

  // ---- the agents' network (network.cc) ----
  void cutLink(int a, int b, int64_t until);
  bool linkCut(int a, int b) const;
  int64_t networkDelay();
  void askFailsafe(int from, uint64_t inc, const PeerIdentity& to, const driver::FailsafeRequest& request,
                   int64_t timeoutMs, std::function<void(Result<driver::FailsafeAnswer>)> done);

  // ---- faults (faults/): each kind of the plan, by family ----
  void runFault(const Fault& f);  // faults.cc
  void beginQuietPhase();
  // The nodes the state names primary and sync (-1 for none); in quorum mode the first
  // member stands for the sync, so that the faults aimed at the sync hit a member.
  std::pair<int, int> primaryAndSync() const {
    const int primary = state_ ? nodeOf(state_->primary.id) : -1;
    if (state_ && state_->quorum && !state_->quorum->members.empty()) {
      return {primary, nodeOf(state_->quorum->members.front().id)};
    }
    return {primary, state_ && state_->sync ? nodeOf(state_->sync->id) : -1};
  }
  // quorum.cc
  void laggingMemberPrimaryDies(const Fault& f);
  void bestMemberDies(const Fault& f);
  void armStepInterrupted(const Fault& f);
  void reportPublished(int n);
  void stepFenced(int n, const std::vector<std::string>& members);
  // standby.cc
  void sourceFault(const Fault& f);
  void healSource();
  void promoteCluster(const Fault& f);
  void plannedPromoteCluster(const Fault& f);
  void wrongSourceGone(const Fault& f);
  // The operator's promote-cluster (--source-gone or not), asked again every 2 s while
  // the cluster is a standby cluster with no request in its state.
  void opPromoteCluster(bool sourceGone);
  // How the source's demotion and a promote request name the cluster under test.
  static StandbySource thisCluster();
  // crashes.cc
  void crashPeer(const Fault& f);
  void crashAgent(const Fault& f);
  void armCrashAfterWrite(const Fault& f);
  void crashPeer(int n, int64_t downFor);
  void crashAgent(int n, int64_t downFor);
  void restartSyncAgentWithin(const Fault& f, int sync, int64_t window);
  void stopAgentGroup(const Fault& f);
  // suspend.cc
  void suspendHost(const Fault& f);
  void resumeHost(int n);
  // The standbys a suspended host's postgres would feed, and its own, held for one
  // replication tick (their stalledUntil before, to put back).
  std::vector<std::pair<PgServer*, int64_t>> holdSuspendedStreams();
  // When the watchdog of an agent that died or stopped now shuts its postgres down (ms
  // from now); nullopt: not armed (its applied role is not primary).
  std::optional<int64_t> watchdogDelay(int n);
  void restartAgentAfter(int n, int64_t downFor);
  void crashAfterWrite(const std::string& writer);
  // postgres.cc
  void crashPostgres(const Fault& f);
  void slowPostgres(const Fault& f);
  void unhealthyServing(const Fault& f);
  void stallReplication(const Fault& f);
  void armCrashPgAfterFence(const Fault& f);
  void crashPgAfterFence(int n);
  // zookeeper.cc
  void expireSession(const Fault& f);
  void partitionZk(const Fault& f);
  void cutOffFollower(const Fault& f);
  void leaderChange(const Fault& f);
  void delayNotifications(const Fault& f);
  void quorumLoss(const Fault& f);
  // takeover_races.cc
  void restartPrimaryLateSync(const Fault& f);
  void cutSyncCrashPrimary(const Fault& f);
  void partialRecordTakeover(const Fault& f);
  void flapSync(const Fault& f);
  void restoreStaleSync(const Fault& f);
  std::optional<std::string> haltedOnAReplacedCopy() const;
  void cutAfterWrite(const std::string& writer);
  // operator.cc
  void operatorWrite(ClusterState next, const std::string& what);
  void opFreeze();
  void opUnfreeze();
  void opPromote(bool valid, uint64_t variant);
  void opRebuild(uint64_t variant);
  void raiseMaxConnections(const Fault& f);
  // Its rolling restart: restarts the standby `order[i]` (an id), or after the last
  // switches over to `sync`; then waits (until `deadline`) for it to stream again.
  void rollingRestartStep(const std::vector<std::string>& order, size_t i, const std::string& sync);
  void rollingRestartWait(const std::vector<std::string>& order, size_t i, const std::string& sync, int64_t deadline);
  void operatorQuietTick();
  // With rejoin: rewind, a deposed peer whose agent runs on a data directory rejoins by
  // itself; the first such peer still deposed.
  bool rejoinsByItself(const std::string& id) const;
  std::optional<std::string> deposedNotRejoined() const;

  // ---- checks (checks/) ----
  // peer_checks.cc
  void checkStep();
  std::string diagnose() const;
  // commit_checks.cc
  void checkLocalAck(int n, uint64_t id);
  void checkAckHasSync(int n, const WalMark& mark);
  // Quorum mode (docs/decisions/0079-quorum-commit.md section 7): Q, an acknowledged
  // commit beyond the generation's initWal on k members of the set in ZooKeeper, checked
  // at each acknowledgement and at each write that keeps the generation (ack-off-quorum);
  // a new quorum generation's primary holds every acknowledged commit as its write lands
  // (takeover-without-commit).
  void checkAckOnQuorum(const std::string& what, const WalMark& mark);
  void checkQuorumWrite(bool newGeneration);
  // standby_checks.cc
  void checkStandby();
  // two-writable-sites (0083 N2): a peer of this cluster acknowledged while the source has
  // a writable primary.
  void checkTwoWritableSites(int n, uint64_t commitId, const char* how);
  void standbyStateWritten(const std::optional<ClusterState>& before, const std::string& writer);
  bool standbyFollowing() const;
  // failsafe_checks.cc
  void noteZooKeeperReach();
  void noteZooKeeperReachAtStep();
  void checkPromise(int target, const std::string& asker, const driver::FailsafeAnswer& a);

  const Scenario& sc_;
  WorldOptions opts_;
  InvariantChecker checker_;
  Rng rngZk_{0}, rngPg_{0}, rngClient_{0}, rngOp_{0}, rngAgent_{0}, rngNet_{0};

  simworld::EventQueue q_;
  int64_t now_ = 0;  // q_.now(), kept here for brevity
  simworld::PgFleet fleet_;  // every node's postgres
  simworld::ZkEnsemble zk_;  // the ZooKeeper ensemble and every node's client (outlives the nodes)
  // A standby seed's scripted source (its hosts in fleet_ after the nodes'), and its own
  // random stream (the other seeds draw nothing from it).
  Rng rngSource_{0};
  std::unique_ptr<simworld::SimSource> source_;
  bool promoteClusterAsked_ = false;  // the operator wrote standby.promote
  std::optional<WalPosition> promotedAtWal_;  // the initWal of the generation promote-cluster wrote
  bool promotedPlanned_ = false;  // that generation followed the source's demotion (0083 5.3)
  // That generation carried out a --source-gone its leader judged on a look that could not
  // reach the source, while the source was writable: two sites may be writable, the
  // operator's assertion (0083 7.1; the site fence, 7.2, is not built): two-writable-sites
  // is no longer checked in the run.
  bool promotedBesideAnUnseenSource_ = false;
  // A wrong --source-gone (faults/standby.cc wrongSourceGone) is in the state until then:
  // the source's own faults are skipped meanwhile.
  int64_t wrongSourceGoneUntil_ = -1;
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
  std::optional<std::string> leftToAnOperator_;

  // Client.
  uint64_t nextCommit_ = 0;
  // The latest commit acknowledged by a primary of a quorum generation, and that generation.
  std::optional<std::pair<int64_t, WalMark>> lastQuorumAck_;
  // Records of restored copies (restore-stale-sync): ids no client commit ever has.
  static constexpr uint64_t kNeverAcknowledged = 1ULL << 62;
  uint64_t staleRecords_ = 0;

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
  // best-member-dies and step-interrupted armed: how long the peer they kill stays down.
  struct QuorumCrash {
    int64_t downFor = 0;
    bool primary = false;  // step-interrupted: the primary (else a member of the step's set)
  };
  std::optional<QuorumCrash> bestMemberDies_;
  std::optional<QuorumCrash> stepInterrupted_;
  // Links between two hosts cut until then (the failsafe's requests and answers are
  // lost; the standby's replication stalls), by (lower, higher) node index.
  std::map<std::pair<int, int>, int64_t> linkCutUntil_;
  // When each host's ZooKeeper client last could not confirm a round trip through the
  // leader (cut off, no leader, no session ready, its notifications late).
  std::vector<int64_t> zkUnreachableAt_;
  // What noteZooKeeperReach last saw, valid while zk_.changes() stays reachChangesSeen_:
  // until when each client is unreachable (kForever: cut off), and the latest of those.
  std::vector<int64_t> reachUnreachableUntil_;
  int64_t reachQuietFrom_ = 0;
  uint64_t reachChangesSeen_ = UINT64_MAX;

  int suspendedHosts_ = 0;  // hosts suspended now (suspend-host)

  // Phases.
  int faultsRun_ = 0;
  std::vector<int> faultsRunByKind_ = std::vector<int>(kFaultKinds, 0);
  std::vector<int> faultsPlanned_;
  bool quiet_ = false;
  int64_t quietStart_ = 0;
  bool ackedSinceQuiet_ = false;
  std::optional<int64_t> convergedAt_;
  int64_t nextTimingCheck_ = 0;
};

}  // namespace world_internal
}  // namespace dugong::clustersim
