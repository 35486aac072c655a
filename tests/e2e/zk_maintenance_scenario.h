// ZooKeeper maintenance under a writing primary: a real 3-server ensemble
// (tickTime 200 ms), agents on the whole ensemble, a writer inserting a row every 20 ms on
// the primary (synchronous_commit on). Each fault reports the longest gap between two
// acknowledged rows, whether the cluster's generation changed and whether the primary's
// postgres was restarted. Shared by tests/e2e/zk_maintenance_test.cc (asserts) and
// bench/zk_maintenance_bench.cc (figures over many runs).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {

struct MaintenanceOutcome {
  int64_t maxGapMs = 0;       // between two acknowledged rows, over the fault and 2 s after
  bool newGeneration = false;
  bool postgresRestarted = false;  // pg_postmaster_start_time() changed on the primary
  bool samePrimary = false;        // the same peer answers /primary 200 afterwards
  int rows = 0;                    // acknowledged over the fault
  // A quorum loss: acknowledged in its last second, past the end of any lease (only the
  // failsafe lets a primary write then).
  int rowsLate = 0;
};

class ZkMaintenanceCluster {
 public:
  // `noLease`: zookeeper.lease: false (no lease); `noFailsafe`:
  // zookeeper.failsafe: off; `extraConfig`: appended to every agent's configuration
  // (e.g. a `replication:` block for quorum mode).
  explicit ZkMaintenanceCluster(int sessionTimeoutMs = 4000, bool noLease = false, bool noFailsafe = false,
                                const std::string& extraConfig = "");
  ~ZkMaintenanceCluster();
  Harness& harness() { return *h_; }
  // Starts the cluster and its writer; false (and a message in error()) on failure.
  bool start();
  // The ZooKeeper leader killed, and started again once another leads.
  MaintenanceOutcome leaderKill();
  // Every server restarted in turn, the leader last.
  MaintenanceOutcome rollingRestart();
  // The quorum lost for `lost`: the leader and another server killed, then both started
  // again (the quorum is back once the first of them serves).
  MaintenanceOutcome quorumLoss(std::chrono::milliseconds lost);
  const std::string& error() const { return error_; }

 private:
  template <class Fault>
  MaintenanceOutcome measure(Fault fault);
  void write();
  std::string postmasterStart();

  std::unique_ptr<Harness> h_;
  int primary_ = -1;
  std::string error_;
  std::mutex mu_;
  std::optional<std::chrono::steady_clock::time_point> last_;
  std::chrono::steady_clock::duration maxGap_{};
  int acked_ = 0;
  std::optional<int> lateFrom_;  // acked_ a second before the quorum came back
  int lateRows_ = 0;             // acknowledged in that last second
  std::atomic<bool> done_{false};
  std::thread writer_;
};

}  // namespace dugong::e2e
