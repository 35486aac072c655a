// The driver's failsafe (driver/failsafe.h, docs/design.md "Quorum loss: the sync's
// promise"): as primary, asking the sync for a promise while the lease is about to end,
// and writing on under the permission it gives; as sync, deciding a request and holding
// its own takeover back while a promise runs.
#include <algorithm>

#include "driver/core.h"
#include "statemachine/quorum.h"

namespace dugong::driver {

// A promise an earlier run of this agent may have given is held from the start.
void Core::holdEarlierPromise() {
  if (opts_.earlierPromiseMs) {
    // The record of the promises of earlier runs says how long the last one runs on: held
    // whatever this run's failsafe setting and session timeout, which may differ.
    if (*opts_.earlierPromiseMs > 0) {
      failsafe_.promisedUntil_ = now() + *opts_.earlierPromiseMs;
      log(LogLevel::kWarn, "failsafe: an earlier run of this agent promised the primary not to take over for " +
                               std::to_string(*opts_.earlierPromiseMs) +
                               " ms more (its record): this peer takes over from no primary before then, whatever "
                               "its own failsafe setting");
    }
  } else if (opts_.failsafe && opts_.failsafeDurationMs > 0) {
    // No record of earlier runs' promises is kept: held as if one was given now.
    failsafe_.promisedUntil_ = now() + opts_.failsafeDurationMs;
    log(LogLevel::kInfo, "failsafe: on; this peer takes over from no primary within " +
                             std::to_string(opts_.failsafeDurationMs) +
                             " ms of its start (an earlier run of its agent may have promised so)");
  }
}

int64_t Core::failsafeDurationMs() const {
  return opts_.failsafeDurationMs > 0 ? opts_.failsafeDurationMs : coord_.sessionTimeoutMs;
}

bool Core::failsafeHolds() const {
  return failsafe_.permittedUntil_ && now() < *failsafe_.permittedUntil_ - opts_.lease.writeStopLeadMs;
}

bool Core::failsafeInUse() const { return failsafeHolds() && !leaseValid(); }

int64_t Core::writeDeadline() const {
  const int64_t lease = lease_.deadline() ? *lease_.deadline() : INT64_MIN / 2;
  return failsafe_.permittedUntil_ ? std::max(lease, *failsafe_.permittedUntil_) : lease;
}

// The timer that stops writes a little before the end of writes, and the watchdog's end.
void Core::armWriteDeadline() {
  const int64_t deadline = writeDeadline();
  emit(cmd::LeaseDeadline{deadline});
  setTimer(TimerKind::kLease, std::max<int64_t>(deadline - opts_.lease.writeStopLeadMs - now(), 0));
}

void Core::scheduleFailsafeAsk(int64_t atMs) {
  if (!opts_.failsafe || !peersReachable_) return;
  setTimer(TimerKind::kFailsafe, std::max<int64_t>(atMs - now(), 0));
}

// Why this primary cannot ask for a promise now (nullopt: it can).
std::optional<std::string> Core::whyNoFailsafe() const {
  if (opts_.singleton) return "one-node-write mode: no sync to ask";
  const auto& s = peer_->clusterState();
  if (peer_->role() != Role::kPrimary || !s || s->primary.id != opts_.identity.id) return "not the primary";
  if (s->oneNodeWriteMode || (!s->sync && !s->quorum)) return "no sync to ask";
  if (isolation_.writesStopped() || isolation_.connectionLost() || isolation_.postgresShutDown()) {
    return "writes are stopped already";
  }
  if (handover_.handingOver()) return "this peer hands over to its sync for a switchover";
  if (!lease_.inUse()) return "no lease";
  // A write of this primary's may land (or have landed) and name another sync, which
  // promised nothing.
  if ((stateWrite_ && !stateWrite_->answered) || stateWriteUnsettled_) {
    return "a cluster-state write of this peer is in flight or of unknown outcome";
  }
  if (peer_->awaitingCompletion() || pgBusy()) return "a step of the state machine or a postgres transition is in flight";
  return std::nullopt;
}

// After a refusal, a request with no answer, or while no request can be made: a
// quarter of the round trips' interval (the sync may not have missed one yet).
int64_t Core::retryMs() const { return std::max<int64_t>(lease_.intervalMs() / 4, 25); }

void Core::askFailsafe() {
  // Asked when no round trip has confirmed the session for a while (onLease restarts
  // the timer at each), and renewed while none does: the next request is planned as
  // this one leaves (a third of the promise on, or soon while none is held), whatever
  // becomes of this one; its answer may plan it anew.
  const int64_t d = failsafeDurationMs();
  if (auto why = whyNoFailsafe()) {
    if (peer_->role() == Role::kPrimary && logOnce(Memo::kNoAsk, *why)) {
      log(LogLevel::kInfo, "failsafe: not asking the sync for a promise: " + *why);
    }
    // Looked at again while a primary's end of writes is ahead.
    if (peer_->role() == Role::kPrimary && !isolation_.writesStopped() && writeDeadline() > now()) {
      scheduleFailsafeAsk(now() + retryMs());
    }
    return;
  }
  const ClusterState& s = *peer_->clusterState();
  // Quorum mode: every member, k of which must promise (failsafe.h, kthLatestGrant).
  const PeerList asked = promisers(s);
  const int64_t sentAt = now();
  const int64_t generation = s.generation;
  const int64_t session = lease_.sessionId();
  scheduleFailsafeAsk(sentAt + (failsafeHolds() ? d / 3 : retryMs()));
  // Once per stall of the round trips (its retries are not decisions of their own).
  if (!failsafe_.permittedUntil_ && logOnce(Memo::kAskFor, std::to_string(lease_.sentAt()))) {
    const std::string whom = s.quorum ? "the members " + peerIds(asked) + " (" + std::to_string(s.quorum->k) +
                                            " of them must promise: a takeover reads " +
                                            std::to_string(readQuorum(static_cast<int>(asked.size()), s.quorum->k)) +
                                            ")"
                                      : asked.front().id + ", the sync,";
    log(LogLevel::kWarn, "failsafe: no round trip through the ZooKeeper leader for " +
                             std::to_string(sentAt - lease_.sentAt()) + " ms; asking " + whom +
                             " for a promise not to take over for " + std::to_string(d) + " ms");
  }
  for (const PeerIdentity& to : asked) {
    emit(cmd::AskFailsafe{to, FailsafeRequest{generation, opts_.identity.id, d}, std::max<int64_t>(d / 3, 1), sentAt,
                          generation, session});
  }
}

// The permission the grants held for this generation and session give: the k-th latest
// of the asked peers' (the sync's alone in sync mode).
std::optional<int64_t> Core::failsafeGrantsEnd() const {
  const ClusterState& s = *peer_->clusterState();
  const PeerList asked = promisers(s);
  std::vector<int64_t> ends;
  for (const auto& [id, grant] : failsafe_.grants_) {
    if (containsPeer(asked, id) && grant.generation == s.generation && grant.session == lease_.sessionId()) {
      ends.push_back(grant.endMs);
    }
  }
  return kthLatestGrant(std::move(ends), s.quorum ? s.quorum->k : 1);
}

void Core::onFailsafeAnswer(const in::FailsafeAnswered& answered) {
  const int64_t sentAt = answered.sentAt;
  const int64_t generation = answered.generation;
  const int64_t session = answered.session;
  const Result<FailsafeAnswer>& r = answered.r;
  const int64_t d = failsafeDurationMs();
  const int64_t now = this->now();
  // The peer asked, which answered: the sync of the generation asked in, not the sync now.
  const std::string& sync = answered.from;
  if (answered.release) {
    if (!r || !r->granted) {
      log(LogLevel::kInfo, "switchover: " + sync + " did not take the release: " + (r ? r->reason : r.error()) +
                               " (a promise it still holds ends on its own)");
    }
    return;
  }
  if (!r || !r->granted) {
    const std::string why = !r ? "no answer (" + r.error() + ")" : "refused: " + r->reason;
    if (logOnce(Memo::kNoAsk, why)) {
      log(LogLevel::kWarn, "failsafe: " + sync + " gave no promise, " + why + (failsafeHolds() ? "; writes go on until the permission held ends"
                                                                                             : "; writes stop at the lease's end"));
    }
    return;  // the next request is planned already
  }
  // Granted for the generation, session and role it was asked in, if still so: a
  // permission for anything else says nothing.
  if (whyNoFailsafe() || generation != peer_->clusterState()->generation || session != lease_.sessionId()) {
    log(LogLevel::kInfo, "failsafe: " + sync + "'s promise came for a generation, session or role this peer no longer has: unused");
    return;
  }
  const int64_t granted = failsafePermissionEndMs(sentAt, d, opts_.lease.stopMarginMs);
  Failsafe::Grant& grant = failsafe_.grants_[sync];
  if (grant.generation != generation || grant.session != session) grant = {granted, generation, session};
  grant.endMs = std::max(grant.endMs, granted);
  const std::optional<int64_t> kth = failsafeGrantsEnd();
  if (!kth) {
    const int k = peer_->clusterState()->quorum ? peer_->clusterState()->quorum->k : 1;
    log(LogLevel::kInfo, "failsafe: " + sync + " promised not to take over (" + r->reason + "); " +
                             std::to_string(k) + " members' promises are needed before writes go on past the lease");
    return;  // asked again at the retry planned with this request
  }
  const int64_t end = *kth;
  if (!failsafe_.permittedUntil_ || end > *failsafe_.permittedUntil_) {
    if (!failsafe_.permittedUntil_) {
      log(LogLevel::kWarn, "failsafe: " + sync + " promised not to take over (" + r->reason + "): writes go on for " +
                               std::to_string(end - now) + " ms more without ZooKeeper, renewed every " +
                               std::to_string(d / 3) + " ms while the ZooKeeper leader is out of reach");
    }
    failsafe_.permittedUntil_ = end;
    failsafe_.generation_ = generation;
    memos_.erase(Memo::kNoAsk);
    armWriteDeadline();
  }
  if (lease_.sentAt() < sentAt) scheduleFailsafeAsk(sentAt + d / 3);
}

// The permission is forgotten (writes then stop at the lease's end, or now if it ended).
void Core::dropFailsafe(const std::string& why) {
  cancelTimer(TimerKind::kFailsafe);
  failsafe_.grants_.clear();
  if (!failsafe_.permittedUntil_) return;
  const bool used = failsafeInUse();
  failsafe_.permittedUntil_.reset();
  if (used) log(LogLevel::kWarn, "failsafe: the permission is dropped: " + why);
  armWriteDeadline();
}

FailsafeGranterView Core::granterView() const {
  FailsafeGranterView view;
  view.enabled = opts_.failsafe;
  view.selfId = opts_.identity.id;
  const auto& state = peer_->clusterState();
  view.state = state ? &*state : nullptr;
  view.leaseInUse = lease_.inUse();
  view.reachesZooKeeper = reachesZooKeeper(lease_.sentAt(), lease_.intervalMs(), now());
  view.maxDurationMs = std::min(failsafeDurationMs(), kFailsafeMaxDurationMs);
  // Every step of a takeover is one of the state machine's in flight (awaitingCompletion):
  // its fence, a switchover's wait before it, its state write, and either held for a promise.
  view.takingOver = peer_->role() != Role::kSync ||
                    peer_->keepsFence() || peer_->awaitingCompletion() || stopping_ || health_.withdrawn();
  view.switchoverToSelf = switchoverToSelf();
  return view;
}

FailsafeAnswer Core::answerFailsafe(const FailsafeRequest& request) {
  if (request.release) return releaseFailsafe(request);
  FailsafeAnswer a = decideFailsafeGrant(request, granterView());
  const int64_t now = this->now();
  if (!a.granted) {
    // Once per reason: a primary asks again every quarter of an interval while refused.
    const std::string line = "failsafe: no promise to " + request.primaryId + ": " + a.reason;
    if (logOnce(Memo::kNoPromise, line)) log(LogLevel::kInfo, line);
    return a;
  }
  memos_.erase(Memo::kNoPromise);
  if (failsafe_.pendingRelease_) {
    // A promise given after a kept release is newer than it: the primary writes again
    // (it gave the switchover up), so that release must not end this promise.
    failsafe_.pendingRelease_.reset();
    log(LogLevel::kInfo, "failsafe: the release kept from " + request.primaryId + " no longer counts: it asked for a " +
                             "promise since");
  }
  const bool first = !failsafe_.promisedUntil_ || *failsafe_.promisedUntil_ <= now;
  failsafe_.promisedUntil_ = extendPromise(failsafe_.promisedUntil_, now, request.durationMs);
  log(first ? LogLevel::kWarn : LogLevel::kDebug,
      "failsafe: promised " + request.primaryId + " (primary of generation " + std::to_string(request.generation) +
          ") not to take over for " + std::to_string(*failsafe_.promisedUntil_ - now) +
          " ms: this peer cannot reach ZooKeeper either, so no takeover can be written meanwhile");
  return a;
}

FailsafeAnswer Core::releaseFailsafe(const FailsafeRequest& request) {
  FailsafeGranterView view = granterView();
  FailsafeAnswer a = decideFailsafeRelease(request, view);
  if (!a.granted) {
    // Sent by the primary for a switchover to this peer that it does not see yet (the
    // primary saw the request first: this peer still reconnecting after a ZooKeeper
    // quorum loss, say): kept, and carried out once it sees that very request.
    const bool seesNone = view.switchoverToSelf.empty();
    view.switchoverToSelf = request.promote;
    if (!seesNone || !decideFailsafeRelease(request, view).granted) {
      log(LogLevel::kInfo, "failsafe: the release from " + request.primaryId + " changes nothing: " + a.reason);
      return a;
    }
    failsafe_.pendingRelease_ = request;
    log(LogLevel::kInfo, "failsafe: the release from " + request.primaryId + " is for a switchover to this peer that " +
                             "it does not see requested yet: kept until it does");
    return a;
  }
  failsafe_.pendingRelease_.reset();
  const int64_t now = this->now();
  if (failsafe_.promisedUntil_ && *failsafe_.promisedUntil_ > now) {
    log(LogLevel::kInfo, "failsafe: " + request.primaryId + " stopped postgres to hand over to this peer and released it from its promise (" +
                             std::to_string(*failsafe_.promisedUntil_ - now) + " ms left): no takeover waits for it");
  }
  failsafe_.promisedUntil_.reset();
  if (failsafe_.heldTakeover_) setTimer(TimerKind::kHeldTakeover, 0);
  return a;
}

// A release kept until this peer sees the switchover it was sent for (releaseFailsafe):
// carried out once it does, forgotten with its generation.
void Core::releaseFailsafeOnceRequested() {
  if (!failsafe_.pendingRelease_) return;
  const FailsafeRequest request = *failsafe_.pendingRelease_;
  if (request.generation != generation()) {
    failsafe_.pendingRelease_.reset();
    return;
  }
  if (switchoverToSelf() != request.promote) return;
  failsafe_.pendingRelease_.reset();
  releaseFailsafe(request);
}

// A sync's takeover begins with its fence (which stops its streaming from the primary)
// and lands with its state write: while a promise runs, either waits for its end. The
// fence is the usual first step; the write is held too, for a takeover whose fence was
// already in place. Neither is held for a switchover whose old primary's stream ended
// (onUpstreamStopped).
bool Core::holdTakeoverForPromise(const Action& action) {
  const int64_t now = this->now();
  if (peer_->role() != Role::kSync || !failsafe_.promisedUntil_ || *failsafe_.promisedUntil_ <= now) return false;
  if (handover_.streamEndedIn() == generation()) return false;
  const char* what = "fence";
  if (const auto* w = std::get_if<WriteClusterState>(&action)) {
    const auto& s = peer_->clusterState();
    const bool takeover = w->state.primary.id == opts_.identity.id && (!s || s->primary.id != opts_.identity.id);
    if (!takeover) return false;
    what = "state write";
  } else if (const auto* p = std::get_if<PublishReport>(&action)) {
    // Quorum mode: a member's report is counted towards another member's takeover; one
    // whose fence was in place already publishes it without a new fence.
    if (!p->report) return false;
    what = "report";
  } else if (!std::holds_alternative<FencePg>(action)) {
    return false;
  }
  failsafe_.heldTakeover_ = action;
  log(LogLevel::kWarn, std::string("failsafe: holding this takeover's ") + what + " back for " +
                           std::to_string(*failsafe_.promisedUntil_ - now) +
                           " ms: this peer promised the primary not to take over before then");
  setTimer(TimerKind::kHeldTakeover, *failsafe_.promisedUntil_ - now);
  return true;
}

void Core::onHeldTakeoverTimer() {
  if (!failsafe_.heldTakeover_) return;
  Action held = *std::exchange(failsafe_.heldTakeover_, std::nullopt);
  log(LogLevel::kInfo, "failsafe: the promise has ended: taking over");
  carryOut(std::move(held));
}

}  // namespace dugong::driver
