// The driver's environment: everything the agent's logic (driver/driver.h) needs from
// the world, as abstract interfaces. The daemon implements them on Asio, ZooKeeper and
// libpq (agent/daemon_env.h); the simulators on virtual time (sim/script/); the driver's
// unit tests on a hand-driven fake.
//
// Contract shared by every implementation:
// - ONE loop. Every method is called on the driver's loop, and every callback runs on
//   it, never inside the call that started the operation (always later).
// - Exactly once. Each operation's callback runs exactly once, unless the object that
//   owns it is destroyed first (then never). A cancelled or restarted timer does not
//   fire for its earlier start.
// - Nothing here blocks the loop, destructors included.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver/failsafe.h"
#include "statemachine/rejoin_policy.h"
#include "driver/sync_ack_watch.h"
#include "driver/types.h"
#include "statemachine/action.h"
#include "statemachine/cluster_state.h"
#include "statemachine/event.h"
#include "statemachine/identity.h"
#include "statemachine/pg_config.h"
#include "statemachine/result.h"
#include "statemachine/takeover_report.h"
#include "statemachine/time_format.h"

namespace dugong::driver {

// ---- clock and timers ---------------------------------------------------------------

class Timer {
 public:
  virtual ~Timer() = default;
  // Runs `fired` once, `delayMs` from now. Starting it again replaces the earlier start.
  virtual void start(int64_t delayMs, std::function<void()> fired) = 0;
  virtual void cancel() = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time, for the state machine (promote requests expire at a wall time).
  virtual EpochMs wallMs() const = 0;
  // A clock that never goes back, for durations (how long postgres has been down).
  virtual int64_t monotonicMs() const = 0;
  virtual std::unique_ptr<Timer> newTimer() = 0;
  // Runs `fn` on the loop soon, after the current callback returns.
  virtual void post(std::function<void()> fn) = 0;
};

// ---- the coordinator (ZooKeeper) ------------------------------------------------------

// What the coordinator tells the driver while it is a member.
struct CoordinatorCallbacks {
  // ZkInitialized (after every new session, with everything re-read), ActivePeersChanged
  // and ClusterStateChanged, in the order they happened.
  std::function<void(Event)> onEvent;
  // Connection lost / regained under a valid session. Implementations that never lose
  // a connection without losing the session (simulators that model only expiry) may
  // never call it; the driver then relies on ZkInitialized alone.
  std::function<void(CoordinatorConnection)> onConnection;
  // Each confirmed leader round trip (CoordinatorLease). Implementations that send none
  // (simulators that model no leader) never call it; the driver then has no lease and
  // relies on onConnection alone.
  std::function<void(CoordinatorLease)> onLease;
};

// What the status endpoint shows about the membership.
struct CoordinatorStatus {
  bool member = false;       // joined and not left
  bool connected = false;    // talking to a server now
  bool initialized = false;  // ZkInitialized was delivered for the current session
  int64_t sessionId = 0;
  std::string electionNode;
  std::string lastError;
};

class Coordinator {
 public:
  virtual ~Coordinator() = default;
  // Becomes a member: opens a session and creates this peer's election node; the
  // callbacks run until leave(). Errors (invalid options) are returned at once and
  // nothing is joined; connection problems are retried, never returned.
  virtual Result<bool> join(CoordinatorCallbacks callbacks) = 0;
  // Leaves at once (the election node goes with the session). A write in flight is
  // answered with a failure; no other callback runs afterwards. Harmless when not a
  // member.
  virtual void leave() = 0;
  // Leaves this run of the agent, not the cluster: the membership stays with the
  // coordinator for a restarted agent to take up again (ZooKeeper: the session and
  // its election node are kept until the session expires). Otherwise like leave().
  // Default: leave().
  virtual void leaveKeepingMembership() { leave(); }
  // Test-and-set of the cluster state (expectedVersion -1: create), with a history
  // entry. `done` runs exactly once, also when not a member (a failure).
  virtual void putClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                               std::function<void(StateWriteFinished)> done) = 0;
  // The same write, landing only if each election node in `checks` (a quorum takeover's
  // counted reports, docs/decisions/0079-quorum-commit.md 4.4) is still there at that
  // data version, in the same multi-op; a failed check is a lost race. The runner calls
  // it only with checks (putClusterState otherwise). The default implementation answers
  // AT ONCE (inside the call) with a failure: environments that model no election node
  // versions never land a checked write.
  virtual void putCheckedClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                                      const std::vector<ElectionNodeCheck>& checks,
                                      std::function<void(StateWriteFinished)> done) {
    (void)state, (void)expectedVersion, (void)reason, (void)checks;
    done(StateWriteFinished{false, "checked writes are not modelled by this environment", false, -1});
  }
  virtual CoordinatorStatus status() const = 0;
  // Publishes what this peer's data directory holds (nullopt: nothing) for the peers
  // that set up a cluster with no state: in the membership now and in every later one,
  // until replaced. The peers see it in ZkInitialized/ActivePeersChanged::data.
  // Default: nothing is published (environments that model no data state).
  virtual void publishDataState(const std::optional<PeerDataState>& data) { (void)data; }
  // Publishes whether this peer's postgres streams (Core's stream watch) in the
  // membership now and in every later one, until replaced; the peers see the peers that
  // publish false in ZkInitialized/ActivePeersChanged::notStreaming. Default: nothing is
  // published (the peers count this one as streaming).
  virtual void publishStreaming(bool streams) { (void)streams; }
  // Quorum mode: publishes this member's takeover report (nullopt: withdraws it) in its
  // election node, beside what publishDataState and publishStreaming put there, in the
  // membership now and in every later one until replaced; `done` says the node's data
  // version once it holds it (ReportPublished), or that it may hold either (a failure).
  // The peers see it in ZkInitialized/ActivePeersChanged::reports, with that version.
  // The default implementation answers AT ONCE (inside the call) with a failure:
  // environments that model no reports (the state machine then never takes over in
  // quorum mode).
  virtual void publishReport(const std::optional<TakeoverReport>& report, std::function<void(ReportPublished)> done) {
    (void)report;
    done(ReportPublished{false, "publishing takeover reports is not modelled by this environment", -1});
  }
};

