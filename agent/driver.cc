#include "agent/driver.h"

#include <utility>

#include "statemachine/overloaded.h"
#include "statemachine/promote_request.h"

namespace dugong::agent {

namespace {
// How much longer than the sync's wait the primary keeps postgres stopped for a
// switchover that does not happen.
constexpr int64_t kHandoverSlackMs = 500;
}  // namespace

Driver::Driver(Env env, DriverOptions options)
    : env_(env),
      opts_(std::move(options)),
      peer_(std::make_unique<Peer>(peerOptions())),
      healthTimer_(env_.clock.newTimer()),
      withdrawalTimer_(env_.clock.newTimer()),
      writesTimer_(env_.clock.newTimer()),
      shutDownTimer_(env_.clock.newTimer()),
      leaseTimer_(env_.clock.newTimer()),
      leaseShutTimer_(env_.clock.newTimer()),
      failsafeTimer_(env_.clock.newTimer()),
      heldTakeoverTimer_(env_.clock.newTimer()),
      peerGraceTimer_(env_.clock.newTimer()),
      rejoinTimer_(env_.clock.newTimer()),
      handoverTimer_(env_.clock.newTimer()),
      dataTimer_(env_.clock.newTimer()),
      syncWatchTimer_(env_.clock.newTimer()),
      syncWatch_(opts_.syncReplaceAfterMs, opts_.syncConnectGraceMs) {}

PeerOptions Driver::peerOptions() const {
  PeerOptions o{opts_.identity, opts_.singleton, opts_.retryDelayMs};
  o.setupFromData = opts_.setupFromData;
  o.setupWaitMs = opts_.setupWaitMs;
  o.syncReplaceHoldMs = opts_.syncReplaceHoldMs;
  return o;
}

Driver::~Driver() = default;

template <class T>
std::function<void(T)> Driver::guarded(std::function<void(T)> fn) {
  return [this, alive = std::weak_ptr<int>(alive_), fn = std::move(fn)](T value) {
    if (!alive.expired() && !stopping_) fn(std::move(value));
  };
}

bool Driver::start() {
  env_.postgres.init(guarded<PgInitialized>([this](PgInitialized e) {
    log(LogLevel::kInfo, std::string("postgres found ") + (e.online ? "running" : "stopped") + " and " +
                             (e.setUp ? "set up before" : "never set up"));
    step(e);
  }));
  env_.postgres.startHealthCheck([this, alive = std::weak_ptr<int>(alive_)](bool healthy, const std::string& detail) {
    if (!alive.expired() && !stopping_) onHealth(healthy, detail);
  });
  if (opts_.failsafe && opts_.failsafeDurationMs > 0) {
    // A promise an earlier run of this agent gave is not remembered: held as if given now.
    promisedUntil_ = env_.clock.monotonicMs() + opts_.failsafeDurationMs;
    log(LogLevel::kInfo, "failsafe: on; this peer takes over from no primary within " +
                             std::to_string(opts_.failsafeDurationMs) +
                             " ms of its start (an earlier run of its agent may have promised so)");
  }
  join();
  startSyncWatch();
  return !failed_;
}

void Driver::join() {
  ++counters_.joins;
  CoordinatorCallbacks cb;
  cb.onEvent = guarded<Event>([this](Event e) { step(e); });
  cb.onConnection = guarded<CoordinatorConnection>([this](CoordinatorConnection c) { onConnection(c); });
  cb.onLease = guarded<CoordinatorLease>([this](CoordinatorLease l) { onLease(l); });
  if (auto ok = env_.coordinator.join(std::move(cb)); !ok) {
    carryOut(Fatal{"cannot join the coordinator: " + ok.error()});
  }
}

void Driver::stop(std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  log(LogLevel::kInfo, std::string("stopping: ") +
                           (opts_.keepMembershipOnStop
                                ? "keeping the ZooKeeper session for a restart (peers see no change if this agent is "
                                  "back within the session timeout)"
                                : "leaving ZooKeeper") +
                           (opts_.stopPostgresOnExit ? " and stopping postgres" : ""));
  for (auto& [id, timer] : timers_) timer->cancel();
  healthTimer_->cancel();
  withdrawalTimer_->cancel();
  writesTimer_->cancel();
  shutDownTimer_->cancel();
  leaseTimer_->cancel();
  leaseShutTimer_->cancel();
  failsafeTimer_->cancel();
  heldTakeoverTimer_->cancel();
  peerGraceTimer_->cancel();
  rejoinTimer_->cancel();
  handoverTimer_->cancel();
  dataTimer_->cancel();
  syncWatchTimer_->cancel();
  if (opts_.keepMembershipOnStop) {
    env_.coordinator.leaveKeepingMembership();
  } else {
    env_.coordinator.leave();
  }
  env_.postgres.stopHealthCheck();
  if (!opts_.stopPostgresOnExit) return env_.clock.post(std::move(done));
  env_.postgres.apply(PgConfig::none(),
                      [this, alive = std::weak_ptr<int>(alive_), done = std::move(done)](PgConfigApplied r) {
                        if (!r.ok && !alive.expired()) log(LogLevel::kError, "stopping postgres failed: " + r.error);
                        done();
                      });
}

// ---- the state machine's loop ------------------------------------------------------

void Driver::later(Event event) {
  env_.clock.post([this, alive = std::weak_ptr<int>(alive_), event = std::move(event)] {
    if (!alive.expired() && !stopping_) step(event);
  });
}

void Driver::step(const Event& delivered) {
  if (stopping_) return;
  bool newSessionAfterLoss = false;
  if (std::holds_alternative<ZkInitialized>(delivered) || std::holds_alternative<ClusterStateChanged>(delivered)) {
    stateWriteUnsettled_ = false;  // the state read says how any earlier write ended
  }
  if (auto* init = std::get_if<ZkInitialized>(&delivered)) {
    if (failsafeInUse() && !connectionLost_) {
      isolate("failsafe: a new ZooKeeper session while writing under the sync's promise: the old session may have "
              "expired, and a takeover be decided; stopping writes until the state is confirmed on the new one");
    }
    if (failsafeUntil_) dropFailsafe("a new ZooKeeper session");
    resumeAfterStep_.reset();  // decided on the session it was asked on, never on a new one
    confirmAfterStep_ = false;
    lastStateNode_ = init->state;
    lastActive_ = init->active;
    lastData_ = init->data;
    // The new session's lease comes with it (onLease, a new session id): its creation
    // was a leader's transaction.
    coordinatorUp_ = true;
    newSessionAfterLoss = connectionLost_;
    if (newSessionAfterLoss) {
      connectionLost_ = false;
      tellPrimaryConnectionLoss(false);
      log(LogLevel::kWarn, "a new ZooKeeper session: the one whose connection was lost expired");
      if (!activeBeforeLoss_.empty()) {
        peerGraceUntil_ = env_.clock.monotonicMs() + sessionTimeoutMs_;
        peerGraceTimer_->start(sessionTimeoutMs_, [this, alive = std::weak_ptr<int>(alive_)] {
          if (!alive.expired() && !stopping_) endPeerGrace();
        });
      }
    }
  } else if (auto* change = std::get_if<ClusterStateChanged>(&delivered)) {
    lastStateNode_ = change->state;
  } else if (auto* active = std::get_if<ActivePeersChanged>(&delivered)) {
    lastActive_ = active->active;
    lastData_ = active->data;
  }
  const Event event = keepingPeersFromBeforeTheLoss(delivered);
  if (std::holds_alternative<ClusterStateChanged>(event) || std::holds_alternative<ZkInitialized>(event)) {
    // The event being stepped now delivers the state; the active list comes first.
    if (rebuiltWhileDeposed()) startFreshStateMachine(std::holds_alternative<ClusterStateChanged>(event));
  }
  if (newSessionAfterLoss && writesStopped_ && !postgresShutDown_ && roleAtLoss_ == Role::kPrimary) {
    shutDownTimer_->cancel();
    shutDownWrites("the session whose connection was lost has expired");
  }
  for (const Action& a : peer_->step(env_.clock.wallMs(), event)) carryOut(a);
  if (failsafeUntil_ && (peer_->role() != Role::kPrimary || generation() != failsafeGeneration_)) {
    dropFailsafe("this peer is no longer the primary of generation " + std::to_string(failsafeGeneration_));
  }
  if (resumeAfterStep_ && !peer_->awaitingCompletion() && !peer_->keepsFence()) {
    auto [how, noTakeoverCanLand] = *std::exchange(resumeAfterStep_, std::nullopt);
    resumeWritesIfUnchanged(how, noTakeoverCanLand);
  }
  if (confirmAfterStep_ && !peer_->awaitingCompletion() && !peer_->keepsFence()) {
    confirmAfterStep_ = false;
    confirmAfterNewSession();
  }
  if (newSessionAfterLoss) afterNewSession();
  maybeHandOver();
  maybeRejoin();
  maybePublishDataState();
}

// A deposed peer's state machine ignores everything. Once an operator has rebuilt this
// peer and removed it from `deposed`, the driver starts a fresh one: when the state
// says so, or, if a transition was in flight then, as soon as it ends.
bool Driver::rebuiltWhileDeposed() const {
  if (peer_->role() != Role::kDeposed || pgBusy_ || !lastStateNode_.exists) return false;
  auto state = ClusterState::parse(lastStateNode_.data);
  return state && !containsPeer(state->deposed, opts_.identity.id);
}

void Driver::startFreshStateMachine(bool feedState) {
  log(LogLevel::kInfo, "this peer is no longer deposed: it was rebuilt; starting a fresh state machine");
  ++counters_.freshStateMachines;
  peer_ = std::make_unique<Peer>(peerOptions());
  for (auto& [id, timer] : timers_) timer->cancel();
  env_.postgres.init(guarded<PgInitialized>([this](PgInitialized e) { step(e); }));
  if (feedState) {
    for (const Action& a : peer_->step(env_.clock.wallMs(), ZkInitialized{lastStateNode_, lastActive_, lastData_})) {
      carryOut(a);
    }
  }
}

void Driver::carryOut(const Action& action) {
  std::visit(
      Overloaded{
          [&](const WriteClusterState& w) {
            ++counters_.stateWrites;
            if (withdrawn_) {
              ++counters_.stateWriteFailures;
              return later(StateWriteFinished{false, "not connected to ZooKeeper (withdrawn)", false, -1});
            }
            if (confirmInFlight_) {
              ++counters_.stateWriteFailures;
              return later(StateWriteFinished{
                  false, "a test-and-set confirming the state after a new session is in flight", false, -1});
            }
            if (holdTakeoverForPromise(w)) return;
            // A write may name another sync, which promised nothing: the failsafe's
            // permission does not outlive it.
            if (failsafeUntil_) dropFailsafe("this peer writes the cluster state (" + w.reason + ")");
            smWriteInFlight_ = true;
            env_.coordinator.putClusterState(w.state, w.expectedVersion, w.reason,
                                             guarded<StateWriteFinished>([this](StateWriteFinished r) {
                                               smWriteInFlight_ = false;
                                               if (!r.ok) ++counters_.stateWriteFailures;
                                               if (!r.ok) stateWriteUnsettled_ = true;
                                               later(r);
                                               if (confirmDeferred_) {
                                                 // After the state machine has stepped the answer.
                                                 confirmDeferred_ = false;
                                                 env_.clock.post([this, alive = std::weak_ptr<int>(alive_)] {
                                                   if (!alive.expired() && !stopping_) confirmAfterNewSession();
                                                 });
                                               }
                                             }));
          },
          [&](const ApplyPgConfig& a) {
            // A primary out of ZooKeeper keeps postgres down (see withdraw()): the state
            // machine's retry of an apply that failed around the withdrawal is refused,
            // and it tries again once the peer has joined again.
            if (withdrawn_ && a.config.role == PgRole::kPrimary) {
              return later(PgConfigApplied{false, "withdrawn from ZooKeeper: postgres stays down until this peer "
                                                  "has joined again",
                                           false});
            }
            applyPg(a.config, true);
          },
          [&](const FencePg& f) {
            // The state machine fences only with no transition of its own in flight; a
            // restart after a crash may be: the fence then fails and is retried.
            if (pgBusy_) return later(PgFenced{false, "postgres is being restarted", 0});
            if (holdTakeoverForPromise(f)) return;
            pgBusy_ = true;
            const auto gen = generation();
            if (!switchoverRequested(true) || handoverWaitedIn_ == gen) return fencePg(f.newSync);
            handoverWaitedIn_ = gen;
            log(LogLevel::kInfo, "switchover: waiting up to " + std::to_string(opts_.handoverWaitMs) + " ms for " +
                                     peer_->clusterState()->primary.id +
                                     " to stop postgres, so that this peer has all of its WAL before taking over");
            auto inCall = std::make_shared<bool>(true);
            env_.postgres.awaitUpstreamStop(
                opts_.handoverWaitMs, [this, alive = std::weak_ptr<int>(alive_), inCall, newSync = f.newSync](bool ended) {
                  if (!*inCall && (alive.expired() || stopping_)) return;
                  log(LogLevel::kInfo, ended ? "switchover: the old primary's WAL stream ended: taking over"
                                             : "switchover: the old primary's WAL stream did not end: taking over anyway");
                  fencePg(newSync);
                });
            *inCall = false;
          },
          [&](const ReadWal&) {
            env_.postgres.readWal(guarded<WalPositionRead>([this](WalPositionRead r) { step(r); }));
          },
          [&](const StartTimer& t) {
            auto& timer = timers_[t.id];
            if (!timer) timer = env_.clock.newTimer();
            timer->start(t.delayMs, [this, alive = std::weak_ptr<int>(alive_), id = t.id] {
              if (!alive.expired() && !stopping_) step(TimerFired{id});
            });
          },
          [&](const LogDecision& d) {
            ++counters_.decisions;
            log(d.level, d.message);
          },
          [&](const Fatal& f) {
            log(LogLevel::kError, "fatal: " + f.reason);
            failed_ = true;
            if (onFatal_) env_.clock.post(onFatal_);
          },
      },
      action);
}

// ---- postgres ------------------------------------------------------------------------

// REQUIRES: pgBusy_ set by the caller.
void Driver::fencePg(const std::optional<PeerIdentity>& newSync) {
  fenceInFlight_ = true;
  env_.postgres.fence(newSync, guarded<PgFenced>([this](PgFenced r) {
                        pgBusy_ = false;
                        fenceInFlight_ = false;
                        step(r);
                        resumeIfDeferred();
                      }));
}

void Driver::resumeIfDeferred() {
  if (pgBusy_ || !resumeAfterTransition_) return;
  // A confirmation of the state asked for since decides instead (its answer resumes).
  if (confirmInFlight_) return resumeAfterTransition_.reset();
  auto [how, noTakeoverCanLand] = *std::exchange(resumeAfterTransition_, std::nullopt);
  resumeWritesIfUnchanged(how, noTakeoverCanLand);
}

void Driver::applyPg(const PgConfig& config, bool fromPeer) {
  if (pgBusy_) {
    // Only a restart can be in flight when the state machine asks (it never asks twice).
    if (fromPeer) queuedPeerApply_ = config;
    return;
  }
  pgBusy_ = true;
  if (config.role == PgRole::kPrimary && opts_.onPrimaryApplyStarting) opts_.onPrimaryApplyStarting();
  env_.postgres.apply(config, guarded<PgConfigApplied>([this, config, fromPeer](PgConfigApplied r) {
                        pgBusy_ = false;
                        lastTransitionDone_ = env_.clock.monotonicMs();
                        if (r.ok) {
                          lastApplied_ = config;
                          ++counters_.transitions;
                          if (writesStopped_ && connectionLost_) {
                            log(LogLevel::kWarn, std::string("stopping writes again: postgres was configured as ") +
                                                     pgRoleName(config.role) +
                                                     " while ZooKeeper is unreachable, which lifts the stop");
                            // Shut down at once where it must be down (the shutdown stops
                            // writes itself: a stop of writes first would leave it writable
                            // meanwhile, e.g. a withdrawn primary whose restart ended after the
                            // takeover): it had been shut down before this configuration, or it
                            // became primary during the outage, so no shutdown was planned at
                            // the loss and its session may expire any time now.
                            const bool wasShutDown = std::exchange(postgresShutDown_, false);
                            if (wasShutDown) {
                              shutDownWrites("it had been shut down before this configuration");
                            } else if (withdrawn_ || (leaseInUse_ && leaseEnded_)) {
                              // No lease to write under (it ended, or this peer left
                              // ZooKeeper): a shutdown planned at the lease's end or at the
                              // withdrawal may have run before this start (it does not wait
                              // for a transition in flight).
                              shutDownWrites(withdrawn_ ? "this peer withdrew from ZooKeeper while it started"
                                                        : "its lease ended while it started");
                            } else if (config.role == PgRole::kPrimary && roleAtLoss_ != Role::kPrimary) {
                              shutDownWrites("it became the primary while ZooKeeper is unreachable, and its "
                                             "session may expire before the connection is back");
                            } else {
                              stopWrites();
                            }
                          } else if (writesStopped_ && fromPeer && config.role == PgRole::kPrimary &&
                                     roleAtLoss_ == Role::kPrimary && peer_->role() == Role::kPrimary &&
                                     (generation() == generationAtLoss_ || confirmOwed_)) {
                            // Still the primary, from a state read on the new session (of the
                            // generation at the loss, or of a newer one its own write of unknown
                            // outcome made): a takeover decided on an older read may yet land
                            // before this peer's test-and-set, so writes resume only on the
                            // confirmation, as without this apply.
                            log(LogLevel::kInfo, "stopping writes again: postgres was configured as primary "
                                                 "before the state read on the new session was confirmed");
                            // Shut down before this apply: down again until the confirmation,
                            // which starts it (stopped writes would still let a session that
                            // says BEGIN READ WRITE commit locally while a takeover may land).
                            if (std::exchange(postgresShutDown_, false)) {
                              shutDownWrites("it had been shut down before this configuration, and stays down "
                                             "until the state read on the new session is confirmed");
                            } else {
                              stopWrites();
                            }
                            confirmAfterNewSession();
                          } else if (writesStopped_ && fromPeer) {
                            writesStopped_ = false;
                            confirmOwed_ = false;
                            postgresShutDown_ = false;
                            writesTimer_->cancel();
                            shutDownTimer_->cancel();
                            log(LogLevel::kInfo, std::string("writes are no longer stopped: the state machine "
                                                             "configured postgres as ") +
                                                     pgRoleName(config.role) + " from the cluster state read since");
                          }
                          // After the above: whether postgres is expected online may have
                          // changed, and an unhealthy report heard while it was not (a
                          // crash since is no change for the health check) starts the clock.
                          noteUnhealthy();
                        } else {
                          ++counters_.transitionFailures;
                          if (!fromPeer) {
                            log(LogLevel::kWarn, "restarting postgres failed: " + r.error);
                            noteUnhealthy();  // the health check restarts it again
                          }
                        }
                        if (r.ok && fromPeer && peer_->role() != roleApplied_) {
                          const Role previous = std::exchange(roleApplied_, peer_->role());
                          if (opts_.onRoleApplied) opts_.onRoleApplied(previous, roleApplied_);
                        }
                        if (fromPeer) step(r);
                        afterPgTransition();
                      }));
}

bool Driver::expectPostgresOnline() const {
  return lastApplied_ && lastApplied_->role != PgRole::kNone && !postgresShutDown_;
}

// A postgres transition ended: what waited for it.
void Driver::afterPgTransition() {
  if (rebuiltWhileDeposed()) startFreshStateMachine(true);
  resumeIfDeferred();
  if (queuedPeerApply_ && !pgBusy_ && !stopping_) {
    PgConfig next = *queuedPeerApply_;
    queuedPeerApply_.reset();
    applyPg(next, true);
  }
  maybeHandOver();
  maybeRejoin();
  maybePublishDataState();
}

// ---- the data state published for a setup ------------------------------------------------

// With no cluster state, postgres is stopped (role none): what its data directory holds
// is then final, and published for the peers that choose who sets the cluster up. Once
// a state exists it is withdrawn, so that a later loss of the state never finds it stale.
void Driver::maybePublishDataState() {
  if (!opts_.setupFromData || stopping_) return;
  if (peer_->clusterState()) {
    if (dataPublished_) {
      dataPublished_ = false;
      log(LogLevel::kInfo, "no longer publishing this peer's data state: the cluster has a state");
      env_.coordinator.publishDataState(std::nullopt);
    }
    return;
  }
  if (dataPublished_ || dataReading_ || pgBusy_ || !lastApplied_ || lastApplied_->role != PgRole::kNone) return;
  dataReading_ = true;
  env_.postgres.readDataState([this, alive = std::weak_ptr<int>(alive_)](Result<PeerDataState> r) {
    // Posted: the default implementation answers inside the call.
    env_.clock.post([this, alive, r = std::move(r)] {
      if (alive.expired() || stopping_) return;
      dataReading_ = false;
      if (!r) {
        log(LogLevel::kError, "cannot read what the data directory holds (" + r.error() + "); trying again in " +
                                  std::to_string(opts_.retryDelayMs) + " ms");
        dataTimer_->start(opts_.retryDelayMs, [this, alive] {
          if (!alive.expired()) maybePublishDataState();
        });
        return;
      }
      if (peer_->clusterState() || pgBusy_ || !lastApplied_ || lastApplied_->role != PgRole::kNone) {
        return maybePublishDataState();  // things moved on while it was read
      }
      dataPublished_ = true;
      log(LogLevel::kInfo, "no cluster state: publishing what this peer's data directory holds (" + r->describe() +
                               ") for the choice of who sets the cluster up");
      env_.coordinator.publishDataState(*r);
    });
  });
}

// ---- the clean handover of a planned switchover --------------------------------------------

bool Driver::switchoverRequested(bool forSelf) const {
  const auto& s = peer_->clusterState();
  if (opts_.handoverWaitMs <= 0) return false;
  if (!s || !s->sync || !s->hasPromote() || s->frozen() || s->oneNodeWriteMode) return false;
  auto req = validatePromote(s->promote, *s, env_.clock.wallMs());
  if (!req || req->role != "sync" || req->id != s->sync->id) return false;
  if (forSelf) return peer_->role() == Role::kSync && req->id == opts_.identity.id && containsPeer(lastActive_, s->primary.id);
  return containsPeer(lastActive_, s->sync->id);
}

// On the primary: a switchover to its sync is requested: stop postgres now, while the
// sync still streams, so that it receives everything this primary wrote. Once per
// request, and for a bounded time: the sync waits at most handoverWaitMs for this
// stop, so a primary still not deposed a little after that starts postgres again.
void Driver::maybeHandOver() {
  if (peer_->role() != Role::kPrimary) {
    handoverFrom_.reset();
    handoverTimer_->cancel();
    return;
  }
  if (pgBusy_ || stopping_) return;
  // Not while the state machine is in the middle of a step: a start between its fence
  // and its state write would undo the fence. Looked at again after it.
  if (handoverFrom_ && peer_->awaitingCompletion()) return;
  const auto& s = peer_->clusterState();
  const bool requested = switchoverRequested(false);
  const std::string request = requested ? s->promote.dump() : "";
  if (requested && !handoverFrom_ && request != handedOverFor_ && lastApplied_ &&
      lastApplied_->role == PgRole::kPrimary) {
    handoverFrom_ = *lastApplied_;
    handedOverFor_ = request;
    ++counters_.handovers;
    log(LogLevel::kInfo, "switchover to " + s->sync->id + " requested: stopping postgres now, while " + s->sync->id +
                             " streams, so that it receives all of this primary's WAL before it takes over");
    handoverTimedOut_ = false;
    applyPg(PgConfig::none(), false);
    handoverTimer_->start(opts_.handoverWaitMs + kHandoverSlackMs, [this, alive = std::weak_ptr<int>(alive_)] {
      if (alive.expired() || stopping_) return;
      handoverTimedOut_ = true;
      maybeHandOver();  // now, or when the stop in flight ends
    });
  } else if (handoverTimedOut_ && handoverFrom_) {
    log(LogLevel::kWarn, "switchover did not happen within " + std::to_string(opts_.handoverWaitMs + kHandoverSlackMs) +
                             " ms: this peer is still the primary; starting postgres again as primary");
    startAgainAfterHandover();
  } else if (!requested && handoverFrom_) {
    log(LogLevel::kWarn, "switchover abandoned: the promote request is gone or expired and this peer is still the "
                         "primary: starting postgres again as primary");
    handoverTimer_->cancel();
    startAgainAfterHandover();
  }
}

// The switchover is over and this peer is still the primary: postgres should run as the
// state machine wants it now (its sync may have changed meanwhile), also for the health
// logic should this start fail.
void Driver::startAgainAfterHandover() {
  lastApplied_ = peer_->wantedPgConfig();
  handoverFrom_.reset();
  applyPg(*lastApplied_, false);
}

// ---- the automatic rejoin of a deposed peer ---------------------------------------------

void Driver::maybeRejoin() {
  if (opts_.rejoin == RejoinPolicy::kManual || stopping_ || withdrawn_ || failed_) return;
  if (peer_->role() != Role::kDeposed || pgBusy_ || queuedPeerApply_) return;
  if (rejoinedTo_) return releaseAfterRejoin();
  // Only once the deposed state machine has stopped postgres.
  if (!lastApplied_ || lastApplied_->role != PgRole::kNone || !lastStateNode_.exists) return;
  auto state = ClusterState::parse(lastStateNode_.data);
  if (!state || !containsPeer(state->deposed, opts_.identity.id) || state->primary.id == opts_.identity.id) return;
  if (state->oneNodeWriteMode) return;
  if (rejoinTriedGeneration_ != state->generation) rejoinRetryDelayMs_ = 0;  // a new generation: at once
  if (rejoinTriedGeneration_ == state->generation && (rejoinRetryDelayMs_ == 0 || !rejoinRetryDue_)) return;
  if (!containsPeer(lastActive_, state->primary.id)) return;  // tried when the primary is present
  rejoinTriedGeneration_ = state->generation;
  rejoinRetryDue_ = false;
  const PeerIdentity primary = state->primary;
  log(LogLevel::kInfo, std::string("rejoining automatically (rejoin: ") + rejoinPolicyName(opts_.rejoin) +
                           "): making postgres a standby of " + primary.id + ", the primary of generation " +
                           std::to_string(state->generation) + ", " +
                           (opts_.rejoin == RejoinPolicy::kFollow
                                ? "only if its data directory can follow as it is (nothing discarded)"
                                : "rewinding its data directory if it diverged") +
                           ", never copying it");
  pgBusy_ = true;
  // The default implementation answers inside the call (not modelled): handled at once,
  // so that the peer is not busy for a loop turn; a real answer comes later.
  auto inCall = std::make_shared<bool>(true);
  env_.postgres.rejoin(primary, opts_.rejoin,
                       [this, alive = std::weak_ptr<int>(alive_), primary, inCall](RejoinFinished r) {
                         if (*inCall) return onRejoined(primary, r);
                         if (!alive.expired() && !stopping_) onRejoined(primary, r);
                       });
  *inCall = false;
}

void Driver::onRejoined(const PeerIdentity& primary, const RejoinFinished& r) {
  pgBusy_ = false;
  lastTransitionDone_ = env_.clock.monotonicMs();
  if (r.rewound) {
    log(LogLevel::kWarn, "rejoin: pg_rewind discarded " + r.discarded + ", which " + primary.id +
                             "'s timeline does not have (rejoin: rewind)");
  }
  if (!r.ok) {
    ++counters_.rejoinFailures;
    // Tried again with a back-off while the generation lasts: a failure may be transient
    // (the new primary still promoting, a refused connection), and a peer left deposed
    // leaves a 3-peer cluster with no async to take over next.
    rejoinRetryDelayMs_ = rejoinRetryDelayMs_ == 0 ? kRejoinFirstRetryMs
                                                   : std::min(rejoinRetryDelayMs_ * 2, kRejoinMaxRetryMs);
    log(LogLevel::kWarn, "not rejoined automatically, this peer stays deposed for now: " + r.error +
                             "; trying again in " + std::to_string(rejoinRetryDelayMs_ / 1000) + " s" +
                             (opts_.rejoin == RejoinPolicy::kFollow
                                  ? " (`dugong-adm rebuild` rebuilds it now; or set rejoin: rewind)"
                                  : " (`dugong-adm rebuild` rebuilds it now)"));
    rejoinTimer_->start(rejoinRetryDelayMs_, [this, alive = std::weak_ptr<int>(alive_)] {
      if (alive.expired() || stopping_) return;
      rejoinRetryDue_ = true;
      maybeRejoin();
    });
    if (r.rewound) lastApplied_.reset();  // postgres may be in any state: the next apply says
    return afterPgTransition();
  }
  rejoinedTo_ = primary.id;
  rejoinReason_ = "rejoin " + opts_.identity.id + " (automatic, rejoin: " + rejoinPolicyName(opts_.rejoin) +
                  "): streams from " + primary.id + " without a copy, " +
                  (r.rewound ? "after pg_rewind discarded " + r.discarded : "nothing discarded");
  lastApplied_.reset();  // postgres runs as a standby now, not as the state machine left it
  afterPgTransition();
}

// Postgres follows the primary: the peer leaves `deposed` (a test-and-set of the state
// last read, retried after a conflict), and the state change starts a fresh state machine.
void Driver::releaseAfterRejoin() {
  // One state write at a time: a confirmation of this peer's primacy on a new session
  // may still be in flight; looked at again once it is answered.
  if (rejoinWriteInFlight_ || confirmInFlight_ || !rejoinedTo_ || !lastStateNode_.exists) return;
  auto parsed = ClusterState::parse(lastStateNode_.data);
  if (!parsed) return;
  ClusterState state = parsed.value();
  auto released = releaseFromDeposed(state, opts_.identity.id, *rejoinedTo_);
  if (!released || !released.value()) {
    if (!released) {
      log(LogLevel::kWarn, "rejoined, but not leaving deposed: " + released.error() +
                               "; stopping postgres, and rejoining the new primary instead");
      rejoinedTo_.reset();
      applyPg(PgConfig::none(), false);
      return;
    }
    rejoinedTo_.reset();  // no longer deposed: someone else released it
    return;
  }
  rejoinWriteInFlight_ = true;
  ++counters_.stateWrites;
  env_.coordinator.putClusterState(
      state, lastStateNode_.version, rejoinReason_, guarded<StateWriteFinished>([this](StateWriteFinished w) {
        rejoinWriteInFlight_ = false;
        if (w.ok) {
          ++counters_.rejoins;
          log(LogLevel::kInfo, "left deposed: " + rejoinReason_);
          rejoinedTo_.reset();
          return;
        }
        ++counters_.stateWriteFailures;
        log(LogLevel::kInfo, "leaving deposed failed (" + w.error + "); trying again in " +
                                 std::to_string(opts_.retryDelayMs) + " ms with the state read since");
        rejoinTimer_->start(opts_.retryDelayMs, [this, alive = std::weak_ptr<int>(alive_)] {
          if (!alive.expired() && !stopping_) maybeRejoin();
        });
      }));
}

void Driver::onHealth(bool healthy, const std::string& detail) {
  healthy_ = healthy;
  if (healthy) {
    if (unhealthySince_) log(LogLevel::kInfo, "postgres is healthy again");
    unhealthySince_.reset();
    if (withdrawn_) {
      log(LogLevel::kInfo, "rejoining ZooKeeper: postgres is healthy again");
      withdrawn_ = false;
      join();
    }
    return;
  }
  unhealthyDetail_ = detail;
  // Still unhealthy, and the postmaster is now found gone: no need to wait for the tick.
  if (unhealthySince_ && env_.postgres.postmasterGone()) return healthTick();
  noteUnhealthy();
}

// Postgres should be running but is not answering: start the clock (once), and tick.
void Driver::noteUnhealthy() {
  if (healthy_ || !expectPostgresOnline() || unhealthySince_) return;
  unhealthySince_ = env_.clock.monotonicMs();
  log(LogLevel::kWarn, "postgres is unhealthy: " + unhealthyDetail_);
  healthTick();
}

// A restart re-applies the last configuration, and only while the state machine still
// wants it: one it has moved away from (a sync that took over and whose promotion failed)
// would make postgres follow a deposed primary again. The state machine applies its own
// configuration (its retry after the failed apply starts postgres).
// Nor while the state machine is in the middle of a step (a takeover between its fence
// and its state write): re-applying the configuration from before the fence would undo
// it; postgres starts once the step is over, if still wanted.
// Nor while a takeover's state write failed and may have landed (Peer::keepsFence): a
// primary's fence makes commits wait for the new sync and the current one, a sync's stops
// its streaming from the old primary, and a restart would undo either. Postgres then
// starts once the state says whether it landed (a withdrawn peer joins again to read it:
// see withdraw()).
bool Driver::lastAppliedIsStale() const {
  return !lastApplied_ || !(peer_->wantedPgConfig() == *lastApplied_) || peer_->awaitingCompletion() ||
         peer_->keepsFence();
}

void Driver::withdraw(int64_t downMs) {
  log(LogLevel::kError, "withdrawing from ZooKeeper: postgres has been unhealthy for " + std::to_string(downMs / 1000) +
                            " s and restarts did not help (" + unhealthyDetail_ + ")");
  ++counters_.withdrawals;
  withdrawn_ = true;
  if (peer_->role() != Role::kPrimary) {
    env_.coordinator.leave();
    // A standby restarts postgres while away and joins again once it is healthy; but one
    // whose takeover write may have landed keeps its fence and so postgres down (see
    // lastAppliedIsStale): it joins again after withdrawAfterMs to learn the state, as a
    // primary does.
    // Leaving answers a write in flight afterwards, as of unknown outcome.
    if (peer_->keepsFence() || smWriteInFlight_) {
      joinAgainAfterWithdrawal("its takeover write may have landed: the state says whether");
    }
    return;
  }
  // A primary out of ZooKeeper must not write (its sync may take over at once), as after
  // a lost connection: postgres is shut down and starts again only with a session, on
  // resumption. So it joins again after withdrawAfterMs to try; if postgres then stays
  // unhealthy, it withdraws again.
  if (!connectionLost_) {
    connectionLost_ = true;
    roleAtLoss_ = Role::kPrimary;
    generationAtLoss_ = generation();
  }
  writesStopped_ = true;
  shutDownTimer_->cancel();
  // The shutdown first (the real adapter signals the postmaster in the call, waiting for
  // no lock), then the leave that lets the sync take over at once.
  shutDownWrites("this primary withdraws from ZooKeeper, and another peer may take over at once");
  env_.coordinator.leave();
  joinAgainAfterWithdrawal(
      "a withdrawn primary's postgres starts only with a session, once the state confirms it is still the primary");
}

// If postgres then stays unhealthy, the peer withdraws again.
void Driver::joinAgainAfterWithdrawal(const std::string& why) {
  withdrawalTimer_->start(opts_.withdrawAfterMs, [this, why, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired() || stopping_ || !withdrawn_) return;
    log(LogLevel::kInfo, "joining ZooKeeper again after " + std::to_string(opts_.withdrawAfterMs / 1000) +
                             " s away: " + why);
    withdrawn_ = false;
    joinedAgainAt_ = env_.clock.monotonicMs();
    join();
  });
}

