// The driver's isolated-primary protocol (driver/core.h): what a peer does when its
// ZooKeeper connection is lost and comes back, or a new session replaces the old one:
// stopping, shutting down and resuming writes, the confirmation on a new session, and
// the grace for peers after an outage.
#include <cstdio>

#include "driver/core.h"

namespace dugong::driver {

// ---- the isolated primary ----------------------------------------------------------------

namespace {
std::string hexSession(int64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(id));
  return buf;
}

// The active list an event carries (ZkInitialized, ActivePeersChanged), or null; const
// for a const event.
template <class E>
auto activeListOf(E& event) -> decltype(&std::get<ActivePeersChanged>(event).active) {
  if (auto* init = std::get_if<ZkInitialized>(&event)) return &init->active;
  if (auto* change = std::get_if<ActivePeersChanged>(&event)) return &change->active;
  return nullptr;
}
}  // namespace

void Core::onConnection(const CoordinatorConnection& c) {
  coord_.connected = c.connected;
  if (!c.connected) {
    if (isolation_.connectionLost_) return;
    ++counters_.connectionLosses;
    coord_.sessionTimeoutMs = c.sessionTimeoutMs;
    // Whatever the role and the lease: if this session expires, the peers present now
    // count as present for a session timeout after the next one (an outage may have
    // expired theirs too, and they reconnect later than this peer).
    notePeersBeforeTheLoss();
    if (lease_.inUse() && (leaseValid() || failsafeHolds())) {
      // A server restart or a leader change closes the connection a moment after the
      // leader confirmed the session: the lease says how long it surely lives on; its
      // own timers stop writes at its end unless a round trip confirms it again first.
      log(LogLevel::kInfo, "lost the connection to ZooKeeper (session " + hexSession(c.sessionId) +
                               "): writes go on under the " + (leaseValid() ? "lease" : "failsafe's permission") +
                               ", which ends in " + std::to_string(writeDeadline() - now()) +
                               " ms unless a round trip through the leader confirms the session again");
      return;
    }
    isolate("lost the connection to ZooKeeper (session " + hexSession(c.sessionId) + ", timeout " +
            std::to_string(c.sessionTimeoutMs) + " ms) as " + roleName(peer_->role()) +
            ": stopping writes now, before the session can expire (about " + std::to_string(c.sessionTimeoutMs / 3) +
            " ms from now at the earliest) and another peer take over");
    if (isolation_.roleAtLoss_ == Role::kPrimary && !isolation_.postgresShutDown_) {
      // Half-way to the earliest expiry, so that the shutdown is done before a takeover
      // can fence the sync: from then on no client setting gets a commit acknowledged.
      isolation_.shutDownAfterLossMs_ = c.sessionTimeoutMs / 6;
      setTimer(TimerKind::kShutDown, *isolation_.shutDownAfterLossMs_);
    }
    return;
  }
  isolation_.lossReported_ = false;  // the same session: no grace after it
  if (!isolation_.connectionLost_) return;
  if (lease_.ended()) {
    log(LogLevel::kInfo, "the connection to ZooKeeper is back with the same session " + hexSession(c.sessionId) +
                             ", but the lease has ended: writes stay stopped until a round trip through the leader "
                             "confirms the session");
    return;
  }
  log(LogLevel::kInfo, "the connection to ZooKeeper is back with the same session " + hexSession(c.sessionId));
  reconnected("the connection came back with the same session");
}

// Writes stop (and a primary tells its watchdog): ZooKeeper may be out of reach.
void Core::isolate(const std::string& why) {
  isolation_.connectionLost_ = true;
  isolation_.resumeWanted_.reset();  // decided again once the connection is back
  isolation_.roleAtLoss_ = peer_->role();
  isolation_.generationAtLoss_ = generation();
  if (!isolation_.lossReported_) notePeersBeforeTheLoss();
  log(LogLevel::kWarn, why);
  stopWrites();
  if (isolation_.roleAtLoss_ == Role::kPrimary) tellPrimaryConnectionLoss(true);
}

