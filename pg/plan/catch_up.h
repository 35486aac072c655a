// The catch-up planner: when a primary that waits for its sync (or, in quorum mode, for
// k members of its synchronous set) becomes writable. Once enough standbys stream
// synchronously, the primary's position at that moment is the target; once the k-th
// latest flush among them reaches it, the primary is made writable: every commit the
// primary had then is on k of them. Pure: pg/controller_writes.cc (pollWritable) and the
// simulated postgres both run it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace dugong::pg {

// One look at the sync, when it streams synchronously.
struct SyncSeen {
  uint64_t primaryAt = 0;  // the primary's position now
  uint64_t syncFlush = 0;  // the sync's flush position
};

// One look at a quorum's members (docs/decisions/0079-quorum-commit.md section 3).
struct QuorumSeen {
  uint64_t primaryAt = 0;               // the primary's position now
  int k = 1;                            // how many members a commit waits for
  std::vector<uint64_t> memberFlushes{};  // one per member streaming with sync_state 'quorum', any order
};

struct CatchUp {
  std::optional<uint64_t> target;  // the position the sync must reach
  bool targetSet = false;          // set by this look (for the log)
  bool writable = false;           // make the primary writable now
};

// The k-th latest of `flushes` (k = 1: the latest): the position k of them have flushed.
// nullopt when fewer than k (or k < 1).
std::optional<uint64_t> kthLatestFlush(std::vector<uint64_t> flushes, int k);

// The quorum's rule: the target is set at the first look where k members stream
// synchronously; writable once their k-th latest flush has reached it.
CatchUp planCatchUp(std::optional<uint64_t> target, const QuorumSeen& seen);
// The sync's rule, the quorum's with one member and k = 1. `seen`: nullopt when the sync
// does not stream synchronously (keep waiting).
CatchUp planCatchUp(std::optional<uint64_t> target, const std::optional<SyncSeen>& seen);

}  // namespace dugong::pg
