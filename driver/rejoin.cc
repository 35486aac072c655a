// The driver's deposed peer (driver/core.h): the automatic rejoin (options.rejoin;
// docs/rejoin.md): once its postgres is stopped and the primary is present, postgres is
// asked to follow the primary without a copy, and on success the peer removes itself
// from `deposed` (a test-and-set, with the reason in the history); a fresh state machine
// once it is no longer deposed (rejoined, or rebuilt by an operator); and the data state
// published for a setup of a cluster with no state.
#include "driver/core.h"

namespace dugong::driver {

// A deposed peer's state machine ignores everything. Once an operator has rebuilt this
// peer and removed it from `deposed`, the driver starts a fresh one: when the state
// says so, or, if a transition was in flight then, as soon as it ends.
bool Core::rebuiltWhileDeposed() const {
  if (peer_->role() != Role::kDeposed || pgBusy() || !coord_.state.node.exists) return false;
  const auto& state = coord_.state.parsed;
  return state && !containsPeer(state->deposed, opts_.identity.id);
}

void Core::startFreshStateMachine(bool feedState) {
  log(LogLevel::kInfo, "this peer is no longer deposed (it rejoined, or an operator rebuilt it): starting a fresh state machine");
  ++counters_.freshStateMachines;
  peer_ = std::make_unique<Peer>(peerOptions());
  // What the deposed state machine asked for and a transition in flight held back goes
  // with it: run later, its answer would be taken for the fresh one's own apply.
  if (pg_.queuedPeerApply) {
    log(LogLevel::kInfo, std::string("dropping the deposed state machine's queued configuration (") +
                             pgRoleName(pg_.queuedPeerApply->role) + "): the fresh state machine asks for its own");
    pg_.queuedPeerApply.reset();
  }
  for (auto it = armed_.begin(); it != armed_.end();) {
    if (it->first.kind != TimerKind::kStateMachine) {
      ++it;
      continue;
    }
    emit(cmd::CancelTimer{it->first});
    it = armed_.erase(it);
  }
  emit(cmd::InitPostgres{true});
  if (feedState) {
    const ZkInitialized init{coord_.state.node, coord_.active, coord_.data, false, coord_.notStreaming,
                             coord_.reports};
    for (Action& a : peer_->step(now_.wallMs, init)) {
      carryOut(std::move(a));
    }
  }
}

void Core::maybeRejoin() {
  if (opts_.rejoin == RejoinPolicy::kManual || health_.withdrawn() || failed_) return;
  if (peer_->role() != Role::kDeposed || pgBusy() || pg_.queuedPeerApply) return;
  if (rejoin_.rejoinedTo_) return releaseAfterRejoin();
  // Only once the deposed state machine has stopped postgres.
  if (!pg_.lastApplied || pg_.lastApplied->role != PgRole::kNone || !coord_.state.node.exists) return;
  const auto& state = coord_.state.parsed;
  if (!state || !containsPeer(state->deposed, opts_.identity.id) || state->primary.id == opts_.identity.id) return;
  if (state->oneNodeWriteMode) return;
  if (rejoin_.triedGeneration_ != state->generation) rejoin_.retryDelayMs_ = 0;  // a new generation: at once
  if (rejoin_.triedGeneration_ == state->generation && (rejoin_.retryDelayMs_ == 0 || !rejoin_.retryDue_)) return;
  if (!containsPeer(coord_.active, state->primary.id)) return;  // tried when the primary is present
  rejoin_.triedGeneration_ = state->generation;
  rejoin_.retryDue_ = false;
  const PeerIdentity primary = state->primary;
  log(LogLevel::kInfo, std::string("rejoining automatically (rejoin: ") + rejoinPolicyName(opts_.rejoin) +
                           "): making postgres a standby of " + primary.id + ", the primary of generation " +
                           std::to_string(state->generation) + ", " +
                           (opts_.rejoin == RejoinPolicy::kFollow
                                ? "only if its data directory can follow as it is (nothing discarded)"
                                : "rewinding its data directory if it diverged") +
                           ", never copying it");
  pg_.op = PgOp::kRejoin;
  emit(cmd::Rejoin{primary, opts_.rejoin});
}

void Core::onRejoined(const PeerIdentity& primary, const RejoinFinished& r) {
  pg_.op.reset();
  pg_.lastTransitionDone = now();
  if (r.rewound) {
    log(LogLevel::kWarn, "rejoin: pg_rewind discarded " + r.discarded + ", which " + primary.id +
                             "'s timeline does not have (rejoin: rewind)");
  }
  if (!r.ok) {
    ++counters_.rejoinFailures;
    rejoin_.lastError_ = r.error;
    // Tried again with a back-off while the generation lasts: a failure may be transient
    // (the new primary still promoting, a refused connection), and a peer left deposed
    // leaves a 3-peer cluster with no async to take over next.
    rejoin_.retryDelayMs_ =
        rejoin_.retryDelayMs_ == 0 ? Rejoin::kFirstRetryMs : std::min(rejoin_.retryDelayMs_ * 2, Rejoin::kMaxRetryMs);
    log(LogLevel::kWarn,
        "not rejoined automatically, this peer stays deposed for now: " + r.error + "; trying again in " +
            std::to_string(rejoin_.retryDelayMs_ / 1000) + " s" +
            (opts_.rejoin == RejoinPolicy::kFollow ? " (`dugong-adm rebuild` rebuilds it now; or set rejoin: rewind)"
                                                   : " (`dugong-adm rebuild` rebuilds it now)"));
    rejoin_.timerMarksDue_ = true;
    setTimer(TimerKind::kRejoin, rejoin_.retryDelayMs_);
    // Postgres is stopped, as role none left it, whether or not pg_rewind ran (a rewound
    // directory whose start failed is a standby's, started as it is by the next try).
    return afterPgTransition();
  }
  rejoin_.rejoinedTo_ = primary.id;
  rejoin_.lastError_.clear();
  rejoin_.reason_ = "rejoin " + opts_.identity.id + " (automatic, rejoin: " + rejoinPolicyName(opts_.rejoin) +
                    "): streams from " + primary.id + " without a copy, " +
                    (r.rewound ? "after pg_rewind discarded " + r.discarded : "nothing discarded");
  pg_.lastApplied.reset();  // postgres runs as a standby now, not as the state machine left it
  afterPgTransition();
}

void Core::onRejoinTimer() {
  if (std::exchange(rejoin_.timerMarksDue_, false)) rejoin_.retryDue_ = true;
  maybeRejoin();
}

// Postgres follows the primary: the peer leaves `deposed` (a test-and-set of the state
// last read, retried after a conflict), and the state change starts a fresh state machine.
void Core::releaseAfterRejoin() {
  // One state write at a time: a confirmation of this peer's primacy on a new session
  // may still be in flight; looked at again once it is answered.
  if (stateWriteUnanswered(in::WriteFor::kRelease) || stateWriteUnanswered(in::WriteFor::kConfirmation) ||
      !rejoin_.rejoinedTo_ || !coord_.state.parsed) {
    return;
  }
  ClusterState state = *coord_.state.parsed;
  auto released = releaseFromDeposed(state, opts_.identity.id, *rejoin_.rejoinedTo_);
  if (!released || !released.value()) {
    if (!released) {
      log(LogLevel::kWarn, "rejoined, but not leaving deposed: " + released.error() +
                               "; stopping postgres, and rejoining the new primary instead");
      rejoin_.rejoinedTo_.reset();
      applyPg(PgConfig::none());
      return;
    }
    rejoin_.rejoinedTo_.reset();  // no longer deposed: someone else released it
    return;
  }
  stateWrite_ = StateWrite{in::WriteFor::kRelease};
  ++counters_.stateWrites;
  emit(cmd::PutState{state, coord_.state.node.version, rejoin_.reason_, in::WriteFor::kRelease});
}

void Core::onReleased(const StateWriteFinished& w) {
  stateWrite_.reset();
  if (w.ok) {
    ++counters_.rejoins;
    log(LogLevel::kInfo, "left deposed: " + rejoin_.reason_);
    rejoin_.rejoinedTo_.reset();
    return;
  }
  ++counters_.stateWriteFailures;
  log(LogLevel::kInfo, "leaving deposed failed (" + w.error + "); trying again in " +
                           std::to_string(opts_.retryDelayMs) + " ms with the state read since");
  rejoin_.timerMarksDue_ = false;
  setTimer(TimerKind::kRejoin, opts_.retryDelayMs);
}

// ---- the data state published for a setup ------------------------------------------------

// With no cluster state, postgres is stopped (role none): what its data directory holds
// is then final, and published for the peers that choose who sets the cluster up. Once
// a state exists it is withdrawn, so that a later loss of the state never finds it stale.
void Core::maybePublishDataState() {
  if (!opts_.setupFromData) return;
  if (peer_->clusterState()) {
    if (dataState_.published_) {
      dataState_.published_ = false;
      log(LogLevel::kInfo, "no longer publishing this peer's data state: the cluster has a state");
      emit(cmd::PublishDataState{std::nullopt});
    }
    return;
  }
  if (dataState_.published_ || dataState_.reading_ || pgBusy() || !pg_.lastApplied ||
      pg_.lastApplied->role != PgRole::kNone)
    return;
  dataState_.reading_ = true;
  emit(cmd::ReadDataState{});
}

void Core::onDataStateRead(const Result<PeerDataState>& r) {
  dataState_.reading_ = false;
  if (!r) {
    log(LogLevel::kError, "cannot read what the data directory holds (" + r.error() + "); trying again in " +
                              std::to_string(opts_.retryDelayMs) + " ms");
    setTimer(TimerKind::kDataState, opts_.retryDelayMs);
    return;
  }
  if (peer_->clusterState() || pgBusy() || !pg_.lastApplied || pg_.lastApplied->role != PgRole::kNone) {
    return maybePublishDataState();  // things moved on while it was read
  }
  dataState_.published_ = true;
  log(LogLevel::kInfo, "no cluster state: publishing what this peer's data directory holds (" + r->describe() +
                           ") for the choice of who sets the cluster up");
  emit(cmd::PublishDataState{*r});
}

}  // namespace dugong::driver
