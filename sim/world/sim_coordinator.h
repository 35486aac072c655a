// The one simulated ZooKeeper delivery of both simulators (dugong-sim,
// dugong-cluster-sim), on the ensemble's data (zookeeper.h):
// - ZkEnsemble: the sessions (alive, connected, expired after the session timeout
//   without their client), one client per host with what it has heard (in order, each
//   after a delay), the test-and-set of the cluster state, and the connection faults a
//   world may inject (a host cut off from the ensemble and healed, a session expired).
// - SimCoordinator: the client of one run of an agent (agent::Coordinator): join (a
//   session and its election node, ZkInitialized), leave, the state write, with the
//   exactly-once callbacks of driver/env.h; the connection lost and regained.
// What differs between the two tools is a ZkModel (delays) and whether faults are
// injected (dugong-sim injects none, and its other peers are election nodes with no
// client: hosts are only the peers whose agent runs in the simulation).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "driver/env.h"
#include "sim/world/event_queue.h"
#include "sim/world/rng.h"
#include "sim/world/sim_postgres.h"
#include "sim/world/trace_sink.h"
#include "sim/world/zookeeper.h"

namespace dugong::simworld {

class SimCoordinator;

struct ZkModel {
  Latency connect = {};        // join -> the session is established (drawn from the join rng)
  Latency delivery = {};       // each notification and answer reaches its client after this
  Latency toServer = {};       // a write reaches the leader
  int slowWritePermille = 0;
  Latency slowToServer = {};   // ... behind a slow quorum (a disk sync, a leader election)
  Latency fromServer = {};     // the answer leaves the leader
  Latency expiryNoticed = {};  // a connected client hears its session expired
  Latency reconnect = {};      // then starts a new session
  int64_t retryConnectMs = 500;
  int64_t sessionTimeoutMs = 0;  // negotiated
  // The ensemble's tickTime: a follower relays its sessions' touches to the leader in its
  // replies to the leader's pings (every tickTime/2), so the leader's last touch of a
  // session lags its client's by up to that.
  int64_t tickTimeMs = 0;
  // The lease's leader round trips (agent::CoordinatorLease), every this long while a
  // session is connected; 0: none (the driver then has no lease).
  int64_t leaseIntervalMs = 0;
};

// The world's part of a write and of the membership (all optional).
struct ZkHooks {
  // Hands an event to host n's driver (`call` runs its callback), traced and checked.
  // `call` may move `ev` into the driver: the hook reads `ev` only before it.
  std::function<void(int n, const Event& ev, const std::function<void()>& call)> deliver;
  // The identity of an active peer.
  std::function<const PeerIdentity&(const std::string& id)> identityOf;
  // The active peers changed, before the clients are told.
  std::function<void(const std::vector<std::string>& before, const std::vector<std::string>& after)> activeChanged;
  // A write about to succeed; false: refused (nothing is written).
  std::function<bool(const std::string& writer, const std::string& data)> admit;
  // What host n's WAL is as it issues a write.
  std::function<std::optional<WalPosition>(int n)> writerWal;
  // A write succeeded (version `version`), after the clients were told.
  std::function<void(const std::string& writer, int64_t issuedAt, std::optional<WalPosition> writerWal,
                     const std::string& reason)>
      written;
  // Host n's election node now holds a takeover report (quorum mode).
  std::function<void(int n)> reportPublished;
  // The driver broke the coordinator's contract (a write while one is in flight).
  std::function<void(const std::string& invariant, const std::string& detail)> violation;
};

// What one host's ZooKeeper client has: its session and what it has heard.
struct ZkClient {
  std::string id;          // the peer
  uint64_t session = 0;    // 0: none
  bool ready = false;      // ZkInitialized was sent for this session
  bool connecting = false;
  bool partitioned = false;
  uint64_t partitionSerial = 0;
  bool needResync = false;    // missed notifications while partitioned
  bool lossReported = false;  // the client told the driver its connection was lost
  int64_t nextDelivery = 0;   // keeps what one client hears in order
  int64_t slowNotifyUntil = 0;
  int64_t slowNotifyMs = 0;
  SimCoordinator* agent = nullptr;  // the client of the running agent, if any
  uint64_t agentRun = 0;            // its run (0: none): what a scheduled callback checks
};

class ZkEnsemble {
 public:
  // `rng` draws every delay but the connect of a join (`joinRng`).
  ZkEnsemble(EventQueue& queue, Rng& rng, Rng& joinRng, TraceSink& trace, ZkModel model, ZkHooks hooks)
      : q_(queue), rng_(rng), joinRng_(joinRng), trace_(trace), model_(std::move(model)), hooks_(std::move(hooks)) {}

