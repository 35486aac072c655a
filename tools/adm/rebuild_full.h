// `dugong-adm rebuild --full`: a fresh copy (pg_basebackup, or the cluster's replica
// methods) even where the data directory could follow its primary as it is or after
// pg_rewind (Patroni's `reinit`, for a standby suspected of corruption). The rebuild
// planner copies only a directory that is not set up (pg/plan/rebuild.h), so the command
// moves the data directory aside first: the copy is made into an empty place, and the
// old directory is put back if the copy fails. Once the copy runs, the old directory is
// removed only when it held nothing the cluster may need; otherwise it is kept and named.
#pragma once

#include <string>

#include "statemachine/result.h"

namespace dugong::adm {

// Where the old data directory waits during a --full rebuild.
std::string setAsidePath(const std::string& dataDir);

// What the old data directory was, read (postgres stopped) before it was moved aside.
struct OldDataDir {
  bool setUp = false;      // it held a database
  bool standby = false;    // standby.signal: it last ran as a standby
  std::string systemId;    // pg_controldata's system identifier, when known
  bool marked = false;     // incompleteMarkerPath was there: its making had not finished
};

// After the copy runs: remove the old directory (true), or keep it for the operator
// (false, and `why`). Removed: with --discard-data, or a standby's directory of the same
// database system as the copy (it holds no WAL the cluster lacks). Kept: a directory
// that last ran as a primary (it may hold WAL no other peer has), one of another system
// or whose system could not be read.
bool removeAfterCopy(const OldDataDir& old, const std::string& copySystemId, bool discardData, std::string* why);

// Moves `dataDir` to setAsidePath(dataDir). Refuses when something is there already (a
// previous --full rebuild's: the operator decides what becomes of it) or the rename fails.
Result<bool> moveAside(const std::string& dataDir);
// The marker the postgres adapter keeps beside a data directory it is making, left there
// when the making fails (PgController::markerPath, pg/controller.h): a directory with
// it is never started as it is.
std::string incompleteMarkerPath(const std::string& dataDir);
// Puts the old directory back after a failed copy: whatever the copy left is removed,
// and the failed copy's marker too unless one was there before the copy (`markerBefore`).
Result<bool> putBack(const std::string& dataDir, bool markerBefore);
// Removes the old directory.
Result<bool> removeSetAside(const std::string& dataDir);

}  // namespace dugong::adm
