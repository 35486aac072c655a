#include "pg/pg_status.h"

namespace dugong::pg {
namespace {
template <class T>
nlohmann::json orNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json ReplicationRow::toJson() const {
  return {{"applicationName", applicationName}, {"state", state},          {"syncState", syncState},
          {"sentLsn", orNull(sentLsn)},         {"writeLsn", orNull(writeLsn)}, {"flushLsn", orNull(flushLsn)},
          {"replayLsn", orNull(replayLsn)}};
}

nlohmann::json PgStatus::toJson() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : replication) rows.push_back(r.toJson());
  nlohmann::json j = {{"online", online},
                      {"role", role},
                      {"upstream", orNull(upstream)},
                      {"sync", orNull(sync)},
                      {"inRecovery", inRecovery},
                      {"readOnly", readOnly},
                      {"waitingForSync", waitingForSync},
                      {"writesStopped", writesStopped},
                      {"timeline", orNull(timeline)},
                      {"currentLsn", orNull(currentLsn)},
                      {"receiveLsn", orNull(receiveLsn)},
                      {"replayLsn", orNull(replayLsn)},
                      {"replayLagSeconds", orNull(replayLagSeconds)},
                      {"walReceiverStatus", orNull(walReceiverStatus)},
                      {"replayPaused", replayPaused},
                      {"streamProblem", orNull(streamProblem)},
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
