// The invariants of a standby cluster (docs/decisions/0083-standby-cluster.md 8.3), checked
// in standby seeds only, against the world's view of the scripted source
// (sim/world/sim_source.h):
//  - standby-writable (N1): while ZooKeeper holds a standby state, no peer of this cluster
//    runs postgres out of recovery (role primary, or being promoted);
//  - standby-ahead-of-source-sync (N4): while the source is there, no peer's WAL diverged
//    from the source's history, but after a source failover that came within
//    kSourceChangeWindowMs of a change of the source's sync (the race N4 allows: the
//    leader may still stream from the old sync, ahead of the new one);
//  - two-writable-sites (N2): at every acknowledgement by a peer of this cluster, the
//    source has no primary writable at that instant (sim_source.h writablePrimary: the
//    checker knows the truth, whether or not the agents can reach the source);
//  - site-switch-lost-commit (N5): once the new primary of a promote-cluster runs as
//    primary, every commit the source acknowledged is in its WAL: all of them after the
//    source's demotion (the planned switch, 0083 5.3), those at or before the promotion's
//    initWal (what the leader reported received) after --source-gone;
//  - standby-received-backwards (N3) is checked with each new generation (invariants.cc,
//    takeoverChecks);
//  - liveness: once the faults stop, the leader streams from the source's current
//    upstream (its sync, else its primary) and every other peer of the state streams
//    from its upstream (standbyFollowing).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

namespace {

// A source failover this soon after a change of its sync may leave the leader on a fork
// (N4's race): the leader sees the change within a poll (1 s) and a reload.
constexpr int64_t kSourceChangeWindowMs = 2000;

}  // namespace

void World::checkStandby() {
  if (!source_ || !state_) return;
  if (state_->standby) {
    for (const Node& nd : nodes_) {
      const PgServer& pg = nd.pg;
      if ((pg.running && pg.config.role == PgRole::kPrimary) || pg.promoting) {
        checker_.fail(now_, "standby-writable",
                      nd.identity.id + "'s postgres runs out of recovery (" +
                          (pg.promoting ? "being promoted from " : "") + describeConfig(pg.config) +
                          ") while the cluster state is a standby state of generation " +
                          std::to_string(state_->generation));
        return;
      }
    }
    if (!source_->gone() && !source_->failingOver() && !source_->lastFailoverInWindow(kSourceChangeWindowMs)) {
      const Wal& history = source_->history();
      for (const Node& nd : nodes_) {
        // A copy of another history put in place by restore-stale-sync diverged by design.
        if (!nd.pg.setUp || nd.restoredFromStaleCopy || !nd.pg.wal.divergedFrom(history)) continue;
        checker_.fail(now_, "standby-ahead-of-source-sync",
                      nd.identity.id + "'s WAL (" + std::to_string(nd.pg.wal.size()) + " records, " +
                          nd.pg.wal.history().describe() + ") diverged from the source's history (" +
                          std::to_string(history.size()) + " records, " + history.history().describe() +
                          "): it holds WAL the source's sync did not have");
        return;
      }
    }
    return;
  }
  // A normal cluster after promote-cluster: its primary holds what the source had
  // acknowledged: all of it after a demotion (no commit is acknowledged past demotedAt),
  // else up to the promotion's initWal.
  if (!promotedAtWal_ || statePrimary_ < 0) return;
  const PgServer& pg = node(statePrimary_).pg;
  if (!pg.serving() || pg.config.role != PgRole::kPrimary) return;
  const auto& acked = source_->acknowledged();
  auto it = acked.end();
  if (!promotedPlanned_) {
    const uint64_t records = promotedAtWal_->value() / pg.wal.recordBytes();
    it = std::upper_bound(acked.begin(), acked.end(), records,
                          [](uint64_t r, const WalMark& m) { return r < m.index + 1; });
  }
  if (it == acked.begin()) return;
  const WalMark& last = *std::prev(it);
  if (pg.wal.contains(last)) return;
  checker_.fail(now_, "site-switch-lost-commit",
                state_->primary.id + ", primary after promote-cluster " +
                    (promotedPlanned_ ? "of the demoted source (demotedAt " + source_->demotedAt()->wal.toString() + ")"
                                      : std::string("--source-gone")) +
                    " at " + promotedAtWal_->toString() + ", lacks the source's acknowledged commit at record " +
                    std::to_string(last.index) + " (its WAL: " + std::to_string(pg.wal.size()) + " records, " +
                    pg.wal.history().describe() + ")");
}

