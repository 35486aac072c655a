#include "sim/cluster/runner.h"

#include <algorithm>
#include <iterator>

namespace dugong::clustersim {

RunResult runSeed(uint64_t seed, const WorldOptions& options) { return runScenario(makeScenario(seed), options); }

Shrunk shrink(uint64_t seed, const RunResult& failing, const WorldOptions& options, int maxRuns) {
  const Scenario scenario = makeScenario(seed);
  const std::string invariant = failing.violation ? failing.violation->invariant : "";
  Shrunk best;
  best.faults = std::set<int>(failing.faultsPlanned.begin(), failing.faultsPlanned.end());
  best.result = failing;

  auto tryWith = [&](const std::set<int>& faults) {
    if (best.runs >= maxRuns) return false;
    ++best.runs;
    WorldOptions o = options;
    o.onlyFaults = faults;
    RunResult r = runScenario(scenario, o);
    if (r.ok || !r.violation || r.violation->invariant != invariant) return false;
    best.faults = faults;
    best.result = std::move(r);
    return true;
  };

  if (tryWith({})) return best;
  size_t chunk = std::max<size_t>(1, best.faults.size() / 2);
  while (!best.faults.empty() && best.runs < maxRuns) {
    bool removed = false;
    std::vector<int> order(best.faults.rbegin(), best.faults.rend());  // later faults first
    for (size_t start = 0; start < order.size() && best.runs < maxRuns; start += chunk) {
      std::set<int> fewer = best.faults;
      for (size_t i = start; i < std::min(order.size(), start + chunk); ++i) fewer.erase(order[i]);
      if (tryWith(fewer)) {
        removed = true;
        break;
      }
    }
    if (!removed) {
      if (chunk == 1) break;
      chunk = std::max<size_t>(1, chunk / 2);
    }
  }
  return best;
}

std::vector<TraceLine> relevantTrace(const std::vector<TraceLine>& trace) {
  std::vector<TraceLine> out;
  std::copy_if(trace.begin(), trace.end(), std::back_inserter(out), [](const TraceLine& l) {
    return l.kind == 'F' || l.kind == 'O' || l.kind == 'Q' || l.kind == 'Z' || l.kind == 'P' || l.kind == 'L' ||
           l.kind == 'V';
  });
  return out;
}

std::string replayCommand(uint64_t seed, const std::optional<std::set<int>>& faults) {
  std::string cmd = "dugong-cluster-sim --seed " + std::to_string(seed);
  if (faults) {
    cmd += " --faults ";
    if (faults->empty()) cmd += "none";
    bool first = true;
    for (int f : *faults) {
      cmd += (first ? "" : ",") + std::to_string(f);
      first = false;
    }
  }
  return cmd + " --trace full";
}

}  // namespace dugong::clustersim
