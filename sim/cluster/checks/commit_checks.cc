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

}  // namespace dugong::clustersim::world_internal
