// The primary's rules (peer.h): keeping its sync and async chain, carrying out promote
// requests for an async, replacing a sync that is gone or acknowledges nothing, and
// leaving one-node-write mode.
#include <algorithm>

#include "statemachine/peer.h"
#include "statemachine/promote_request.h"

namespace dugong {

// The state written again without its promote request, for `reason`.
void Peer::removePromote(const std::string& reason) {
  ClusterState next = *state_;
  next.promote = nullptr;
  writeState(std::move(next), reason);
}

void Peer::evaluatePrimary() {
  const ClusterState& s = *state_;
  if (s.quorum) return evaluateQuorumPrimary();
  if (s.hasDemote()) return evaluateDemotion();  // demote-cluster (peer_standby.cc)

  if (s.hasPromote()) {
    auto req = validatePromote(s.promote, s, now_);
    if (!req) return removePromote("removed an invalid promote request: " + req.error());
    if (req->role == "async" && *req->asyncIndex == 0) {
      const std::string why = "promote request for async[0] " + req->id;
      if (!maySync(s.async.front())) {
        return removePromote("removed a promote request: " + req->id +
                             " is tagged nofailover and is never made the sync");
      } else if (s.frozen()) {
        blocked(why + ", but the cluster is frozen", false);
      } else if (!isActive(req->id)) {
        blocked(why + ", but it is not present", false);
      } else if (!pgReady()) {
        blocked(why + ": waiting for postgres to run as primary first", false);
      } else if (auto wal = fencedWal(why, s.async.front())) {
        return writeState(promoteFirstAsync(*wal), "generation " + std::to_string(s.generation + 1) + ": " + why +
                                                       " carried out; " + s.sync->id + " becomes async[0]");
      } else {
        return;
      }
    } else if (req->role == "async") {
      ClusterState next = s;
      next.promote = nullptr;
      auto i = static_cast<size_t>(*req->asyncIndex);
      std::swap(next.async[i], next.async[i - 1]);
      return writeState(std::move(next), "promote request carried out: " + req->id + " moves to async[" +
                                             std::to_string(i - 1) + "], " + s.async[i - 1].id + " to async[" +
                                             std::to_string(i) + "]");
    }
    // A sync promotion is the sync's to carry out.
  }

  if (!isActive(s.sync->id)) {
    const std::string why = "sync " + s.sync->id + " is gone";
    auto candidates = withSyncFirst(presentAsyncs());
    if (s.frozen()) {
      blocked(why + ", but the cluster is frozen: no takeover", false);
    } else if (!candidates) {
      blocked(why + ", but " + noSyncCandidate(), false);
    } else if (!pgReady()) {
      blocked(why + ": waiting for postgres to run as primary first", false);
    } else if (auto wal = fencedWal(why, candidates->front())) {
      return writeState(primaryTakeover(*wal), "generation " + std::to_string(s.generation + 1) + ": " + why + "; " +
                                                   candidates->front().id + " becomes sync" +
                                                   passedOver(presentAsyncs(), *candidates));
    } else {
      return;
    }
  }

  if (stalledSync_ && stalledSync_->syncId == s.sync->id && stalledGeneration_ == s.generation) {
    const std::string why = "sync " + s.sync->id + " acknowledges no commits (" + stalledSync_->detail + ")";
    auto candidates = withSyncFirst(presentAsyncs());
    const EpochMs holdUntil = stallHold_.since ? stallHold_.until() : now_;
    if (s.frozen()) {
      blocked(why + ", but the cluster is frozen: it stays the sync", false);
    } else if (!candidates) {
      blocked(why + ", but " + noSyncCandidate(), false);
    } else if (now_ < holdUntil) {
      blocked(why + ", but this primary replaced a sync that acknowledged nothing less than " +
                  std::to_string(stallHold_.holdMs) + " ms ago: the next replacement waits until " + formatIso8601(holdUntil),
              false);
      startTimer(TimerId::kRetryEvaluation, holdUntil - now_);
    } else if (!pgReady()) {
      blocked(why + ": waiting for postgres to run as primary first", false);
    } else if (auto wal = fencedWal(why, candidates->front())) {
      stallHold_.renew(now_, opts_.syncReplaceHoldMs);
      return writeState(replaceStalledSync(*wal, *candidates),
                        "generation " + std::to_string(s.generation + 1) + ": " + why + "; " +
                            candidates->front().id + " becomes sync, " + s.sync->id + " the last async" +
                            passedOver(presentAsyncs(), *candidates));
    } else {
      return;
    }
  }

  if (historyCheck_ == s.generation && pgReady() && !checkInitWalOnOwnHistory()) return;

  // Quorum mode wanted (peer_quorum.cc): the sync re-encoded as ANY 1 (sync), the same rule.
  if (opts_.quorum && quorum_.wanted && quorum_.wanted->mode == ReplicationMode::kQuorum) {
    if (auto step = nextMembershipStep(s, quorumWanted(), quorumPresence())) return runMembershipStep(*step);
  }

  // Async chain maintenance, in this generation: drop absent asyncs, append newcomers.
  asyncChain({*s.sync});
}

// Drops absent asyncs and appends newcomers; the sync (quorum mode: the members) hold no
// place in the chain.
void Peer::asyncChain(const PeerList& synchronous) {
  const ClusterState& s = *state_;
  PeerList asyncs = presentAsyncs();
  for (const auto& p : *active_) {
    if (isSelf(p) || containsPeer(synchronous, p.id) || containsPeer(asyncs, p.id) || containsPeer(s.async, p.id) ||
        containsPeer(s.deposed, p.id)) {
      continue;
    }
    asyncs.push_back(p);
  }
  if (!sameIds(asyncs, s.async)) {
    ClusterState next = s;
    next.async = asyncs;
    next.promote = nullptr;
    writeState(std::move(next), "async chain " + peerIdList(s.async) + " -> " + peerIdList(asyncs));
  }
}

// Defence in depth (decision 0072): the takeover's initWal is where the sync's replay
// ended when fenced, and its promotion begins the new timeline there. Should the promotion
// have ended recovery before initWal all the same (a partial record at the end of what it
// received), the generation's history names WAL this primary never held: its own adapter
// would refuse its data at its next restart, and no sync could take over from it. It
// holds every acknowledged commit all the same (a promotion replays every whole record it
// received; what it dropped ended no commit), so it writes a new generation at its own
// position, read under a fence; a write that fails is tried again in this generation.
bool Peer::checkInitWalOnOwnHistory() {
  const ClusterState& s = *state_;
  const std::string what = "initWal " + s.initWal.toString() + " of generation " + std::to_string(s.generation);
  if (!freshWal_) {
    const std::string check = "checking that " + what + " is on this primary's history";
    if (fence_ == Fence::kFenced && fencedFor_ == s.sync->id) {
      fencedWal(check, s.sync);
    } else {
      walForTakeover(check);
    }
    return false;
  }
  if (!freshHistory_) {
    blocked("cannot tell whether " + what + " is on this primary's history: its timelines are not known", true);
    return false;
  }
  const int64_t mine = freshHistory_->timelineAt(s.initWal);
  if (mine == s.initTimeline) {
    historyCheck_ = 0;
    return true;
  }
  const std::string why = what + " is not on this primary's history (" + freshHistory_->describe() +
                          "): its promotion began timeline " + std::to_string(freshHistory_->timeline) +
                          " before it";
  auto wal = fencedWal(why, s.sync);
  if (!wal) return false;
  writeState(nextGeneration(*wal), "generation " + std::to_string(s.generation + 1) + ": " + why +
                                       "; its own WAL " + wal->toString() +
                                       " becomes initWal, so that its restart and the next takeover check "
                                       "against WAL it holds");
  return false;
}

void Peer::evaluateOnwmPrimary() {
  if (opts_.singleton) return;  // a one-node-write peer ignores everyone else
  const ClusterState& s = *state_;
  bool others = std::any_of(active_->begin(), active_->end(),
                            [&](const PeerIdentity& p) { return !isSelf(p) && !containsPeer(s.deposed, p.id); });
  if (!others) return;
  const std::string why = "leaving one-node-write mode";
  if (s.frozen()) return blocked(why + ": another peer is present, waiting for the cluster to be unfrozen", false);
  if (!pgReady()) return blocked(why + ": waiting for postgres to run as primary first", false);
  PeerList candidates;
  for (const auto& p : *active_) {
    if (!isSelf(p) && !containsPeer(s.deposed, p.id)) candidates.push_back(p);
  }
  auto order = withSyncFirst(candidates);
  if (!order) return blocked(why + ": every other present peer is tagged nofailover, none can be the sync", false);
  if (auto wal = fencedWal(why, order->front())) {
    ClusterState next = leaveOnwm(*wal);
    writeState(next, "generation " + std::to_string(next.generation) + ": " + why + ", " + next.sync->id +
                         " becomes sync");
  }
}

ClusterState Peer::primaryTakeover(WalPosition wal) const {
  ClusterState next = nextGeneration(wal);
  PeerList order = *withSyncFirst(presentAsyncs());
  next.sync = order.front();
  next.async.assign(order.begin() + 1, order.end());
  return next;
}

ClusterState Peer::promoteFirstAsync(WalPosition wal) const {
  ClusterState next = nextGeneration(wal);
  next.sync = state_->async.front();
  next.async.front() = *state_->sync;
  return next;
}

ClusterState Peer::leaveOnwm(WalPosition wal) const {
  ClusterState next = nextGeneration(wal);
  PeerList others;
  for (const auto& p : *active_) {
    if (!isSelf(p) && !containsPeer(state_->deposed, p.id)) others.push_back(p);
  }
  PeerList order = *withSyncFirst(others);
  next.sync = order.front();
  next.async.assign(order.begin() + 1, order.end());
  return next;
}

// A sync that acknowledges nothing while it keeps its session: `order` (the present
// asyncs, the first that may be the sync in front) gives the new sync and the chain
// behind it; the old sync goes last, where a link it lacks holds back nobody.
ClusterState Peer::replaceStalledSync(WalPosition wal, const PeerList& order) const {
  ClusterState next = nextGeneration(wal);
  next.sync = order.front();
  next.async.assign(order.begin() + 1, order.end());
  next.async.push_back(*state_->sync);
  return next;
}

void Peer::onSyncAcknowledgement(const SyncAcknowledgement& e) {
  if (role_ == Role::kPrimary && state_ && state_->quorum) {  // quorum mode: one verdict per member
    if (!containsPeer(state_->quorum->members, e.syncId)) return;  // stale
    const bool known = quorum_.stalled.count(e.syncId) > 0;
    if (e.acknowledging == !known) return;  // no change
    if (e.acknowledging) {
      quorum_.stalled.erase(e.syncId);
      log(LogLevel::kInfo, "member " + e.syncId + " acknowledges commits again");
    } else {
      quorum_.stalled[e.syncId] = e.detail;
      log(LogLevel::kWarn, "member " + e.syncId + " acknowledges no commits: " + e.detail);
    }
    return evaluate();
  }
  if (role_ != Role::kPrimary || !state_ || !state_->sync || state_->sync->id != e.syncId) return;  // stale
  if (e.acknowledging) {
    if (!stalledSync_) return;
    stalledSync_.reset();
    log(LogLevel::kInfo, "sync " + e.syncId + " acknowledges commits again");
  } else {
    if (stalledSync_ && stalledGeneration_ == state_->generation) return;
    stalledSync_ = e;
    stalledGeneration_ = state_->generation;
    log(LogLevel::kWarn, "sync " + e.syncId + " acknowledges no commits: " + e.detail);
  }
  evaluate();
}

}  // namespace dugong
