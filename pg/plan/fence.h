// The fence planner: what a fence must establish before a takeover reads its initWal
// (statemachine/action.h, FencePg), and how it is verified. Pure: pg/controller.cc and
// the simulated postgres (sim/world/sim_postgres.cc) both run it.
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

// A fenced standby's WAL, read for a takeover's initWal. What it received may end inside
// a record whose rest never came (the upstream sends what it has flushed, a page boundary
// inside a long record): that is no commit, and the standby's promotion starts the new
// timeline at the end of the last complete record, where replay stops. So the position is
// where replay stopped once the startup process waits for more WAL; a later standby of the
// new primary then holds the generation's timeline up to initWal. `startupWaitsForWal`:
// the startup process's wait event says it waits for WAL (RecoveryWalStream,
// RecoveryRetrieveRetryInterval).
struct StandbyWalSeen {
  std::string received;  // pg_last_wal_receive_lsn() ("" when null)
  std::string replayed;  // pg_last_wal_replay_lsn()
  bool startupWaitsForWal = false;
};
enum class StandbyWalEnd { kReplayed, kWaitForReplay, kReceived };
// kReplayed: the replayed position is the WAL's end; kWaitForReplay: replay is still
// running, ask again; kReceived (the caller's deadline passed, `gaveUp`): the greater of
// the two, as before replay ends (no commit is beyond it).
StandbyWalEnd planStandbyWalEnd(const StandbyWalSeen& seen, bool gaveUp);

// The startup process's wait events that mean it has replayed what it has.
bool startupWaitsForWal(const std::string& waitEvent);

}  // namespace dugong::pg