// The peers present before a loss (reported, or found by the lease's end), for the grace
// on the new session if the lost one expires.
void Core::notePeersBeforeTheLoss() {
  isolation_.lossReported_ = true;
  // Lost again within the grace of an earlier loss: those peers may still be away.
  PeerList before = coord_.active;
  if (isolation_.peerGraceUntil_) {
    for (const auto& p : isolation_.activeBeforeLoss_) {
      if (!containsPeer(before, p.id)) before.push_back(p);
    }
  }
  isolation_.activeBeforeLoss_ = std::move(before);
  isolation_.peerGraceUntil_.reset();
  cancelTimer(TimerKind::kPeerGrace);
}

// The same session is confirmed again (its connection is back, or a leader round trip
// answered after the lease ended).
void Core::reconnected(const std::string& how) {
  cancelTimer(TimerKind::kShutDown);
  cancelTimer(TimerKind::kLeaseShut);
  isolation_.connectionLost_ = false;
  tellPrimaryConnectionLoss(false);
  if (isolation_.confirmOwed_) {
    // The same session is back, but it is a new one whose confirmation has not landed: a
    // takeover decided while the old one was gone may still land, so the same-session rule
    // does not apply.
    log(LogLevel::kInfo, how + ", which is new and not confirmed yet: writes stay stopped until the confirmation lands");
    return confirmAfterNewSession();
  }
  resumeWritesIfUnchanged(how, true);
}

void Core::tellPrimaryConnectionLoss(bool lost) {
  if (isolation_.primaryLossTold_ == lost) return;
  isolation_.primaryLossTold_ = lost;
  emit(cmd::PrimaryConnectionLoss{lost});
}

// Stops writes (a no-op for anything but a running primary) and keeps trying while
// the connection stays lost.
void Core::stopWrites() {
  isolation_.writesStopped_ = true;
  cancelTimer(TimerKind::kWrites);
  ++counters_.writeStops;
  emit(cmd::StopWrites{});
}

void Core::onWritesStopped(const Result<int>& r) {
  if (!isolation_.writesStopped_) return;
  if (r) {
    log(LogLevel::kInfo,
        "writes stopped: postgres accepts no new writes, " + std::to_string(*r) + " client sessions terminated");
    return;
  }
  log(LogLevel::kError,
      "stopping writes failed: " + r.error() +
          (isolation_.connectionLost_ ? "; trying again in " + std::to_string(opts_.retryDelayMs) + " ms" : ""));
  if (!isolation_.connectionLost_) return;
  isolation_.writesRetry_ = Isolation::WritesRetry::kStop;
  setTimer(TimerKind::kWrites, opts_.retryDelayMs);
}

// What the writes timer retries (one timer: a start replaces the earlier one's purpose).
void Core::onWritesTimer() {
  switch (isolation_.writesRetry_) {
    case Isolation::WritesRetry::kStop:
      if (isolation_.writesStopped_ && isolation_.connectionLost_) stopWrites();
      return;
    case Isolation::WritesRetry::kResume:
      return resumeWritesIfUnchanged("retrying", isolation_.writesRetryNoTakeover_);
    case Isolation::WritesRetry::kConfirm:
      return confirmAfterNewSession();
  }
}

// Stopped writes leave a new session that says BEGIN READ WRITE able to commit
// locally: once the session may expire, postgres goes down.
void Core::shutDownWrites(const std::string& why) {
  if (isolation_.postgresShutDown_) return;
  isolation_.postgresShutDown_ = true;
  ++counters_.shutDowns;
  log(LogLevel::kWarn, "shutting postgres down: " + why +
                           "; a stopped primary would still let a session that says BEGIN READ WRITE commit locally");
  isolation_.shutDownInFlight_ = true;
  emit(cmd::ShutDownWrites{});
}