// ---- postgres -------------------------------------------------------------------------

class Postgres {
 public:
  virtual ~Postgres() = default;
  // Looks at the local postgres for the first time (and again after a rebuild).
  virtual void init(std::function<void(PgInitialized)> done) = 0;
  // Reconfigures and starts/stops/promotes/rebuilds postgres to match `config`.
  virtual void apply(const PgConfig& config, std::function<void(PgConfigApplied)> done) = 0;
  // FencePg (statemachine/action.h).
  virtual void fence(const std::optional<PeerIdentity>& newSync, std::function<void(PgFenced)> done) = 0;
  // FencePg with a quorum (statemachine/action.h): a primary's membership step that makes
  // postgres acknowledge less easily (docs/decisions/0079-quorum-commit.md 5.2). Reloads
  // `ANY k (members)` of `quorum` and verifies it; with `endWalsenders` (k raised) ends
  // the members' walsenders and waits until every streaming member's was started after
  // the reload took effect; then waits until the k-th latest flush among the members
  // reaches the primary's flush position read after that. Fails (ok=false) if that has
  // not happened within `timeoutMs`: the rule reloaded stays until the next apply (the
  // state machine applies the state's rule again). The default implementation answers
  // AT ONCE (inside the call) with a failure: environments that model no quorum step.
  virtual void fenceQuorum(const Quorum& quorum, bool endWalsenders, int64_t timeoutMs,
                           std::function<void(PgFenced)> done) {
    (void)quorum;
    (void)endWalsenders;
    (void)timeoutMs;
    done(PgFenced{false, "a quorum step's fence is not modelled by this environment", 0});
  }
  virtual void readWal(std::function<void(WalPositionRead)> done) = 0;
  // What the data directory holds (set up or empty; system identifier, timeline and
  // WAL position), for a setup of a cluster with no state. Read while postgres is
  // stopped, so that the WAL position is final. The default implementation answers AT
  // ONCE (inside the call) with an error: environments that model no data state.
  virtual void readDataState(std::function<void(Result<PeerDataState>)> done) {
    done(Error{"reading the data state is not modelled by this environment"});
  }
  // Checks health periodically until stopHealthCheck(); `onChange` runs for the first
  // result and then for each change between healthy and unhealthy, and again (unhealthy)
  // when an unhealthy postgres' postmaster is found gone.
  virtual void startHealthCheck(std::function<void(bool healthy, const std::string& detail)> onChange) = 0;
  virtual void stopHealthCheck() = 0;
  // True when the last health check found no postmaster at all (it crashed or was
  // killed), as opposed to one that runs but does not answer (starting, recovering,
  // overloaded). The driver restarts a gone postmaster at once, and gives one that runs
  // the restart grace. Default: false (always the grace).
  virtual bool postmasterGone() const { return false; }
  // What the last look at postgres saw of its WAL receiver (StreamSample); nullopt: this
  // environment does not tell, and the driver publishes nothing about streaming.
  virtual std::optional<StreamSample> streamSample() const { return std::nullopt; }

