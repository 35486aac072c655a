// The simulated world of a whole cluster: 3 to 6 peers, each running the real
// dugong::Peer, over a simulated ZooKeeper (sessions, ephemeral election nodes, watches
// delivered late, test-and-set, history) and a simulated postgres per peer (a WAL,
// synchronous and cascading replication, promotion, rebuild), with a client that keeps
// committing and a seeded fault scheduler. Virtual time; one seed drives everything.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/cluster/checks/invariants.h"
#include "sim/cluster/scenario.h"

namespace dugong::clustersim {

// One line of the trace. Kinds:
//   F fault   O operator   Q phase    Z ZooKeeper server   P postgres
//   E event stepped into a peer        A action a peer asked for
//   L a peer's decision (info and up)  D a peer's debug decision
//   C client commit / acknowledgement  V violation
struct TraceLine {
  int64_t t = 0;  // virtual ms since the start
  char kind = ' ';
  std::string text;

  std::string format() const;
};

struct WorldOptions {
  // Run only these faults of the scenario's plan (by index); all when absent.
  std::optional<std::set<int>> onlyFaults;
  // Testing only: the primary acknowledges a commit before its sync has it (asynchronous
  // replication), a bug the invariants must catch.
  bool testingAckBeforeSync = false;
  // Check the takeover rules of DESIGN.md on every new generation (default), or only
  // their consequences: lost commits, two writers, deposed peers serving, ...
  bool checkTakeoverRules = true;
  // Keep the trace (and its hash). Off for unwatched seed ranges, which re-run a failing
  // seed with it on: a run is the same either way.
  bool trace = true;
};

struct RunResult {
  uint64_t seed = 0;
  bool ok = true;
  std::optional<Violation> violation;
  std::vector<TraceLine> trace;
  uint64_t traceHash = 0;
  int64_t acks = 0;
  int64_t generations = 0;
  int faultsRun = 0;
  std::vector<int> faultsRunByKind;           // indexed by FaultKind
  std::vector<int> faultsPlanned;             // indices of the faults that were scheduled
  std::optional<int64_t> convergedAfterMs;    // after the faults stopped
  // Not read-write in the bound, rightly: the primary halted on data a fault replaced by
  // an older copy (what only an operator can choose about); the reason.
  std::optional<std::string> leftToAnOperator;
  int64_t virtualMs = 0;
};

RunResult runScenario(const Scenario& scenario, const WorldOptions& options = {});

}  // namespace dugong::clustersim
