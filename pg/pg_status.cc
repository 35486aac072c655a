#include "pg/pg_status.h"

#include "pg/json_or_null.h"

namespace dugong::pg {

nlohmann::json ReplicationRow::toJson() const {
  return {{"applicationName", applicationName},  {"state", state},
          {"syncState", syncState},              {"sentLsn", jsonOrNull(sentLsn)},
          {"writeLsn", jsonOrNull(writeLsn)},    {"flushLsn", jsonOrNull(flushLsn)},
          {"replayLsn", jsonOrNull(replayLsn)}};
}

nlohmann::json PgStatus::toJson() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : replication) rows.push_back(r.toJson());
  nlohmann::json j = {{"online", online},
                      {"role", role},
                      {"upstream", jsonOrNull(upstream)},
                      {"sync", jsonOrNull(sync)},
                      {"inRecovery", inRecovery},
                      {"readOnly", readOnly},
                      {"waitingForSync", waitingForSync},
                      {"writesStopped", writesStopped},
                      {"timeline", jsonOrNull(timeline)},
                      {"currentLsn", jsonOrNull(currentLsn)},
                      {"receiveLsn", jsonOrNull(receiveLsn)},
                      {"replayLsn", jsonOrNull(replayLsn)},
                      {"replayLagSeconds", jsonOrNull(replayLagSeconds)},
                      {"walReceiverStatus", jsonOrNull(walReceiverStatus)},
                      {"replayPaused", replayPaused},
                      {"streamProblem", jsonOrNull(streamProblem)},
                      {"replication", rows},
                      {"pendingRestart", pendingRestart},
                      {"sampledAt", sampledAtMs},
                      {"hotStandbyValues", hotStandbyValues}};
  j["archiver"] = archiver ? archiver->toJson() : nlohmann::json(nullptr);
  j["source"] = source ? source->toJson() : nlohmann::json(nullptr);
  if (!error.empty()) j["error"] = error;
  return j;
}

}  // namespace dugong::pg
