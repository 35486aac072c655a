// One-line summaries of what changed between two consecutive cluster states, for
// `dugong-adm history`. Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/cluster_state.h"

namespace dugong::adm {

// The changes from `before` (nullopt: the first state) to `after`, most important first:
//   "cluster set up: primary A, sync B, asyncs C, D" / "... in one-node-write mode"
//   "sync B took over as primary from A" / "A became primary (was async)"
//   "A is deposed", "async C became sync (was sync B)", "sync B moved to async"
//   "async C added", "async C removed", "async chain reordered: C, D -> D, C"
//   "A removed from deposed"
//   "frozen: REASON" / "unfrozen"
//   "promote requested: B as sync (generation 3, expires T)" / "promote request carried
//   out" (the peer holds the place it was promoted to) / "promote request removed"
//   "one-node-write mode on" / "one-node-write mode off"
//   "quorum mode: ANY 1 (B, C)" / "quorum set: ANY 1 (B, C) -> ANY 2 (B, C)" / "sync mode:
//   sync B" (a member of the set is a sync: no line of its own)
// and "no change" when nothing an operator cares about changed.
std::vector<std::string> summarizeChange(const std::optional<ClusterState>& before, const ClusterState& after);

// The changes joined with "; ".
std::string summaryLine(const std::optional<ClusterState>& before, const ClusterState& after);

// One history record ({"time", "state", "reason"?}), decoded.
struct HistoryItem {
  int64_t sequence = 0;
  std::string time;    // as stored (ISO-8601), "" if absent
  std::string reason;  // "" if absent
  nlohmann::json raw;  // the record's "state" as stored
  std::optional<ClusterState> state;  // when the stored state is valid
  std::string error;   // why `state` is absent
};
HistoryItem decodeHistoryRecord(int64_t sequence, const std::string& data);

// Summaries for a whole history, oldest first: each item against the last valid state
// before it. An item whose state is invalid is summarised as "invalid state: ERROR".
std::vector<std::string> summarizeHistory(const std::vector<HistoryItem>& items);

}  // namespace dugong::adm
