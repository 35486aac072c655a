// The driver's health protocol (driver/core.h): a postgres that should run but does not
// answer is restarted with its last configuration once it has been down for the restart
// grace (at once when its postmaster is gone), and once it has been down for
// withdrawAfterMs the peer leaves the coordinator until postgres is healthy again.
#include "driver/core.h"

namespace dugong::driver {

void Core::onHealth(bool healthy, const std::string& detail) {
  health_.healthy_ = healthy;
  if (healthy) {
    if (health_.unhealthySince_) log(LogLevel::kInfo, "postgres is healthy again");
    health_.unhealthySince_.reset();
    if (health_.withdrawn_) {
      log(LogLevel::kInfo, "rejoining ZooKeeper: postgres is healthy again");
      health_.withdrawn_ = false;
      join();
    }
    return;
  }
  health_.detail_ = detail;
  // Still unhealthy, and the postmaster is now found gone: no need to wait for the tick.
  if (health_.unhealthySince_ && now_.postmasterGone) return healthTick();
  noteUnhealthy();
}

// Postgres should be running but is not answering: start the clock (once), and tick.
void Core::noteUnhealthy() {
  if (health_.healthy_ || !expectPostgresOnline() || health_.unhealthySince_) return;
  health_.unhealthySince_ = now();
  log(LogLevel::kWarn, "postgres is unhealthy: " + health_.detail_);
  healthTick();
}

void Core::withdraw(int64_t downMs) {
  log(LogLevel::kError, "withdrawing from ZooKeeper: postgres has been unhealthy for " + std::to_string(downMs / 1000) +
                            " s and restarts did not help (" + health_.detail_ + ")");
  ++counters_.withdrawals;
  health_.withdrawn_ = true;
  if (peer_->role() != Role::kPrimary) {
    emit(cmd::Leave{});
    // A standby restarts postgres while away and joins again once it is healthy; but one
    // whose takeover write may have landed keeps its fence and so postgres down (see
    // lastAppliedIsStale): it joins again after withdrawAfterMs to learn the state, as a
    // primary does. Leaving answers a write in flight afterwards, as of unknown outcome.
    if (peer_->keepsFence() || stateWriteUnanswered(in::WriteFor::kStateMachine)) {
      joinAgainAfterWithdrawal("its takeover write may have landed: the state says whether");
    }
    return;
  }
  // A primary out of ZooKeeper must not write (its sync may take over at once), as after
  // a lost connection: postgres is shut down and starts again only with a session, on
  // resumption. So it joins again after withdrawAfterMs to try; if postgres then stays
  // unhealthy, it withdraws again.
  stopWritesForWithdrawal();
  // The shutdown first (the real adapter signals the postmaster in the call, waiting for
  // no lock), then the leave that lets the sync take over at once.
  shutDownWrites("this primary withdraws from ZooKeeper, and another peer may take over at once");
  emit(cmd::Leave{});
  joinAgainAfterWithdrawal(
      "a withdrawn primary's postgres starts only with a session, once the state confirms it is still the primary");
}

// A deposed peer withdrawn while its postgres was being stopped: role none has nothing
// left to be healthy about, and out of ZooKeeper it would never rejoin the new primary.
void Core::joinAgainOnceDeposedAndStopped() {
  if (!health_.withdrawn_ || pgBusy() || peer_->role() != Role::kDeposed || !pg_.lastApplied ||
      pg_.lastApplied->role != PgRole::kNone) {
    return;
  }
  log(LogLevel::kInfo, "joining ZooKeeper again: this deposed peer's postgres is stopped, so its health no longer "
                       "keeps it away");
  cancelTimer(TimerKind::kWithdrawal);
  health_.withdrawn_ = false;
  health_.unhealthySince_.reset();
  health_.joinedAgainAt_ = now();
  join();
}

// If postgres then stays unhealthy, the peer withdraws again.
void Core::joinAgainAfterWithdrawal(const std::string& why) {
  health_.withdrawalWhy_ = why;
  setTimer(TimerKind::kWithdrawal, opts_.withdrawAfterMs);
}

void Core::onWithdrawalOver() {
  if (!health_.withdrawn_) return;
  log(LogLevel::kInfo, "joining ZooKeeper again after " + std::to_string(opts_.withdrawAfterMs / 1000) +
                           " s away: " + health_.withdrawalWhy_);
  health_.withdrawn_ = false;
  health_.joinedAgainAt_ = now();
  join();
}

// While postgres is unhealthy: restart it (re-apply its configuration) once it has
// been down for a grace period since the last transition; withdraw from ZooKeeper
// once it has been down for withdrawAfterMs.
void Core::healthTick() {
  if (health_.healthy_ || !health_.unhealthySince_ || !expectPostgresOnline()) {
    health_.unhealthySince_.reset();
    return;
  }
  const int64_t down = now() - *health_.unhealthySince_;
  // Joined again after a withdrawal to read the state: another withdrawAfterMs for that.
  const bool justJoinedAgain = health_.joinedAgainAt_ && now() - *health_.joinedAgainAt_ < opts_.withdrawAfterMs;
  if (!health_.withdrawn_ && !justJoinedAgain && down >= opts_.withdrawAfterMs) {
    withdraw(down);
    // A withdrawn primary's postgres stays down (its shutdown is on the way): no restart.
    if (!expectPostgresOnline()) return nextHealthTick();
  }
  const bool graceOver = down >= opts_.restartGraceMs && now() - pg_.lastTransitionDone >= opts_.restartGraceMs;
  // No process is starting or recovering: nothing to wait for (but no restart loop).
  const bool gone = now_.postmasterGone && now() - health_.lastRestartStarted_ >= opts_.restartGraceMs;
  const bool stale = lastAppliedIsStale();
  // A primary writes only under its lease (or the sync's promise).
  const bool noLease = lease_.inUse() && !leaseValid() && !failsafeHolds();
  // Logged once per transition.
  const std::string transition = std::to_string(pg_.lastTransitionDone);
  if (!pgBusy() && (graceOver || gone) && stale && logOnce(Memo::kStaleRestart, transition)) {
    log(LogLevel::kInfo,
        std::string("not restarting postgres as ") + pgRoleName(pg_.lastApplied->role) +
            (peer_->awaitingCompletion() ? ": the state machine is in the middle of a step"
             : peer_->keepsFence()
                 ? ": the state machine keeps the fence of a takeover whose state write may have landed"
                 : ": the state machine now wants it as " + std::string(pgRoleName(peer_->wantedPgConfig().role))) +
            " and configures it itself");
  } else if (!pgBusy() && (graceOver || gone) && !stale && pg_.lastApplied->role == PgRole::kPrimary &&
             (isolation_.connectionLost() || health_.withdrawn_ || noLease)) {
    // A primary that may be cut off from ZooKeeper starts only once the session is
    // confirmed (resumption starts a shut-down one): a start takes seconds in crash
    // recovery, and the session may expire meanwhile. So does one whose lease ended
    // (an agent that continues after a stop may find its postmaster gone before it
    // steps the lease's end).
    if (logOnce(Memo::kOutageRestart, transition)) {
      log(LogLevel::kInfo, std::string("not restarting postgres as primary: ") +
                               (health_.withdrawn_ ? "this peer is withdrawn from ZooKeeper"
                                : isolation_.connectionLost()
                                    ? "the connection to ZooKeeper is lost"
                                    : "its lease has ended (no round trip through the ZooKeeper leader has confirmed "
                                      "the session for " +
                                          std::to_string(now() - lease_.sentAt()) + " ms)") +
                               "; it starts once the session is confirmed");
    }
  } else if (!pgBusy() && (graceOver || gone) && !stale) {
    log(LogLevel::kInfo, std::string("restarting postgres as ") + pgRoleName(pg_.lastApplied->role) +
                             (gone && !graceOver ? " at once: the postmaster is gone (it crashed or was killed)"
                                                 : ": it has not answered for " + std::to_string(down) + " ms"));
    ++counters_.restarts;
    health_.lastRestartStarted_ = now();
    applyPg(*pg_.lastApplied);
  }
  nextHealthTick();
}

void Core::nextHealthTick() { setTimer(TimerKind::kHealth, opts_.healthTickMs); }

}  // namespace dugong::driver
