// PgController's bootstrap of a new cluster's first data directory: initdb, or a
// restore of a pgBackRest backup (postgres.bootstrap, pg/options.h) recovered to its
// target and promoted, so that the caller (applyPrimary) starts it as a primary and sets
// up dugong's roles and passwords as after initdb.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "pg/controller.h"
#include "pg/pgbackrest.h"

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// postgresql.auto.conf without the recovery targets pgBackRest wrote there: once
// promoted, a target left behind would stop this data directory's next recovery (as a
// standby, later) at the same point.
std::string withoutRecoveryTargets(const std::string& autoConf) {
  std::istringstream in(autoConf);
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.rfind("recovery_target", 0) == 0) continue;
    kept += line + "\n";
  }
  return kept;
}

}  // namespace

Result<bool> PgController::bootstrapDataDir(const std::optional<PeerIdentity>& downstream, bool* refused) {
  *refused = false;
  if (options_.bootstrapMethod != "pgbackrest") return initdb();
  auto r = restoreCluster(downstream, refused);
  if (!r && *refused) spdlog::error("pg: {}", r.error());
  if (!r && !*refused) spdlog::error("pg: bootstrap from the backup failed: {}", r.error());
  return r;
}

BootstrapSystems PgController::bootstrapSystems(const StanzaInfo& info, const std::optional<PeerIdentity>& downstream) {
  BootstrapSystems s;
  s.stanza = options_.bootstrapStanza;
  s.backup = info.latestBackupSystemId;
  s.stanzaNow = info.systemId;
  s.dataDir = options_.dataDir;
  std::error_code ec;
  // Not set up (no PG_VERSION, or the incomplete marker of an interrupted copy), but a
  // pg_control may still say whose data it is.
  if (fs::exists(options_.dataDir + "/global/pg_control", ec)) {
    auto system = controlValue("Database system identifier:");
    s.dataDirSystem = system ? system.value() : "unknown (" + system.error() + ")";
  }
  if (downstream) {
    s.downstreamId = downstream->id;
    auto remote = remoteSystemId(*downstream);
    if (remote) {
      s.downstreamSystem = remote.value();
    } else {
      spdlog::info("pg: the sync {} cannot be asked which database system it serves (a new cluster's sync has no "
                   "data yet): {}",
                   downstream->id, remote.error());
    }
  }
  return s;
}

Result<bool> PgController::restoreCluster(const std::optional<PeerIdentity>& downstream, bool* refused) {
  const std::string& stanza = options_.bootstrapStanza;
  auto targetOptions = recoveryTargetOptions(options_.bootstrapTarget);
  if (!targetOptions) return Error{targetOptions.error()};
  auto info = stanzaInfo(stanza, options_.bootstrapRepo);
  if (!info) return Error{info.error()};
  if (info->latestBackup.empty()) {
    return Error{"the repository has no backup of stanza " + stanza + " (" + info->status + "): nothing restored"};
  }
  // Before anything is written: a backup of another database system than the one this
  // data directory or the cluster's sync holds is never restored.
  if (auto refusal = bootstrapRefusal(bootstrapSystems(info.value(), downstream))) {
    *refused = true;
    return Error{*refusal};
  }
  // After the refusal, which compares the systems of what is there.
  if (auto kept = keepAsideUnfinishedRewind(); !kept) return kept;
  setMarker("pgbackrest restore (bootstrap)");
  if (auto prep = prepareDataDir(/*wipe=*/true); !prep) return prep;
  auto argv = pgBackRestArgv(stanza, options_.bootstrapRepo, options_, "restore", targetOptions.value());
  spdlog::info("pg: bootstrapping this cluster from backup {} of stanza {} (database system {}), recovering to {}: {}",
               info->latestBackup, stanza, info->latestBackupSystemId,
               options_.bootstrapTarget.empty() ? "the end of the archive" : options_.bootstrapTarget,
               describeArgv(argv));
  auto r = runPgBackRest(argv, options_, options_.basebackupTimeout);
  if (!r.ok()) return Error{"pgbackrest restore " + r.describe() + ": " + pgBackRestFailure(r.output)};
  // Recovery to the target, until postgres promotes itself (target-action promote). Its
  // configuration: a read-only primary's, as for a new primary.
  ManagedState recovering;
  recovering.role = "primary";
  recovering.readOnly = true;
  if (auto w = writeConf(recovering); !w) return w;
  if (auto s = start(); !s) return Error{"recovering the restored backup: " + s.error()};
  const auto deadline = std::chrono::steady_clock::now() + options_.basebackupTimeout;
  for (;;) {
    auto q = localQuery("SELECT pg_is_in_recovery()");
    if (q && !q->rows.empty() && q->rows[0][0] == "f") break;
    if (!isRunning() || std::chrono::steady_clock::now() > deadline) {
      std::string tail = logTail();
      (void)stop();
      return Error{"the restored backup did not finish its recovery to " +
                   (options_.bootstrapTarget.empty() ? std::string("the end of the archive") : options_.bootstrapTarget) +
                   " (postgres " + (isRunning() ? "still recovering" : "stopped") + "): " + tail};
    }
    std::this_thread::sleep_for(200ms);
  }
  spdlog::info("pg: the restored backup recovered to {} and was promoted", 
               options_.bootstrapTarget.empty() ? "the end of the archive" : options_.bootstrapTarget);
  if (auto s = stop(); !s) return s;
  const std::string autoPath = options_.dataDir + "/postgresql.auto.conf";
  std::ifstream in(autoPath);
  std::ostringstream text;
  text << in.rdbuf();
  if (auto w = writeFileAsOwner(autoPath, withoutRecoveryTargets(text.str()), 0600); !w) return w;
  // As after initdb: pg_hba.conf is dugong's. The caller starts it and sets up the roles.
  return writeHba();
}

}  // namespace dugong::pg
