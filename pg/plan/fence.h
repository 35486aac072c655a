// The fence planner: what a fence must establish before a takeover reads its initWal
// (statemachine/action.h, FencePg), and how it is verified. Pure: pg/controller.cc and
// the simulated postgres (tools/sim_world/sim_postgres.cc) both run it.
#pragma once

#include <optional>
#include <string>

#include "statemachine/result.h"

namespace dugong::pg {

// What a fence establishes: a standby stops streaming; a primary's commits wait for the
// new sync, and for the sync it had until the takeover's outcome is known.
struct FenceTarget {
  bool standby = false;
  std::string syncId;                     // primary: the new sync, which commits wait for
  std::optional<std::string> alsoSyncId;  // primary: the sync it had, which they also wait for
  bool operator==(const FenceTarget&) const = default;
};

// Where the fence starts from: postgres runs, in recovery or not, with the syncs of its
// last apply (or of an earlier fence).
struct FenceFrom {
  bool standby = false;
  std::optional<std::string> syncId;      // the sync it waits for now
  std::optional<std::string> alsoSyncId;  // set by an earlier fence since the last apply
};

// The takeover's state write may land or not: commits acknowledged from now on must be
// on the new sync and on the current one, whichever is the sync afterwards. The current
// one is the sync of the last apply: fenced again (the takeover changed its target), it
// stays. A primary fenced without a new sync is an error.
Result<FenceTarget> planFence(const FenceFrom& from, const std::optional<std::string>& newSyncId);

// What postgres showed when asked whether the fence holds.
struct FenceSeen {
  bool inRecovery = false;
  // standby
  std::string primaryConninfo;  // current_setting('primary_conninfo')
  long walReceivers = 0;        // rows of pg_stat_wal_receiver
  // primary
  std::string syncNames;        // current_setting('synchronous_standby_names')
  long othersWithPriority = 0;  // walsenders not of the fence's syncs with a sync priority
  long syncWithoutPriority = 0; // walsenders of the new sync that have not taken the setting
};

// Verified exactly: a standby has an empty primary_conninfo and no WAL receiver; a
// primary's synchronous_standby_names, parsed, names the new sync (and the sync it had)
// alone, and no walsender but theirs has a sync priority. The error says what is not so.
Result<bool> checkFence(const FenceTarget& fence, const FenceSeen& seen);

// For the log.
std::string describeFence(const FenceTarget& fence);

}  // namespace dugong::pg
