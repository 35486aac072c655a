// The rules of a standby cluster's peers (docs/decisions/0083-standby-cluster.md 3.1 and
// 3.4): the standby leader keeps its sync and async chain as a primary does, but it
// acknowledges nothing and never promotes; its sync takes over as standby leader.
#include "statemachine/peer.h"
#include "statemachine/promote_request.h"
#include "statemachine/standby.h"

namespace dugong {
namespace {

// A full look at a dugong source: the agent's watch reads it once a second, each read
// bounded by 2 s (zk/source_watch.cc), and reports a change within that.
constexpr int64_t kSourceLookMs = 3000;

}  // namespace

// A gone sync is replaced as the primary replaces it (peer_primary.cc), with two
// differences. The new generation's initWal is where the leader's replay ends under the
// standby fence (it stops streaming from the source for the read, then streams again):
// what a later taker must have reached, so that no received WAL is given up at a takeover
// (0083 N3); the received position, read unfenced, may end inside a record that no
// standby's replay ever reaches. And no commit waits for the new sync: nothing needs it
// streaming first. Chain maintenance is the primary's.
void Peer::evaluateStandbyLeader() {
  const ClusterState& s = *state_;
  if (s.hasPromote()) {
    auto req = validatePromote(s.promote, s, now_);
    if (!req) return removePromote("removed an invalid promote request: " + req.error());
  }
  // Where the leader's replay ends under the standby fence, for a new generation: unset
  // while the fence or the read is in flight, or (logged, the fence lifted, retried) when
  // it is behind initWal.
  auto fencedReplayEnd = [this, &s](const std::string& why) -> std::optional<WalPosition> {
    if (!pgReady()) {
      blocked(why + ": waiting for postgres to run as standby leader first", false);
      return std::nullopt;
    }
    auto wal = fencedWal(why, std::nullopt);
    if (!wal || !(*wal < s.initWal)) return wal;
    keepFence_ = false;
    blocked(why + ", but this standby leader's WAL " + wal->toString() + " is behind initWal " + s.initWal.toString() +
                ": no new generation would begin behind it",
            true);
    return std::nullopt;
  };
  if (!isActive(s.sync->id)) {
    const std::string why = "sync " + s.sync->id + " is gone";
    auto candidates = withSyncFirst(presentAsyncs());
    if (s.frozen()) return blocked(why + ", but the cluster is frozen: no new sync", false);
    if (!candidates) return blocked(why + ", but " + noSyncCandidate(), false);
    auto wal = fencedReplayEnd(why);
    if (!wal) return;
    return writeState(primaryTakeover(*wal), "generation " + std::to_string(s.generation + 1) + ": " + why + "; " +
                                                 candidates->front().id + " becomes sync of the standby cluster" +
                                                 passedOver(presentAsyncs(), *candidates));
  }
  if (s.standby->hasPromote()) {
    // promote-cluster (0083 6.2): the leader stops streaming from the source (the standby
    // fence, which also asks the source: PgFenced::source), reads where its replay ends,
    // checks the source itself (dugong-adm judged an older observation: the source may
    // have changed since), and writes the next generation as a normal state naming itself
    // primary with the same sync and asyncs; its primary apply then promotes postgres, as
    // a sync's takeover does, and its peers follow the new timeline. The check and the
    // write come BEFORE the promotion: a standby state never names a peer that may write
    // (N1), and no site is made writable beside a source this leader sees writable (N2).
    auto req = validateStandbyPromote(s.standby->promote, s, now_);
    if (!req) {
      ClusterState next = s;
      next.standby->promote = nullptr;
      return writeState(std::move(next), "removed an invalid promote-cluster request: " + req.error());
    }
    const std::string asked = "promote-cluster requested by " + req->by + (req->sourceGone ? " (--source-gone)" : "");
    if (s.frozen()) return blocked(asked + ", but the cluster is frozen: not promoted", false);
    const std::string request = s.standby->promote.dump();
    if (request != promoteClusterAsked_) {
      promoteClusterAsked_ = request;
      promoteClusterAskedAt_ = now_;
    }
    if (s.standby->source.kind == SourceKind::kDugong && !sourceSeen_) {
      // A dugong source is judged on what this agent's watch saw of it, and it has seen
      // nothing yet (its agent just started): "not read yet" is not "cannot be reached"
      // (0083 6.1), and a --source-gone judged now would make this site writable beside
      // a source in sight (N2). The watch's first read, or its timeout, answers within
      // seconds (onSourceObserved evaluates again).
      return blocked(asked + ": waiting for this agent's first read of the source " + s.standby->source.describe() +
                         " before judging the request",
                     false);
    }
    if (s.standby->source.kind == SourceKind::kDugong) {
      // The look this agent holds may predate what dugong-adm saw when it wrote the request
      // (a planned switch: demote-cluster on the source returned, promote-cluster asked at
      // once). The watch reports changes only, so the look is judged once a change has been
      // reported after the request, or once a full look has passed with none.
      const EpochMs lookEnds = promoteClusterAskedAt_ + kSourceLookMs;
      if (sourceSeenAt_ <= promoteClusterAskedAt_ && now_ < lookEnds) {
        startTimer(TimerId::kRetryEvaluation, lookEnds - now_);
        return blocked(asked + ": judging it on a look at the source newer than the request (a change reported, or " +
                           std::to_string(kSourceLookMs) + " ms of reads with none: the source is read once a second)",
                       false);
      }
    }
    auto wal = fencedReplayEnd(asked);
    if (!wal) return;
    const PromoteClusterVerdict verdict = promoteClusterRefusal(s, req->sourceGone, promoteClusterView(*wal));
    if (!verdict.ok()) {
      // Refused: the request is removed in the same generation with the reason (the
      // history's record and the log say why; dugong-adm reports it), and the fence is
      // lifted: the leader follows the source again.
      keepFence_ = false;
      ClusterState next = s;
      next.standby->promote = nullptr;
      return writeState(std::move(next), asked + ", refused by standby leader " + opts_.self.id + ": " +
                                             *verdict.refusal);
    }
    if (verdict.waitFor && !(verdict.waitFor->wal < *wal)) {
      // The planned case: the source's demotion point not replayed past yet (0083 6.2 step 2).
      keepFence_ = false;
      return blocked(asked + ": waiting to replay past the source's demotion point " +
                         verdict.waitFor->wal.toString() + " (replayed " + wal->toString() + ")",
                     true);
    }
    ClusterState next = nextGeneration(*wal);
    next.standby.reset();
    return writeState(std::move(next), "generation " + std::to_string(s.generation + 1) + ": " + asked +
                                           ": no longer a standby cluster of " + s.standby->source.describe() + "; " +
                                           opts_.self.id + " is primary with WAL " + wal->toString() +
                                           " and promotes, " + s.sync->id + " stays sync");
  }
  if (s.hasPromote() && validatePromote(s.promote, s, now_)->role != "sync") {
    // A sync's promote request is the sync's to carry out (a switchover inside the
    // standby cluster); an async's moves are not carried out by a standby leader yet.
    blocked("a promote request for an async is in the state: a standby leader does not carry it out yet", false);
  }
  asyncChain({*s.sync});
}

// demote-cluster (0083 5.2; phase 4 as built): a normal cluster's primary carries out a
// demote request in this order: postgres stops (a fast shutdown while its sync still
// streams: writes end, and the sync receives the shutdown checkpoint), the WAL is read
// where it ended (the shutdown checkpoint), the next generation is written as a standby
// state naming this peer standby leader with the same sync and asyncs, initWal and
// `demotedAt` that position, and only then postgres starts in recovery from the new
// source (rewound first if its history forked: PgConfig::demoted). No instant exists at
// which the standby state is written and this postgres accepts writes; once postgres is
// down for it the request is carried out whatever its expiry (postgres does not run as
// primary again in between).
bool Peer::demoting() const {
  const ClusterState& s = *state_;
  if (!s.hasDemote()) return false;
  if (pgApplied_ && pgApplied_->role == PgRole::kNone) return true;
  return validateDemote(s.demote, s, now_).ok() && !s.frozen();
}

void Peer::evaluateDemotion() {
  const ClusterState& s = *state_;
  const bool stopped = pgApplied_ && pgApplied_->role == PgRole::kNone && !pgOnline_;
  // Stopped for it, the request's expiry no longer counts (0: never expired).
  auto req = validateDemote(s.demote, s, stopped ? 0 : now_);
  if (!req) {
    ClusterState next = s;
    next.demote = nullptr;
    return writeState(std::move(next), "removed an invalid demote-cluster request: " + req.error());
  }
  const std::string asked = "demote-cluster requested by " + req->by + " (source " + req->source.describe() + ")";
  if (!stopped) {
    if (s.frozen()) return blocked(asked + ", but the cluster is frozen: not demoted", false);
    // evaluate() applies PgConfig::none() (desiredPgConfig: demoting()).
    return blocked(asked + ": stopping postgres (its writes end; its sync receives all it wrote) before the "
                           "standby state is written",
                   false);
  }
  auto wal = walForTakeover(asked);
  if (!wal) return;
  if (!freshHistory_) {
    return blocked(asked + ", but the timeline of its WAL at " + wal->toString() + " is not known: not demoted",
                   true);
  }
  const DemotionPoint point{*wal, freshHistory_->timelineAt(*wal)};
  ClusterState next = nextGeneration(*wal);
  next.demote = nullptr;
  next.standby = StandbyMode{req->source, point, nullptr};
  return writeState(std::move(next), "generation " + std::to_string(s.generation + 1) + ": " + asked +
                                         ": a standby cluster of " + req->source.describe() + "; " + opts_.self.id +
                                         " is standby leader, its WAL ended at " + wal->toString() + " on timeline " +
                                         std::to_string(point.timeline) + ", " + s.sync->id + " stays sync");
}

// This cluster as its leader sees it under the standby fence, at replay end `wal`: itself
// present and running as standby leader (fencedReplayEnd waited for both), its timeline
// there, and what its fence saw of the source (not reached when the fence did not ask).
PromoteClusterView Peer::promoteClusterView(WalPosition wal) const {
  PromoteClusterView view;
  view.leaderPresent = true;
  view.leaderRunsAsStandbyLeader = true;
  if (freshHistory_) view.leaderTimeline = freshHistory_->timelineAt(wal);
  const SourceObservation notAsked{false, "its standby leader's fence did not ask it", std::nullopt, false,
                                   std::nullopt, {}};
  if (state_->standby->source.kind == SourceKind::kDugong) {
    // A dugong source is judged on what this agent's session to its ensemble saw last
    // (0083 3.3): its state, whether its primary is present.
    const SourceObservation notSeen{false, "this agent has not read the source's ensemble yet", std::nullopt, false,
                                    std::nullopt, {}};
    view.source = sourceSeen_ ? sourceSeen_->seen : notSeen;
    if (sourceSeen_) {
      view.cluster = sourceSeen_->cluster;
      view.chroot = sourceSeen_->chroot;
      view.root = sourceSeen_->root;
    }
    return view;
  }
  view.source = fencedSource_.value_or(notAsked);
  return view;
}

// What this agent's session to a dugong source saw (0083 3.3): the upstream is chosen
// again from each state read (sourceUpstream: the source's sync); while the source
// cannot be read the last choice stays (postgres is not touched).
// A new upstream is a new wanted configuration for the standby leader: a reload of
// primary_conninfo.
void Peer::onSourceObserved(const SourceObserved& e) {
  sourceSeen_ = e;
  sourceSeenAt_ = now_;
  if (e.seen.reachable && e.seen.state) {
    PeerIdentity up = sourceUpstream(*e.seen.state);
    if (!sourceUpstream_ || sourceUpstream_->id != up.id || sourceUpstream_->pgUrl != up.pgUrl) {
      log(LogLevel::kInfo, "the source's generation " + std::to_string(e.seen.state->generation) + " names " + up.id +
                               (e.seen.state->sync ? " sync" : " primary") +
                               ": a standby leader of this cluster streams from it (" + up.pgUrl + ")" +
                               (sourceUpstream_ ? ", was " + sourceUpstream_->id : std::string()));
      sourceUpstream_ = std::move(up);
    }
  }
  if (!zkInitialized_ || !state_ || role_ == Role::kDeposed) return;
  evaluate();
}

// A leader with no upstream chosen yet (0083 "Phase 7 as built": its agent started, or
// it took over, while the source could not be read) runs all the same: postgres in
// recovery, never promoted, following at most the source peer it followed last as this
// source's standby leader (the pg adapter's choice), so that it is ready: a gone sync is
// replaced and promote-cluster --source-gone is carried out. Waiting for the source's
// state would wait for ever in the case --source-gone is for.
SourceEndpoint Peer::standbyEndpoint() const {
  return sourceEndpoint(state_->standby->source, sourceUpstream_);
}

// As a normal takeover (the sync becomes the leader, the first present async that may be
// the sync becomes the sync), but the old leader is not deposed: it was a standby and
// wrote nothing; back, it is appended to the chain as any newcomer.
ClusterState Peer::standbyTakeover(WalPosition wal) const { return primaryTakeover(wal); }

std::string Peer::standbySetup() const {
  if (!opts_.standbySource) return "";
  return "; a standby cluster of " + opts_.standbySource->describe() + " (dugong.yaml standby.source)";
}

}  // namespace dugong
