// ZooKeeper maintenance and outages under a writing primary, repeated: each
// run sets up a fresh 3-peer cluster on a 3-server ensemble
// (tests/e2e/zk_maintenance_scenario.h) and either kills the ZooKeeper leader, then
// restarts every server in turn, the leader last (the default), or loses the quorum for
// --quorum-loss=MS (two of the three servers killed, then started again). For each fault:
// the longest write gap (median and max over the runs), and how many runs had a new
// generation or a postgres restart on the primary.
//   zk_maintenance_bench [runs=10] [sessionTimeoutMs=4000] [--no-lease] [--no-failsafe]
//                        [--quorum-loss=MS]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
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
  void print(const std::string& fault) {
    if (gaps.empty()) return;
    std::sort(gaps.begin(), gaps.end());
    std::cout << fault << ": write gap median " << gaps[gaps.size() / 2] << " ms, max " << gaps.back()
              << " ms over " << gaps.size() << " runs; runs with a new generation " << generations
              << ", with a postgres restart " << restarts << ", with another primary " << primaryChanges << "\n";
  }
};

std::string describe(const char* what, const dugong::e2e::MaintenanceOutcome& o) {
  return std::string(what) + " gap " + std::to_string(o.maxGapMs) + " ms" +
         (o.postgresRestarted ? ", postgres restarted" : "") + (o.newGeneration ? ", new generation" : "") +
         (o.samePrimary ? "" : ", another primary");
}

}  // namespace

int main(int argc, char** argv) {
  bool noLease = false, noFailsafe = false;
  long quorumLossMs = 0;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-lease") {
      noLease = true;
    } else if (a == "--no-failsafe") {
      noFailsafe = true;
    } else if (a.rfind("--quorum-loss=", 0) == 0) {
      quorumLossMs = std::atol(a.c_str() + 14);
    } else {
      positional.push_back(a);
    }
  }
  const int runs = positional.size() >= 1 ? std::atoi(positional[0].c_str()) : 10;
  const int sessionTimeoutMs = positional.size() >= 2 ? std::atoi(positional[1].c_str()) : 4000;
  if (runs < 1 || sessionTimeoutMs < 1000 || quorumLossMs < 0 || positional.size() > 2) {
    std::cerr << "usage: zk_maintenance_bench [runs>=1] [sessionTimeoutMs>=1000] [--no-lease] [--no-failsafe] "
                 "[--quorum-loss=MS]\n";
    return 2;
  }
  Tally kill, rolling, quorum;
  int failed = 0;
  for (int i = 0; i < runs; ++i) {
    dugong::e2e::ZkMaintenanceCluster cluster(sessionTimeoutMs, noLease, noFailsafe);
    if (!cluster.start()) {
      ++failed;
      std::cout << "run " << i + 1 << ": FAILED: " << cluster.error() << "\n";
      continue;
    }
    if (quorumLossMs > 0) {
      const auto q = cluster.quorumLoss(std::chrono::milliseconds(quorumLossMs));
      quorum.add(q);
      std::cout << "run " << i + 1 << ": " << describe("quorum loss", q) << ", " << q.rowsLate
                << " rows in its last second" << std::endl;
      continue;
    }
    const auto k = cluster.leaderKill();
    const auto r = cluster.rollingRestart();
    kill.add(k);
    rolling.add(r);
    std::cout << "run " << i + 1 << ": " << describe("leader kill", k) << "; " << describe("rolling restart", r)
              << std::endl;
  }
  std::cout << "session timeout " << sessionTimeoutMs << " ms, ZooKeeper tickTime 200 ms"
            << (noLease ? ", no lease" : ", lease") << (noFailsafe ? ", failsafe off" : ", failsafe on") << "; "
            << failed << " runs failed to start\n";
  kill.print("leader kill");
  rolling.print("rolling restart");
  quorum.print("quorum loss " + std::to_string(quorumLossMs) + " ms");
  return failed == runs ? 1 : 0;
}
