// The postgres configuration a role needs: what the state machine asks the pg adapter
// to apply.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "statemachine/cluster_state.h"
#include "statemachine/identity.h"
#include "statemachine/wal_position.h"

namespace dugong {

enum class PgRole { kNone, kPrimary, kSync, kAsync, kStandbyLeader };

const char* pgRoleName(PgRole role);

// primary: {upstream null, downstream = the sync (null in one-node-write mode, which
//           means writable alone)}; in quorum mode {downstream null, quorum = the set
//           and k: `ANY k (members)`}.
// sync / async: {upstream = the peer to stream from, restorePeer = the primary, from
//           which a peer with no usable data directory is rebuilt}.
// standby-leader (docs/decisions/0083-standby-cluster.md 3.1): a standby whose upstream is
//           outside the cluster, `source`; never promoted. `newCluster`: the first
//           leader of a new standby cluster, which makes its data directory from the
//           source (pg_basebackup) when it has none, never by initdb.
// none: postgres stopped.
struct PgConfig {
  PgRole role = PgRole::kNone;
  std::optional<PeerIdentity> upstream;
  std::optional<PeerIdentity> downstream;
  std::optional<PeerIdentity> restorePeer;
  // primary (and standby-leader) only: the first primary of a new cluster (generation 1
  // with no initWal: set up with no data, or one-node-write mode set up), which creates
  // its data directory (initdb, or the bootstrap from a backup; a standby leader's from
  // its source) when it has none. Any other primary's data
  // directory holds the cluster's data: found missing, the adapter refuses (the peer
  // halts), never putting an empty database system in its place.
  bool newCluster = false;
  // primary only: the history its data must hold, the generation's: its WAL on timeline
  // `initTimeline` at `initWal` (ClusterState's; 0: none recorded, nothing to check).
  // Data whose WAL forked off before initWal (a host restored from an older copy) lacks
  // what the generation acknowledged: the adapter refuses it (the peer halts) instead of
  // starting it as the primary.
  WalPosition initWal;
  int64_t initTimeline = 0;
  // primary only, quorum mode (docs/decisions/0079-quorum-commit.md section 3): commits
  // wait for k of these members (`synchronous_standby_names = 'ANY k (...)'`); then
  // `downstream` is absent, and does not mean writable alone.
  std::optional<Quorum> quorum;
  // standby-leader only: what it streams from.
  std::optional<SourceEndpoint> source;
  // standby-leader only: the generation a demote-cluster began (0083 5.2): its data
  // directory last ran as this site's primary (the adapter refuses that otherwise), and
  // is rewound with pg_rewind from the source's writable host if it diverged.
  bool demoted = false;
  // sync and async only: the generation a demote-cluster began (0083 5.2). Their WAL
  // diverged with the old primary's, which is rewound onto the new source's history: a
  // standby that cannot follow its upstream (the server log's evidence of a fork) is
  // repaired at once instead of after postgres.repairStandbyAfterSeconds.
  bool repairAtOnce = false;

  static PgConfig none() { return {}; }
  // The primary of an existing cluster: never bootstraps.
  static PgConfig primary(std::optional<PeerIdentity> downstream);
  // The first primary of a new cluster (newCluster).
  static PgConfig firstPrimary(std::optional<PeerIdentity> downstream);
  static PgConfig standby(PgRole role, PeerIdentity upstream, PeerIdentity restorePeer);
  // The standby leader of a standby cluster, streaming from `source`.
  static PgConfig standbyLeader(SourceEndpoint source, bool newCluster);

  // Full identities, or null; "newCluster": true only when set; "initWal" and
  // "initTimeline" only when a timeline is recorded; "quorum": {"k", "members"} (full
  // identities) only when set.
  nlohmann::json toJson() const;
  // Equal when toJson() would be: the role and every identity in full. Compared field by
  // field (the state machine compares on every evaluation).
  bool operator==(const PgConfig& other) const {
    auto same = [](const std::optional<PeerIdentity>& a, const std::optional<PeerIdentity>& b) {
      return a.has_value() == b.has_value() &&
             (!a || (a->id == b->id && a->ip == b->ip && a->pgUrl == b->pgUrl && a->zoneId == b->zoneId &&
                     a->backupUrl == b->backupUrl));
    };
    auto sameQuorum = [&same](const std::optional<Quorum>& a, const std::optional<Quorum>& b) {
      if (a.has_value() != b.has_value()) return false;
      if (!a) return true;
      if (a->k != b->k || a->members.size() != b->members.size()) return false;
      for (size_t i = 0; i < a->members.size(); ++i) {
        if (!same(a->members[i], b->members[i])) return false;
      }
      return true;
    };
    return role == other.role && same(upstream, other.upstream) && same(downstream, other.downstream) &&
           same(restorePeer, other.restorePeer) && newCluster == other.newCluster && initWal == other.initWal &&
           initTimeline == other.initTimeline && sameQuorum(quorum, other.quorum) && source == other.source &&
           demoted == other.demoted && repairAtOnce == other.repairAtOnce;
  }
};

}  // namespace dugong
