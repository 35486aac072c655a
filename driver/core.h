// The driver's core: the agent's logic around the state machine (statemachine/peer.h),
// as a second pure core. `step(moment, input)` returns the commands to carry out, in
// order (driver/command.h); it reads no clock, owns no thread and does no I/O: time and
// the one fact it reads of postgres come in the Moment, and every answer comes back as
// an input (driver/input.h). The runner (driver/driver.h) carries the commands out on
// an environment (driver/env.h) for the daemon and both simulators; the transcripts of
// driver/testdata/ step it by hand.
//
// It knows the values the environment reports (driver/types.h), not the environment's
// interfaces. It feeds the coordinator's and postgres' events into the state machine and
// carries out its actions in order, and it adds what the state machine leaves to the
// agent, one protocol per file, whose fields are a class in the protocol's header (lease.h,
// failsafe.h, isolation.h, health.h, handover.h, rejoin.h, sync_watch.h): the file changes
// only its own, and asks the others' queries (docs/driver.md):
// - core.cc: the state machine's loop, one postgres transition at a time (an apply
//   asked for while a restart is in flight is queued; a fence asked for during a restart
//   is refused and retried by the state machine), the driver's start and stop;
// - health.cc: a postgres that should run but does not answer is restarted (its last
//   configuration applied again) after the restart grace, and once down for
//   withdrawAfterMs the peer leaves the coordinator until postgres is healthy again;
// - isolated_primary.cc: when the coordinator's connection is lost, writes stop at
//   once and resume only with this peer's role and the cluster's generation unchanged
//   (a new session: once the state written back, test-and-set at the version read on it,
//   shows that no takeover can land); a primary is shut down half-way to the session's
//   earliest expiry; the peers present before an outage count as present for a session
//   timeout after it;
// - lease.cc: a primary writes only under a lease confirmed by round trips through the
//   coordinator's leader (driver/lease.h), and shuts postgres down at its end;
// - failsafe.cc (core_failsafe.cc): the sync's promise during a quorum loss
//   (driver/failsafe.h);
// - sync_watch.cc: a sync that acknowledges nothing is reported to the state machine
//   (driver/sync_ack_watch.h), which replaces it;
// - handover.cc: the clean handover of a planned switchover;
// - rejoin.cc: the automatic rejoin of this deposed peer, a fresh state machine once it
//   is rebuilt, and the data state published for a setup from data;
// - reports.cc: quorum mode's takeover report published in this peer's election node.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "driver/command.h"
#include "driver/defaults.h"
#include "driver/failsafe.h"
#include "driver/handover.h"
#include "driver/health.h"
#include "driver/input.h"
#include "driver/isolation.h"
#include "driver/lease.h"
#include "driver/rejoin.h"
#include "driver/reports.h"
#include "driver/sync_watch.h"
#include "driver/types.h"
#include "statemachine/standby.h"
#include "statemachine/peer.h"
#include "statemachine/result.h"

