// The driver's isolated-primary protocol (driver/core.h): what a peer does when its
// ZooKeeper connection is lost and comes back, or a new session replaces the old one:
// stopping, shutting down and resuming writes, the confirmation on a new session, and
// the grace for peers after an outage.
#include <cstdio>

#include "driver/core.h"

namespace dugong::agent {

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

void DriverCore::onConnection(const CoordinatorConnection& c) {
  coordinatorUp_ = c.connected;
  if (!c.connected) {
    if (connectionLost_) return;
    ++counters_.connectionLosses;
    sessionTimeoutMs_ = c.sessionTimeoutMs;
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
    if (roleAtLoss_ == Role::kPrimary && !postgresShutDown_) {
      // Half-way to the earliest expiry, so that the shutdown is done before a takeover
      // can fence the sync: from then on no client setting gets a commit acknowledged.
      shutDownAfterLossMs_ = c.sessionTimeoutMs / 6;
      setTimer(TimerKind::kShutDown, *shutDownAfterLossMs_);
    }
    return;
  }
  lossReported_ = false;  // the same session: no grace after it
  if (!connectionLost_) return;
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
void DriverCore::isolate(const std::string& why) {
  connectionLost_ = true;
  resumeWanted_.reset();  // decided again once the connection is back
  roleAtLoss_ = peer_->role();
  generationAtLoss_ = generation();
  if (!lossReported_) notePeersBeforeTheLoss();
  log(LogLevel::kWarn, why);
  stopWrites();
  if (roleAtLoss_ == Role::kPrimary) tellPrimaryConnectionLoss(true);
}

// The peers present before a loss (reported, or found by the lease's end), for the grace
// on the new session if the lost one expires.
void DriverCore::notePeersBeforeTheLoss() {
  lossReported_ = true;
  // Lost again within the grace of an earlier loss: those peers may still be away.
  PeerList before = lastActive_;
  if (peerGraceUntil_) {
    for (const auto& p : activeBeforeLoss_) {
      if (!containsPeer(before, p.id)) before.push_back(p);
    }
  }
  activeBeforeLoss_ = std::move(before);
  peerGraceUntil_.reset();
  cancelTimer(TimerKind::kPeerGrace);
}

// The same session is confirmed again (its connection is back, or a leader round trip
// answered after the lease ended).
void DriverCore::reconnected(const std::string& how) {
  cancelTimer(TimerKind::kShutDown);
  cancelTimer(TimerKind::kLeaseShut);
  connectionLost_ = false;
  tellPrimaryConnectionLoss(false);
  if (confirmOwed_) {
    // The same session is back, but it is a new one whose confirmation has not landed: a
    // takeover decided while the old one was gone may still land, so the same-session rule
    // does not apply.
    log(LogLevel::kInfo, how + ", which is new and not confirmed yet: writes stay stopped until the confirmation lands");
    return confirmAfterNewSession();
  }
  resumeWritesIfUnchanged(how, true);
}

void DriverCore::tellPrimaryConnectionLoss(bool lost) {
  if (primaryLossTold_ == lost) return;
  primaryLossTold_ = lost;
  emit(cmd::PrimaryConnectionLoss{lost});
}

// Stops writes (a no-op for anything but a running primary) and keeps trying while
// the connection stays lost.
void DriverCore::stopWrites() {
  writesStopped_ = true;
  cancelTimer(TimerKind::kWrites);
  ++counters_.writeStops;
  emit(cmd::StopWrites{});
}

void DriverCore::onWritesStopped(const Result<int>& r) {
  if (!writesStopped_) return;
  if (r) {
    log(LogLevel::kInfo,
        "writes stopped: postgres accepts no new writes, " + std::to_string(*r) + " client sessions terminated");
    return;
  }
  log(LogLevel::kError, "stopping writes failed: " + r.error() +
                            (connectionLost_ ? "; trying again in " + std::to_string(opts_.retryDelayMs) + " ms" : ""));
  if (!connectionLost_) return;
  writesRetry_ = WritesRetry::kStop;
  setTimer(TimerKind::kWrites, opts_.retryDelayMs);
}

// What the writes timer retries (one timer: a start replaces the earlier one's purpose).
void DriverCore::onWritesTimer() {
  switch (writesRetry_) {
    case WritesRetry::kStop:
      if (writesStopped_ && connectionLost_) stopWrites();
      return;
    case WritesRetry::kResume:
      return resumeWritesIfUnchanged("retrying", writesRetryNoTakeover_);
    case WritesRetry::kConfirm:
      return confirmAfterNewSession();
  }
}

// Stopped writes leave a new session that says BEGIN READ WRITE able to commit
// locally: once the session may expire, postgres goes down.
void DriverCore::shutDownWrites(const std::string& why) {
  if (postgresShutDown_) return;
  postgresShutDown_ = true;
  ++counters_.shutDowns;
  log(LogLevel::kWarn, "shutting postgres down: " + why +
                           "; a stopped primary would still let a session that says BEGIN READ WRITE commit locally");
  shutDownInFlight_ = true;
  emit(cmd::ShutDownWrites{});
}

void DriverCore::onShutDown(const Result<bool>& r) {
  shutDownInFlight_ = false;
  if (!postgresShutDown_) return;
  if (r) {
    log(LogLevel::kInfo, "postgres is shut down: it starts again on resumption or a new configuration");
    return;
  }
  log(LogLevel::kError, "shutting postgres down failed: " + r.error() + "; trying again in " +
                            std::to_string(opts_.retryDelayMs) + " ms");
  postgresShutDown_ = false;
  shutDownAfterLossMs_.reset();
  setTimer(TimerKind::kShutDown, opts_.retryDelayMs);
}

// Half-way to the earliest expiry after a loss, or again after a failed shutdown.
void DriverCore::onShutDownTimer() {
  if (const auto delay = std::exchange(shutDownAfterLossMs_, std::nullopt)) {
    if (!connectionLost_ || !writesStopped_) return;
    return shutDownWrites("ZooKeeper has been unreachable for " + std::to_string(*delay) +
                          " ms more, half-way to the earliest expiry of the session");
  }
  if (writesStopped_) shutDownWrites("retrying");
}

bool DriverCore::primaryConfigAppliedMidStep() const {
  return peer_->role() == Role::kPrimary && lastApplied_ && peer_->wantedPgConfig() == *lastApplied_ &&
         (peer_->keepsFence() || peer_->awaitingCompletion());
}

DriverCore::WritesWait DriverCore::resumeWaitsFor(bool noTakeoverCanLand) const {
  // A primary writes only under a lease: the next leader round trip decides.
  if (lease_.inUse() && !leaseValid() && (peer_->role() == Role::kPrimary || roleAtLoss_ == Role::kPrimary)) {
    return WritesWait::kLease;
  }
  // The adapter would carry it out after the transition, on whatever was decided
  // meanwhile (a withdrawal, a new configuration): decided when the transition ends.
  if (pgBusy()) return WritesWait::kTransition;
  // Primary in a newer generation (its own write, answered during the outage: a primary's
  // new sync, or a sync's takeover) whose configuration postgres already has, and the
  // state machine is in the middle of a step (an async-chain write) or settles a write of
  // unknown outcome: decided once that is over, since nothing else would lift the stop.
  // Only if no takeover can land: the same session came back (none was decided on its
  // absence), or the state was written back test-and-set on the new session.
  const bool changed = peer_->role() != roleAtLoss_ || generation() != generationAtLoss_;
  if (changed && noTakeoverCanLand && primaryConfigAppliedMidStep()) return WritesWait::kStep;
  return WritesWait::kNothing;
}

void DriverCore::reconcileWrites() {
  if (resumeWanted_) {
    const Resumption r = *resumeWanted_;
    if (resumeWaitsFor(r.noTakeoverCanLand) == WritesWait::kNothing && stateWriteUnanswered(in::WriteFor::kConfirmation)) {
      resumeWanted_.reset();  // a confirmation of the state asked for since decides instead (its answer resumes)
    } else {
      resumeWritesIfUnchanged(r.how, r.noTakeoverCanLand);
    }
  }
  if (std::exchange(confirmWanted_, false)) confirmAfterNewSession();
}

void DriverCore::resumeWritesIfUnchanged(const std::string& how, bool noTakeoverCanLand) {
  const std::optional<Resumption> before = std::exchange(resumeWanted_, std::nullopt);
  if (!writesStopped_ || connectionLost_) return;
  const WritesWait wait = resumeWaitsFor(noTakeoverCanLand);
  if (wait != WritesWait::kNothing) {
    if (!before || before->waitsFor != wait) {
      if (wait == WritesWait::kLease) {
        log(LogLevel::kInfo, "writes stay stopped (" + how +
                                 ") until a round trip through the ZooKeeper leader confirms the session (the lease)");
      } else if (wait == WritesWait::kTransition) {
        log(LogLevel::kInfo, "writes stay stopped (" + how +
                                 ") while a postgres transition is in flight: decided when it ends");
      }
    }
    resumeWanted_ = Resumption{how, noTakeoverCanLand, wait};
    return;
  }
  const Role role = peer_->role();
  const auto gen = generation();
  auto genName = [](std::optional<int64_t> g) { return g ? std::to_string(*g) : std::string("none"); };
  // Primary in a newer generation whose configuration postgres already has (see
  // resumeWaitsFor): the state machine has nothing left to apply, so nothing else would
  // lift the stop.
  const bool appliedMeanwhile = noTakeoverCanLand && role == Role::kPrimary && !lastAppliedIsStale();
  if ((role != roleAtLoss_ || gen != generationAtLoss_) && !appliedMeanwhile) {
    log(LogLevel::kWarn, "writes stay stopped (" + how + "): the cluster changed meanwhile (role " +
                             roleName(roleAtLoss_) + " -> " + roleName(role) + ", generation " +
                             genName(generationAtLoss_) + " -> " + genName(gen) +
                             "); the state machine reconfigures postgres");
    return;
  }
  writesStopped_ = false;
  confirmOwed_ = false;
  cancelTimer(TimerKind::kWrites);
  cancelTimer(TimerKind::kShutDown);
  ++counters_.writeResumes;
  // Postgres shut down starts again with its last configuration only if the state
  // machine still wants it (see lastAppliedIsStale: a sync whose promotion failed would
  // follow the deposed primary again); otherwise the state machine's own
  // apply (its retry, or the next step) starts it.
  const bool startNow = postgresShutDown_ && !lastAppliedIsStale();
  log(LogLevel::kInfo, "resuming writes: " + how + ", and this peer is still " + roleName(role) + " in generation " +
                           genName(gen) +
                           (!postgresShutDown_ ? ""
                            : startNow        ? "; starting postgres again"
                                              : "; postgres starts with the state machine's next configuration, not "
                                                "with its last one (the state machine has moved on from it)"));
  // The adapter's stop (or shutdown) holds until this resume, through any apply: the
  // resume first, then the start of a postgres that was shut down.
  emit(cmd::ResumeWrites{noTakeoverCanLand});
  if (postgresShutDown_) {
    postgresShutDown_ = false;
    if (startNow) applyPg(*lastApplied_);
    noteUnhealthy();  // if that could not start now, the health check starts it
  }
}

void DriverCore::onWritesResumed(bool noTakeoverCanLand, const Result<bool>& r) {
  if (r) return;
  log(LogLevel::kError,
      "resuming writes failed: " + r.error() + "; trying again in " + std::to_string(opts_.retryDelayMs) + " ms");
  writesStopped_ = true;
  writesRetry_ = WritesRetry::kResume;
  writesRetryNoTakeover_ = noTakeoverCanLand;
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
void DriverCore::afterNewSession() {
  if (!writesStopped_) return;
  confirmOwed_ = true;
  cancelTimer(TimerKind::kWrites);
  confirmAfterNewSession();
}

void DriverCore::confirmAfterNewSession() {
  if (!writesStopped_ || connectionLost_ || stateWriteUnanswered(in::WriteFor::kConfirmation) ||
      stateWriteUnanswered(in::WriteFor::kRelease)) {
    return;
  }
  // A standby's stopped writes are nothing to lift; only a primary's can conflict: one
  // that lost its connection as the primary, or a standby that became it meanwhile (its
  // takeover write answered during the outage) and whose postgres was shut down as a
  // primary's is.
  const bool becamePrimary = peer_->role() == Role::kPrimary && postgresShutDown_;
  if (roleAtLoss_ != Role::kPrimary && !becamePrimary) return resumeWritesIfUnchanged("a new session");
  if (stateWrite_) {
    // One write at a time: after the state machine's, once it has stepped the answer,
    // which may leave the last configuration stale meanwhile.
    confirmWanted_ = true;
    return;
  }
  // Still primary, in a newer generation whose configuration postgres already has (its
  // own write, answered during the outage): confirmed as well, or nothing would lift the
  // stop.
  const bool newerApplied = generation() != generationAtLoss_ && !lastAppliedIsStale();
  if (generation() != generationAtLoss_ && primaryConfigAppliedMidStep()) {
    // Postgres has the newer generation's configuration and the state machine is in the
    // middle of a step, or settles a write of unknown outcome: confirmed once that is
    // over, since nothing else would.
    confirmWanted_ = true;
    return;
  }
  if (peer_->role() != Role::kPrimary || (generation() != generationAtLoss_ && !newerApplied) ||
      !lastState_.node.exists) {
    return resumeWritesIfUnchanged("a new session");  // logs why writes stay stopped
  }
  const auto& state = lastState_.parsed;
  if (!state) return;
  const int32_t version = lastState_.node.version;
  stateWrite_ = StateWrite{in::WriteFor::kConfirmation};
  ++counters_.stateWrites;
  log(LogLevel::kInfo, "writes stay stopped until a test-and-set of the cluster state at version " +
                           std::to_string(version) + " (read on the new session) confirms that no takeover landed");
  emit(cmd::PutState{*state, version,
                     opts_.identity.id + " confirms it is still primary of generation " +
                         std::to_string(state->generation) + " after a new ZooKeeper session (no takeover landed)",
                     in::WriteFor::kConfirmation});
}

void DriverCore::onConfirmation(int32_t version, const StateWriteFinished& w) {
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
  writesRetry_ = WritesRetry::kConfirm;
  setTimer(TimerKind::kWrites, opts_.retryDelayMs);
}

// During the grace after a new session, the peers present before the loss count as
// present: after an outage every peer reconnects, some later than others.
std::optional<Event> DriverCore::keepingPeersFromBeforeTheLoss(const Event& delivered) {
  if (!peerGraceUntil_) return std::nullopt;
  const PeerList* active = activeListOf(delivered);
  if (!active) return std::nullopt;
  PeerList kept;
  for (const auto& p : activeBeforeLoss_) {
    if (!containsPeer(*active, p.id)) kept.push_back(p);
  }
  if (kept.empty()) return std::nullopt;
  Event event = delivered;
  PeerList* list = activeListOf(event);
  list->insert(list->end(), kept.begin(), kept.end());
  log(LogLevel::kInfo, "treating " + peerIds(kept) + " as present for " + std::to_string(*peerGraceUntil_ - now()) +
                           " ms more: present before the ZooKeeper connection was lost, and maybe not reconnected yet");
  return event;
}

void DriverCore::endPeerGrace() {
  peerGraceUntil_.reset();
  PeerList missing;
  for (const auto& p : activeBeforeLoss_) {
    if (!containsPeer(lastActive_, p.id)) missing.push_back(p);
  }
  activeBeforeLoss_.clear();
  if (missing.empty() || health_.withdrawn()) return;
  log(LogLevel::kWarn, peerIds(missing) + " did not come back within a session timeout (" +
                           std::to_string(sessionTimeoutMs_) + " ms) of the new session: treating them as gone");
  step(ActivePeersChanged{lastActive_, lastData_, lastNotStreaming_});
}

}  // namespace dugong::agent
