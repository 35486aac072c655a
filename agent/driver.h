// The driver: the agent's logic around the state machine, on an environment
// (agent/env.h). The daemon, dugong-sim and dugong-cluster-sim all run this code.
//
// It feeds the coordinator's and postgres' events into the state machine and carries
// out its actions in order, and it adds what the state machine leaves to the agent:
// - one postgres transition at a time: an apply the state machine asks for while a
//   restart is in flight is queued and carried out when the restart ends; a fence
//   asked for during a restart is refused (the state machine retries it);
// - health: postgres that should run but does not answer is restarted (its last
//   configuration applied again) once it has been down for the restart grace, and,
//   once it has been down for withdrawAfterMs, the driver leaves the coordinator
//   (its peers see it gone) until postgres is healthy again, then joins again;
// - a fresh state machine once an operator has rebuilt this deposed peer;
// - a clean handover in a planned switchover (a valid promote request of the sync):
//   the primary stops postgres at once (a stopping primary sends all of its WAL to its
//   streaming sync, its shutdown checkpoint included), and the sync, before its fence,
//   waits up to handoverWaitMs for that stream to end, so that the old primary's data
//   directory can follow the new timeline as it is; abandoned (postgres started again
//   as primary) when the request goes away while this peer is still the primary;
// - the automatic rejoin of this deposed peer (options.rejoin; docs/design.md
//   "Rejoining a deposed peer"): once its postgres is stopped and the primary is
//   present, postgres is asked to follow the primary without a copy (Postgres::rejoin,
//   once per generation), and on success the peer removes itself from `deposed` (a
//   test-and-set, with the reason in the history), which starts a fresh state machine;
// - the isolated primary: when the coordinator's connection is lost, writes
//   stop at once (before the session can expire and another peer take over), and
//   resume only on reconnection with this peer's role and the cluster's generation
//   unchanged (a new session: once the state written back, test-and-set at the version
//   read on it, shows that no takeover can land); otherwise they stay stopped until
//   the state machine applies a new postgres configuration. Stopped writes still let a
//   new session that says BEGIN READ WRITE commit (synchronous_commit = local needs no
//   sync), so a primary is shut down once its session may be about to expire (half-way
//   to the earliest expiry), and started again only by a resume or a new configuration;
// - a sync that acknowledges nothing (agent/driver_sync_watch.cc): on a primary, the
//   sync's walsender is sampled every syncSampleMs; when commits have waited on a sync
//   that does not move for syncReplaceAfterMs (agent/sync_ack_watch.h), the state
//   machine is told (SyncAcknowledgement) and replaces it;
// - the primary's lease (agent/driver_lease.h): when the coordinator confirms
//   round trips through its leader (CoordinatorCallbacks::onLease), a primary stops
//   writes a little before the last confirmed send + the session timeout - margins, and
//   shuts postgres down at it, whatever the connection says (a ZooKeeper follower cut off
//   from its leader keeps answering pings); a connection lost while the lease holds stops
//   nothing; writes resume only under a valid lease;
// - a coordinator outage that this peer saw too: after a new session, the peers that
//   were present before the loss are still treated as present for one session timeout,
//   so that a peer back first does not replace a sync (or take over from a primary)
//   that simply has not reconnected yet.
//
// It reads no clock and owns no thread: time, timers and completions come from the
// environment, on its one loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "agent/driver_lease.h"
#include "agent/env.h"
#include "statemachine/peer.h"

