#include "pg/sync_standby.h"

namespace dugong::pg {

std::string syncStandbyQuery(const std::string& standbyName) {
  const std::string name = quoteLiteral(standbyName);
  return "SELECT (SELECT count(*) FROM pg_stat_replication WHERE application_name = " + name +
         " AND state = 'streaming'), (SELECT max(flush_lsn)::text FROM pg_stat_replication WHERE application_name = " +
         name + "), (SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep')";
}

Result<SyncStandbyView> parseSyncStandbyView(const QueryResult& result) {
  if (result.rows.size() != 1 || result.rows[0].size() != 3 || !result.rows[0][0] || !result.rows[0][2]) {
    return Error{"unexpected answer to the synchronous standby query"};
  }
  const Row& row = result.rows[0];
  SyncStandbyView view;
  try {
    view.streaming = std::stoi(*row[0]) > 0;
    view.waitingCommits = std::stoi(*row[2]);
  } catch (const std::exception&) {
    return Error{"unexpected counts in the synchronous standby query: " + *row[0] + ", " + *row[2]};
  }
  if (row[1]) {
    auto flushed = WalPosition::parse(*row[1]);
    if (!flushed) return Error{"unexpected flush position " + *row[1] + ": " + flushed.error()};
    view.flushed = *flushed;
  }
  return view;
}

}  // namespace dugong::pg
