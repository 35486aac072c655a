// The rebuild planner: how a standby's apply (or the agent's rejoin) makes a stopped data
// directory follow its restore peer: start it as it is, compare it first (pg_rewind, or
// its dry run), copy it (pg_basebackup), or refuse. Pure: the facts in, the step out; the
// controller (pg/controller.cc) and the simulated postgres (sim/world) run it.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace dugong::pg {

// What comparing the data directory with the restore peer found.
enum class Divergence {
  kCanFollow,  // it can follow as it is (no rewind required)
  kDiverged,   // it went past the fork: only a rewind (or a copy) helps
  kAhead,      // same timeline, but further than the source: only a copy helps
  kUnknown,    // the comparison (or pg_rewind) failed
  kRewound,    // pg_rewind ran and discarded the local WAL after the fork
};

// What a rebuild may do when the data directory cannot follow as it is.
struct RebuildRules {
  bool rewind = true;      // pg_rewind a diverged data directory
  bool basebackup = true;  // pg_basebackup when nothing else works
};

// The stopped data directory, as the apply sees it before any comparison.
struct RebuildFacts {
  bool setUp = false;             // PG_VERSION and pg_control there, no incomplete marker
  bool replaceOther = false;      // another database system, and the operator's command replaces it
  std::string repair;             // non-empty: a standby that cannot follow, and why (its log line)
  bool hasStandbySignal = false;  // standby.signal: it last ran (or was left) in recovery
  bool wasPrimary = false;        // it last ran as a primary (ManagedState::wasPrimary)
};

enum class RebuildStep {
  kStartAsIs,     // a standby's data directory: start it
  kCompare,       // it may have WAL the cluster lacks: compare (rewind) before it follows
  kBasebackup,    // nothing usable, or nothing a rewind can fix: copy
  kNothingToUse,  // a copy is needed and the rules forbid one (the rejoin): error
};

struct RebuildStart {
  RebuildStep step = RebuildStep::kStartAsIs;
  std::string why;  // for the log, when kBasebackup or kNothingToUse
};

RebuildStart planRebuildStart(const RebuildFacts& facts, const RebuildRules& rules);

// With a rewind allowed and the source's system verified, pg_rewind runs once, for real
// (it changes nothing when no rewind is required); otherwise only the dry run.
bool rewindAtOnce(const RebuildRules& rules, bool verified);

// What follows the comparison.
enum class RebuildOutcome {
  kFollow,          // start as it is
  kFollowRewound,   // rewound: start
  kRefuseAhead,     // it has WAL the source lacks: only the operator may discard it
  kFailUnverified,  // the source's system could not be compared: change nothing
  kFailNoCopy,      // a copy is needed and the rules forbid one
  kBasebackup,      // copy
};

RebuildOutcome planAfterCompare(Divergence found, bool verified, bool replaceUnknownData, const RebuildRules& rules);

// The settings a stopped ex-primary's crash recovery runs with before pg_rewind (single-user
// mode, pg/controller_rebuild.cc). Its end-of-recovery and shutdown checkpoints remove every
// WAL segment older than their redo point that no slot keeps, and pg_rewind needs the
// segments from the last checkpoint before the fork on: with archiving on and an archive
// command that always fails, postgres keeps every segment not yet archived, which is all
// of them (decision 0058).
const std::vector<std::pair<std::string, std::string>>& crashRecoverySettingsKeepingWal();

// pg_rewind changes the target only once it has read everything it needs: its --progress
// output says "need to copy" just before. A run that failed before that line left the data
// directory exactly as it was (no rewind marker is needed to tell a half-done rewind).
bool rewindChangedTarget(const std::string& pgRewindOutput);

const char* divergenceName(Divergence d);
const char* rebuildOutcomeName(RebuildOutcome o);

}  // namespace dugong::pg
