// What a peer's data directory holds, as the peer publishes it in its election node
// while the cluster has no state: what a (re-)setup of a cluster whose state was lost
// chooses its primary from (docs/state-machine.md "A lost cluster state").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/result.h"
#include "statemachine/timeline_history.h"
#include "statemachine/wal_position.h"

namespace dugong {

struct PeerDataState {
  bool setUp = false;     // the data directory holds a database (else: empty, new)
  std::string systemId;   // pg_controldata's "Database system identifier" (when setUp)
  int64_t timeline = 0;   // the timeline its WAL is on (when setUp)
  WalPosition wal;        // how far its WAL goes (when setUp)
  // The timelines `timeline` came from (TimelineHistory::ancestors), when known: older
  // agents, or a history that could not be read, publish none.
  std::optional<std::vector<TimelineHistory::Ancestor>> ancestors;

  // {"setUp", "systemId", "timeline", "wal", "history": [[timeline, "X/Y"], ...] when
  // known}; only setUp without data.
  nlohmann::json toJson() const;
  static Result<PeerDataState> fromJson(const nlohmann::json& j);
  // "empty", or "system 7312..., timeline 2, WAL 0/3000060".
  std::string describe() const;
  // True when this data directory's WAL goes further than `other`'s: a later timeline
  // first (its history holds the other's, a promotion happened after it forked), then
  // the WAL position. Only meaningful between data directories of the same system.
  bool aheadOf(const PeerDataState& other) const;
  // Whether a cluster set up from this data directory keeps what `other`'s history holds
  // that the cluster may need: other's WAL is a prefix of this one's (same history up to
  // other's end), or this one's history left other's timeline at a promotion (other went
  // on past that fork on the old timeline: WAL no later generation kept). False when the
  // two histories diverged otherwise. True when either history is unknown (the number
  // order of aheadOf is all there is then).
  bool keeps(const PeerDataState& other) const;

  bool operator==(const PeerDataState&) const = default;
};

// Published data states of the present peers, by peer id. A peer absent from the map
// has published none (yet).
using PeerDataStates = std::map<std::string, PeerDataState>;

}  // namespace dugong
