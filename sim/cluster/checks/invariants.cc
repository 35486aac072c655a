#include "sim/cluster/checks/invariants.h"

#include <utility>

#include "statemachine/promote_request.h"
#include "statemachine/standby.h"

namespace dugong::clustersim {
namespace {

// The set and k of a quorum state, the members compared as a set (nullopt: none).
bool sameQuorum(const ClusterState& a, const ClusterState& b) {
  if (a.quorum.has_value() != b.quorum.has_value()) return false;
  if (!a.quorum) return true;
  if (a.quorum->k != b.quorum->k || a.quorum->members.size() != b.quorum->members.size()) return false;
  for (const PeerIdentity& m : a.quorum->members) {
    if (!containsPeer(b.quorum->members, m.id)) return false;
  }
  return true;
}

// How many of `a`'s members `b` lacks.
size_t missingFrom(const PeerList& a, const PeerList& b) {
  size_t n = 0;
  for (const PeerIdentity& m : a) n += containsPeer(b, m.id) ? 0 : 1;
  return n;
}

// One membership step of 0079 5.1: a sync re-encoded as ANY 1 of it (or back), one member
// added or removed at the same k, or k changed by one over the same set.
bool isMembershipStep(const ClusterState& before, const ClusterState& after) {
  if (before.sync && after.quorum && !before.quorum) {
    return after.quorum->k == 1 && after.quorum->members.size() == 1 && after.quorum->members[0].id == before.sync->id;
  }
  if (before.quorum && after.sync && !after.quorum) {
    return before.quorum->k == 1 && before.quorum->members.size() == 1 &&
           before.quorum->members[0].id == after.sync->id;
  }
  if (!before.quorum || !after.quorum) return false;
  const PeerList& from = before.quorum->members;
  const PeerList& to = after.quorum->members;
  const size_t removed = missingFrom(from, to);
  const size_t added = missingFrom(to, from);
  if (before.quorum->k == after.quorum->k) return removed + added == 1;
  return removed + added == 0 && (after.quorum->k == before.quorum->k + 1 || after.quorum->k + 1 == before.quorum->k);
}

std::string commitName(const WalMark& m) {
  return "c" + std::to_string(m.commitId) + " (WAL record " + std::to_string(m.index) + ")";
}

}  // namespace

void InvariantChecker::fail(EpochMs at, std::string invariant, std::string detail) {
  violations_.push_back(Violation{std::move(invariant), std::move(detail), at});
}

std::string InvariantChecker::AckRecord::describe() const {
  return commitName(mark) + ", acknowledged at " + std::to_string(at) + " ms by " + peer + " as primary of generation " +
         std::to_string(generation) +
         (standby.empty() ? " (no synchronous standby)" : " (its synchronous standby " + standby + " had it)");
}

void InvariantChecker::onAck(EpochMs at, const std::string& peer, int64_t generation, const WalMark& mark,
                             const Wal& wal, bool deposed,
                             const std::optional<std::string>& statePrimaryOfGeneration, const std::string& standby) {
  ++acks_;
  AckRecord ack{mark, at, peer, generation, standby};
  if (takeoverRules_) {
    for (auto it = covers_.upper_bound(generation); it != covers_.end(); ++it) {
      checkAckCoveredByInitWal(at, ack, it->first);
    }
    auto [furthest, inserted] = furthestAck_.try_emplace({generation, standby}, ack);
    if (!inserted && mark.index > furthest->second.mark.index) furthest->second = ack;
  }
  if (deposed) {
    fail(at, "deposed-serves", peer + " acknowledged " + commitName(mark) + " while its state machine says deposed");
  }
  if (frontier_ && !wal.contains(frontier_->mark)) {
    fail(at, "lost-commit",
         peer + " acknowledged " + commitName(mark) + " on a history without the acknowledged commit " +
             frontier_->describe());
  }
  auto it = ackerOfGeneration_.find(generation);
  if (it == ackerOfGeneration_.end()) {
    ackerOfGeneration_.emplace(generation, peer);
  } else if (it->second != peer) {
    fail(at, "two-writers", "both " + it->second + " and " + peer + " acknowledged commits in generation " +
                                std::to_string(generation));
  }
  if (statePrimaryOfGeneration && *statePrimaryOfGeneration != peer) {
    fail(at, "two-writers", peer + " acknowledged " + commitName(mark) + " as primary of generation " +
                                std::to_string(generation) + ", whose primary is " + *statePrimaryOfGeneration);
  }
  if (!frontier_ || mark.index > frontier_->mark.index) frontier_ = std::move(ack);
}

// A commit acknowledged in a generation before `generation`, beyond its initWal, by a
// standby other than its sync: nothing makes the next takeover wait for it.
void InvariantChecker::checkAckCoveredByInitWal(EpochMs at, const AckRecord& ack, int64_t generation) {
  const GenerationCover& c = covers_.at(generation);
  if (ack.generation >= generation || ack.mark.index < c.initWalRecords || ack.standby == c.sync) return;
  fail(at, "ack-beyond-initwal",
       ack.describe() + " lies beyond generation " + std::to_string(generation) + "'s initWal (" +
           std::to_string(c.initWalRecords) + " records), and its sync " + (c.sync.empty() ? "(none)" : c.sync) +
           " did not acknowledge it: a takeover that checks initWal may lose it");
}

void InvariantChecker::checkCurrentPrimary(EpochMs at, const std::string& peer, const Wal& wal) {
  if (frontier_ && !wal.contains(frontier_->mark)) {
    fail(at, "lost-commit",
         "the current primary " + peer + " does not hold the acknowledged commit " + frontier_->describe() +
             "; its WAL has " + std::to_string(wal.size()) + " records");
  }
}

void InvariantChecker::checkPrimaryHistory(EpochMs at, const std::string& peer, const Wal& wal,
                                           const ClusterState& state) {
  if (state.initTimeline == 0) return;
  const int64_t mine = wal.timelineAt(state.initWal);
  if (mine == state.initTimeline) return;
  fail(at, "initwal-off-history",
       "the primary " + peer + " of generation " + std::to_string(state.generation) + " holds timeline " +
           std::to_string(mine) + " at its initWal " + state.initWal.toString() + ", the generation's is on timeline " +
           std::to_string(state.initTimeline) + " (" + wal.history().describe() + ")");
}

void InvariantChecker::onPeerView(EpochMs at, const std::string& peer, uint64_t incarnation, int64_t generation) {
  // try_emplace: no node is built (and freed) for a peer already seen, as on most events.
  auto [it, inserted] = views_.try_emplace(peer, incarnation, generation);
  if (inserted) return;
  auto& [inc, gen] = it->second;
  if (inc == incarnation && generation < gen) {
    fail(at, "generation-backwards",
         peer + "'s view went from generation " + std::to_string(gen) + " back to " + std::to_string(generation));
  }
  inc = incarnation;
  gen = generation;
}

void InvariantChecker::onDeposedWritable(EpochMs at, const std::string& peer) {
  fail(at, "deposed-serves", peer + " is deposed but its postgres accepts writes");
}

void InvariantChecker::onStateWrite(const StateWrite& w) {
  const ClusterState& after = w.after;
  if (after.generation < lastGeneration_) {
    fail(w.at, "generation-backwards", w.writer + " wrote generation " + std::to_string(after.generation) +
                                           " after generation " + std::to_string(lastGeneration_));
  }
  if (!generationStart_.count(after.generation)) generationStart_[after.generation] = w.at;
  if (takeoverRules_ && !covers_.count(after.generation)) {
    // A quorum generation (format 2) has no sync whose acknowledgement excuses a commit
    // beyond its initWal (docs/decisions/0079-quorum-commit.md, W): no standby has this name.
    covers_[after.generation] = {after.initWal.value() / Wal::kRecordBytes,
                                 after.quorum ? std::string(kNoSyncInQuorumMode) : after.sync ? after.sync->id : ""};
    for (const auto& [key, furthest] : furthestAck_) checkAckCoveredByInitWal(w.at, furthest, after.generation);
  }
  if (after.generation > lastGeneration_) lastGeneration_ = after.generation;

  if (!w.before) {
    if (after.generation != 1 || after.primary.id != w.writer) {
      fail(w.at, "bad-setup", w.writer + " created the cluster state with generation " +
                                  std::to_string(after.generation) + " and primary " + after.primary.id);
    }
    return;
  }
  const ClusterState& before = *w.before;
  if (after.generation == before.generation) {
    bool samePlaces = after.primary.id == before.primary.id && after.initWal == before.initWal &&
                      (after.sync ? after.sync->id : "") == (before.sync ? before.sync->id : "") &&
                      sameQuorum(before, after);
    // Quorum mode: the primary's membership steps, one member or k by one at a time, or
    // the re-encoding of a sync (docs/decisions/0079-quorum-commit.md 5.1).
    const bool primarysStep = w.writer == before.primary.id && after.primary.id == before.primary.id &&
                              after.initWal == before.initWal && isMembershipStep(before, after);
    if (!samePlaces && !primarysStep) {
      fail(w.at, "same-generation-change",
           w.writer + " changed the primary, sync, set or initWal without a new generation " +
               std::to_string(after.generation) + " (" + summarizeState(before).dump() + " -> " +
               summarizeState(after).dump() + ")");
    }
    // The operator and the primary may rewrite their generation; most writes are theirs,
    // and the serializations below would dominate the checks of a run.
    if (w.writer == "operator" || w.writer == before.primary.id) return;
    const std::string afterText = after.serialize();
    // A deposed peer whose postgres rejoined the primary removes itself from `deposed`
    // (statemachine/rejoin_policy.h releaseFromDeposed) and changes nothing else.
    const int self = indexOfPeer(before.deposed, w.writer);
    bool ownRelease = false;
    if (self >= 0) {
      ClusterState released = before;
      released.deposed.erase(released.deposed.begin() + self);
      ownRelease = released.serialize() == afterText;
    }
    // A write that changes nothing but the version (a peer settling whether its own
    // takeover write landed: docs/state-machine.md, "A takeover write of unknown outcome") decides
    // nothing, whoever writes it.
    if (!ownRelease && before.serialize() != afterText) {
      fail(w.at, "unauthorized-writer",
           w.writer + " rewrote generation " + std::to_string(after.generation) + " of primary " + before.primary.id);
    }
    return;
  }
  if (after.generation > before.generation && takeoverRules_) takeoverChecks(w);
}

void InvariantChecker::takeoverChecks(const StateWrite& w) {
  const ClusterState& before = *w.before;
  const ClusterState& after = w.after;
  const std::string g = std::to_string(after.generation);
  auto bad = [&](const std::string& why) {
    fail(w.at, "bad-takeover", w.writer + " wrote generation " + g + " (" + summarizeState(after).dump() +
                                   ") over " + summarizeState(before).dump() + ": " + why);
  };
  if (after.generation != before.generation + 1) return bad("generation skipped");
  if (w.writer == "operator") return bad("the operator declared a generation");
  if (after.primary.id != w.writer) return bad("the writer is not the new primary");
  bool wasPrimary = before.primary.id == w.writer;
  // Quorum mode: a member of G's set takes over as the sync does (0079 4.7).
  bool wasSync = (before.sync && before.sync->id == w.writer) ||
                 (before.quorum && containsPeer(before.quorum->members, w.writer));
  if (!wasPrimary && !wasSync) return bad("the writer was neither primary nor sync (or member) of generation " +
                                          std::to_string(before.generation));
  if (before.frozen()) return bad("the cluster was frozen");
  if (before.standby) return standbyTakeoverChecks(w, wasPrimary);
  if (before.oneNodeWriteMode) return;  // leaving one-node-write mode: any other peer may be sync
  if (after.quorum) {
    // The next set: G's members and asyncs, never the old primary (0079 4.3).
    for (const PeerIdentity& m : after.quorum->members) {
      const bool fromG = containsPeer(before.async, m.id) || (before.sync && before.sync->id == m.id) ||
                         (before.quorum && containsPeer(before.quorum->members, m.id));
      if (!fromG || m.id == before.primary.id) return bad("the new member " + m.id + " was no member nor async of G");
    }
  } else if (!after.sync || !containsPeer(before.async, after.sync->id)) {
    return bad("the new sync was not an async");
  }
  if (wasPrimary && before.quorum) {
    // Only decision 0072's rewrite at its own position: the same set and k.
    if (!sameQuorum(before, after)) return bad("the primary of a quorum generation changed its set in a new generation");
    return;
  }

  auto start = generationStart_.find(before.generation);
  EpochMs from = start == generationStart_.end() ? 0 : start->second;
  auto promote = before.hasPromote() ? validatePromote(before.promote, before, w.issuedAt)
                                     : Result<PromoteRequest>(Error{"no promote request"});
  if (wasPrimary) {
    if (!before.sync) return bad("a new generation by the primary without a sync");
    bool syncGone = before.sync && wasAbsent_(before.sync->id, from, w.issuedAt);
    bool promoted = promote.ok() && promote->role == "async" && promote->asyncIndex == 0 &&
                    promote->id == after.sync->id;
    // A sync that acknowledged nothing (statemachine/peer_primary.cc) is replaced while
    // present and goes last in the chain; whether it acknowledged nothing is the driver's
    // judgement, and what it risks (a lost commit, two writers) the data invariants check.
    bool stalledSyncReplaced = before.sync && !after.async.empty() && after.async.back().id == before.sync->id &&
                               !containsPeer(after.deposed, before.sync->id);
    if (!syncGone && !promoted && !stalledSyncReplaced) {
      return bad("the old sync " + before.sync->id + " never left and no valid promote of async[0] existed");
    }
    return;
  }
  bool primaryGone = wasAbsent_(before.primary.id, from, w.issuedAt);
  bool promoted = promote.ok() && promote->role == "sync" && promote->id == w.writer;
  if (!primaryGone && !promoted) {
    return bad("the old primary " + before.primary.id + " never left and no valid promote of the sync existed");
  }
  if (!containsPeer(after.deposed, before.primary.id)) return bad("the old primary is not deposed");
  if (!w.writerWal || *w.writerWal < before.initWal) {
    return bad("the writer's WAL " + (w.writerWal ? w.writerWal->toString() : std::string("(unknown)")) +
               " had not reached initWal " + before.initWal.toString());
  }
  if (after.initWal < before.initWal) return bad("initWal went backwards");
}

// A new generation of a standby cluster (docs/decisions/0083-standby-cluster.md 8.3): a
// standby generation is written by its leader replacing a gone sync, or by its sync
// taking over as leader (the old leader's session gone, or a valid promote of the sync),
// deposing nobody (the old leader wrote nothing); a normal generation after a standby one
// only by the leader carrying out a valid standby.promote. N3 (standby-received-backwards):
// initWal never goes back, and a taker has reached the previous generation's initWal.
void InvariantChecker::standbyTakeoverChecks(const StateWrite& w, bool wasPrimary) {
  const ClusterState& before = *w.before;
  const ClusterState& after = w.after;
  const std::string g = std::to_string(after.generation);
  auto fails = [&](const char* invariant, const std::string& why) {
    fail(w.at, invariant, w.writer + " wrote generation " + g + " (" + summarizeState(after).dump() + ") over " +
                              summarizeState(before).dump() + ": " + why);
  };
  if (after.initWal < before.initWal) {
    return fails("standby-received-backwards", "initWal " + after.initWal.toString() + " is behind the previous " +
                                                   "generation's " + before.initWal.toString());
  }
  if (!after.standby) {
    if (!wasPrimary) return fails("bad-takeover", "a normal generation after a standby one, not by its standby leader");
    auto req = before.standby->hasPromote() ? validateStandbyPromote(before.standby->promote, before, w.issuedAt)
                                            : Result<StandbyPromoteRequest>(Error{"no promote-cluster request"});
    if (!req) return fails("bad-takeover", "a normal generation after a standby one: " + req.error());
    // promote-cluster's initWal is where the leader's WAL ends under its fence: never past
    // the whole records it holds (a received position may end inside a record, which its
    // promotion gives up: the new timeline would fork before initWal).
    if (!w.writerWal || *w.writerWal < after.initWal) {
      return fails("standby-received-backwards",
                   "promote-cluster's initWal " + after.initWal.toString() + " is past the leader's WAL " +
                       (w.writerWal ? w.writerWal->toString() : std::string("(unknown)")) + " (a partial record)");
    }
    return;
  }
  if (!after.sync || !containsPeer(before.async, after.sync->id)) return fails("bad-takeover", "the new sync was not an async");
  auto start = generationStart_.find(before.generation);
  const EpochMs from = start == generationStart_.end() ? 0 : start->second;
  if (wasPrimary) {
    if (before.sync && !wasAbsent_(before.sync->id, from, w.issuedAt)) {
      return fails("bad-takeover", "the standby leader replaced its sync " + before.sync->id + ", which never left");
    }
    return;
  }
  auto promote = before.hasPromote() ? validatePromote(before.promote, before, w.issuedAt)
                                     : Result<PromoteRequest>(Error{"no promote request"});
  const bool promoted = promote.ok() && promote->role == "sync" && promote->id == w.writer;
  if (!promoted && !wasAbsent_(before.primary.id, from, w.issuedAt)) {
    return fails("bad-takeover", "the standby leader " + before.primary.id + " never left and no valid promote of the sync existed");
  }
  if (containsPeer(after.deposed, before.primary.id)) return fails("bad-takeover", "a standby takeover deposed the old leader");
  if (!w.writerWal || *w.writerWal < before.initWal) {
    return fails("standby-received-backwards",
                 "the taker's WAL " + (w.writerWal ? w.writerWal->toString() : std::string("(unknown)")) +
                     " had not reached initWal " + before.initWal.toString() + ": received WAL given up");
  }
}

}  // namespace dugong::clustersim