  // A host: a peer whose agent may run in the simulation. Numbered in the order added.
  int addHost(const std::string& id) {
    ++changes_;
    clients_.push_back(ZkClient{id});
    return static_cast<int>(clients_.size()) - 1;
  }
  // Every access that may change a client counts as a change (changes()): a reference
  // it returns is for the change at hand, not to keep for a later event.
  ZkClient& client(int n) {
    ++changes_;
    return clients_[static_cast<size_t>(n)];
  }
  // A look at a client that changes nothing: not counted as a change.
  const ZkClient& look(int n) const { return clients_[static_cast<size_t>(n)]; }
  // Counts the accesses that may have changed a client, and the leader changes: what a
  // world derives from the clients at every step (the cluster simulator's reach of
  // ZooKeeper) it need not derive again while this stays the same.
  uint64_t changes() const { return changes_; }
  // No leader until then (a leader election).
  int64_t leaderlessUntil() const { return noLeaderUntil_; }

  const ZkStateNode& state() const { return zk_; }
  StateNode stateNode() const { return zk_.node(); }
  const ZkElection& election() const { return election_; }
  PeerList activePeers() const;
  // The active peers whose running agent publishes that its postgres does not stream.
  std::set<std::string> notStreaming() const;
  // The takeover reports the active peers' election nodes hold (quorum mode), each from
  // the peer's first node, with that node's data version (docs/decisions/0079 4.2).
  TakeoverReports reports() const;
  // A leader is elected (no election under way, the quorum not lost): writes can land.
  bool hasLeader() const { return !leaderless(); }

  // A test-and-set of the cluster state, at once (an operator's, or a write that
  // reached the leader).
  StateWriteFinished cas(const std::string& writer, const std::string& data, int32_t expectedVersion,
                         int64_t issuedAt, std::optional<WalPosition> writerWal, const std::string& reason,
                         const std::vector<ElectionNodeCheck>& checks = {});
  // A peer with no client in the simulation (a scripted peer) joins or leaves.
  void joinWithoutClient(const std::string& id);
  void leaveWithoutClient(const std::string& id);

  // Host n's agent starts (a client with no session) or stops (its session is left to
  // expire).
  void agentStarts(int n);
  void agentStops(int n);
  // Faults: host n cannot reach the ensemble for `duration`; it reaches it again; a
  // session expires (the client hears of it unless cut off).
  // `reportAfterMs`: when the client reports the loss (-1: 2/3 of the session timeout,
  // when it notices a silent server); `touchLagMs`: how long before the cut the leader
  // last heard of the session.
  void partition(int n, int64_t duration, int64_t reportAfterMs = -1, int64_t touchLagMs = 0);
  void heal(int n);
  void expire(uint64_t sid, const std::string& why);
  // The server host n's client talks to is cut off from its leader: it answers the
  // client's pings (no loss reported) until it gives up after `giveUpMs` (syncLimit x
  // tickTime) and closes the connection; the client then moves to another server. The
  // leader hears no touch meanwhile, and expires the session after its timeout.
  void cutOffFollower(int n, int64_t giveUpMs);
  // The leader goes: every server closes its clients' connections at once (a closed
  // connection, not an expiry), nothing is written and no session expires for
  // `electionMs`, then the new leader gives every session a fresh timeout.
  void leaderChange(int64_t electionMs);

 private:
  friend class SimCoordinator;
  struct Session {
    int host = 0;  // -1: a peer with no client here
    bool alive = true;
    bool connected = true;
    uint64_t disconnects = 0;
    // Its election node's data: the version (created at 0, +1 for every set of its data,
    // as ZooKeeper counts) and the takeover report it holds (quorum mode).
    int32_t nodeVersion = 0;
    std::optional<TakeoverReport> report;
    std::optional<bool> streaming;
  };

