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
#include "statemachine/wal_position.h"

namespace dugong {

struct ClusterState {
  int64_t generation = 1;             // starts at 1, only ever grows
  PeerIdentity primary;
  std::optional<PeerIdentity> sync;   // absent only in one-node-write mode
  PeerList async;                     // replication order: async[i] follows async[i-1]
  PeerList deposed;                   // former primaries waiting for a rebuild
  WalPosition initWal;                // the primary's WAL when the generation began
  int64_t initTimeline = 0;           // the timeline of its WAL up to initWal; 0: not known
  nlohmann::json freeze;              // null: not frozen; otherwise true or {"date","reason"}
  bool oneNodeWriteMode = false;
  nlohmann::json promote;             // null: none; kept raw, see promote_request.h

  bool frozen() const { return !freeze.is_null() && freeze != false; }
  bool hasPromote() const { return !promote.is_null(); }

  // Writes every field the state has; `deposed` always, `initTimeline`, `freeze`,
  // `oneNodeWriteMode` and `promote` only when set.
  nlohmann::json toJson() const;
  // The text of toJson().dump(), byte for byte, written without building the JSON tree
  // (the simulators write a state thousands of times a second).
  std::string serialize() const;

  // Validates the schema and the rules a usable state obeys: generation is an integer
  // >= 1; primary is an identity; sync is an identity, or null only in one-node-write
  // mode; async and deposed are arrays of identities; no peer holds two places;
  // initWal is "hex/hex"; initTimeline, when present, an integer >= 1; freeze is a
  // boolean or an object; oneNodeWriteMode a boolean.
  // `promote` is kept as it is: peers validate it on their own (promote_request.h).
  static Result<ClusterState> fromJson(const nlohmann::json& j);
  // Parses JSON text, then validates as fromJson does.
  static Result<ClusterState> parse(std::string_view text);
};

// The state with the peers written as their ids: what the simulator and tools print.
nlohmann::json summarizeState(const ClusterState& state);

}  // namespace dugong