void Core::onShutDown(const Result<bool>& r) {
  isolation_.shutDownInFlight_ = false;
  if (!isolation_.postgresShutDown_) return;
  if (r) {
    log(LogLevel::kInfo, "postgres is shut down: it starts again on resumption or a new configuration");
    return;
  }
  log(LogLevel::kError, "shutting postgres down failed: " + r.error() + "; trying again in " +
                            std::to_string(opts_.retryDelayMs) + " ms");
  isolation_.postgresShutDown_ = false;
  isolation_.shutDownAfterLossMs_.reset();
  setTimer(TimerKind::kShutDown, opts_.retryDelayMs);
}

// Half-way to the earliest expiry after a loss, or again after a failed shutdown.
void Core::onShutDownTimer() {
  if (const auto delay = std::exchange(isolation_.shutDownAfterLossMs_, std::nullopt)) {
    if (!isolation_.connectionLost_ || !isolation_.writesStopped_) return;
    return shutDownWrites("ZooKeeper has been unreachable for " + std::to_string(*delay) +
                          " ms more, half-way to the earliest expiry of the session");
  }
  if (isolation_.writesStopped_) shutDownWrites("retrying");
}

bool Core::primaryConfigAppliedMidStep() const {
  return peer_->role() == Role::kPrimary && pg_.lastApplied && peer_->wantedPgConfig() == *pg_.lastApplied &&
         (peer_->keepsFence() || peer_->awaitingCompletion());
}

Isolation::WritesWait Core::resumeWaitsFor(bool noTakeoverCanLand) const {
  // A primary writes only under a lease: the next leader round trip decides.
  if (lease_.inUse() && !leaseValid() &&
      (peer_->role() == Role::kPrimary || isolation_.roleAtLoss_ == Role::kPrimary)) {
    return Isolation::WritesWait::kLease;
  }
  // The adapter would carry it out after the transition, on whatever was decided
  // meanwhile (a withdrawal, a new configuration): decided when the transition ends.
  if (pgBusy()) return Isolation::WritesWait::kTransition;
  // Primary in a newer generation (its own write, answered during the outage: a primary's
  // new sync, or a sync's takeover) whose configuration postgres already has, and the
  // state machine is in the middle of a step (an async-chain write) or settles a write of
  // unknown outcome: decided once that is over, since nothing else would lift the stop.
  // Only if no takeover can land: the same session came back (none was decided on its
  // absence), or the state was written back test-and-set on the new session.
  const bool changed = peer_->role() != isolation_.roleAtLoss_ || generation() != isolation_.generationAtLoss_;
  if (changed && noTakeoverCanLand && primaryConfigAppliedMidStep()) return Isolation::WritesWait::kStep;
  return Isolation::WritesWait::kNothing;
}

void Core::reconcileWrites() {
  if (isolation_.resumeWanted_) {
    const Isolation::Resumption r = *isolation_.resumeWanted_;
    if (resumeWaitsFor(r.noTakeoverCanLand) == Isolation::WritesWait::kNothing &&
        stateWriteUnanswered(in::WriteFor::kConfirmation)) {
      isolation_.resumeWanted_
          .reset();  // a confirmation of the state asked for since decides instead (its answer resumes)
    } else {
      resumeWritesIfUnchanged(r.how, r.noTakeoverCanLand);
    }
  }
  if (std::exchange(isolation_.confirmWanted_, false)) confirmAfterNewSession();
}

