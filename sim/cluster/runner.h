// Running seeds: one run, shrinking a failing run to the fewest faults that still break
// the same invariant, and the pieces of the report (relevant trace, replay command).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/cluster/world.h"

namespace dugong::clustersim {

RunResult runSeed(uint64_t seed, const WorldOptions& options = {});

struct Shrunk {
  std::set<int> faults;  // the faults kept
  RunResult result;      // the run with only those faults (it fails)
  int runs = 0;          // how many runs shrinking took
};

// Removes faults (halves, then quarters, ... then one at a time) while the run still
// violates the same invariant. REQUIRES: !failing.ok. At most `maxRuns` extra runs.
Shrunk shrink(uint64_t seed, const RunResult& failing, const WorldOptions& options, int maxRuns = 200);

// The trace without the chatter: faults, operator actions, ZooKeeper, postgres, the
// peers' decisions and the violation; commits and events are left out.
std::vector<TraceLine> relevantTrace(const std::vector<TraceLine>& trace);

std::string replayCommand(uint64_t seed, const std::optional<std::set<int>>& faults);

}  // namespace dugong::clustersim
