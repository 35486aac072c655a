// The fence planner: what a fence must establish before a takeover reads its initWal
// (statemachine/action.h, FencePg), and how it is verified. Pure: pg/controller.cc and
// the simulated postgres (sim/world/sim_postgres.cc) both run it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pg/plan/standby_names.h"
#include "statemachine/result.h"

namespace dugong::pg {

// What a fence establishes: a standby stops streaming; a primary's commits wait for the
// new sync, and for the sync it had until the takeover's outcome is known; or, a
// primary's membership step in quorum mode (docs/decisions/0079-quorum-commit.md 5.2),
// they wait for any k of the step's members and of no one else.
struct FenceTarget {
  bool standby = false;
  std::string syncId;                     // primary: the new sync, which commits wait for
  std::optional<std::string> alsoSyncId;  // primary: the sync it had, which they also wait for
  std::optional<StandbyQuorum> quorum;    // primary, quorum mode (syncId empty): the step's set and k
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
  std::string primaryConninfo{};  // current_setting('primary_conninfo')
  long walReceivers = 0;        // rows of pg_stat_wal_receiver
  // primary
  std::string syncNames{};        // current_setting('synchronous_standby_names')
  long othersWithPriority = 0;  // walsenders not of the fence's syncs (or members) with a sync priority
  long syncWithoutPriority = 0; // walsenders of the new sync (every member) that have not taken the setting
  // standby, last: current_setting('restore_command') (a standby leader restoring from a repository)
  std::string restoreCommand{};
};

// Verified exactly: a standby has an empty primary_conninfo and restore_command and no WAL
// receiver; a
// primary's synchronous_standby_names, parsed, names the new sync (and the sync it had)
// alone, and no walsender but theirs has a sync priority; a quorum's is `ANY k` of
// exactly its members (waitsForQuorum), no walsender of another standby (a member just
// removed) has a sync priority, and every member's walsender has one (in ANY mode each
// listed standby has priority 1). The error says what is not so.
Result<bool> checkFence(const FenceTarget& fence, const FenceSeen& seen);

// For the log.
std::string describeFence(const FenceTarget& fence);

// --- A quorum step's fence (docs/decisions/0079-quorum-commit.md 5.2), on the primary.
// Step 1 is the reload to `ANY k' (S')` verified by checkFence (a weakening step's reload
// after its write is verified the same way, and goes no further). A strengthening step
// (a member removed, k raised) then makes sure every commit acknowledged before the
// reload is on k' members of S' before the step is written:
//   2. k raised only: each member's walsender is ended and the fence waits until every
//      member that streams does so through a walsender started after step 1's verifying
//      query, since a walsender's copy of k is not observable (a stale one would release
//      commits under the old k). A removal needs no such step: the count is unchanged
//      and the removed member's priority 0 is observed by step 1.
//   3. p0, the primary's flush position, read once after that: every commit acknowledged
//      before now is at or before it.
//   4. the k'-th latest flush among S' members streaming synchronously reaches p0.

// The fence of the step from `from` (what postgres runs now: a sync is {1, [sync]}) to
// `to`: its target, and whether the walsenders are ended (k raised). An invalid `to`
// (validQuorum) is an error.
struct QuorumFence {
  FenceTarget target;
  bool endWalsenders = false;
  bool operator==(const QuorumFence&) const = default;
};
Result<QuorumFence> planQuorumFence(const std::optional<StandbyQuorum>& from, const StandbyQuorum& to);

// What the fence has done so far, kept by the caller between looks (starts empty).
struct QuorumFenceProgress {
  bool walsendersEnded = false;   // step 2 carried out
  std::optional<uint64_t> p0{};   // step 3's position
  bool operator==(const QuorumFenceProgress&) const = default;
};

// One look at the primary, in one statement, in this order: the walsender count, then the
// flush positions, then the primary's flush position (a later read of p0 is safe, an
// earlier one is not).
struct QuorumFenceSeen {
  long staleWalsenders = 0;             // members' walsenders started at or before step 1's verifying query
  std::vector<uint64_t> memberFlushes{};  // members streaming with sync_state 'quorum' (a raise: through
                                        // walsenders started after that query)
  uint64_t primaryFlush = 0;            // pg_current_wal_flush_lsn()
};

enum class QuorumFenceStep {
  kEndWalsenders,      // end every member's walsender (pg_terminate_backend), then look again
  kWaitForWalsenders,  // a member still streams through a walsender that may hold the old k
  kWaitForCatchUp,     // fewer than k' members have flushed p0
  kCaughtUp,           // every commit acknowledged before the reload is on k' members of S': write the step
  kGaveUp,             // the caller's deadline passed: the step is abandoned (the state's configuration
                       // applied again: C_zk, safe)
};

struct QuorumFenceNext {
  QuorumFenceStep step = QuorumFenceStep::kWaitForCatchUp;
  // To keep for the next look; after kEndWalsenders, only once they were ended (else keep
  // the progress passed in, and the next look asks again).
  QuorumFenceProgress progress;
};

// Steps 2-4, one look at a time. REQUIRES: `fence` from planQuorumFence, step 1 verified
// (checkFence on fence.target). At the deadline a fence that has caught up is caught up.
QuorumFenceNext planQuorumFenceStep(const QuorumFence& fence, const QuorumFenceProgress& at,
                                    const QuorumFenceSeen& seen, bool gaveUp);

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
