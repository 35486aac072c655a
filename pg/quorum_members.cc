#include "pg/quorum_members.h"

namespace dugong::pg {

std::string quorumMembersQuery(const std::vector<std::string>& memberNames) {
  // A single-row SELECT evaluates its columns in order, each scalar subquery when its
  // column is reached: the primary's flush position is read before any walsender.
  std::string sql = "SELECT pg_current_wal_flush_lsn()::text";
  for (const std::string& m : memberNames) {
    const std::string name = quoteLiteral(m);
    sql += ", (SELECT count(*) FROM pg_stat_replication WHERE application_name = " + name +
           " AND state = 'streaming'), (SELECT max(flush_lsn)::text FROM pg_stat_replication WHERE application_name = " +
           name + ")";
  }
  return sql;
}

Result<QuorumMembersView> parseQuorumMembersView(const std::vector<std::string>& memberNames,
                                                 const QueryResult& result) {
  if (result.rows.size() != 1 || result.rows[0].size() != 1 + 2 * memberNames.size() || !result.rows[0][0]) {
    return Error{"unexpected answer to the quorum members query"};
  }
  const Row& row = result.rows[0];
  QuorumMembersView view;
  auto primary = WalPosition::parse(*row[0]);
  if (!primary) return Error{"unexpected flush position of the primary " + *row[0] + ": " + primary.error()};
  view.primaryFlushed = *primary;
  for (size_t i = 0; i < memberNames.size(); ++i) {
    const auto& count = row[1 + 2 * i];
    const auto& flush = row[2 + 2 * i];
    SyncStandbyView member;
    try {
      if (!count) throw std::invalid_argument("null");
      member.streaming = std::stoi(*count) > 0;
    } catch (const std::exception&) {
      return Error{"unexpected walsender count of member " + memberNames[i] + ": " + count.value_or("NULL")};
    }
    if (flush) {
      auto flushed = WalPosition::parse(*flush);
      if (!flushed) return Error{"unexpected flush position of member " + memberNames[i] + " " + *flush + ": " + flushed.error()};
      member.flushed = *flushed;
    }
    view.members[memberNames[i]] = member;
  }
  return view;
}

}  // namespace dugong::pg
