#include "pg/pgbackrest.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

namespace dugong::pg {
namespace {

bool optionNameOk(const std::string& key) {
  if (key.empty() || !std::islower(static_cast<unsigned char>(key[0]))) return false;
  return std::all_of(key.begin(), key.end(), [](unsigned char c) { return std::islower(c) || std::isdigit(c) || c == '-'; });
}

// Options that pgBackRest accepts on the command line of every command dugong runs
// (archive-push, archive-get, restore, info, check, backup, stanza-create): the
// repository's, and where pgBackRest logs and locks (lock-path: all but check, which
// pgBackRestArgv leaves it out of). Others (retention, compression) belong to a
// backup's own command line.
bool validForEveryCommand(const std::string& key) {
  static const char* kGeneral[] = {"log-level-file", "log-level-console", "log-level-stderr", "log-path",
                                   "lock-path", "io-timeout", "buffer-size", "log-timestamp"};
  if (std::any_of(std::begin(kGeneral), std::end(kGeneral), [&](const char* k) { return key == k; })) return true;
  if (key.rfind("repo", 0) != 0) return false;
  size_t i = 4;
  while (i < key.size() && std::isdigit(static_cast<unsigned char>(key[i]))) ++i;
  if (i == 4 || i >= key.size() || key[i] != '-') return false;
  std::string rest = key.substr(i + 1);
  for (const char* excluded : {"retention", "bundle", "block", "hardlink"}) {
    if (rest.rfind(excluded, 0) == 0) return false;
  }
  return true;
}

std::string quoteForShell(const std::string& s) { return "'" + s + "'"; }

// An argv as one line for postgres to run by the shell (archive_command, restore_command).
std::string shellLine(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const auto& a : argv) {
    const bool plain = a.find_first_of(" \t\"\\$`;&|<>()*?[]#~") == std::string::npos;
    cmd += (cmd.empty() ? "" : " ") + (plain ? a : quoteForShell(a));
  }
  return cmd;
}

}  // namespace

const char* replicaMethodName(ReplicaMethod m) {
  return m == ReplicaMethod::kPgBackRest ? "pgbackrest" : "basebackup";
}

Result<BackupSettings> BackupSettings::parse(const std::map<std::string, std::string>& section) {
  BackupSettings out;
  for (const auto& [key, value] : section) {
    if (value.find_first_of("\n'") != std::string::npos) {
      return Error{"backup." + key + ": a value may hold no newline and no single quote"};
    }
    if (key == "archive") {
      if (value != "on" && value != "off") return Error{"backup.archive: on or off, got '" + value + "'"};
      out.archive = value == "on";
    } else if (key == "stanza") {
      if (!optionNameOk(value) && !value.empty()) {
        return Error{"backup.stanza: letters, digits and '-' only, got '" + value + "'"};
      }
      out.stanza = value;
    } else if (key == "replica-methods") {
      out.replicaMethods.clear();
      std::istringstream in(value);
      std::string name;
      while (std::getline(in, name, ',')) {
        if (name == "pgbackrest") {
          out.replicaMethods.push_back(ReplicaMethod::kPgBackRest);
        } else if (name == "basebackup") {
          out.replicaMethods.push_back(ReplicaMethod::kBasebackup);
        } else {
          return Error{"backup.replica-methods: unknown method '" + name + "' (known: pgbackrest, basebackup)"};
        }
      }
      if (out.replicaMethods.empty()) return Error{"backup.replica-methods: name at least one method"};
    } else if (validForEveryCommand(key)) {
      out.options[key] = value;
    } else {
      return Error{"backup." + key + ": not a key of the backup section (archive, stanza, replica-methods) nor a "
                   "pgBackRest repository option valid for every command (repo1-path, repo1-type, ..., log-path, "
                   "log-level-file, lock-path)"};
    }
  }
  const bool wantsRepo = out.archive || std::count(out.replicaMethods.begin(), out.replicaMethods.end(),
                                                   ReplicaMethod::kPgBackRest) > 0;
  if (wantsRepo && out.stanza.empty()) return Error{"backup: archiving and the pgbackrest method need backup.stanza"};
  return out;
}

