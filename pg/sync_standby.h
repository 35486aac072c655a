// What a primary sees of its synchronous standby, in one query: whether the standby's
// walsender streams, how far it has flushed, and how many commits wait for synchronous
// replication. The agent's sync-acknowledgement watch (driver/sync_ack_watch.h) samples it.
#pragma once

#include <optional>
#include <string>

#include "pg/sql.h"
#include "statemachine/result.h"
#include "statemachine/wal_position.h"

namespace dugong::pg {

struct SyncStandbyView {
  bool streaming = false;              // a walsender with application_name = the standby streams
  std::optional<WalPosition> flushed;  // its flush position (absent without walsender)
  int waitingCommits = 0;              // backends waiting on synchronous replication (SyncRep)
};

// The query for `standbyName` (the peer id: the standbys' application_name).
std::string syncStandbyQuery(const std::string& standbyName);
Result<SyncStandbyView> parseSyncStandbyView(const QueryResult& result);

}  // namespace dugong::pg