namespace dugong::driver {

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
  std::optional<StandbySource> standbySource;  // PeerOptions::standbySource
  // What a deposed peer does on its own (statemachine/rejoin_policy.h).
  RejoinPolicy rejoin = defaults::kRejoin;
  // A planned switchover: how long the sync waits for the old primary to stop (and its
  // WAL stream to end) before it fences itself and takes over anyway. 0: no clean
  // handover (Manatee's behaviour; the script simulator, which models no WAL stream).
  int64_t handoverWaitMs = defaults::kHandoverWaitMs;
  // A sync that keeps its session but acknowledges nothing: how long commits may wait on
  // it without its flush position moving before the primary replaces it (0: never, the
  // simulators unless they model replication), how often the primary samples it, how
  // long a new sync may take to connect, and the state machine's hold between two
  // such replacements (PeerOptions::syncReplaceHoldMs).
  int64_t syncReplaceAfterMs = defaults::kSyncReplaceAfterMs;
  int64_t syncSampleMs = 250;
  int64_t syncConnectGraceMs = defaults::kSyncConnectGraceMs;
  int64_t syncReplaceHoldMs = defaults::kSyncReplaceHoldMs;
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
  // The primary's lease (driver/lease.h), when the coordinator confirms leader
  // round trips (CoordinatorCallbacks::onLease): its terms, and a call on the loop each
  // time its end (monotonic ms) moves on, for the watchdog, which shuts postgres down at
  // that end too (agent/watchdog.h).
  LeaseTerms lease;
  std::function<void(int64_t deadlineMs)> onLeaseDeadline;
  // The failsafe (driver/failsafe.h, docs/design.md "Quorum loss: the sync's promise"):
  // a primary whose lease is about to end asks its sync (Env::peers) for a promise of
  // durationMs (0: the negotiated session timeout) and writes on under it; a sync
  // promises while it cannot reach ZooKeeper either, and holds its own takeover until
  // the promise ends (and for durationMs after this driver starts: a promise given by
  // an earlier run of the agent is not remembered).
  bool failsafe = false;
  int64_t failsafeDurationMs = 0;
  // The promises of earlier runs of this agent (docs/isolated-primary.md, "The sync's
  // promise across a restart"). A promise is recorded before it is answered
  // (recordPromise, with its end in monotonic ms; an error refuses it), and a new run
  // holds its takeovers from the record whatever its own failsafe setting:
  // earlierPromiseMs is how long the last recorded promise still runs from this
  // driver's start (0: none runs on). nullopt: no record is kept (the simulators, whose
  // runs of an agent share one configuration): a promise is held for failsafeDurationMs
  // from the start if the failsafe is on.
  std::optional<int64_t> earlierPromiseMs;
  std::function<Result<bool>(int64_t promisedUntilMs)> recordPromise;
  // Quorum mode (docs/decisions/0079-quorum-commit.md, PeerOptions::quorum): the state
  // machine reads every format and runs format 2's rules, and the driver carries out what
  // they ask (takeover reports, checked writes). The agent always sets it (0089). Off: a
  // format-2 state halts the peer.
  bool quorum = false;
};

struct DriverCounters {
  uint64_t transitions = 0, transitionFailures = 0, restarts = 0;
  uint64_t stateWrites = 0, stateWriteFailures = 0;
  uint64_t joins = 0, withdrawals = 0, decisions = 0, freshStateMachines = 0;
  uint64_t connectionLosses = 0, writeStops = 0, writeResumes = 0, shutDowns = 0;
  uint64_t rejoins = 0, rejoinFailures = 0, handovers = 0;
  uint64_t syncStalls = 0;  // a sync (quorum mode: a member) found acknowledging nothing
};

class Core {
 public:
  // `peersReachable`: the environment can reach the other agents (Env::peers), which
  // the failsafe needs.
  Core(DriverOptions options, bool peersReachable);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // The one entry: what happened at `now`, and what to do about it, in order.
  std::vector<Command> step(const Moment& now, const Input& input);
  // The same into `out` (cleared first), whose capacity is reused: the driver steps its
  // core for every input, and a fresh vector grew by reallocation each time.
  void step(const Moment& now, const Input& input, std::vector<Command>& out);

  const Peer& peer() const { return *peer_; }
  bool healthy() const { return health_.healthy(); }
  const std::string& unhealthyDetail() const { return health_.detail(); }
  const std::string& lastRejoinError() const { return rejoin_.lastError(); }
  bool withdrawn() const { return health_.withdrawn(); }
  bool stopping() const { return stopping_; }
  bool failed() const { return failed_; }
  bool pgBusy() const { return pg_.op.has_value(); }
  bool applyQueued() const { return pg_.queuedPeerApply.has_value(); }
  // Postgres runs the configuration the state machine wants: no transition in flight, and
  // the last one applied is the wanted one.
  bool runsWantedConfig() const { return !pgBusy() && !lastAppliedIsStale(); }
  const DriverCounters& counters() const { return counters_; }
  bool writesStopped() const { return isolation_.writesStopped(); }
  Role appliedRole() const { return pg_.roleApplied; }
  bool postgresShutDown() const { return isolation_.postgresShutDown(); }
  bool coordinatorConnected() const { return !isolation_.connectionLost(); }
  std::optional<int64_t> leaseDeadline() const { return lease_.deadline(); }
  std::optional<int64_t> failsafeUntil() const { return failsafe_.permittedUntil(); }
  std::optional<int64_t> promisedUntil() const { return failsafe_.promisedUntil(); }