void Core::resumeWritesIfUnchanged(const std::string& how, bool noTakeoverCanLand) {
  const std::optional<Isolation::Resumption> before = std::exchange(isolation_.resumeWanted_, std::nullopt);
  if (!isolation_.writesStopped_ || isolation_.connectionLost_) return;
  const Isolation::WritesWait wait = resumeWaitsFor(noTakeoverCanLand);
  if (wait != Isolation::WritesWait::kNothing) {
    if (!before || before->waitsFor != wait) {
      if (wait == Isolation::WritesWait::kLease) {
        log(LogLevel::kInfo, "writes stay stopped (" + how +
                                 ") until a round trip through the ZooKeeper leader confirms the session (the lease)");
      } else if (wait == Isolation::WritesWait::kTransition) {
        log(LogLevel::kInfo, "writes stay stopped (" + how +
                                 ") while a postgres transition is in flight: decided when it ends");
      }
    }
    isolation_.resumeWanted_ = Isolation::Resumption{how, noTakeoverCanLand, wait};
    return;
  }
  const Role role = peer_->role();
  const auto gen = generation();
  auto genName = [](std::optional<int64_t> g) { return g ? std::to_string(*g) : std::string("none"); };
  // Primary in a newer generation whose configuration postgres already has (see
  // resumeWaitsFor): the state machine has nothing left to apply, so nothing else would
  // lift the stop.
  const bool appliedMeanwhile = noTakeoverCanLand && role == Role::kPrimary && !lastAppliedIsStale();
  if ((role != isolation_.roleAtLoss_ || gen != isolation_.generationAtLoss_) && !appliedMeanwhile) {
    log(LogLevel::kWarn, "writes stay stopped (" + how + "): the cluster changed meanwhile (role " +
                             roleName(isolation_.roleAtLoss_) + " -> " + roleName(role) + ", generation " +
                             genName(isolation_.generationAtLoss_) + " -> " + genName(gen) +
                             "); the state machine reconfigures postgres");
    return;
  }
  isolation_.writesStopped_ = false;
  isolation_.confirmOwed_ = false;
  cancelTimer(TimerKind::kWrites);
  cancelTimer(TimerKind::kShutDown);
  ++counters_.writeResumes;
  // Postgres shut down starts again with its last configuration only if the state
  // machine still wants it (see lastAppliedIsStale: a sync whose promotion failed would
  // follow the deposed primary again); otherwise the state machine's own
  // apply (its retry, or the next step) starts it.
  const bool startNow = isolation_.postgresShutDown_ && !lastAppliedIsStale();
  log(LogLevel::kInfo, "resuming writes: " + how + ", and this peer is still " + roleName(role) + " in generation " +
                           genName(gen) +
                           (!isolation_.postgresShutDown_ ? ""
                            : startNow                    ? "; starting postgres again"
                                       : "; postgres starts with the state machine's next configuration, not "
                                         "with its last one (the state machine has moved on from it)"));
  // The adapter's stop (or shutdown) holds until this resume, through any apply: the
  // resume first, then the start of a postgres that was shut down.
  emit(cmd::ResumeWrites{noTakeoverCanLand});
  if (isolation_.postgresShutDown_) {
    isolation_.postgresShutDown_ = false;
    if (startNow) applyPg(*pg_.lastApplied);
    noteUnhealthy();  // if that could not start now, the health check starts it
  }
}

void Core::onWritesResumed(bool noTakeoverCanLand, const Result<bool>& r) {
  if (r) return;
  log(LogLevel::kError,
      "resuming writes failed: " + r.error() + "; trying again in " + std::to_string(opts_.retryDelayMs) + " ms");
  isolation_.writesStopped_ = true;
  isolation_.writesRetry_ = Isolation::WritesRetry::kResume;
  isolation_.writesRetryNoTakeover_ = noTakeoverCanLand;
  setTimer(TimerKind::kWrites, opts_.retryDelayMs);
}

// The old session expired and a new one is initialised: the state just read is the
// cluster's, but a takeover decided while this peer's election node was gone may still
// be on its way (a test-and-set at the version it read). The primary therefore writes
// the same state back, test-and-set at the version read on the new session: if that
// succeeds, no such takeover can succeed after it (its expected version is gone) and,
// this peer's new election node being in place before the write, none can be decided
// again; writes resume. If it fails, the state changed: writes stay stopped and the
// state read since decides (a confirmation is tried again while still primary in the
// same generation).
void Core::afterNewSession() {
  if (!isolation_.writesStopped_) return;
  isolation_.confirmOwed_ = true;
  cancelTimer(TimerKind::kWrites);
  confirmAfterNewSession();
}