void World::checkTwoWritableSites(int n, uint64_t commitId, const char* how) {
  if (promotedBesideAnUnseenSource_) return;
  const auto other = source_->writablePrimary();
  if (!other) return;
  checker_.fail(now_, "two-writable-sites",
                node(n).identity.id + " acknowledged c" + std::to_string(commitId) + how +
                    " while the source's primary " + *other + " is writable (" +
                    (source_->isCut() ? "cut off from this cluster" : "reachable by this cluster") + ", generation " +
                    std::to_string(source_->state().generation) + ")");
}

void World::standbyStateWritten(const std::optional<ClusterState>& before, const std::string& writer) {
  if (!source_ || !before || !before->standby || state_->standby) return;
  if (before->generation == state_->generation) return;
  promotedAtWal_ = state_->initWal;
  promotedPlanned_ = source_->demotedAt().has_value();
  const int w = nodeOf(writer);
  const auto writable = source_->writablePrimary();
  if (writable && w >= 0 && node(w).env) {
    // The leader judged --source-gone on its agent's look at the source when it asked for
    // this write (the look may have changed before the write landed): one that could not
    // reach it (its host suspended, its link cut) while the source was writable leaves two
    // writable sites on the operator's word (0083 7.1), not by the leader's mistake. A
    // leader that saw the source writable, or saw nothing yet, is still checked.
    const auto& seen = node(w).env->hostCoordinator.sourceSeenAtLastWrite();
    if (seen && !seen->seen.reachable) {
      promotedBesideAnUnseenSource_ = true;
      trace('Q', [&] {
        return "promote-cluster --source-gone carried out by " + writer + " on a look that could not reach the source (" +
               seen->seen.lastSeen + ") while its primary " + *writable +
               " is writable: two sites may be writable on the operator's word (0083 7.1; the site fence, 7.2, is not "
               "built): two-writable-sites no longer checked";
      });
    }
  }
  trace('Q', [&] { return "promote-cluster: generation " + std::to_string(state_->generation) + " is a normal cluster from " +
                          state_->initWal.toString() + (promotedPlanned_ ? " (the source was demoted)" : ""); });
}

// Liveness of a standby cluster: the leader streams from the source's current upstream
// (0083 3.2: its sync, else its primary), every other peer of the state from its upstream.
bool World::standbyFollowing() const {
  if (!source_ || !state_ || !state_->standby || source_->gone() || source_->isCut() || source_->failingOver()) {
    return false;
  }
  const ClusterState& src = source_->state();
  const std::string& upstream = src.sync ? src.sync->id : src.primary.id;
  if (statePrimary_ < 0 || !fleet_.streamsFrom(statePrimary_, source_->hostOf(upstream))) return false;
  std::vector<std::string> followers;
  if (state_->sync) followers.push_back(state_->sync->id);
  for (const PeerIdentity& a : state_->async) followers.push_back(a.id);
  for (const std::string& id : followers) {
    const int n = nodeOf(id);
    const PgServer& pg = node(n).pg;
    if (!pg.config.upstream) return false;
    const int u = nodeOf(pg.config.upstream->id);
    if (u < 0 || !fleet_.streamsFrom(n, u)) return false;
  }
  return true;
}

}  // namespace dugong::clustersim::world_internal
