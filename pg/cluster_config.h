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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pg/options.h"
#include "statemachine/event.h"
#include "statemachine/quorum.h"
#include "statemachine/result.h"

namespace dugong::pg {

// The newest format this build reads. A node of a newer format is refused: its meaning
// is unknown to this build, so nothing is applied from it. Format 1: settings, hba,
// backup. Format 2 adds `replication` (docs/decisions/0079-quorum-commit.md section 2),
// and is written only when the configuration has one: a configuration without it keeps
// format 1, which an agent of an earlier release still reads.
inline constexpr int kClusterConfigFormat = 2;

// The cluster-wide replication setting: Manatee's one sync, or quorum commit with a set
// of `size` members of which a commit waits for `k` (ReplicationWanted, what the primary
// moves the cluster state to, one step at a time). k and size are kept in sync mode too
// (the next switch to quorum mode uses them) and checked alike: 1 <= k < size <= 64.
struct ClusterReplication {
  ReplicationMode mode = ReplicationMode::kSync;
  int k = 1;
  int size = 2;

  ReplicationWanted wanted() const { return ReplicationWanted{mode, k, size}; }
  // {"k": 1, "mode": "quorum", "size": 2}
  nlohmann::json toJson() const;
  // "quorum, k 1 of a set of 2" / "sync (k 1, size 2 kept for quorum mode)"
  std::string describe() const;
  bool operator==(const ClusterReplication&) const = default;
};

// The keys `dugong-adm config set` takes for it, after "replication.".
const std::vector<std::string>& replicationKeys();  // mode, k, size
// Sets one field from its text ("quorum", "2"): the key and the value checked, not yet
// the whole (validateReplication).
Result<bool> setReplicationField(ClusterReplication& r, const std::string& key, const std::string& value);
// 1 <= k < size <= 64 (with k = size every member's failure stalls writes).
Result<bool> validateReplication(const ClusterReplication& r);

struct ClusterConfig {
  std::map<std::string, std::string> settings;
  std::vector<std::string> hba;
  // Backups with pgBackRest (pg/pgbackrest.h BackupSettings): archive, stanza,
  // replica-methods and pgBackRest's repository options. Absent from the JSON when empty.
  std::map<std::string, std::string> backup;
  // The replication setting (format 2); absent: each agent's dugong.yaml `replication`
  // block decides (the fallback), and the primary keeps the state's mode, k and size
  // until its agent says otherwise.
  std::optional<ClusterReplication> replication;

  // The format its bytes have: 2 with a replication block, else 1.
  int format() const { return replication ? 2 : 1; }
  // {"format": 1, "settings": {...}, "hba": [...], "backup": {...}, "replication": {...}},
  // keys sorted: the same configuration always has the same bytes.
  std::string serialize() const;
  // Refuses what is not JSON, a field of the wrong type, and a newer format.
  static Result<ClusterConfig> parse(std::string_view bytes);
  bool operator==(const ClusterConfig&) const = default;
};

// The rules `dugong --check` applies to postgres.settings and postgres.hba, for the
// cluster's: names, managed settings, values on one line, wal_level replica or logical;
// the backup section's (BackupSettings::parse); and the replication block's
// (validateReplication).
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