std::vector<std::string> pgBackRestArgv(const std::string& stanza, const std::map<std::string, std::string>& options,
                                        const PgOptions& host, const std::string& command,
                                        const std::vector<std::string>& extra) {
  // pgBackRest refuses an option its command does not take (error 031): `info` takes
  // no pg1 option, the archive commands and `restore` only its path (they connect to
  // nothing), `check` no lock-path.
  std::vector<std::string> argv = {kPgBackRestBinary, "--stanza=" + stanza};
  for (const auto& [k, v] : options) {
    if (k != "lock-path" || command != "check") argv.push_back("--" + k + "=" + v);
  }
  if (command != "info") argv.push_back("--pg1-path=" + host.dataDir);
  if (command != "info" && command != "restore" && command != "archive-push" && command != "archive-get") {
    argv.push_back("--pg1-socket-path=" + host.socketPath());
    argv.push_back("--pg1-port=" + std::to_string(host.port));
    argv.push_back("--pg1-user=" + host.superuser);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(command);
  return argv;
}

std::map<std::string, std::string> archiveSettings(const BackupSettings& backup, const PgOptions& host) {
  if (!backup.archive) return {};
  return {{"archive_mode", "on"},
          {"archive_command", shellLine(pgBackRestArgv(backup.stanza, backup.options, host, "archive-push")) + " %p"}};
}

Result<bool> validateSourceRepository(const SourceRepository& repo) {
  if (repo.stanza.empty()) return Error{"the repository's stanza is empty"};
  for (const char* own : {"archive", "stanza", "replica-methods"}) {
    if (repo.options.count(own)) {
      return Error{std::string("options.") + own + ": a key of the backup section, not a pgBackRest repository "
                   "option"};
    }
  }
  std::map<std::string, std::string> section = repo.options;
  section["stanza"] = repo.stanza;
  if (auto s = BackupSettings::parse(section); !s) return Error{s.error()};
  return true;
}

std::string restoreCommand(const SourceRepository& repo, const PgOptions& host) {
  return shellLine(pgBackRestArgv(repo.stanza, repo.options, host, "archive-get")) + " %f \"%p\"";
}

CommandResult runPgBackRest(const std::vector<std::string>& argv, const PgOptions& host,
                            std::chrono::milliseconds timeout) {
  CommandSpec spec;
  spec.argv = argv;
  spec.runAsUser = host.osUser;
  spec.timeout = timeout;
  return runCommand(spec);
}

std::string pgBackRestFailure(const std::string& output) {
  std::string last;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("ERROR:") != std::string::npos) return line;
    if (!line.empty()) last = line;
  }
  return last;
}

Result<bool> validateBootstrap(const BootstrapFromBackup& b) {
  if (b.stanza.empty()) return Error{"postgres.bootstrap.stanza is required with method pgbackrest"};
  std::map<std::string, std::string> section = b.options;
  section["stanza"] = b.stanza;
  if (auto s = BackupSettings::parse(section); !s) return Error{"postgres.bootstrap: " + s.error()};
  if (auto t = recoveryTargetOptions(b.target); !t) return Error{"postgres.bootstrap.target: " + t.error()};
  return true;
}

Result<StanzaInfo> parseStanzaInfo(const std::string& text, const std::string& stanza) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) return Error{"pgbackrest info did not print a JSON array"};
  try {
    for (const auto& s : j) {
      if (s.value("name", "") != stanza) continue;
      StanzaInfo out;
      out.status = s.contains("status") ? s["status"].value("message", "") : "";
      const auto& db = s.value("db", nlohmann::json::array());
      if (!db.empty()) out.systemId = std::to_string(db.back().value("system-id", uint64_t{0}));
      const auto& archive = s.value("archive", nlohmann::json::array());
      if (!archive.empty()) out.archiveMax = archive.back().value("max", "");
      const auto& backups = s.value("backup", nlohmann::json::array());
      if (backups.empty()) return out;
      const auto& latest = backups.back();
      out.latestBackup = latest.value("label", "");
      // Without a "database" id (older output), the backup is taken as the stanza's now.
      out.latestBackupSystemId = out.systemId;
      if (latest.contains("database") && latest["database"].contains("id")) {
        const auto id = latest["database"]["id"].get<int64_t>();
        for (const auto& d : db) {
          if (d.value("id", int64_t{-1}) != id) continue;
          out.latestBackupSystemId = std::to_string(d.value("system-id", uint64_t{0}));
        }
      }
      return out;
    }
  } catch (const nlohmann::json::exception& e) {
    return Error{std::string("pgbackrest info: ") + e.what()};
  }
  return Error{"pgbackrest info lists no stanza '" + stanza + "'"};
}

