// A quorum member's takeover report (docs/decisions/0079-quorum-commit.md section 4.2):
// its WAL, read under its fence, published in its election node so that every member
// decides the same takeover from the same reports.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "statemachine/result.h"
#include "statemachine/timeline_history.h"
#include "statemachine/wal_position.h"

namespace dugong {

// {"generation": G, "wal": "X/Y", "timeline": n, "history": [[t, "X/Y"], ...],
//  "instance": <postmaster start>} in the member's election node, beside "streaming" and
// "data". The session delivers it with the node's data version (`nodeVersion`, not part
// of the JSON): a takeover's write checks that version, so a report withdrawn or changed
// since it was counted makes the write fail.
struct TakeoverReport {
  int64_t generation = 0;    // the generation it fenced itself for
  WalPosition wal;           // its replay end under the fence (decision 0059)
  TimelineHistory history;   // the timelines of that WAL
  int32_t nodeVersion = -1;  // its election node's data version; -1: not known
  // The run of postgres that was fenced (PgInstance: its postmaster's start). A member
  // whose postgres restarted publishes again, which changes the node's version.
  uint64_t instance = 0;

  nlohmann::json toJson() const;
  // Validates: an object; generation an integer >= 1; wal "X/Y"; timeline an integer
  // >= 1; history an array of [timeline, "X/Y"], timelines rising and below `timeline`,
  // ends not decreasing and not past wal; instance, when present, an integer >= 0.
  static Result<TakeoverReport> fromJson(const nlohmann::json& j);
  static Result<TakeoverReport> parse(std::string_view text);
  // "generation 7: timeline 3 (from 2 at 0/800), WAL 0/1000".
  std::string describe() const;

  bool operator==(const TakeoverReport&) const = default;
};

using TakeoverReports = std::map<std::string, TakeoverReport>;  // by member id

}  // namespace dugong
