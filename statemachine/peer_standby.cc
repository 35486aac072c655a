// The rules of a standby cluster's peers (docs/decisions/0083-standby-cluster.md 3.1 and
// 3.4): the standby leader keeps its sync and async chain as a primary does, but it
// acknowledges nothing and never promotes; its sync takes over as standby leader.
#include "statemachine/peer.h"
#include "statemachine/promote_request.h"
#include "statemachine/standby.h"

namespace dugong {

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
    // promote-cluster (0083 6.2; phase 3 as built): the leader stops streaming from the
    // source (the standby fence), reads where its replay ends, and writes the next
    // generation as a normal state naming itself primary with the same sync and asyncs;
    // its primary apply then promotes postgres, as a sync's takeover does, and its peers
    // follow the new timeline. The write comes BEFORE the promotion: a standby state never
    // names a peer that may write (N1). What the source shows was judged by dugong-adm
    // before it wrote the request (promoteClusterRefusal); this leader does not observe
    // the source.
    auto req = validateStandbyPromote(s.standby->promote, s, now_);
    if (!req) {
      ClusterState next = s;
      next.standby->promote = nullptr;
      return writeState(std::move(next), "removed an invalid promote-cluster request: " + req.error());
    }
    const std::string asked = "promote-cluster requested by " + req->by + (req->sourceGone ? " (--source-gone)" : "");
    if (s.frozen()) return blocked(asked + ", but the cluster is frozen: not promoted", false);
    auto wal = fencedReplayEnd(asked);
    if (!wal) return;
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

// As a normal takeover (the sync becomes the leader, the first present async that may be
// the sync becomes the sync), but the old leader is not deposed: it was a standby and
// wrote nothing; back, it is appended to the chain as any newcomer.
ClusterState Peer::standbyTakeover(WalPosition wal) const { return primaryTakeover(wal); }

std::string Peer::standbySetup() const {
  if (!opts_.standbySource) return "";
  return "; a standby cluster of " + opts_.standbySource->describe() + " (dugong.yaml standby.source)";
}

}  // namespace dugong
