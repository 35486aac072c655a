// PgController's replica-creation methods (pg/pgbackrest.h ReplicaMethod): a data
// directory made from nothing for a new peer, `dugong-adm rebuild` or a repair, by the
// methods of the cluster's backup.replica-methods in order. pgbackrest restores the
// newest backup from the repository; the standby then replays the archive and streams
// from its upstream the WAL not archived yet. basebackup copies the upstream.
#include <filesystem>

#include <spdlog/spdlog.h>

#include "pg/controller.h"
#include "pg/pgbackrest.h"
#include "pg/sql.h"

namespace dugong::pg {
namespace fs = std::filesystem;

void PgController::noteBackupSection(const std::map<std::string, std::string>& backup) {
  std::lock_guard lock(clusterMu_);
  backupSection_ = backup;
}

BackupSettings PgController::backupSettings() const {
  std::lock_guard lock(clusterMu_);
  auto b = BackupSettings::parse(backupSection_);
  return b ? b.value() : BackupSettings{};
}

Result<StanzaInfo> PgController::stanzaInfo(const std::string& stanza,
                                             const std::map<std::string, std::string>& repo) {
  auto argv = pgBackRestArgv(stanza, repo, options_, "info", {"--output=json"});
  spdlog::info("pg: running {}", describeArgv(argv));
  auto r = runPgBackRest(argv, options_, std::chrono::seconds(120));
  if (!r.ok()) return Error{"pgbackrest info " + r.describe() + ": " + pgBackRestFailure(r.output)};
  return parseStanzaInfo(r.output, stanza);
}

Result<bool> PgController::createReplica(const PeerIdentity& source) {
  const BackupSettings backup = backupSettings();
  std::string failures;
  for (ReplicaMethod method : backup.replicaMethods) {
    if (!failures.empty()) spdlog::info("pg: falling back to replica method {}", replicaMethodName(method));
    auto r = method == ReplicaMethod::kPgBackRest ? restoreReplica(source, backup) : basebackup(source);
    if (r) {
      spdlog::info("pg: data directory made by replica method {}", replicaMethodName(method));
      return r;
    }
    spdlog::warn("pg: replica method {} failed: {}", replicaMethodName(method), r.error());
    failures += std::string(failures.empty() ? "" : "; ") + replicaMethodName(method) + " failed: " + r.error();
  }
  return Error{failures};
}

Result<bool> PgController::restoreReplica(const PeerIdentity& source, const BackupSettings& backup) {
  // The repository must hold a backup of the system the upstream serves: a standby
  // restored from another system's backup could never follow it.
  auto info = stanzaInfo(backup.stanza, backup.options);
  if (!info) return Error{info.error()};
  if (info->latestBackup.empty()) {
    return Error{"the repository has no backup of stanza " + backup.stanza + " (" + info->status + ")"};
  }
  auto conninfo = peerConninfo(source, true);
  if (!conninfo) return Error{conninfo.error()};
  auto remote = runQuery(conninfo.value() + " " + buildConninfo({{"replication", "true"}}), "IDENTIFY_SYSTEM",
                         options_.queryTimeout);
  if (!remote || remote->rows.empty() || !remote->rows[0][0]) {
    return Error{"cannot read the system identifier of " + source.id + ": " +
                 (remote ? std::string("no answer") : remote.error())};
  }
  if (*remote->rows[0][0] != info->systemId) {
    return Error{"stanza " + backup.stanza + " holds database system " + info->systemId + ", and " + source.id +
                 " serves another one, " + *remote->rows[0][0] + ": not restored"};
  }
  // The current data directory (if any) stays aside until the restored one is complete.
  std::error_code ec;
  const bool keptOld = isSetUp();
  if (keptOld) {
    fs::remove_all(oldDataDir(), ec);
    fs::rename(options_.dataDir, oldDataDir(), ec);
    if (ec) return Error{"cannot move " + options_.dataDir + " aside: " + ec.message()};
    spdlog::info("pg: moved the old data directory aside to {}", oldDataDir());
  }
  setMarker("pgbackrest restore");
  auto restored = [&]() -> Result<bool> {
    if (auto prep = prepareDataDir(/*wipe=*/true); !prep) return prep;
    auto argv = pgBackRestArgv(backup.stanza, backup.options, options_, "restore", {"--type=standby"});
    spdlog::info("pg: restoring backup {} of stanza {} (then streaming from {}): {}", info->latestBackup,
                 backup.stanza, source.id, describeArgv(argv));
    auto r = runPgBackRest(argv, options_, options_.basebackupTimeout);
    if (!r.ok()) return Error{"pgbackrest restore " + r.describe() + ": " + pgBackRestFailure(r.output)};
    spdlog::info("pg: pgbackrest restore finished in {} ms", r.elapsed.count());
    return true;
  }();
  if (!restored) {
    fs::remove_all(options_.dataDir, ec);
    if (keptOld) fs::rename(oldDataDir(), options_.dataDir, ec);
    if (!ec) clearMarker();
    return restored;
  }
  clearMarker();
  return true;
}

}  // namespace dugong::pg
