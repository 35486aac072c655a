// PgController's replica-creation methods (pg/pgbackrest.h ReplicaMethod): a data
// directory made from nothing for a new peer, `dugong-adm rebuild` or a repair, by the
// methods of the cluster's backup.replica-methods in order. pgbackrest restores the
// newest backup from the repository; the standby then replays the archive and streams
// from its upstream the WAL not archived yet. basebackup copies the upstream.
#include <sys/statvfs.h>

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

Result<std::string> PgController::remoteSystemId(const PeerIdentity& peer) {
  auto conninfo = peerConninfo(peer, true);
  if (!conninfo) return Error{conninfo.error()};
  auto remote = runQuery(conninfo.value() + " " + buildConninfo({{"replication", "true"}}), "IDENTIFY_SYSTEM",
                         options_.queryTimeout);
  if (!remote || remote->rows.empty() || !remote->rows[0][0]) {
    return Error{"cannot read the system identifier of " + peer.id + ": " +
                 (remote ? std::string("no answer") : remote.error())};
  }
  return *remote->rows[0][0];
}

Result<bool> PgController::restoreReplica(const PeerIdentity& source, const BackupSettings& backup) {
  // The repository must hold a backup of the system the upstream serves: a standby
  // restored from another system's backup could never follow it.
  auto info = stanzaInfo(backup.stanza, backup.options);
  if (!info) return Error{info.error()};
  if (info->latestBackup.empty()) {
    return Error{"the repository has no backup of stanza " + backup.stanza + " (" + info->status + ")"};
  }
  auto remote = remoteSystemId(source);
  if (!remote) return Error{remote.error()};
  if (remote.value() != info->latestBackupSystemId) {
    return Error{"the newest backup of stanza " + backup.stanza + " is of database system " +
                 info->latestBackupSystemId + ", and " + source.id + " serves another one, " + remote.value() +
                 ": not restored"};
  }
  // The current data directory (if any) stays aside until the restored one is complete.
  // After an interrupted attempt it is already there, and the data directory is the
  // incomplete copy or restore, which goes.
  std::error_code ec;
  if (auto kept = keepAsideUnfinishedRewind(); !kept) return kept;
  const bool keptOld = isSetUp();
  if (keptOld) {
    fs::remove_all(oldDataDir(), ec);
    fs::rename(options_.dataDir, oldDataDir(), ec);
    if (ec) return Error{"cannot move " + options_.dataDir + " aside: " + ec.message()};
    spdlog::info("pg: moved the old data directory aside to {}", oldDataDir());
  }
  setMarker("pgbackrest restore");
  const RestoreIntoPlan plan = planRestoreIntoOld(info->latestBackupSystemId);
  bool delta = false;
  if (plan.how == RestoreInto::kCopyWithDelta) {
    spdlog::info("pg: restoring into {}", plan.why);
    auto copied = copyOldDataDir();
    delta = copied.ok();
    if (!delta) spdlog::warn("pg: restoring into an empty directory instead: {}", copied.error());
  } else {
    spdlog::info("pg: restoring into an empty directory: {}", plan.why);
  }
  auto restored = [&]() -> Result<bool> {
    if (auto prep = prepareDataDir(/*wipe=*/!delta); !prep) return prep;
    std::vector<std::string> extra = {"--type=standby"};
    if (delta) extra.push_back("--delta");
    auto argv = pgBackRestArgv(backup.stanza, backup.options, options_, "restore", extra);
    spdlog::info("pg: restoring backup {} of stanza {} (then streaming from {}): {}", info->latestBackup,
                 backup.stanza, source.id, describeArgv(argv));
    auto r = runPgBackRest(argv, options_, options_.basebackupTimeout);
    if (!r.ok()) return Error{"pgbackrest restore " + r.describe() + ": " + pgBackRestFailure(r.output)};
    spdlog::info("pg: pgbackrest restore{} finished in {} ms", delta ? " --delta" : "", r.elapsed.count());
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

namespace {

uint64_t bytesUnder(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code sizeEc;
    if (it->is_regular_file(sizeEc)) total += it->file_size(sizeEc);
  }
  return total;
}

uint64_t freeBytesAt(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

bool hasSymbolicLinks(const std::string& dataDir) {
  std::error_code ec;
  if (fs::is_symlink(dataDir + "/pg_wal", ec)) return true;
  return !fs::is_empty(dataDir + "/pg_tblspc", ec) && !ec;
}

}  // namespace

RestoreIntoPlan PgController::planRestoreIntoOld(const std::string& backupSystem) {
  RestoreIntoFacts facts;
  facts.backupSystem = backupSystem;
  std::error_code ec;
  const std::string old = oldDataDir();
  facts.oldSetUp = fs::exists(old + "/PG_VERSION", ec) && fs::exists(old + "/global/pg_control", ec);
  if (facts.oldSetUp) {
    auto system = controlValue("Database system identifier:", old);
    facts.oldSystem = system ? system.value() : "";
    facts.oldHasLinks = hasSymbolicLinks(old);
    facts.oldBytes = bytesUnder(old);
    // The incomplete directory of an earlier attempt goes first: its space counts.
    facts.freeBytes = freeBytesAt(fs::path(old).parent_path().string()) +
                      (fs::exists(options_.dataDir, ec) ? bytesUnder(options_.dataDir) : 0);
  }
  return planRestoreInto(facts);
}

Result<bool> PgController::copyOldDataDir() {
  std::error_code ec;
  fs::remove_all(options_.dataDir, ec);
  if (ec) return Error{"cannot remove " + options_.dataDir + ": " + ec.message()};
  CommandSpec spec;
  spec.argv = {"/usr/bin/cp", "-a", "--reflink=auto", oldDataDir(), options_.dataDir};
  spec.timeout = options_.basebackupTimeout;
  spdlog::info("pg: running {}", describeArgv(spec.argv));
  const CommandResult r = runCommand(spec);
  if (!r.ok()) {
    fs::remove_all(options_.dataDir, ec);
    return Error{"the copy of the old data directory failed (" + r.describe() + "): " + r.output.substr(0, 300)};
  }
  // pgBackRest refuses a directory with postmaster.pid (a running postgres, for all it
  // knows); the old postgres is stopped.
  fs::remove(options_.dataDir + "/postmaster.pid", ec);
  spdlog::info("pg: copied the old data directory in {} ms", r.elapsed.count());
  return true;
}

}  // namespace dugong::pg