 private:
  // A postgres operation: an apply (the state machine's, the driver's own, or the start
  // after a switchover that did not happen, which applies the state machine's wanted
  // configuration), the wait for the old primary's stop before a fence, the fence, a rejoin.
  enum class PgOp { kPeerApply, kOwnApply, kStartAgain, kAwaitUpstreamStop, kFence, kRejoin };
  // ---- core.cc: the loop, the state machine's actions, postgres transitions
  void onInput(const Input& input);
  void start();
  void stop();
  void step(const Event& event);
  void later(Event event) { emit(cmd::Later{std::move(event)}); }
  void carryOut(Action action);  // moves what it emits (a state written) out of `action`
  void join();
  void applyPg(const PgConfig& config, PgOp op = PgOp::kOwnApply);
  void onApplied(const in::Applied& a);
  void fencePg(const std::optional<PeerIdentity>& newSync);
  void onFenced(const PgFenced& r);
  void onStateMachineWrite(const StateWriteFinished& r);
  void noteStateRead(const StateNode& node);
  // A write of this purpose is in flight, its answer not yet come back.
  bool stateWriteUnanswered(in::WriteFor purpose) const;
  void afterPgTransition();
  PeerOptions peerOptions() const;
  std::optional<int64_t> generation() const;
  bool expectPostgresOnline() const;
  bool lastAppliedIsStale() const;
  void onTimer(const TimerKey& key);
  // ---- health.cc
  void onHealth(bool healthy, const std::string& detail);
  void noteUnhealthy();
  void healthTick();
  void nextHealthTick();
  void withdraw(int64_t downMs);
  void joinAgainAfterWithdrawal(const std::string& why);
  void joinAgainOnceDeposedAndStopped();
  void onWithdrawalOver();
  // ---- isolated_primary.cc
  void onConnection(const CoordinatorConnection& c);
  // A new session (ZkInitialized): what the old one left is dropped before the state is
  // noted (true: a resumption or a confirmation that waited), then the new one begins
  // (true: the old session's connection was lost), and once the state machine is
  // stepped a primary whose lost session expired is shut down.
  bool leaveTheOldSession();
  bool enterTheNewSession();
  void shutDownAsTheLostSessionExpired();
  // After a successful apply: whether writes stay stopped, or resume (true: start
  // postgres again after the resume, a shutdown kept it down).
  bool writesAfterApply(const PgConfig& config, bool wanted);
  // A primary withdrawing from the coordinator stops writes as if its connection was lost.
  void stopWritesForWithdrawal();
  // A shutdown still holds at the lease's end (false: a transition since may have started
  // postgres, which is then shut down again).
  bool postgresStillShutDown();
  void isolate(const std::string& why);
  void notePeersBeforeTheLoss();
  void reconnected(const std::string& how);
  void tellPrimaryConnectionLoss(bool lost);
  void stopWrites();
  void onWritesStopped(const Result<int>& r);
  void shutDownWrites(const std::string& why);
  void onShutDown(const Result<bool>& r);
  void onShutDownTimer();
  // noTakeoverCanLand: the lost session came back, or the state was confirmed on a new one.
  void resumeWritesIfUnchanged(const std::string& how, bool noTakeoverCanLand = false);
  // What holds a resumption back now (kNothing: it is decided now).
  Isolation::WritesWait resumeWaitsFor(bool noTakeoverCanLand) const;
  // The primary, with the configuration postgres already has, and the state machine in the
  // middle of a step or settling a write of unknown outcome: nothing but the end of that
  // lifts a stop of writes.
  bool primaryConfigAppliedMidStep() const;
  // The resumption and the confirmation that wait, decided now if nothing holds them back.
  void reconcileWrites();
  void onWritesResumed(bool noTakeoverCanLand, const Result<bool>& r);
  void onWritesTimer();
  void afterNewSession();
  void confirmAfterNewSession();
  void onConfirmation(int32_t version, const StateWriteFinished& w);
  // nullopt: the event as delivered (no grace, or no peer to add); spares a copy of each.
  std::optional<Event> keepingPeersFromBeforeTheLoss(const Event& delivered);
  void endPeerGrace();
  // ---- lease.cc
  void onLease(const CoordinatorLease& l);
  void leaseEnding();
  void onLeaseShutTimer();
  bool leaseValid() const;
  // ---- core_failsafe.cc
  void holdEarlierPromise();
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
  void onFailsafeAnswer(const in::FailsafeAnswered& a);
  void dropFailsafe(const std::string& why);
  std::optional<int64_t> failsafeGrantsEnd() const;
  FailsafeGranterView granterView() const;
  FailsafeAnswer answerFailsafe(const FailsafeRequest& request);
  // A release from the primary that stopped postgres for a switchover to this peer.
  FailsafeAnswer releaseFailsafe(const FailsafeRequest& request);
  // A sync's takeover (its fence, or a state write that makes it the primary) held back
  // by its promise until the promise ends; false: go ahead now.
  bool holdTakeoverForPromise(const Action& action);
  void onHeldTakeoverTimer();
  // ---- sync_watch.cc
  void startSyncWatch();
  void syncWatchTick();
  // Every healthTickMs, when the environment tells (Moment::stream): publishes whether
  // postgres streams, i.e. runs as a standby that has streamed from the upstream its
  // configuration names since it last started. A standby whose upstream has just gone
  // still counts (a takeover may be about to replace that upstream); a rebuild, a
  // standby that cannot follow, or one whose new upstream it has not reached, does not.
  void streamWatchTick();
  void onSyncSampled(const in::SyncSampled& s);
  // A running primary, writes not stopped, no transition in flight: its replication is
  // watched.
  bool watchesReplication() const;
  // The sync to watch now (none: replication not watched, or no sync), and the
  // generation it is the sync of.
  std::optional<std::pair<int64_t, std::string>> watchedSync() const;
  // Quorum mode: the members to watch now, and the generation they are members of.
  std::optional<std::pair<int64_t, std::vector<std::string>>> watchedMembers() const;
  void membersWatchTick(const std::pair<int64_t, std::vector<std::string>>& members);
  void onMembersSampled(const in::MembersSampled& s);
  // ---- handover.cc
  // A valid promote request of this cluster's sync (`forSelf`: of this peer, as sync; in
  // quorum mode, of a member, and `forSelf` of any member, every member waiting for the
  // old primary's stop): its target.
  std::optional<std::string> switchoverTarget(bool forSelf) const;
  bool switchoverRequested(bool forSelf) const;
  // In sync mode, a valid promote request naming this peer, the sync (its JSON text;
  // empty: none), whether or not the primary is still there to hand over.
  std::string switchoverToSelf() const;
  void releaseFailsafeOnceRequested();
  void releaseSyncForHandover(const ClusterState& s);
  bool awaitOldPrimaryStop(const std::optional<PeerIdentity>& newSync);
  void onHandoverTimer();
  void maybeHandOver();
  void startAgainAfterHandover();
  void onUpstreamStopped(const in::UpstreamStopped& u);
  // ---- rejoin.cc
  bool rebuiltWhileDeposed() const;
  void startFreshStateMachine(bool feedState);
  void maybeRejoin();
  void onRejoined(const PeerIdentity& primary, const RejoinFinished& r);
  void releaseAfterRejoin();
  void onReleased(const StateWriteFinished& w);
  void onRejoinTimer();
  void maybePublishDataState();
  void onDataStateRead(const Result<PeerDataState>& r);
  // ---- reports.cc
  void publishReport(std::optional<TakeoverReport> report);
  void onReportPublished(const ReportPublished& r);

