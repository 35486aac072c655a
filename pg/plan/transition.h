// The transition planner: from the managed state postgres is in to the role wanted, which
// step the apply takes (reload, start, promote, or stop and rebuild), and whether a new
// primary starts read-only. Pure: facts in, the plan out; pg/controller.cc and the
// simulated postgres (sim/world/sim_postgres.cc) both run it.
#pragma once

#include <optional>
#include <string>

#include "statemachine/standby.h"
#include "statemachine/timeline_history.h"
#include "statemachine/wal_position.h"

namespace dugong::pg {

// What a primary's apply finds in its data directory before anything else.
enum class DataDirFound {
  kSetUp,       // PG_VERSION and global/pg_control, and no incomplete marker
  kMissing,     // no database there (no directory, or it lacks those files), or a marker
  kUnreadable,  // the file system answered with an error: it is not known which
};

struct PrimaryDirFacts {
  DataDirFound found = DataDirFound::kSetUp;
  bool running = false;     // a live postmaster holds the directory
  bool newCluster = false;  // the first primary of a new cluster (PgConfig::newCluster)
  // The generation's history (PgConfig::initWal, initTimeline; 0: nothing to check), and
  // the timelines of the directory's WAL (read when set up and there is one to check).
  WalPosition initWal;
  int64_t initTimeline = 0;
  std::optional<TimelineHistory> history;
  std::string historyError;  // why it was not read
};

enum class PrimaryDirStep {
  kUse,        // set up: start, reload or promote it
  kBootstrap,  // a new cluster's first data directory: initdb, or the bootstrap from a backup
  kRefuse,     // no data, or data off the generation's history: the peer halts for an operator
  kFail,       // an error, tried again later, nothing changed
};

struct PrimaryDirPlan {
  PrimaryDirStep step = PrimaryDirStep::kUse;
  std::string why;  // for kRefuse and kFail: what is wrong, for the error
};

// A data directory is created only for a new cluster: a primary of any later generation
// (or of a cluster set up from data) that finds none refuses, since an empty database
// system in its place would be a new primary with none of the cluster's data. A file
// system error is never taken for "no data". Data whose WAL is on another timeline at
// the generation's initWal than the one recorded forked off before it, and lacks what the
// generation acknowledged: refused too; a history that could not be read is an error.
PrimaryDirPlan planPrimaryDataDir(const PrimaryDirFacts& facts);

// A primary's apply.
struct PrimaryFacts {
  bool hasDownstream = false;       // the wanted configuration names a sync
  bool wasWritablePrimary = false;  // its last apply left a writable primary
  bool inRecovery = false;          // running in recovery, or stopped with standby.signal
};

struct PrimaryPlan {
  bool readOnly = false;  // read-only until its sync has caught up (pg/plan/catch_up.h)
  bool promote = false;   // it leaves recovery: a new timeline
};

// Read-only until the sync has caught up; a primary that was already writable stays
// writable when its sync changes (commits then wait for the new sync). One leaving
// recovery is read-only whenever it has a sync.
PrimaryPlan planPrimary(const PrimaryFacts& facts);

// A standby's apply.
struct StandbyFacts {
  bool running = false;           // a live postmaster
  bool setUp = false;             // the data directory is set up
  bool inRecovery = false;        // running in recovery (asked of postgres)
  bool hasStandbySignal = false;  // standby.signal in the data directory
  bool wasPrimary = false;        // it last ran as a primary (may hold WAL nobody has)
  bool sameUpstream = false;      // the last apply followed the same upstream, the same way
  bool repair = false;            // the health check found it cannot follow: repair it
  bool replaceOther = false;      // another database system, replaced by the operator's command
};

enum class StandbyStep {
  kRoleOnly,  // already streaming from this upstream: rewrite the role, reload (no new slot)
  kReload,    // a running standby: a new upstream is a reload (primary_conninfo)
  kRestart,   // stop, make the data directory follow (pg/plan/rebuild.h), start
};

// kRoleOnly is decided before a slot or a system identifier is read (nothing on a
// failover's path waits for them); the controller asks again with replaceOther known.
StandbyStep planStandby(const StandbyFacts& facts);

const char* standbyStepName(StandbyStep s);

// What a standby leader follows (docs/decisions/0083 "Phase 7 as built"). A `dugong`
// endpoint with no source peer (the agent has read no state of the source since it
// started, or since it took over): the source peer of `last`, the endpoint its last apply
// followed as standby leader, when that was the same source cluster's; else none (postgres
// runs in recovery with no primary_conninfo, replaying what it has). Never a peer of its
// own cluster (a sync that took over streamed from the old leader: `last` is then none),
// never another source's. Any other endpoint is followed as it is.
SourceEndpoint planLeaderEndpoint(const SourceEndpoint& wanted, const std::optional<SourceEndpoint>& last);

}  // namespace dugong::pg
