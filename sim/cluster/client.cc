// The cluster simulator's client: it commits on every writable primary, and each
// primary acknowledges what its sync holds (or at once, with synchronous_commit = local);
// each acknowledgement is checked (checks/commit_checks.cc, checks/invariants.h).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

bool World::writable(int n) const {
  const Node& nd = node(n);
  const PgServer& pg = nd.pg;
  // Commits are accepted whenever the adapter made it writable; they wait for the sync.
  // A suspended host's postgres takes none.
  return nd.up && !nd.suspended && pg.serving() && !pg.promoting && pg.config.role == PgRole::kPrimary && !pg.readOnly &&
         !pg.writesStopped;
}

void World::replicate() {
  if (suspendedHosts_ == 0) {
    fleet_.stream();
  } else {
    const auto held = holdSuspendedStreams();
    fleet_.stream();
    for (const auto& [pg, stalledUntil] : held) pg->stalledUntil = stalledUntil;
  }
  if (source_) source_->tick();  // a standby seed's source writes
  // Primaries acknowledge what their sync has (a suspended one nothing, until it resumes).
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    PgServer& pg = node(n).pg;
    if (pg.quorum) fleet_.refreshWalsenders(n);  // quorum mode: each walsender's rule, its start
    if (pg.waiting.empty() || !node(n).up || node(n).suspended || !pg.serving() || pg.config.role != PgRole::kPrimary) {
      continue;
    }
    size_t acked = 0;
    if (pg.config.quorum) {
      // Quorum mode: what the walsenders release, each under the rule it runs now.
      const size_t released = fleet_.quorumReleased(n);
      while (acked < pg.waiting.size() && pg.waiting[acked].index < released) ++acked;
    } else if (pg.config.downstream && attachedSync(n)) {
      const Wal& sync = node(nodeOf(pg.config.downstream->id)).pg.wal;
      while (acked < pg.waiting.size() && sync.contains(pg.waiting[acked])) ++acked;
      if (pg.alsoSync) {  // fenced: the sync it had must have it too
        int also = nodeOf(pg.alsoSync->id);
        if (also < 0 || !fleet_.streamsFrom(also, n)) {
          acked = 0;
        } else {
          const Wal& other = node(also).pg.wal;
          size_t both = 0;
          while (both < acked && other.contains(pg.waiting[both])) ++both;
          acked = both;
        }
      }
    }
    if ((!pg.config.downstream && !pg.config.quorum) || opts_.testingAckBeforeSync) acked = pg.waiting.size();
    if (acked == 0) continue;
    // ack() leaves `waiting` as it is; what it acknowledged goes after (or on a violation).
    auto ackedEnd = pg.waiting.begin() + static_cast<std::ptrdiff_t>(acked);
    for (auto it = pg.waiting.begin(); it != ackedEnd; ++it) {
      ack(n, *it);
      if (!checker_.ok()) break;
    }
    pg.waiting.erase(pg.waiting.begin(), ackedEnd);
    if (!checker_.ok()) return;
  }
}

void World::clientTick() {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    if (node(n).up && !node(n).suspended && node(n).pg.writesStopped && node(n).pg.serving() &&
        node(n).pg.config.role == PgRole::kPrimary) {
      // After BEGIN READ WRITE, a session commits on it all the same.
      if (rngClient_.chance(300)) localCommit(n);
      continue;
    }
    if (!writable(n)) continue;
    // A writable primary acknowledges a synchronous_commit = local commit without any
    // standby, as a writes-stopped one does after BEGIN READ WRITE.
    if (rngClient_.chance(30)) localCommit(n);
    if (!rngClient_.chance(600)) continue;
    uint64_t id = ++nextCommit_;
    WalMark m = node(n).pg.wal.append(id);
    node(n).pg.waiting.push_back(m);
    trace('C', [&] { return std::string("commit c" + std::to_string(id) + " on " + node(n).identity.id); });
  }
}

// A commit with synchronous_commit = local, acknowledged without any standby: on a
// writable primary, or on a writes-stopped one after BEGIN READ WRITE (checkLocalAck).
void World::localCommit(int n) {
  Node& nd = node(n);
  uint64_t id = ++nextCommit_;
  nd.pg.wal.append(id);
  trace('C', [&] {
    return std::string("local commit c" + std::to_string(id) + " on " + (nd.pg.writesStopped ? "writes-stopped " : "") +
                       nd.identity.id);
  });
  checkLocalAck(n, id);
  if (source_ && checker_.ok()) checkTwoWritableSites(n, id, " (synchronous_commit = local)");
}

void World::ack(int n, const WalMark& mark) {
  Node& nd = node(n);
  int64_t gen = nd.generationTag;
  bool deposed = false;
  if (nd.driver) {
    deposed = nd.driver->peer().role() == Role::kDeposed;
    // The generation it believes it leads: the latest state it saw that names it primary.
    const auto& view = nd.driver->peer().clusterState();
    if (view && view->primary.id == nd.identity.id) gen = view->generation;
  }
  std::optional<std::string> primary;
  if (auto it = primaryOfGeneration_.find(gen); it != primaryOfGeneration_.end()) primary = it->second;
  trace('C', [&] { return std::string("ack c" + std::to_string(mark.commitId) + " by " + nd.identity.id + " (generation " +
                 std::to_string(gen) + ")"); });
  static const std::string kAlone;
  static const std::string kQuorum = "its quorum";
  checker_.onAck(now_, nd.identity.id, gen, mark, nd.pg.wal, deposed, primary,
                 nd.pg.config.quorum       ? kQuorum
                 : nd.pg.config.downstream ? nd.pg.config.downstream->id
                                           : kAlone);
  if (quiet_ && state_ && state_->primary.id == nd.identity.id) ackedSinceQuiet_ = true;
  checkAckHasSync(n, mark);
  if (source_) checkTwoWritableSites(n, mark.commitId, "");
  if (state_ && state_->quorum && state_->primary.id == nd.identity.id && !deposed) {
    lastQuorumAck_ = {state_->generation, mark};
    checkAckOnQuorum("acknowledged", mark);
  }
}

}  // namespace dugong::clustersim::world_internal
