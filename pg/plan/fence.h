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
// new primary then holds the generation's timeline up to initWal. The received position is
// never an initWal, also not when replay is slow: the read fails instead, and the takeover
// step is retried.
//
// Read in two statements, in this order: the startup process's wait (and the pause state),
// then, in the NEXT statement, the replay position. Once fenced no WAL arrives by
// streaming, so a startup process waiting for WAL at t1 has replayed, at t2 > t1, all it
// will replay before the promotion (WAL restored from an archive only moves it forward).
// One statement would read the replay position first (PostgreSQL evaluates the target
// list in order, a scalar subquery when its column is reached).
struct StandbyWalSeen {
  std::string startupWaitType{};  // statement 1: the startup process's wait_event_type ("" when none)
  std::string startupWait{};      // statement 1: its wait_event
  bool paused = false;          // statement 1: pg_get_wal_replay_pause_state() is not 'not paused'
  std::string replayed{};         // statement 2: pg_last_wal_replay_lsn() ("" when null)
};
enum class StandbyWalEnd {
  kReplayed,           // the replayed position is the WAL's end
  kWaitForReplay,      // replay is still running: ask again
  kEndClientSessions,  // replay waits for a lock, buffer pin or snapshot a client session holds: end
                       // the client sessions (not the agent's own), ask again
  kResumeReplay,       // replay is paused: resume it (the promotion would), ask again
  kReplayDidNotEnd,    // the caller's deadline passed (`gaveUp`): fail the read; never the received position
  kNotFenced,          // not fenced: a check before the fence (the greater of received and replayed), never
                       // an initWal (statemachine/action.h: a takeover fences, then reads its initWal)
};
// `fenced`: a standby fence holds (pg/plan/fence.h FenceTarget::standby). The fence's
// configuration lets replay run unhindered: recovery_min_apply_delay 0 (a promotion skips
// the delay too), max_standby_streaming_delay and max_standby_archive_delay 0 (conflicting
// queries are cancelled at once). kEndClientSessions covers a conflict that began before
// the reload, whose wait was computed with the old delay.
StandbyWalEnd planStandbyWalEnd(const StandbyWalSeen& seen, bool fenced, bool gaveUp);

// The startup process's wait events that mean it has replayed what it has
// (RecoveryWalStream, RecoveryRetrieveRetryInterval).
bool startupWaitsForWal(const std::string& waitEvent);
// The startup process's waits that a client session causes: a lock (wait_event_type Lock),
// a buffer pin (BufferPin), a snapshot or tablespace conflict (RecoveryConflictSnapshot,
// RecoveryConflictTablespace).
bool startupWaitsForClients(const std::string& waitEventType, const std::string& waitEvent);

}  // namespace dugong::pg