void Core::confirmAfterNewSession() {
  if (!isolation_.writesStopped_ || isolation_.connectionLost_ || stateWriteUnanswered(in::WriteFor::kConfirmation) ||
      stateWriteUnanswered(in::WriteFor::kRelease)) {
    return;
  }
  // A standby's stopped writes are nothing to lift; only a primary's can conflict: one
  // that lost its connection as the primary, or a standby that became it meanwhile (its
  // takeover write answered during the outage) and whose postgres was shut down as a
  // primary's is.
  const bool becamePrimary = peer_->role() == Role::kPrimary && isolation_.postgresShutDown_;
  if (isolation_.roleAtLoss_ != Role::kPrimary && !becamePrimary) return resumeWritesIfUnchanged("a new session");
  if (stateWrite_) {
    // One write at a time: after the state machine's, once it has stepped the answer,
    // which may leave the last configuration stale meanwhile.
    isolation_.confirmWanted_ = true;
    return;
  }
  // Still primary, in a newer generation whose configuration postgres already has (its
  // own write, answered during the outage): confirmed as well, or nothing would lift the
  // stop.
  const bool newerApplied = generation() != isolation_.generationAtLoss_ && !lastAppliedIsStale();
  if (generation() != isolation_.generationAtLoss_ && primaryConfigAppliedMidStep()) {
    // Postgres has the newer generation's configuration and the state machine is in the
    // middle of a step, or settles a write of unknown outcome: confirmed once that is
    // over, since nothing else would.
    isolation_.confirmWanted_ = true;
    return;
  }
  if (peer_->role() != Role::kPrimary || (generation() != isolation_.generationAtLoss_ && !newerApplied) ||
      !coord_.state.node.exists) {
    return resumeWritesIfUnchanged("a new session");  // logs why writes stay stopped
  }
  const auto& state = coord_.state.parsed;
  if (!state) return;
  const int32_t version = coord_.state.node.version;
  stateWrite_ = StateWrite{in::WriteFor::kConfirmation};
  ++counters_.stateWrites;
  log(LogLevel::kInfo, "writes stay stopped until a test-and-set of the cluster state at version " +
                           std::to_string(version) + " (read on the new session) confirms that no takeover landed");
  emit(cmd::PutState{*state, version,
                     opts_.identity.id + " confirms it is still primary of generation " +
                         std::to_string(state->generation) + " after a new ZooKeeper session (no takeover landed)",
                     in::WriteFor::kConfirmation});
}

void Core::onConfirmation(int32_t version, const StateWriteFinished& w) {
  stateWrite_.reset();
  if (rejoin_.rejoined()) maybeRejoin();  // leaving deposed waited for this answer
  if (w.ok) {
    return resumeWritesIfUnchanged("a new session, and the state written back at version " + std::to_string(version) +
                                       " (a test-and-set): no takeover can land after it",
                                   true);
  }
  ++counters_.stateWriteFailures;
  log(LogLevel::kWarn, "confirming the state after the new session failed (" + w.error +
                           "); writes stay stopped, trying again in " + std::to_string(opts_.retryDelayMs) +
                           " ms with the state read since");
  isolation_.writesRetry_ = Isolation::WritesRetry::kConfirm;
  setTimer(TimerKind::kWrites, opts_.retryDelayMs);
}

// ---- a new session ---------------------------------------------------------------------

bool Core::leaveTheOldSession() {
  // Writes under the failsafe are stopped by onLease (lease.cc), not here: both coordinators
  // tell a new session's first lease before its state (docs/simulation.md, the guards).
  if (failsafe_.permittedUntil()) dropFailsafe("a new ZooKeeper session");
  // Decided on the session they were asked on, never on a new one: a resumption that
  // waited goes through the new session's confirmation instead.
  bool waitDropped = std::exchange(isolation_.resumeWanted_, std::nullopt).has_value();
  // A confirmation an earlier new session owed (held back by a write in flight) is owed
  // on this one too: nothing else would lift the stop (cluster simulator seed 41220).
  waitDropped = std::exchange(isolation_.confirmWanted_, false) || waitDropped;
  return waitDropped;
}

