// A WAL's history as postgres keeps it: the timeline it is on now, and the timelines it
// came from, each with the position where the next one began (a promotion). What a
// takeover compares besides positions: two WALs that reach the same position may hold
// different histories (docs/state-machine.md "The initWal check compares histories").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/result.h"
#include "statemachine/wal_position.h"

namespace dugong {

struct TimelineHistory {
  // A timeline this WAL came from, and where it ended (where the next one began).
  struct Ancestor {
    int64_t timeline = 0;
    WalPosition end;
    bool operator==(const Ancestor&) const = default;
  };

  int64_t timeline = 0;             // the one it is on now (1 after initdb)
  std::vector<Ancestor> ancestors;  // oldest first, each ending where the next began

  // The timeline of the last byte before `p`: the one the WAL up to `p` was written on
  // last. 0 for the empty prefix (p = 0). Two WALs hold the same history up to `p`
  // when this is the same timeline in both (timelines are unique: one promotion each).
  int64_t timelineAt(WalPosition p) const;

  // "timeline 3 (from 2 at 0/3000060, from 1 at 0/2000000)".
  std::string describe() const;

  bool operator==(const TimelineHistory&) const = default;
};

// The ancestors as published in election nodes (a data state's and a takeover report's
// "history"): [[timeline, "X/Y"], ...], oldest first.
nlohmann::json ancestorsToJson(const std::vector<TimelineHistory::Ancestor>& ancestors);
// Parses that form; the error names the field ("\"history\" must be ...") for the caller
// to prefix with what it parses.
Result<std::vector<TimelineHistory::Ancestor>> ancestorsFromJson(const nlohmann::json& j);

}  // namespace dugong
