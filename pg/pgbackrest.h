// pgBackRest, dugong's backup tool: the cluster-wide backup settings (the "backup"
// section of the cluster configuration, pg/cluster_config.h), the archive_command they
// give every peer, and the command lines dugong and dugong-adm run. pgBackRest gets its
// whole configuration on its command line: no /etc/pgbackrest.conf is read or needed.
// Pure, except runPgBackRest.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pg/command.h"
#include "pg/options.h"
#include "statemachine/result.h"

namespace dugong::pg {

inline constexpr const char* kPgBackRestBinary = "/usr/bin/pgbackrest";

// The ways a peer's data directory is made from nothing (a new peer, a rebuild, a
// repair), tried in order: the first that works wins.
enum class ReplicaMethod { kPgBackRest, kBasebackup };
const char* replicaMethodName(ReplicaMethod m);

struct BackupSettings {
  // "archive": on puts archive_mode = on and pgBackRest's archive-push into every peer's
  // configuration (the primary archives; a standby does not until it is promoted).
  bool archive = false;
  // "stanza": pgBackRest's name for this cluster's backups (dugong-adm config set fills
  // in the cluster's name).
  std::string stanza;
  // "replica-methods": comma-separated, in order (default "basebackup").
  std::vector<ReplicaMethod> replicaMethods{ReplicaMethod::kBasebackup};
  // Every other key: a pgBackRest option valid for all of dugong's commands (repo1-path,
  // repo1-type, repo1-s3-bucket, log-level-file, lock-path, ...), given as --KEY=VALUE.
  std::map<std::string, std::string> options;

  bool restoresReplicas() const {
    return !replicaMethods.empty() && replicaMethods.front() == ReplicaMethod::kPgBackRest;
  }
  // Reads the "backup" section. Errors name the key and what is wrong.
  static Result<BackupSettings> parse(const std::map<std::string, std::string>& section);
};

// archive_mode and archive_command for `host` (its data directory), or nothing when
// archiving is off.
std::map<std::string, std::string> archiveSettings(const BackupSettings& backup, const PgOptions& host);

// The argv of `pgbackrest <command>` for this host: the stanza, the repository options,
// pg1 = this host's postgres (data directory, socket, port, superuser), then `extra`.
std::vector<std::string> pgBackRestArgv(const std::string& stanza, const std::map<std::string, std::string>& options,
                                        const PgOptions& host, const std::string& command,
                                        const std::vector<std::string>& extra = {});

// Runs an argv from pgBackRestArgv as host.osUser, bounded by `timeout`.
CommandResult runPgBackRest(const std::vector<std::string>& argv, const PgOptions& host,
                            std::chrono::milliseconds timeout);

// The line of pgBackRest's output that says why it failed ("ERROR: [...]: ..."), else
// its last line.
std::string pgBackRestFailure(const std::string& output);

// What `pgbackrest info --output=json` says of a stanza: the system identifier of its
// database and its newest backup (empty when there is none).
struct StanzaInfo {
  std::string systemId;
  std::string latestBackup;  // label, e.g. 20261124-235959F
  std::string status;        // pgBackRest's status message ("ok", "no valid backups", ...)
};
Result<StanzaInfo> parseStanzaInfo(const std::string& json, const std::string& stanza);

// A new cluster's first data directory from a backup (postgres.bootstrap in the agent's
// configuration): the stanza and repository to restore from, and where to stop.
struct BootstrapFromBackup {
  std::string stanza;
  std::map<std::string, std::string> options;  // pgBackRest repository options, as in BackupSettings
  std::string target;                          // see recoveryTargetOptions
};
// The rules of BackupSettings for the repository options, and of recoveryTargetOptions.
Result<bool> validateBootstrap(const BootstrapFromBackup& b);

// A recovery target as written in the configuration: "name:LABEL", "time:TIMESTAMP",
// "lsn:X/Y", "immediate", or "" (the end of the archive). The pgBackRest restore options
// that stop there and promote.
Result<std::vector<std::string>> recoveryTargetOptions(const std::string& target);

}  // namespace dugong::pg
