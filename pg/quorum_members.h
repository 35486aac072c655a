// What a quorum primary sees of its members, in one query (docs/decisions/0079-quorum-commit.md
// 6.2): its own flush position first, then, per member, whether a walsender with that
// application_name streams and how far that standby has flushed. The agent's member
// watch (driver/sync_watch.cc, Postgres::sampleQuorumMembers) samples it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pg/sql.h"
#include "pg/sync_standby.h"
#include "statemachine/result.h"
#include "statemachine/wal_position.h"

namespace dugong::pg {

struct QuorumMembersView {
  // pg_current_wal_flush_lsn(), read before any member: a member whose flush is at or
  // past it had everything the primary had flushed when the look began.
  WalPosition primaryFlushed;
  // By member name (the peer id: the standbys' application_name); waitingCommits is not
  // read (commits do not wait on one member).
  std::map<std::string, SyncStandbyView> members;
};

// One statement with one row: the primary's flush position, then two columns per member
// (streaming walsenders, the flush position), in the order of `memberNames`.
// REQUIRES: the names are distinct.
std::string quorumMembersQuery(const std::vector<std::string>& memberNames);
Result<QuorumMembersView> parseQuorumMembersView(const std::vector<std::string>& memberNames,
                                                 const QueryResult& result);

}  // namespace dugong::pg