Result<ArchivedEnd> archivedSegmentEnd(const std::string& segment, uint64_t segmentBytes) {
  const bool hex = segment.size() == 24 && std::all_of(segment.begin(), segment.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (!hex) return Error{"not a WAL segment name: \"" + segment + "\""};
  if (segmentBytes == 0 || (uint64_t{1} << 32) % segmentBytes != 0) {
    return Error{"not a WAL segment size: " + std::to_string(segmentBytes)};
  }
  const uint64_t log = std::stoull(segment.substr(8, 8), nullptr, 16);
  const uint64_t seg = std::stoull(segment.substr(16, 8), nullptr, 16);
  if (seg >= (uint64_t{1} << 32) / segmentBytes) return Error{"not a WAL segment name: \"" + segment + "\""};
  const uint64_t end = (log << 32) + (seg + 1) * segmentBytes;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%X/%X", static_cast<unsigned>(end >> 32), static_cast<unsigned>(end & 0xFFFFFFFFu));
  return ArchivedEnd{buf, static_cast<int64_t>(std::stoull(segment.substr(0, 8), nullptr, 16))};
}

std::optional<std::string> bootstrapRefusal(const BootstrapSystems& s) {
  const std::string what = "refusing to bootstrap from the newest backup of stanza " + s.stanza + " (database system " +
                           s.backup + "): ";
  if (!s.stanzaNow.empty() && s.stanzaNow != s.backup) {
    return what + "the stanza now holds another database system, " + s.stanzaNow +
           " (upgraded or created again since that backup), which the restored cluster could not archive into. "
           "Nothing was changed. Take a backup of the stanza's present system, or name another stanza in "
           "postgres.bootstrap.stanza";
  }
  if (s.dataDirSystem && *s.dataDirSystem != s.backup) {
    return what + "the data directory " + s.dataDir + " holds another database system, " + *s.dataDirSystem +
           ", which the restore would overwrite. Nothing was changed. If that data is not needed, stop the agent "
           "and move the directory away; if it is, set the cluster up from it (remove postgres.bootstrap)";
  }
  if (s.downstreamSystem && *s.downstreamSystem != s.backup) {
    return what + "its sync " + s.downstreamId + " serves another database system, " + *s.downstreamSystem +
           " (the cluster's state names peers of that system). Nothing was changed. Restore a backup of that "
           "system, or start the cluster over: stop every agent, move their data directories away, then "
           "`dugong-adm reset-state`";
  }
  return std::nullopt;
}

RestoreIntoPlan planRestoreInto(const RestoreIntoFacts& f) {
  auto mb = [](uint64_t bytes) { return std::to_string(bytes / (1024 * 1024)) + " MB"; };
  if (!f.oldSetUp) return {RestoreInto::kEmpty, "no old data directory to copy"};
  if (f.oldSystem.empty()) {
    return {RestoreInto::kEmpty, "the old data directory's system identifier cannot be read: nothing to reuse"};
  }
  if (f.oldSystem != f.backupSystem) {
    return {RestoreInto::kEmpty, "the old data directory holds database system " + f.oldSystem + ", not the backup's " +
                                     f.backupSystem + ": nothing to reuse"};
  }
  if (f.oldHasLinks) {
    return {RestoreInto::kEmpty, "the old data directory's pg_wal or a tablespace is a symbolic link, which a copy "
                                 "would share with it"};
  }
  if (f.freeBytes < f.oldBytes) {
    return {RestoreInto::kEmpty, "a copy of the old data directory (" + mb(f.oldBytes) + ") does not fit in the " +
                                     mb(f.freeBytes) + " free beside it"};
  }
  return {RestoreInto::kCopyWithDelta, "a copy of the old data directory (" + mb(f.oldBytes) + ", database system " +
                                           f.oldSystem + "), then restore --delta: only the files that differ from "
                                           "the backup come from the repository"};
}

Result<std::vector<std::string>> recoveryTargetOptions(const std::string& target) {
  if (target.empty()) return std::vector<std::string>{};
  if (target == "immediate") return std::vector<std::string>{"--type=immediate", "--target-action=promote"};
  auto colon = target.find(':');
  std::string kind = target.substr(0, colon);
  std::string value = colon == std::string::npos ? "" : target.substr(colon + 1);
  if ((kind != "name" && kind != "time" && kind != "lsn") || value.empty()) {
    return Error{"recovery target '" + target + "': expected name:LABEL, time:TIMESTAMP, lsn:X/Y or immediate"};
  }
  return std::vector<std::string>{"--type=" + kind, "--target=" + value, "--target-action=promote"};
}

}  // namespace dugong::pg
