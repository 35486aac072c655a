// The checks of each acknowledged commit that need the world's view (the others are
// the InvariantChecker's, checks/invariants.h): a commit acknowledged locally after a
// takeover (local-ack-after-takeover), one acknowledged by the current primary that the
// current sync does not hold (ack-without-sync).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

// A commit with synchronous_commit = local (localCommit): the agent shuts such a primary
// down before its session can expire, so no such commit is acknowledged once another
// peer may have taken over (a newer generation names another primary).
void World::checkLocalAck(int n, uint64_t id) {
  Node& nd = node(n);
  if (nd.faultExpiredAt >= 0 && nd.faultExpiredAt >= nd.becamePrimaryAt) return;
  // A host suspended in this primaryship (suspend-host) may resume past its session's
  // expiry and another peer's takeover: its agent stops writes at its first turn (its
  // deadline is past on its clock), but the shutdown then comes after the takeover, and
  // commits after BEGIN READ WRITE, or in flight as writes stop, are acknowledged until it
  // lands. What its agent owes is to have stopped writes: one that lets its postgres
  // write on once it has stepped past its deadline is caught here.
  if (!nd.suspends.empty() && nd.suspends.back().first >= nd.becamePrimaryAt && nd.driver &&
      (nd.driver->writesStopped() || nd.driver->postgresShutDown())) {
    return;
  }
  // A takeover by a promote request does not wait for the old primary's session: an
  // operator's switchover, which the old primary carries out (it stops postgres) only if
  // it hears of it; the shutdown guards against expiry-based takeovers only.
  int64_t led = 0;
  for (const auto& [g, leader] : primaryOfGeneration_) {
    if (leader == nd.identity.id) led = g;
  }
  if (promotedGenerations_.upper_bound(led) != promotedGenerations_.end()) return;
  if (state_ && (state_->primary.id != nd.identity.id || containsPeer(state_->deposed, nd.identity.id))) {
    checker_.fail(now_, "local-ack-after-takeover",
                  nd.identity.id + " acknowledged c" + std::to_string(id) +
                      (nd.pg.writesStopped ? " (BEGIN READ WRITE, synchronous_commit = local) with its writes stopped"
                                           : " (synchronous_commit = local)") +
                      ", after generation " +
                      std::to_string(state_->generation) + " made " + state_->primary.id + " the primary");
  }
}

// The primary of the current generation acknowledges only what that generation's sync
// holds: if it fails, the sync takes over, and must have it (a rule that warns of a
// lost commit before the failure that would lose it).
void World::checkAckHasSync(int n, const WalMark& mark) {
  Node& nd = node(n);
  if (opts_.checkTakeoverRules && state_ && state_->primary.id == nd.identity.id && state_->sync &&
      state_->sync->id != nd.identity.id) {
    const int s = nodeOf(state_->sync->id);
    if (s >= 0 && !node(s).pg.wal.contains(mark)) {
      checker_.fail(now_, "ack-without-sync",
                    nd.identity.id + " acknowledged c" + std::to_string(mark.commitId) + " as primary of generation " +
                        std::to_string(state_->generation) + " (through " +
                        (nd.pg.config.downstream ? nd.pg.config.downstream->id : std::string("no standby")) +
                        "), but that generation's sync " + state_->sync->id +
                        " does not have it: it would take over without it");
    }
  }
}

// Q (docs/decisions/0079-quorum-commit.md section 1), checked directly: a commit the
// current quorum generation's primary acknowledged beyond its initWal is in the WAL of at
// least k members of the set ZooKeeper holds now (the WAL is one history: the latest
// acknowledged stands for every one before it). A member whose data directory a fault
// replaced by an older copy (restore-stale-sync) counts as holding it: the fault, not the
// protocol, lost that copy, and its report is not counted (off the generation's history).
void World::checkAckOnQuorum(const std::string& what, const WalMark& mark) {
  if (!opts_.checkTakeoverRules || !state_ || !state_->quorum) return;
  if (mark.index < state_->initWal.value() / Wal::kRecordBytes) return;
  int holding = 0;
  std::string lacking;
  for (const PeerIdentity& m : state_->quorum->members) {
    const int h = nodeOf(m.id);
    if (h >= 0 && (node(h).pg.wal.contains(mark) || node(h).restoredFromStaleCopy)) {
      ++holding;
    } else {
      lacking += (lacking.empty() ? "" : ", ") + m.id;
    }
  }
  if (holding >= state_->quorum->k) return;
  checker_.fail(now_, "ack-off-quorum",
                state_->primary.id + " " + what + " c" + std::to_string(mark.commitId) + " (WAL record " +
                    std::to_string(mark.index) + ") in generation " + std::to_string(state_->generation) +
                    ", beyond its initWal, but only " + std::to_string(holding) + " of the set's members hold it, fewer than k = " +
                    std::to_string(state_->quorum->k) + " (" + lacking + " lack it; state " +
                    summarizeState(*state_).dump() + "): a takeover reading " +
                    std::to_string(state_->quorum->members.size() - static_cast<size_t>(state_->quorum->k) + 1) +
                    " members may miss it");
}

void World::checkQuorumWrite(bool newGeneration) {
  if (!opts_.checkTakeoverRules || !state_ || !state_->quorum) return;
  if (!newGeneration) {
    if (lastQuorumAck_ && lastQuorumAck_->first == state_->generation) {
      checkAckOnQuorum("acknowledged (before this write of the set)", lastQuorumAck_->second);
    }
    return;
  }
  const auto frontier = checker_.frontier();
  if (!frontier || statePrimary_ < 0) return;
  if (!node(statePrimary_).pg.wal.contains(*frontier)) {
    checker_.fail(now_, "takeover-without-commit",
                  state_->primary.id + " took over as primary of generation " + std::to_string(state_->generation) +
                      " (" + summarizeState(*state_).dump() + ") without the acknowledged commit c" +
                      std::to_string(frontier->commitId) + " (WAL record " + std::to_string(frontier->index) +
                      "); its WAL has " + std::to_string(node(statePrimary_).pg.wal.size()) + " records");
  }
}

}  // namespace dugong::clustersim::world_internal
