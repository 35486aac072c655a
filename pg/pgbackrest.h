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
#include "statemachine/standby.h"

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

// A standby cluster's source repository (docs/decisions/0083 2.1, `restore`): the stanza
// and its options by the backup section's rules (BackupSettings::parse: a stanza of
// lowercase letters, digits and '-'; options valid for every command; no newline or
// single quote), and none of the backup section's own keys. The error names the key.
Result<bool> validateSourceRepository(const SourceRepository& repo);

// The standby leader's restore_command for a source repository (0083 3.1, P6): the argv
// of `pgbackrest archive-get` for this host (pgBackRestArgv), as one shell line with
// `%f "%p"`, quoted as archive_command is. REQUIRES: validateSourceRepository(repo).
std::string restoreCommand(const SourceRepository& repo, const PgOptions& host);

// Runs an argv from pgBackRestArgv as host.osUser, bounded by `timeout`.
CommandResult runPgBackRest(const std::vector<std::string>& argv, const PgOptions& host,
                            std::chrono::milliseconds timeout);

// The line of pgBackRest's output that says why it failed ("ERROR: [...]: ..."), else
// its last line.
std::string pgBackRestFailure(const std::string& output);

// What `pgbackrest info --output=json` says of a stanza: the system identifier of its
// database and its newest backup (empty when there is none).
struct StanzaInfo {
  std::string systemId;      // the stanza's database now (the last of its "db" list)
  std::string latestBackup;  // label, e.g. 20261124-235959F
  // The database system the newest backup was taken of (its "database" id in the "db"
  // list): another than systemId when the stanza was upgraded or recreated since.
  std::string latestBackupSystemId;
  std::string status;  // pgBackRest's status message ("ok", "no valid backups", ...)
  // The newest WAL segment in the archive of the stanza's current database (the last of
  // its "archive" list's "max"), e.g. 000000010000000000000005; "" when none.
  std::string archiveMax;
};
Result<StanzaInfo> parseStanzaInfo(const std::string& json, const std::string& stanza);

// Where the WAL of an archived segment ends (a standby cluster's lag to a repository
// source, docs/decisions/0083 3.5): the position just past `segment` (24 hex digits:
// timeline, log, segment number) for segments of `segmentBytes`, as "X/Y", and its
// timeline. Pure.
struct ArchivedEnd {
  std::string wal;
  int64_t timeline = 0;
};
Result<ArchivedEnd> archivedSegmentEnd(const std::string& segment, uint64_t segmentBytes);

// A new cluster's first data directory from a backup (postgres.bootstrap in the agent's
// configuration): the stanza and repository to restore from, and where to stop.
struct BootstrapFromBackup {
  std::string stanza;
  std::map<std::string, std::string> options;  // pgBackRest repository options, as in BackupSettings
  std::string target;                          // see recoveryTargetOptions
};
// The rules of BackupSettings for the repository options, and of recoveryTargetOptions.
Result<bool> validateBootstrap(const BootstrapFromBackup& b);

// What a bootstrap from a backup is compared with before it writes anything. A backup
// "belongs to another database system" when its system identifier (pg_control's, kept
// by every copy, restore and promotion of that cluster) differs from one of these.
struct BootstrapSystems {
  std::string stanza;
  std::string backup;       // the system of the backup to restore (the stanza's newest)
  std::string stanzaNow;    // the stanza's current database, which the cluster would archive into
  std::string dataDir;      // the path, for the message
  std::optional<std::string> dataDirSystem;  // the data directory holds a pg_control of this system
  std::string downstreamId;                  // the sync this primary is to serve, if any
  std::optional<std::string> downstreamSystem;  // the system the sync serves, when it could be asked
};
// The refusal (one line naming both identifiers and what to do), or nothing when the
// backup may be restored. Pure.
std::optional<std::string> bootstrapRefusal(const BootstrapSystems& s);

// How a rebuild by pgBackRest makes the new data directory when an old one is there.
enum class RestoreInto {
  kCopyWithDelta,  // a copy of the old directory (cp --reflink=auto), then restore --delta
  kEmpty,          // an empty directory, then a plain restore
};
struct RestoreIntoFacts {
  bool oldSetUp = false;     // an old data directory is there (PG_VERSION, pg_control)
  std::string oldSystem;     // its system identifier ("" when unreadable)
  std::string backupSystem;  // the system of the backup to restore
  bool oldHasLinks = false;  // pg_wal or a tablespace is a symbolic link (a copy would share it)
  uint64_t oldBytes = 0;     // its size
  uint64_t freeBytes = 0;    // free space where the copy goes
};
struct RestoreIntoPlan {
  RestoreInto how = RestoreInto::kEmpty;
  std::string why;  // for the log
};
// A copy helps only with files of the same system; it must fit beside the old one (a
// reflink copy may need less, but that is not known before it is made). Pure.
RestoreIntoPlan planRestoreInto(const RestoreIntoFacts& f);

// A recovery target as written in the configuration: "name:LABEL", "time:TIMESTAMP",
// "lsn:X/Y", "immediate", or "" (the end of the archive). The pgBackRest restore options
// that stop there and promote.
Result<std::vector<std::string>> recoveryTargetOptions(const std::string& target);

}  // namespace dugong::pg