bool Core::enterTheNewSession() {
  const bool newSessionAfterLoss = isolation_.connectionLost_;
  // Any new session after a loss, isolated or not (a standby, or a lease still valid at
  // the loss): the peers present before it count as present for a session timeout.
  const bool afterLoss = std::exchange(isolation_.lossReported_, false) || newSessionAfterLoss;
  if (newSessionAfterLoss) {
    isolation_.connectionLost_ = false;
    tellPrimaryConnectionLoss(false);
    log(LogLevel::kWarn, "a new ZooKeeper session: the one whose connection was lost expired");
  } else if (afterLoss) {
    log(LogLevel::kWarn, "a new ZooKeeper session: the one whose connection was lost (under the lease) expired");
  }
  if (afterLoss && !isolation_.activeBeforeLoss_.empty()) {
    isolation_.peerGraceUntil_ = now() + coord_.sessionTimeoutMs;
    setTimer(TimerKind::kPeerGrace, coord_.sessionTimeoutMs);
  }
  return newSessionAfterLoss;
}

void Core::shutDownAsTheLostSessionExpired() {
  if (isolation_.writesStopped_ && !isolation_.postgresShutDown_ && isolation_.roleAtLoss_ == Role::kPrimary) {
    cancelTimer(TimerKind::kShutDown);
    shutDownWrites("the session whose connection was lost has expired");
  }
}

// ---- postgres configured while writes are stopped -------------------------------------

bool Core::writesAfterApply(const PgConfig& config, bool wanted) {
  if (isolation_.writesStopped_ && isolation_.connectionLost_) {
    // The adapter kept the stop (or the shutdown) through this apply: postgres is as
    // writes-stopped as before it. What is left to decide is whether it must now be down
    // where it was only stopped: it became the primary during the outage, so no shutdown
    // was planned at the loss and its session may expire any time now.
    if (!isolation_.postgresShutDown_ && config.role == PgRole::kPrimary && isolation_.roleAtLoss_ != Role::kPrimary) {
      shutDownWrites(
          "it became the primary while ZooKeeper is unreachable, and its "
          "session may expire before the connection is back");
    } else if (!isolation_.postgresShutDown_ && (health_.withdrawn() || lease_.ended())) {
      shutDownWrites(health_.withdrawn() ? "this peer withdrew from ZooKeeper while it started"
                                         : "its lease ended while it started");
    } else {
      log(LogLevel::kInfo, std::string("postgres was configured as ") + pgRoleName(config.role) +
                               " while ZooKeeper is unreachable: writes stay " +
                               (isolation_.postgresShutDown_ ? "shut down" : "stopped") +
                               " (the adapter keeps them so through any apply)");
    }
  } else if (isolation_.writesStopped_ && wanted && config.role == PgRole::kPrimary &&
             isolation_.roleAtLoss_ == Role::kPrimary && peer_->role() == Role::kPrimary &&
             (generation() == isolation_.generationAtLoss_ || isolation_.confirmOwed_)) {
    // Still the primary, from a state read on the new session (of the generation at the
    // loss, or of a newer one its own write of unknown outcome made): a takeover decided
    // on an older read may yet land before this peer's test-and-set, so writes resume
    // only on the confirmation. The adapter kept them stopped (or postgres down) through
    // this apply.
    log(LogLevel::kInfo, std::string("postgres was configured as primary before the state read on the new session "
                                     "was confirmed: writes stay ") +
                             (isolation_.postgresShutDown_ ? "shut down" : "stopped") + " until the confirmation");
    confirmAfterNewSession();
  } else if (isolation_.writesStopped_ && wanted && peer_->wantedPgConfig() == config) {
    // (Not for a configuration the state machine has moved away from while it was
    // applied, e.g. a primary's deposed meanwhile: its next apply decides.)
    isolation_.writesStopped_ = false;
    isolation_.confirmOwed_ = false;
    const bool wasShutDown = std::exchange(isolation_.postgresShutDown_, false);
    cancelTimer(TimerKind::kWrites);
    cancelTimer(TimerKind::kShutDown);
    // The apply ran under the adapter's stop, which only a resume lifts; a primary left
    // down by a shutdown is started again after it.
    const bool startAgain = wasShutDown && config.role == PgRole::kPrimary;
    log(LogLevel::kInfo, std::string("writes are no longer stopped: the state machine configured postgres as ") +
                             pgRoleName(config.role) + " from the cluster state read since" +
                             (startAgain ? "; starting postgres again (the shutdown kept it down)" : ""));
    ++counters_.writeResumes;
    emit(cmd::ResumeWrites{true});
    return startAgain;
  }
  return false;
}

