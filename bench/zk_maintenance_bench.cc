// ZooKeeper maintenance under a writing primary (issue 24), repeated: each run sets up a
// fresh 3-peer cluster on a 3-server ensemble (tests/e2e/zk_maintenance_scenario.h) and
// kills the ZooKeeper leader, then restarts every server in turn, the leader last. For
// each fault: the longest write gap (median and max over the runs), and how many runs
// had a new generation or a postgres restart on the primary.
//   zk_maintenance_bench [runs=10] [sessionTimeoutMs=4000] [--no-lease]
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "tests/e2e/zk_maintenance_scenario.h"

namespace {

struct Tally {
  std::vector<long> gaps;
  int generations = 0, restarts = 0, primaryChanges = 0;
  void add(const dugong::e2e::MaintenanceOutcome& o) {
    gaps.push_back(static_cast<long>(o.maxGapMs));
    generations += o.newGeneration ? 1 : 0;
    restarts += o.postgresRestarted ? 1 : 0;
    primaryChanges += o.samePrimary ? 0 : 1;
  }
  void print(const char* fault) {
    if (gaps.empty()) return;
    std::sort(gaps.begin(), gaps.end());
    std::cout << fault << ": write gap median " << gaps[gaps.size() / 2] << " ms, max " << gaps.back()
              << " ms over " << gaps.size() << " runs; runs with a new generation " << generations
              << ", with a postgres restart " << restarts << ", with another primary " << primaryChanges << "\n";
  }
};

}  // namespace

int main(int argc, char** argv) {
  const bool noLease = argc > 1 && std::strcmp(argv[argc - 1], "--no-lease") == 0;
  const int positional = argc - 1 - (noLease ? 1 : 0);
  const int runs = positional >= 1 ? std::atoi(argv[1]) : 10;
  const int sessionTimeoutMs = positional >= 2 ? std::atoi(argv[2]) : 4000;
  if (runs < 1 || sessionTimeoutMs < 1000) {
    std::cerr << "usage: zk_maintenance_bench [runs>=1] [sessionTimeoutMs>=1000] [--no-lease]\n";
    return 2;
  }
  Tally kill, rolling;
  int failed = 0;
  for (int i = 0; i < runs; ++i) {
    dugong::e2e::ZkMaintenanceCluster cluster(sessionTimeoutMs, noLease);
    if (!cluster.start()) {
      ++failed;
      std::cout << "run " << i + 1 << ": FAILED: " << cluster.error() << "\n";
      continue;
    }
    const auto k = cluster.leaderKill();
    const auto r = cluster.rollingRestart();
    kill.add(k);
    rolling.add(r);
    std::cout << "run " << i + 1 << ": leader kill gap " << k.maxGapMs << " ms" << (k.postgresRestarted ? ", postgres restarted" : "")
              << (k.newGeneration ? ", new generation" : "") << "; rolling restart gap " << r.maxGapMs << " ms"
              << (r.postgresRestarted ? ", postgres restarted" : "") << (r.newGeneration ? ", new generation" : "")
              << std::endl;
  }
  std::cout << "session timeout " << sessionTimeoutMs << " ms, ZooKeeper tickTime 200 ms"
            << (noLease ? ", no lease" : ", lease") << "; " << failed << " runs failed to start\n";
  kill.print("leader kill");
  rolling.print("rolling restart");
  return failed == runs ? 1 : 0;
}
