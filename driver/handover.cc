// The driver's clean handover of a planned switchover (driver/core.h): the primary stops
// postgres when it sees a valid promote request of its sync, while the sync still
// streams, so that the sync receives all of its WAL (a stopping primary sends it all,
// its shutdown checkpoint included); the sync waits up to handoverWaitMs for that stream
// to end before its fence, so that the old primary's data directory can follow the new
// timeline as it is. A primary still not deposed a little after that starts again.
#include "driver/core.h"

#include "statemachine/promote_request.h"

namespace dugong::driver {

namespace {
// How much longer than the sync's wait the primary keeps postgres stopped for a
// switchover that does not happen.
constexpr int64_t kHandoverSlackMs = 500;
// How long the primary waits for its sync's answer to a release (only logged).
constexpr int64_t kReleaseTimeoutMs = 1000;
}  // namespace

std::optional<std::string> Core::switchoverTarget(bool forSelf) const {
  const auto& s = peer_->clusterState();
  if (opts_.handoverWaitMs <= 0) return std::nullopt;
  if (!s || (!s->sync && !s->quorum) || !s->hasPromote() || s->frozen() || s->oneNodeWriteMode) return std::nullopt;
  auto req = validatePromote(s->promote, *s, now_.wallMs);
  // Quorum mode: the target is any member (decision 0079 4.2).
  const bool target = s->quorum ? containsPeer(s->quorum->members, req ? req->id : "") : req && req->id == s->sync->id;
  if (!req || req->role != "sync" || !target) return std::nullopt;
  if (forSelf) {
    // Quorum mode: every member waits, not only the target, so that all of them hold the
    // old primary's last WAL and the target ties with the best.
    const bool waits = s->quorum ? containsPeer(s->quorum->members, opts_.identity.id) : req->id == opts_.identity.id;
    if (peer_->role() != Role::kSync || !waits || !containsPeer(coord_.active, s->primary.id)) return std::nullopt;
    return req->id;
  }
  if (!containsPeer(coord_.active, req->id)) return std::nullopt;
  return req->id;
}

bool Core::switchoverRequested(bool forSelf) const { return switchoverTarget(forSelf).has_value(); }

std::string Core::switchoverToSelf() const {
  const auto& s = peer_->clusterState();
  // Quorum mode: every member takes part in a switchover's takeover (its report), so
  // each counts the switchover as its own.
  if (s && s->quorum) return switchoverRequested(true) ? s->promote.dump() : "";
  if (!s || !s->sync || s->sync->id != opts_.identity.id || !s->hasPromote() || s->frozen() || s->oneNodeWriteMode) {
    return "";
  }
  auto req = validatePromote(s->promote, *s, now_.wallMs);
  return req && req->role == "sync" && req->id == opts_.identity.id ? s->promote.dump() : "";
}

// On the sync: before the fence of a switchover's takeover, wait (once per generation) for
// the old primary's stop, which ends its WAL stream; true: waiting, the fence comes after.
bool Core::awaitOldPrimaryStop(const std::optional<PeerIdentity>& newSync) {
  const auto gen = generation();
  if (!switchoverRequested(true) || handover_.waitedIn_ == gen) return false;
  handover_.waitedIn_ = gen;
  pg_.op = PgOp::kAwaitUpstreamStop;
  log(LogLevel::kInfo, "switchover: waiting up to " + std::to_string(opts_.handoverWaitMs) + " ms for " +
                           peer_->clusterState()->primary.id +
                           " to stop postgres, so that this peer has all of its WAL before taking over");
  emit(cmd::AwaitUpstreamStop{opts_.handoverWaitMs, newSync});
  return true;
}

// The sync's wait is over: the primary starts postgres again, now or when the stop in
// flight ends.
void Core::onHandoverTimer() {
  handover_.timedOut_ = true;
  maybeHandOver();
}

// On the primary: a switchover to its sync is requested: stop postgres now, while the
// sync still streams, so that it receives everything this primary wrote. Once per
// request, and for a bounded time: the sync waits at most handoverWaitMs for this
// stop, so a primary still not deposed a little after that starts postgres again.
void Core::maybeHandOver() {
  if (peer_->role() != Role::kPrimary) {
    handover_.from_.reset();
    cancelTimer(TimerKind::kHandover);
    return;
  }
  if (pgBusy()) return;
  // Not while the state machine is in the middle of a step: a start between its fence
  // and its state write would undo the fence. Looked at again after it.
  if (handover_.from_ && peer_->awaitingCompletion()) return;
  const auto& s = peer_->clusterState();
  const std::optional<std::string> target = switchoverTarget(false);
  const bool requested = target.has_value();
  const std::string request = requested ? s->promote.dump() : "";
  if (requested && !handover_.from_ && request != handover_.request_ && pg_.lastApplied &&
      pg_.lastApplied->role == PgRole::kPrimary) {
    handover_.from_ = *pg_.lastApplied;
    handover_.request_ = request;
    ++counters_.handovers;
    log(LogLevel::kInfo, "switchover to " + *target + " requested: stopping postgres now, while " + *target +
                             " streams, so that it receives all of this primary's WAL before it takes over");
    handover_.timedOut_ = false;
    // The sync takes over without waiting for a promise once this stop ended the stream.
    if (failsafe_.permittedUntil()) dropFailsafe("this peer hands over to " + *target + " for a switchover");
    applyPg(PgConfig::none());
    setTimer(TimerKind::kHandover, opts_.handoverWaitMs + kHandoverSlackMs);
  } else if (handover_.timedOut_ && handover_.from_) {
    log(LogLevel::kWarn, "switchover did not happen within " + std::to_string(opts_.handoverWaitMs + kHandoverSlackMs) +
                             " ms: this peer is still the primary; starting postgres again as primary");
    startAgainAfterHandover();
  } else if (!requested && handover_.from_) {
    log(LogLevel::kWarn, "switchover abandoned: the promote request is gone or expired and this peer is still the "
                         "primary: starting postgres again as primary");
    cancelTimer(TimerKind::kHandover);
    startAgainAfterHandover();
  } else if (handover_.from_ && request == handover_.request_ && handover_.releasedFor_ != request && (s->sync || s->quorum) &&
             pg_.lastApplied && pg_.lastApplied->role == PgRole::kNone) {
    releaseSyncForHandover(*s);
  }
}

// On the primary, once postgres stopped for a switchover: it writes no more, under any
// promise, so the sync is released from its promises and takes over at once, whether or
// not it saw the stream end (a sync whose agent just started may see no stream at all).
// Sent whatever this peer's failsafe setting: the sync may hold a promise an earlier run
// of its own agent recorded. Once per request; the answer is only logged.
void Core::releaseSyncForHandover(const ClusterState& s) {
  // Quorum mode: every member (each one's report counts towards the takeover).
  const PeerList released = promisers(s);
  handover_.releasedFor_ = handover_.request_;
  log(LogLevel::kInfo, "switchover: postgres stopped; releasing " + peerIds(released) +
                           " from any promise not to take over, so that no promise holds its takeover back");
  for (const PeerIdentity& to : released) {
    emit(cmd::AskFailsafe{to, FailsafeRequest::releaseFor(s.generation, opts_.identity.id, handover_.request_),
                          kReleaseTimeoutMs, now(), s.generation, lease_.sessionId()});
  }
}

// The switchover is over and this peer is still the primary: postgres should run as the
// state machine wants it now (its sync may have changed meanwhile), also for the health
// logic should this start fail.
void Core::startAgainAfterHandover() {
  pg_.lastApplied = peer_->wantedPgConfig();
  handover_.from_.reset();
  applyPg(*pg_.lastApplied, PgOp::kStartAgain);
}

// On the sync: the wait for the old primary's stop is over; the fence goes ahead. Once
// the stream ended, no promise this peer gave holds it: the old primary stopped postgres
// for this switchover, as it does only once it has read the request, and gave up its
// permission as it did (maybeHandOver). A stream that did not end may belong to a
// primary that writes under a promise without ZooKeeper: the promise holds then.
void Core::onUpstreamStopped(const in::UpstreamStopped& u) {
  if (u.ended) handover_.streamEndedIn_ = generation();
  log(LogLevel::kInfo, u.ended ? "switchover: the old primary's WAL stream ended: taking over"
                               : "switchover: the old primary's WAL stream did not end: taking over anyway");
  if (!u.ended && holdTakeoverForPromise(FencePg{u.newSync})) {
    pg_.op.reset();  // the wait is over; the held fence is carried out again at the promise's end
    afterPgTransition();
    return;
  }
  fencePg(u.newSync);
}

}  // namespace dugong::driver
