// The cluster-wide postgres configuration: settings and pg_hba lines that apply to every
// peer, stored in ZooKeeper at <root>/config (zk/layout.h) and written by
// `dugong-adm config`. Pure: no I/O.
//
// Precedence (docs/design.md "Cluster-wide configuration"), lowest first:
//   dugong's defaults < the cluster's settings < this host's postgres.settings
//   < the settings dugong manages (never overridable).
// pg_hba.conf: dugong's own lines, then this host's postgres.hba, then the cluster's
// hba lines (the first matching line wins, so a host's lines win over the cluster's).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pg/options.h"
#include "statemachine/result.h"

namespace dugong::pg {

// The format this build writes and reads. A node of a newer format is refused: its
// meaning is unknown to this build, so nothing is applied from it.
inline constexpr int kClusterConfigFormat = 1;

struct ClusterConfig {
  int format = kClusterConfigFormat;
  std::map<std::string, std::string> settings;
  std::vector<std::string> hba;
  // Backups with pgBackRest (pg/pgbackrest.h BackupSettings): archive, stanza,
  // replica-methods and pgBackRest's repository options. Absent from the JSON when empty.
  std::map<std::string, std::string> backup;

  // {"format": 1, "settings": {...}, "hba": [...], "backup": {...}}, keys sorted: the same
  // configuration always has the same bytes.
  std::string serialize() const;
  // Refuses what is not JSON, a field of the wrong type, and a newer format.
  static Result<ClusterConfig> parse(std::string_view bytes);
  bool operator==(const ClusterConfig&) const = default;
};

// The rules `dugong --check` applies to postgres.settings and postgres.hba, for the
// cluster's: names, managed settings, values on one line, wal_level replica or logical;
// and the backup section's (BackupSettings::parse).
Result<bool> validateClusterConfig(const ClusterConfig& config);

// This host's options with the cluster's configuration folded in (see the precedence
// above): what the adapter writes into dugong.conf and pg_hba.conf. With backup.archive
// on, archive_mode and archive_command come with the cluster's settings (a host's own
// win, as for every setting).
PgOptions withClusterConfig(const PgOptions& host, const ClusterConfig& cluster);

// "KEY=VALUE" -> {KEY, VALUE}; an error names what is wrong. Spaces around KEY and
// before VALUE are dropped; the rest is the value exactly, a trailing space included. A
// VALUE written in single quotes, as in postgresql.conf ('%m [%p] '), is what they
// enclose, with '' standing for one quote inside; the quotes are not part of it.
// Backslashes are kept as written. (docs/day2.md "Quoting a value")
Result<std::pair<std::string, std::string>> parseAssignment(const std::string& text);

// The cluster's settings that `host` sets too (its postgres.settings): the host's value
// is the one in effect there, so the cluster's has no effect on that host. Sorted.
std::vector<std::string> shadowedSettings(const PgOptions& host, const ClusterConfig& cluster);

// The settings whose value differs between `before` and `after` (added, changed or
// removed), sorted by name.
std::vector<std::string> changedSettings(const std::map<std::string, std::string>& before,
                                         const std::map<std::string, std::string>& after);

}  // namespace dugong::pg