  // Writes stopped are sticky: stopWrites() and shutDownWrites() take effect without
  // waiting for any transition in flight (an apply in `pg_ctl start`, a fence), and stay
  // in effect, whatever is applied meanwhile, until resumeWrites(): an apply of a primary
  // while writes are stopped leaves it read-only, and while they are shut down leaves
  // postgres stopped (PgConfigApplied ok, not online), also when the stop came during
  // that apply. No apply lifts them; the driver resumes explicitly, before it starts a
  // shut-down postgres again. The state changes in the call (a resume asked after a stop
  // undoes it, a stop asked after a resume holds); `done` reports when the effect is done.
  //
  // Stops a primary from accepting writes at once, without a transition (the
  // coordinator's connection is lost): new sessions read-only, client sessions
  // terminated; `done` gets the number of sessions terminated. A standby or a stopped
  // postgres: nothing to do (success, 0), but the stop holds for any later apply.
  // The default implementation answers AT ONCE (inside the call) with an error saying
  // the environment does not model it: the one exception to "always later", which the
  // driver tolerates for these two operations only. Implementations that model client
  // writes (simulators of a partition) must override both.
  virtual void stopWrites(std::function<void(Result<int>)> done) {
    done(Error{"stopping writes is not modelled by this environment"});
  }
  // Lifts stopWrites() and shutDownWrites(): the primary is as writable as its
  // configuration says; a stopped postgres stays stopped (the next apply starts it).
  virtual void resumeWrites(std::function<void(Result<bool>)> done) {
    done(Error{"resuming writes is not modelled by this environment"});
  }
  // The session may have expired: stopWrites() leaves a new session that says BEGIN
  // READ WRITE able to commit (with synchronous_commit = local, without the sync), so
  // a primary is shut down (a standby or a stopped postgres: nothing to do), and one an
  // apply is starting is stopped before it accepts a connection. No apply starts it
  // until resumeWrites(). Same default as stopWrites().
  virtual void shutDownWrites(std::function<void(Result<bool>)> done) {
    done(Error{"shutting postgres down is not modelled by this environment"});
  }
  // A planned switchover, on the sync about to take over by a promote request, before
  // its fence: waits at most `timeoutMs` until its WAL stream from the old primary has
  // ended because that primary stopped (it stops its postgres when it sees the request,
  // and a stopping primary first sends all of its WAL, its shutdown checkpoint
  // included); `done(true)` then. false: still streaming at the deadline, no stream, or
  // not a standby; the fence goes ahead either way.
  // The default implementation answers AT ONCE (inside the call) with false: nothing
  // is waited for, as before this existed.
  virtual void awaitUpstreamStop(int64_t timeoutMs, std::function<void(bool)> done) {
    (void)timeoutMs;
    done(false);
  }
  // On a primary: what it sees of its synchronous standby `standbyId` now (its walsender,
  // its flush position, the commits waiting for it), for the sync-acknowledgement watch.
  // The default implementation answers AT ONCE (inside the call) with an error:
  // environments that model no replication; the driver then never replaces a sync for
  // a stall.
  virtual void sampleSyncStandby(const std::string& standbyId,
                                 std::function<void(Result<SyncReplicationSample>)> done) {
    (void)standbyId;
    done(Error{"sampling the synchronous standby is not modelled by this environment"});
  }
  // Quorum mode, on a primary: what it sees of the members `memberIds` now, in one look
  // (its own flush position, then each member's walsender and flush position), for the
  // members' acknowledgement watch (docs/decisions/0079-quorum-commit.md 6.2). The
  // default implementation answers AT ONCE (inside the call) with an error: the driver
  // then never finds a member acknowledging nothing.
  virtual void sampleQuorumMembers(const std::vector<std::string>& memberIds,
                                   std::function<void(Result<QuorumReplicationSample>)> done) {
    (void)memberIds;
    done(Error{"sampling the quorum's members is not modelled by this environment"});
  }
  // A deposed peer's automatic rejoin. REQUIRES: postgres was stopped by an apply of
  // PgConfig::none() (the deposed state machine's) and nothing else runs on it. Makes
  // the stopped ex-primary an async standby of `primary` WITHOUT copying its data
  // directory, and only within `policy`:
  // - kFollow: only if its WAL ends at or before the point where `primary`'s timeline
  //   forked from it (pg_rewind's dry run: "no rewind required"), so nothing is lost;
  // - kRewind: also if it diverged: pg_rewind discards its WAL after the fork (the
  //   range is reported), then it follows.
  // Otherwise (ahead on the same timeline, another database system, `primary`
  // unreachable, a rewind failed): ok=false with the reason, and postgres stays stopped.
  // On success postgres runs as a standby streaming from `primary` (a slot created on
  // it), as apply(PgConfig::standby(kAsync, primary, primary)) leaves it.
  // The default implementation answers AT ONCE (inside the call) with an error: the
  // driver then leaves the peer deposed, as with kManual.
  virtual void rejoin(const PeerIdentity& primary, RejoinPolicy policy, std::function<void(RejoinFinished)> done) {
    (void)primary;
    (void)policy;
    done(RejoinFinished{false, false, "", "rejoining is not modelled by this environment"});
  }
};

// ---- the other agents ------------------------------------------------------------------

// The one message an agent sends another (docs/design.md "Quorum loss: the sync's
// promise"): a primary asks its sync for a failsafe promise. The daemon sends it over
// HTTP (POST /failsafe on the peer's agent), the simulators through their network.
class PeerLink {
 public:
  virtual ~PeerLink() = default;
  // Asks `to`'s agent; `done` runs exactly once: its answer, or an error (unreachable,
  // or no answer within `timeoutMs`).
  virtual void askFailsafe(const PeerIdentity& to, const FailsafeRequest& request, int64_t timeoutMs,
                           std::function<void(Result<FailsafeAnswer>)> done) = 0;
};

// ---- log ------------------------------------------------------------------------------

class LogSink {
 public:
  virtual ~LogSink() = default;
  // One decision or observation, in plain words.
  virtual void write(LogLevel level, const std::string& line) = 0;
};

// The driver's view of the world. Everything is owned elsewhere and outlives the driver.
struct Env {
  Clock& clock;
  Coordinator& coordinator;
  Postgres& postgres;
  LogSink& log;
  // The other agents, for the failsafe (nullptr: none reachable; the failsafe then
  // never asks).
  PeerLink* peers = nullptr;
};

}  // namespace dugong::driver