namespace dugong::agent {

struct DriverOptions {
  PeerIdentity identity;
  bool singleton = false;        // one-node-write mode
  int64_t withdrawAfterMs = 30000;
  bool stopPostgresOnExit = false;
  // Stop keeps the coordinator's membership for a restarted agent
  // (Coordinator::leaveKeepingMembership): its peers see no change if it is back
  // within the session timeout.
  bool keepMembershipOnStop = false;
  // How long postgres must have been down, and how long since the last transition,
  // before a restart: a transition in progress or a just-started postgres is no crash.
  // A postmaster that is gone (Postgres::postmasterGone) is restarted at once instead,
  // but not again within this long of the previous restart.
  int64_t restartGraceMs = 3000;
  int64_t healthTickMs = 1000;   // how often an unhealthy postgres is looked at again
  int64_t retryDelayMs = 1000;   // the state machine's back-off
  // A cluster with no state is set up from the data states the peers publish
  // (PeerOptions::setupFromData): the driver publishes this peer's
  // (Coordinator::publishDataState) once its postgres is stopped while the state machine
  // has no cluster state, and withdraws it once a state exists. setupWaitMs: how long
  // the state machine waits for more peers holding data before the setup.
  bool setupFromData = false;
  int64_t setupWaitMs = 0;
  // What a deposed peer does on its own (agent/rejoin.h).
  RejoinPolicy rejoin = RejoinPolicy::kFollow;
  // A planned switchover: how long the sync waits for the old primary to stop (and its
  // WAL stream to end) before it fences itself and takes over anyway. 0: no clean
  // handover (Manatee's behaviour; the simulators, which model no WAL stream).
  int64_t handoverWaitMs = 0;
  // A sync that keeps its session but acknowledges nothing: how long commits may wait on
  // it without its flush position moving before the primary replaces it (0: never, the
  // simulators unless they model replication), how often the primary samples it, how
  // long a new sync may take to connect, and the state machine's hold between two
  // such replacements (PeerOptions::syncReplaceHoldMs).
  int64_t syncReplaceAfterMs = 0;
  int64_t syncSampleMs = 250;
  int64_t syncConnectGraceMs = 10000;
  int64_t syncReplaceHoldMs = 5000;
  // Called on the loop once postgres has applied a configuration the state machine
  // asked for, when the peer's role differs from the one of the last such apply.
  std::function<void(Role previous, Role applied)> onRoleApplied;
  // Called on the loop as postgres starts to apply a primary's configuration: from the
  // promotion on, postgres may accept writes before the apply answers (the agent arms
  // its watchdog here, not only once the role is applied).
  std::function<void()> onPrimaryApplyStarting;
  // Called on the loop when the coordinator's connection is lost while this peer is the
  // primary (true), and when it is back or a new session replaces it (false): the agent
  // shuts postgres down a sixth of the session timeout after such a loss, and a watchdog
  // that outlives the agent must do so by then too (agent/watchdog.h).
  std::function<void(bool lost)> onPrimaryConnectionLoss;
  // The primary's lease (agent/driver_lease.h), when the coordinator confirms leader
  // round trips (CoordinatorCallbacks::onLease): its terms, and a call on the loop each
  // time its end (monotonic ms) moves on, for the watchdog, which shuts postgres down at
  // that end too (agent/watchdog.h).
  LeaseTerms lease;
  std::function<void(int64_t deadlineMs)> onLeaseDeadline;
  // The failsafe (agent/failsafe.h, docs/design.md "Quorum loss: the sync's promise"):
  // a primary whose lease is about to end asks its sync (Env::peers) for a promise of
  // durationMs (0: the negotiated session timeout) and writes on under it; a sync
  // promises while it cannot reach ZooKeeper either, and holds its own takeover until
  // the promise ends (and for durationMs after this driver starts: a promise given by
  // an earlier run of the agent is not remembered).
  bool failsafe = false;
  int64_t failsafeDurationMs = 0;
};

struct DriverCounters {
  uint64_t transitions = 0, transitionFailures = 0, restarts = 0;
  uint64_t stateWrites = 0, stateWriteFailures = 0;
  uint64_t joins = 0, withdrawals = 0, decisions = 0, freshStateMachines = 0;
  uint64_t connectionLosses = 0, writeStops = 0, writeResumes = 0, shutDowns = 0;
  uint64_t rejoins = 0, rejoinFailures = 0, handovers = 0;
  uint64_t syncStalls = 0;  // a sync found acknowledging nothing
};

class Driver {
 public:
  Driver(Env env, DriverOptions options);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Looks at postgres, starts its health check and joins the coordinator. False (and
  // a fatal error) if the coordinator refuses to join.
  bool start();
  // Leaves the coordinator, stops the health check and every timer, stops postgres if
  // configured to, then calls `done` (later, on the loop). Nothing is stepped after.
  void stop(std::function<void()> done);

  // Runs once, later on the loop, after a fatal error (the caller then stops).
  void onFatal(std::function<void()> cb) { onFatal_ = std::move(cb); }
  bool failed() const { return failed_; }

  const Peer& peer() const { return *peer_; }
  bool healthy() const { return healthy_; }
  const std::string& unhealthyDetail() const { return unhealthyDetail_; }
  bool withdrawn() const { return withdrawn_; }
  bool stopping() const { return stopping_; }
  // A postgres transition (apply or fence) is in flight.
  bool pgBusy() const { return pgBusy_; }
  bool applyQueued() const { return queuedPeerApply_.has_value(); }
  const DriverCounters& counters() const { return counters_; }
  // Writes are stopped, or being stopped, because the coordinator's connection was lost
  // (and not yet resumed nor overridden by a new configuration). Such a peer must not
  // advertise itself as a writable primary.
  bool writesStopped() const { return writesStopped_; }
  // The role whose postgres transition last finished (the state machine's role may be ahead).
  Role appliedRole() const { return roleApplied_; }
  // Postgres was shut down because the session may have expired (see writesStopped()).
  bool postgresShutDown() const { return postgresShutDown_; }
  bool coordinatorConnected() const { return !connectionLost_; }
  // The lease's end (monotonic ms), once a leader round trip confirmed the session.
  std::optional<int64_t> leaseDeadline() const { return leaseDeadline_; }
  // The failsafe: the end of the permission this primary holds from its sync, and the
  // end of the promise this peer gave (monotonic ms; nullopt: none).
  std::optional<int64_t> failsafeUntil() const { return failsafeUntil_; }
  std::optional<int64_t> promisedUntil() const { return promisedUntil_; }
  // A primary's request for a failsafe promise (POST /failsafe), decided at once.
  FailsafeAnswer onFailsafeRequest(const FailsafeRequest& request);

 private:
  void step(const Event& event);
  void later(Event event);
  bool rebuiltWhileDeposed() const;
  void startFreshStateMachine(bool feedState);
  void maybeRejoin();
  void onRejoined(const PeerIdentity& primary, const RejoinFinished& r);
  void releaseAfterRejoin();
  void afterPgTransition();
  PeerOptions peerOptions() const;
  void maybePublishDataState();
  // A valid promote request of this cluster's sync (`forSelf`: of this peer, as sync).
  bool switchoverRequested(bool forSelf) const;
  void maybeHandOver();
  void startAgainAfterHandover();
  void fencePg(const std::optional<PeerIdentity>& newSync);
  void carryOut(const Action& action);
  void join();
  void withdraw(int64_t downMs);
  void applyPg(const PgConfig& config, bool fromPeer);
  void onHealth(bool healthy, const std::string& detail);
  void noteUnhealthy();
  void healthTick();
  void nextHealthTick();
  void tellPrimaryConnectionLoss(bool lost);
  void resumeIfDeferred();
  void onConnection(const CoordinatorConnection& c);
  void isolate(const std::string& why);
  void reconnected(const std::string& how);
  void onLease(const CoordinatorLease& l);
  void leaseEnding();
  bool leaseValid() const;
  // The failsafe (agent/driver_failsafe.cc).
  int64_t failsafeDurationMs() const;
  // The end of writes: the lease's, or the failsafe's permission if later.
  int64_t writeDeadline() const;
  bool failsafeHolds() const;
  // The permission keeps writes on past the lease: the session may expire meanwhile.
  bool failsafeInUse() const;
  void armWriteDeadline();
  void scheduleFailsafeAsk(int64_t atMs);
  int64_t retryMs() const;
  void askFailsafe();
  std::optional<std::string> whyNoFailsafe() const;
  void onFailsafeAnswer(int64_t sentAt, int64_t generation, int64_t session, const Result<FailsafeAnswer>& r);
  void dropFailsafe(const std::string& why);
  // A sync's takeover (its fence, or a state write that makes it the primary) held back
  // by its promise until the promise ends; false: go ahead now.
  bool holdTakeoverForPromise(const Action& action);
  void stopWrites();
  void shutDownWrites(const std::string& why);
  // noTakeoverCanLand: the lost session came back, or the state was confirmed on a new one.
  void resumeWritesIfUnchanged(const std::string& how, bool noTakeoverCanLand = false);
  void afterNewSession();
  void confirmAfterNewSession();
  Event keepingPeersFromBeforeTheLoss(Event event);
  void endPeerGrace();
  std::optional<int64_t> generation() const;
  bool expectPostgresOnline() const;
  bool lastAppliedIsStale() const;
  void joinAgainAfterWithdrawal(const std::string& why);
  // The sync-acknowledgement watch (agent/driver_sync_watch.cc).
  void startSyncWatch();
  void syncWatchTick();
  // The sync to watch now ("" when none: not a running primary, writes stopped, a
  // transition in flight), and the generation it is the sync of.
  std::optional<std::pair<int64_t, std::string>> watchedSync() const;
  void log(LogLevel level, const std::string& line) { env_.log.write(level, line); }
  // Wraps a callback so that it does nothing once the driver is gone or stopping.
  template <class T>
  std::function<void(T)> guarded(std::function<void(T)> fn);

  Env env_;
  DriverOptions opts_;
  std::unique_ptr<Peer> peer_;
  // What the coordinator last told us, to start a fresh state machine after a rebuild.
  StateNode lastStateNode_;
  PeerList lastActive_;
  PeerDataStates lastData_;
  // The data state published for a setup: published (or being read), and a retry timer.
  bool dataPublished_ = false;
  bool dataReading_ = false;
  std::map<TimerId, std::unique_ptr<Timer>> timers_;
  std::unique_ptr<Timer> healthTimer_;
  std::unique_ptr<Timer> withdrawalTimer_;  // a withdrawn primary joins again
  // The isolated primary: see the header comment.
  bool connectionLost_ = false;
  bool primaryLossTold_ = false;  // onPrimaryConnectionLoss(true) was the last call
  bool writesStopped_ = false;
  int64_t sessionTimeoutMs_ = 0;
  Role roleAtLoss_ = Role::kUnknown;
  std::optional<int64_t> generationAtLoss_;
  PeerList activeBeforeLoss_;
  std::optional<int64_t> peerGraceUntil_;
  bool postgresShutDown_ = false;
  bool shutDownInFlight_ = false;  // asked of the adapter, not answered yet
  // A resumption asked for while a postgres transition was in flight: carried out when it
  // ends (how, noTakeoverCanLand; see resumeWritesIfUnchanged).
  std::optional<std::pair<std::string, bool>> resumeAfterTransition_;
  // A resumption decided once the state machine's step in flight ends (how, noTakeoverCanLand).
  std::optional<std::pair<std::string, bool>> resumeAfterStep_;
  bool confirmAfterStep_ = false;  // the new session's confirmation, once the step ends
  bool confirmInFlight_ = false;  // the state written back after a new session
  // Writes were stopped on a new session and have not resumed since: a connection that
  // comes back on it resumes them only through the confirmation, never by the
  // same-session rule.
  bool confirmOwed_ = false;
  // One cluster-state write at a time: the state machine's and the confirmation never
  // overlap (a confirmation wanted while the state machine's write is in flight waits
  // for it; the state machine's write asked for during a confirmation fails at once and
  // is retried with the state read after it).
  bool smWriteInFlight_ = false;
  bool confirmDeferred_ = false;
  std::unique_ptr<Timer> writesTimer_;  // stop retry, or resume settle
  std::unique_ptr<Timer> shutDownTimer_;
  // The lease: confirmations seen at all, its end, the last confirmed send, whether it
  // ended (writes stopped for it), a resumption that waits for it, and its timers (the
  // stop of writes a little before the end, the shutdown at the end).
  bool coordinatorUp_ = true;
  bool leaseInUse_ = false;
  std::optional<int64_t> leaseDeadline_;
  int64_t leaseSentAt_ = 0;
  int64_t leaseSessionId_ = 0;  // the session of leaseDeadline_
  int64_t leaseIntervalMs_ = 0;
  bool leaseEnded_ = false;
  std::optional<std::pair<std::string, bool>> resumeAfterLease_;
  std::unique_ptr<Timer> leaseTimer_;
  std::unique_ptr<Timer> leaseShutTimer_;
  // The failsafe, as primary: the permission's end, the generation and session it was
  // asked in, a request in flight, the last refusal logged, the timer of the next ask.
  // As sync: the promise's end, the takeover fence it holds back, and its timer. A state
  // write that failed leaves the outcome unknown until a state is read again: no ask.
  std::optional<int64_t> failsafeUntil_;
  int64_t failsafeGeneration_ = 0;
  int64_t failsafeSession_ = 0;
  std::string failsafeLastRefusal_;
  int64_t failsafeAskLoggedFor_ = -1;  // the last confirmed round trip's send the first request was logged for
  std::unique_ptr<Timer> failsafeTimer_;
  bool stateWriteUnsettled_ = false;
  std::optional<int64_t> promisedUntil_;
  std::string failsafeLastRefusalGiven_;  // logged once per reason
  std::optional<Action> heldTakeover_;
  bool fenceInFlight_ = false;
  std::unique_ptr<Timer> heldTakeoverTimer_;
  std::optional<int64_t> lastStaleRestartSkip_;  // logged once per transition
  std::unique_ptr<Timer> peerGraceTimer_;
  // The automatic rejoin: the generation last tried, the primary postgres
  // follows since a successful rejoin (until this peer is out of `deposed`), and
  // whether that removal is being written.
  std::optional<int64_t> rejoinTriedGeneration_;
  // A failed rejoin is tried again after this delay (0: not failed in this generation),
  // doubled after each failure; due once its timer fired.
  static constexpr int64_t kRejoinFirstRetryMs = 5000;
  static constexpr int64_t kRejoinMaxRetryMs = 300000;
  int64_t rejoinRetryDelayMs_ = 0;
  bool rejoinRetryDue_ = false;
  std::optional<std::string> rejoinedTo_;
  std::string rejoinReason_;
  bool rejoinWriteInFlight_ = false;
  std::unique_ptr<Timer> rejoinTimer_;
  // The clean handover: the primary's configuration before it stopped postgres for a
  // switchover; the generation whose takeover already waited for the old primary.
  std::optional<PgConfig> handoverFrom_;
  bool handoverTimedOut_ = false;  // the sync's wait is over: start postgres again once idle
  std::string handedOverFor_;  // the promote request (JSON) last handed over for
  std::optional<int64_t> handoverWaitedIn_;
  std::unique_ptr<Timer> handoverTimer_;
  std::unique_ptr<Timer> dataTimer_;  // retries reading the data state
  std::unique_ptr<Timer> syncWatchTimer_;
  SyncAckWatch syncWatch_;
  std::optional<std::pair<int64_t, std::string>> syncWatchedFor_;  // generation, sync
  bool syncSampleInFlight_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);

  // Postgres: one transition at a time, whether the state machine or a restart after
  // a crash asked for it.
  bool pgBusy_ = false;
  std::optional<PgConfig> queuedPeerApply_;
  std::optional<PgConfig> lastApplied_;
  bool healthy_ = true;
  std::optional<int64_t> unhealthySince_;
  int64_t lastTransitionDone_ = INT64_MIN / 2;
  int64_t lastRestartStarted_ = INT64_MIN / 2;
  std::string unhealthyDetail_;
  bool withdrawn_ = false;
  std::optional<int64_t> joinedAgainAt_;  // by joinAgainAfterWithdrawal
  bool stopping_ = false;
  bool failed_ = false;
  std::function<void()> onFatal_;
  DriverCounters counters_;
  Role roleApplied_ = Role::kUnknown;  // for opts_.onRoleApplied
};

}  // namespace dugong::agent
