// The faults of quorum mode (docs/decisions/0079-quorum-commit.md section 7): members
// that hold different WAL when the primary dies, the best of them dying during the
// takeover, and a membership step interrupted between its fence and its write.
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

// A member's stream is held (its postgres receives nothing, its walsender stays) for the
// fault's duration; the primary's host dies during the hold, so that the members hold
// different WAL when they fence and report.
void World::laggingMemberPrimaryDies(const Fault& f) {
  // Not a structured binding: clang 14 (the sanitizer build) does not capture one.
  const std::pair<int, int> roles = primaryAndSync();
  const int p = roles.first;
  if (p < 0 || roles.second < 0 || !state_->quorum) return;
  const PeerList& members = state_->quorum->members;
  const int m = nodeOf(members[f.variant % members.size()].id);
  if (m < 0) return;
  node(m).pg.stalledUntil = std::max(node(m).pg.stalledUntil, now_ + f.duration);
  const int64_t deathIn = 50 + static_cast<int64_t>((f.variant / 7) % static_cast<uint64_t>(f.duration));
  const int64_t downFor = 1000 + static_cast<int64_t>((f.variant / 1009) % 9000);
  trace('F', [&] {
    return node(m).identity.id + "'s stream is held for " + std::to_string(f.duration) + " ms; the primary " +
           node(p).identity.id + "'s host dies in " + std::to_string(deathIn) + " ms";
  });
  after(deathIn, [this, p, downFor] {
    if (node(p).up) crashPeer(p, downFor);
  });
}

// The primary's host dies; the member with the most WAL then dies as soon as its report is
// published (reportPublished), or as its takeover write lands (crash-after-write).
void World::bestMemberDies(const Fault& f) {
  // Not a structured binding: clang 14 (the sanitizer build) does not capture one.
  const std::pair<int, int> roles = primaryAndSync();
  const int p = roles.first;
  if (p < 0 || roles.second < 0 || !state_->quorum) return;
  trace('F', [&] {
    return "the primary " + node(p).identity.id + "'s host dies; the member with the most WAL dies after its " +
           (f.variant % 2 ? "write" : "report");
  });
  if (f.variant % 2) {
    crashAfterWrite_.push_back({static_cast<int64_t>((f.variant / 2) % 100), f.duration});
  } else {
    bestMemberDies_ = QuorumCrash{f.duration, false};
  }
  crashPeer(p, f.duration);
}

void World::reportPublished(int n) {
  if (!bestMemberDies_ || !state_ || !state_->quorum || !node(n).up) return;
  for (const PeerIdentity& m : state_->quorum->members) {
    const int other = nodeOf(m.id);
    if (other >= 0 && node(other).pg.wal.size() > node(n).pg.wal.size()) return;
  }
  const int64_t downFor = bestMemberDies_->downFor;
  bestMemberDies_.reset();
  after(0, [this, n, downFor] {
    if (!node(n).up) return;
    trace('F', [&] { return node(n).identity.id + ", the member with the most WAL, dies right after its report"; });
    crashPeer(n, downFor);
  });
}

void World::armStepInterrupted(const Fault& f) {
  trace('F', [&] {
    return std::string("the next membership step is interrupted after its fence: ") +
           (f.variant % 2 ? "a member of its set" : "the primary") + " dies";
  });
  stepInterrupted_ = QuorumCrash{f.duration, f.variant % 2 == 0};
}

// A step's fence held on n (the primary), before the driver hears of it.
void World::stepFenced(int n, const std::vector<std::string>& members) {
  if (!stepInterrupted_) return;
  const QuorumCrash c = *stepInterrupted_;
  stepInterrupted_.reset();
  int victim = n;
  if (!c.primary && !members.empty()) victim = nodeOf(members[static_cast<size_t>(rngAgent_.between(0, static_cast<int64_t>(members.size()) - 1))]);
  if (victim < 0) return;
  after(0, [this, victim, downFor = c.downFor] {
    if (!node(victim).up) return;
    trace('F', [&] { return node(victim).identity.id + " dies between the step's fence and its write"; });
    crashPeer(victim, downFor);
  });
}

}  // namespace dugong::clustersim::world_internal