  // The commands of the step in progress.
  void emit(Command c) { out_.push_back(std::move(c)); }
  void log(LogLevel level, std::string line) { emit(cmd::Log{level, std::move(line)}); }
  void setTimer(TimerKind kind, int64_t delayMs);
  void cancelTimer(TimerKind kind);
  // armed_: starts `key` to fire at `at` (again, if it was); stops it, false if it was not armed.
  void arm(const TimerKey& key, int64_t at);
  bool disarm(const TimerKey& key);
  int64_t now() const { return now_.monoMs; }
  // Lines logged once per value of what they say: the primary's reason not to ask for a
  // promise or the sync's for giving none (each once per reason), the first request of a
  // stall of the round trips (once per round trip it follows), a restart not done (once
  // per transition).
  enum class Memo { kNoAsk, kAskFor, kNoPromise, kStaleRestart, kOutageRestart };
  // True if `value` is new for `memo` (noting it): the line is to be logged.
  bool logOnce(Memo memo, const std::string& value);

  DriverOptions opts_;
  bool peersReachable_ = false;
  Moment now_;
  std::vector<Command> out_;
  // The timers started and not yet fired nor cancelled, sorted by key: a handful, in a
  // vector rather than a map (a node allocation per timer start, every few milliseconds).
  std::vector<std::pair<TimerKey, int64_t>> armed_;
  std::unique_ptr<Peer> peer_;
  // What the coordinator last told (core.cc notes it; every protocol reads it): the
  // cluster state last read, as read and parsed once (nullopt: none, or not valid), the
  // peers present, their data states, those that do not stream and their takeover
  // reports (also to start a fresh
  // state machine after a rebuild), the session's negotiated timeout, and whether its
  // connection is up (as last told).
  struct ReadState {
    StateNode node;
    std::optional<ClusterState> parsed;
  };
  struct CoordinatorView {
    ReadState state;
    PeerList active;
    PeerDataStates data;
    std::set<std::string> notStreaming;
    TakeoverReports reports;  // quorum mode: the reports the present peers publish
    int64_t sessionTimeoutMs = 0;
    bool connected = true;
  };
  CoordinatorView coord_;
  // One cluster-state write at a time, whatever its purpose: the state machine's, the
  // confirmation after a new session, the release from deposed after a rejoin (a
  // confirmation wanted while another write is in flight waits for it; the state
  // machine's write asked for during a confirmation fails at once and is retried with the
  // state read after it). The state machine's lasts until it has stepped the answer
  // (`answered`: the answer is on its way to it).
  struct StateWrite {
    in::WriteFor purpose;
    bool answered = false;
  };
  std::optional<StateWrite> stateWrite_;
  // A state write that failed leaves the outcome unknown until a state is read again (the
  // failsafe asks for no promise meanwhile).
  bool stateWriteUnsettled_ = false;
  // Postgres: one operation at a time, whether the state machine or the driver (a restart
  // after a crash, a handover, a rejoin) asked for it; an apply of the state machine's
  // asked for meanwhile waits in queuedPeerApply. The last configuration applied, when
  // the last transition ended, and the role last applied (for RoleApplied).
  struct Postgres {
    std::optional<PgOp> op;
    std::optional<PgConfig> queuedPeerApply;
    std::optional<PgConfig> lastApplied;
    int64_t lastTransitionDone = INT64_MIN / 2;
    Role roleApplied = Role::kUnknown;
  };
  Postgres pg_;
  bool stopping_ = false;
  bool failed_ = false;
  std::map<Memo, std::string> memos_;
  DriverCounters counters_;
  // The protocols, one class each (docs/driver.md): each file changes only its own, and
  // asks the others' queries.
  Lease lease_;
  Failsafe failsafe_;
  Isolation isolation_;
  Health health_;
  Handover handover_;
  Rejoin rejoin_;
  DataStatePublication dataState_;
  SyncWatch syncWatch_;
  ReportPublication reports_;
};

}  // namespace dugong::driver
