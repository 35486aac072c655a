// The cluster state: the one versioned JSON object in ZooKeeper that every peer watches.
// Field names are Manatee's (DESIGN.md, "Cluster state").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "statemachine/identity.h"
#include "statemachine/result.h"
#include "statemachine/standby.h"
#include "statemachine/wal_position.h"

namespace dugong {

// Quorum commit's synchronous set (docs/decisions/0079-quorum-commit.md): the primary's
// postgres runs `ANY k (members)`, so a commit is acknowledged once k members flushed it,
// and a takeover reads N - k + 1 of them. `members` are in order: the order breaks ties
// between equal reports, and members[0] is the upstream of async[0].
struct Quorum {
  int k = 1;          // 1 <= k <= members.size()
  PeerList members;   // at least one; direct standbys of the primary
};

// The state's format: an absent "format" is format 1, Manatee's fields as they are (so
// this build writes none in sync mode); format 2 is quorum mode (docs/decisions/0079);
// format 3 a standby cluster or a demote-cluster request (docs/decisions/0083). A later
// build that changes the meaning of the state writes "format": 4 or more; this build
// refuses such a state as invalid (a clear error, and no action taken on it) rather than
// misread it, as builds of format 1 refuse format 2.
constexpr int64_t kClusterStateFormat = 3;

struct ClusterState {
  int64_t generation = 1;             // starts at 1, only ever grows
  PeerIdentity primary;
  std::optional<PeerIdentity> sync;   // absent only in one-node-write mode and in quorum mode
  PeerList async;                     // replication order: async[i] follows async[i-1]
  PeerList deposed;                   // former primaries waiting for a rebuild
  WalPosition initWal;                // the primary's WAL when the generation began
  int64_t initTimeline = 0;           // the timeline of its WAL up to initWal; 0: not known
  nlohmann::json freeze;              // null: not frozen; otherwise true or {"date","reason"}
  bool oneNodeWriteMode = false;
  nlohmann::json promote;             // null: none; kept raw, see promote_request.h
  // Set: quorum mode, the state's format 2 ("format": 2, "quorum": {"k", "members"},
  // "sync": null). Unset: Manatee's sync mode, format 1, Manatee's fields and bytes.
  std::optional<Quorum> quorum;
  // Set: a standby cluster (docs/decisions/0083-standby-cluster.md): `primary` is its
  // standby leader, in recovery, following `standby->source`; format 3.
  std::optional<StandbyMode> standby;
  // null: none; otherwise a normal cluster's demote-cluster request, kept raw like
  // `promote` (validateDemote, standby.h); format 3.
  nlohmann::json demote;

  bool frozen() const { return !freeze.is_null() && freeze != false; }
  bool hasPromote() const { return !promote.is_null(); }
  bool hasDemote() const { return !demote.is_null(); }
  // The format this state is written in: 3 with `standby` or `demote`, 2 with a quorum,
  // else 1 (written as no field).
  int format() const { return standby || hasDemote() ? 3 : quorum ? 2 : 1; }

  // Writes every field the state has; `deposed` always, `initTimeline`, `freeze`,
  // `oneNodeWriteMode` and `promote` only when set; `format` and `quorum` only in
  // quorum mode, `format`, `standby` and `demote` only in a format-3 state, so that a
  // sync-mode state is written as Manatee's fields exactly.
  nlohmann::json toJson() const;
  // The text of toJson().dump(), byte for byte, written without building the JSON tree
  // (the simulators write a state thousands of times a second).
  std::string serialize() const;

  // Validates the schema and the rules a usable state obeys: format, when present, 1, 2
  // or 3 (a newer one is refused: written by a newer dugong); generation is an integer
  // >= 1; primary is an identity; sync is an identity, or null only in one-node-write
  // mode; async and deposed are arrays of identities; no peer holds two places;
  // initWal is "hex/hex"; initTimeline, when present, an integer >= 1; freeze is a
  // boolean or an object; oneNodeWriteMode a boolean. Format 2 needs `quorum` (k an
  // integer from 1 to the number of members, members identities, at least one), a null
  // sync and no one-node-write mode; `quorum` is refused without format 2.
  // `promote` is kept as it is: peers validate it on their own (promote_request.h).
  // Format 3 (docs/decisions/0083 section 2.2) needs `standby` or `demote` (not both):
  // `standby` as StandbyMode::fromJson (a known source kind with exactly its fields),
  // not in one-node-write mode; `demote` kept raw (validateDemote). Either is refused
  // without format 3.
  // A format-2 state is refused unless `formats` takes quorum mode, a format-3 state
  // unless it takes standby clusters, as an older build refuses them. The agent's state
  // machine and driver take every format (kAll, docs/decisions/0089): a cluster changes
  // mode, or becomes a standby cluster, with no change to its agents' configuration.
  // The narrower readers are for the rules and tools that run one kind of state.
  enum class Formats { kSyncOnly, kSyncAndQuorum, kSyncAndStandby, kAll };
  static Result<ClusterState> fromJson(const nlohmann::json& j, Formats formats = Formats::kSyncOnly);
  // Parses JSON text, then validates as fromJson does.
  static Result<ClusterState> parse(std::string_view text, Formats formats = Formats::kSyncOnly);
};

// The state with the peers written as their ids: what the simulator and tools print.
nlohmann::json summarizeState(const ClusterState& state);

}  // namespace dugong