  // A run of an agent: callbacks scheduled for it run only while it is host n's
  // current one (plain counters: no atomic reference counts in the hot path).
  using Run = uint64_t;
  void connect(int n, Run run);
  void disconnect(uint64_t sid, const std::string& why, int64_t touchLagMs = 0);
  void leaseLoop(int n, Run run, uint64_t sid);
  void endElection();
  bool leaderless() const { return q_.now() < noLeaderUntil_; }
  void closeSessionOf(int n);
  void recomputeActive();
  // Runs `fn` on n's client after what it heard before (per-client order); nothing runs
  // if that agent is gone by then.
  template <class Fn>
  void schedule(int n, Fn fn);  // defined (and only used) in sim_coordinator.cc
  void deliver(int n, Event ev);
  void answerWrite(int n, uint64_t serial, StateWriteFinished r);
  void notifyAll(bool state);
  void write(int n, uint64_t serial, const ClusterState& state, int32_t expectedVersion, const std::string& reason,
             std::vector<ElectionNodeCheck> checks = {});
  // The failed check of a takeover's write, or empty when every checked node is as counted.
  std::string failedCheck(const std::vector<ElectionNodeCheck>& checks) const;
  // Sets host n's current election node's data to what its agent publishes (a report),
  // when it differs: a set, which bumps the node's version and fires the watches.
  bool syncElectionNode(int n);
  void answerReport(int n, uint64_t serial, ReportPublished r);
  Run runOf(int n) const { return look(n).agentRun; }
  bool runs(int n, Run run) const { return run != 0 && look(n).agentRun == run; }
  bool sessionAlive(uint64_t sid) const {
    auto it = sessions_.find(sid);
    return it != sessions_.end() && it->second.alive;
  }

  EventQueue& q_;
  Rng& rng_;
  Rng& joinRng_;
  TraceSink& trace_;
  ZkModel model_;
  ZkHooks hooks_;

  ZkStateNode zk_;
  ZkElection election_;
  std::map<uint64_t, Session> sessions_;
  std::map<std::string, std::vector<uint64_t>> withoutClient_;  // their sessions, by peer
  uint64_t nextSession_ = 1;
  int64_t noLeaderUntil_ = 0;  // a leader election until then
  std::vector<std::string> active_;
  std::vector<ZkClient> clients_;
  uint64_t changes_ = 0;
  Run lastRun_ = 0;
};

class SimCoordinator final : public driver::Coordinator {
 public:
  SimCoordinator(ZkEnsemble& ensemble, int host);
  ~SimCoordinator() override;

  Result<bool> join(driver::CoordinatorCallbacks callbacks) override;
  void leave() override;
  void putClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                       std::function<void(StateWriteFinished)> done) override;
  // The same write, landing only if each checked election node still has the version
  // counted (ZooKeeper's multi-op with check ops, zk/session.cc): else a lost race.
  void putCheckedClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                              const std::vector<ElectionNodeCheck>& checks,
                              std::function<void(StateWriteFinished)> done) override;
  driver::CoordinatorStatus status() const override;
  // The report, a field of this run's election node (kept across this run's sessions and
  // written into each new session's node, as zk::Session keeps it): a set that reaches
  // the leader, answered with the node's new version; a failure when not connected (then
  // written on the next reconnection or session).
  void publishReport(const std::optional<TakeoverReport>& report, std::function<void(ReportPublished)> done) override;
  // In this run's election node from now on: the peers are told at once (their watches
  // fire) unless this client is cut off, and hear it with their next news otherwise.
  void publishStreaming(bool streams) override;

  bool writePending() const { return pendingWrite_ != nullptr; }
  int64_t writeSince() const { return writeSince_; }

 private:
  friend class ZkEnsemble;
  ZkEnsemble& zk_;
  int host_;
  ZkEnsemble::Run run_;
  bool member_ = false;
  driver::CoordinatorCallbacks callbacks_;
  uint64_t writeSerial_ = 0;
  std::function<void(StateWriteFinished)> pendingWrite_;
  int64_t writeSince_ = 0;
  std::optional<bool> streaming_;  // published in the election node
  std::optional<TakeoverReport> report_;  // published in the election node (quorum mode)
  uint64_t reportSerial_ = 0;
  std::function<void(ReportPublished)> pendingReport_;
};

}  // namespace dugong::simworld