// ---- a withdrawal, and the lease's end --------------------------------------------------

void Core::stopWritesForWithdrawal() {
  if (!isolation_.connectionLost_) {
    isolation_.connectionLost_ = true;
    isolation_.roleAtLoss_ = Role::kPrimary;
    isolation_.generationAtLoss_ = generation();
  }
  isolation_.writesStopped_ = true;
  cancelTimer(TimerKind::kShutDown);
}

bool Core::postgresStillShutDown() {
  // A transition in flight may be starting postgres as the primary although it was shut
  // down before (the adapter's shutdown signals a postmaster that runs, whatever holds
  // its apply lock): shut it down at the lease's end all the same.
  if (isolation_.postgresShutDown_ && pgBusy()) isolation_.postgresShutDown_ = false;
  // Nor does a shutdown that ended mean postgres is still down: a transition since (an
  // abandoned switchover's start) may have started it. A postmaster that runs, with no
  // shutdown in flight, is shut down at the lease's end.
  if (isolation_.postgresShutDown_ && !isolation_.shutDownInFlight_ && !now_.postmasterGone) {
    isolation_.postgresShutDown_ = false;
  }
  return isolation_.postgresShutDown_;
}

// During the grace after a new session, the peers present before the loss count as
// present: after an outage every peer reconnects, some later than others.
std::optional<Event> Core::keepingPeersFromBeforeTheLoss(const Event& delivered) {
  if (!isolation_.peerGraceUntil_) return std::nullopt;
  const PeerList* active = activeListOf(delivered);
  if (!active) return std::nullopt;
  PeerList kept;
  for (const auto& p : isolation_.activeBeforeLoss_) {
    if (!containsPeer(*active, p.id)) kept.push_back(p);
  }
  if (kept.empty()) return std::nullopt;
  Event event = delivered;
  PeerList* list = activeListOf(event);
  list->insert(list->end(), kept.begin(), kept.end());
  log(LogLevel::kInfo, "treating " + peerIds(kept) + " as present for " +
                           std::to_string(*isolation_.peerGraceUntil_ - now()) +
                           " ms more: present before the ZooKeeper connection was lost, and maybe not reconnected yet");
  return event;
}

void Core::endPeerGrace() {
  isolation_.peerGraceUntil_.reset();
  PeerList missing;
  for (const auto& p : isolation_.activeBeforeLoss_) {
    if (!containsPeer(coord_.active, p.id)) missing.push_back(p);
  }
  isolation_.activeBeforeLoss_.clear();
  if (missing.empty() || health_.withdrawn()) return;
  log(LogLevel::kWarn, peerIds(missing) + " did not come back within a session timeout (" +
                           std::to_string(coord_.sessionTimeoutMs) + " ms) of the new session: treating them as gone");
  step(ActivePeersChanged{coord_.active, coord_.data, coord_.notStreaming, coord_.reports});
}

}  // namespace dugong::driver
