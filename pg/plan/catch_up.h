// The catch-up planner: when a primary that waits for its sync becomes writable. Once the
// sync streams with sync_state 'sync', the primary's position at that moment is the
// target; once the sync's flush position reaches it, the primary is made writable. Pure:
// pg/controller_writes.cc (pollWritable) and the simulated postgres both run it.
#pragma once

#include <cstdint>
#include <optional>

namespace dugong::pg {

// One look at the sync, when it streams synchronously.
struct SyncSeen {
  uint64_t primaryAt = 0;  // the primary's position now
  uint64_t syncFlush = 0;  // the sync's flush position
};

struct CatchUp {
  std::optional<uint64_t> target;  // the position the sync must reach
  bool targetSet = false;          // set by this look (for the log)
  bool writable = false;           // make the primary writable now
};

// `seen`: nullopt when the sync does not stream synchronously (keep waiting).
CatchUp planCatchUp(std::optional<uint64_t> target, const std::optional<SyncSeen>& seen);

}  // namespace dugong::pg
