#include "pg/pg_archiver.h"

namespace dugong::pg {

const char* archiverStatusSql() {
  return "(SELECT json_build_object('mode', current_setting('archive_mode'), 'archived', archived_count, "
         "'failed', failed_count, 'lastArchivedWal', last_archived_wal, 'lastFailedWal', last_failed_wal, "
         "'lastArchivedAge', EXTRACT(EPOCH FROM now() - last_archived_time)::float8, "
         "'lastFailedAge', EXTRACT(EPOCH FROM now() - last_failed_time)::float8, "
         "'failing', last_failed_time IS NOT NULL AND "
         "           (last_archived_time IS NULL OR last_failed_time > last_archived_time)) "
         " FROM pg_stat_archiver WHERE current_setting('archive_mode') <> 'off')";
}

std::optional<ArchiverStatus> parseArchiverStatus(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto str = [&](const char* k) -> std::optional<std::string> {
    return j.contains(k) && j[k].is_string() ? std::optional(j[k].get<std::string>()) : std::nullopt;
  };
  auto num = [&](const char* k) -> std::optional<double> {
    return j.contains(k) && j[k].is_number() ? std::optional(j[k].get<double>()) : std::nullopt;
  };
  ArchiverStatus a;
  a.mode = str("mode").value_or("");
  a.archived = static_cast<long long>(num("archived").value_or(0));
  a.failed = static_cast<long long>(num("failed").value_or(0));
  a.lastArchivedWal = str("lastArchivedWal");
  a.lastFailedWal = str("lastFailedWal");
  a.lastArchivedAgeSeconds = num("lastArchivedAge");
  a.lastFailedAgeSeconds = num("lastFailedAge");
  a.failing = j.value("failing", false);
  return a;
}

nlohmann::json ArchiverStatus::toJson() const {
  nlohmann::json j = {{"mode", mode}, {"archived", archived}, {"failed", failed}, {"failing", failing}};
  if (lastArchivedWal) j["lastArchivedWal"] = *lastArchivedWal;
  if (lastFailedWal) j["lastFailedWal"] = *lastFailedWal;
  if (lastArchivedAgeSeconds) j["lastArchivedAgeSeconds"] = *lastArchivedAgeSeconds;
  if (lastFailedAgeSeconds) j["lastFailedAgeSeconds"] = *lastFailedAgeSeconds;
  return j;
}

}  // namespace dugong::pg
