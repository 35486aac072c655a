// What pg_stat_archiver says of WAL archiving on the local postgres (archive_mode on):
// how many segments were archived and failed, and whether the archive command is failing
// now (its last failure is newer than its last success). Reported in /state, /metrics
// (dugong_archive_*) and by `dugong-adm verify`.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dugong::pg {

struct ArchiverStatus {
  std::string mode;                       // archive_mode: on, always
  long long archived = 0;                 // archived_count
  long long failed = 0;                   // failed_count
  std::optional<std::string> lastArchivedWal, lastFailedWal;
  std::optional<double> lastArchivedAgeSeconds, lastFailedAgeSeconds;
  bool failing = false;                   // the last attempt failed

  nlohmann::json toJson() const;
};

// The SQL of one value (a JSON object, NULL when archive_mode is off), for the status
// query's round trip.
const char* archiverStatusSql();
// Reads that value; nullopt for NULL or what is not the expected object.
std::optional<ArchiverStatus> parseArchiverStatus(const std::optional<std::string>& json);

}  // namespace dugong::pg