// While postgres is unhealthy: restart it (re-apply its configuration) once it has
// been down for a grace period since the last transition; withdraw from ZooKeeper
// once it has been down for withdrawAfterMs.
void Driver::healthTick() {
  if (stopping_ || healthy_ || !unhealthySince_ || !expectPostgresOnline()) {
    unhealthySince_.reset();
    return;
  }
  const int64_t now = env_.clock.monotonicMs();
  const int64_t down = now - *unhealthySince_;
  // Joined again after a withdrawal to read the state: another withdrawAfterMs for that.
  const bool justJoinedAgain = joinedAgainAt_ && now - *joinedAgainAt_ < opts_.withdrawAfterMs;
  if (!withdrawn_ && !justJoinedAgain && down >= opts_.withdrawAfterMs) {
    withdraw(down);
    // A withdrawn primary's postgres stays down (its shutdown is on the way): no restart.
    if (!expectPostgresOnline()) return nextHealthTick();
  }
  const bool graceOver = down >= opts_.restartGraceMs && now - lastTransitionDone_ >= opts_.restartGraceMs;
  // No process is starting or recovering: nothing to wait for (but no restart loop).
  const bool gone = env_.postgres.postmasterGone() && now - lastRestartStarted_ >= opts_.restartGraceMs;
  const bool stale = lastAppliedIsStale();
  if (!pgBusy_ && (graceOver || gone) && stale && lastStaleRestartSkip_ != lastTransitionDone_) {
    lastStaleRestartSkip_ = lastTransitionDone_;
    log(LogLevel::kInfo, std::string("not restarting postgres as ") + pgRoleName(lastApplied_->role) +
                             (peer_->awaitingCompletion() ? ": the state machine is in the middle of a step"
                              : peer_->keepsFence()
                                  ? ": the state machine keeps the fence of a takeover whose state write may have landed"
                                  : ": the state machine now wants it as " +
                                        std::string(pgRoleName(peer_->wantedPgConfig().role))) +
                             " and configures it itself");
  } else if (!pgBusy_ && (graceOver || gone) && !stale) {
    log(LogLevel::kInfo, std::string("restarting postgres as ") + pgRoleName(lastApplied_->role) +
                             (gone && !graceOver ? " at once: the postmaster is gone (it crashed or was killed)"
                                                 : ": it has not answered for " + std::to_string(down) + " ms"));
    ++counters_.restarts;
    lastRestartStarted_ = now;
    applyPg(*lastApplied_, false);
  }
  nextHealthTick();
}

void Driver::nextHealthTick() {
  healthTimer_->start(opts_.healthTickMs, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired()) healthTick();
  });
}

}  // namespace dugong::agent
