// The isolated primary, end to end: a 3-peer cluster whose agents each reach
// ZooKeeper through their own TcpProxy; the primary's proxy is cut (its postgres stays
// reachable by clients and by its sync) while two clients write:
// - careful: a new connection per row through the multi-host target_session_attrs=
//   read-write string, synchronous_commit on;
// - local: one connection to the old primary's host only, synchronous_commit = local,
//   reconnecting to that same host after errors;
// - hostile: the same, but each row in a transaction that says BEGIN READ WRITE (which
//   a default_transaction_read_only does not stop).
// Shared by tests/e2e/partition_test.cc (asserts) and bench/partition_bench.cc (figures).
//
// PartitionKind::kFollowerCutOff: a real
// 3-server ensemble (tickTime 200 ms, syncLimit 20: a cut-off follower answers pings for
// 4 s); the primary's agent talks to a follower only, the other agents to the other two
// servers; the follower's quorum and election links are cut, so the primary's agent sees
// a healthy connection while the leader expires its session.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/cluster_harness.h"
#include "tests/support/tcp_proxy.h"

namespace dugong::e2e {

struct PartitionOutcome {
  int oldPrimary = -1;
  int newPrimary = -1;
  // From the cut to the careful client's first acknowledged row on another host.
  std::optional<std::chrono::milliseconds> timeToNewPrimary;
  // From the cut to the old primary's /primary answering 503.
  std::optional<std::chrono::milliseconds> timeToNotWritable;
  // The wall-clock time of the cut (ms since the epoch), to line up the agents' logs.
  int64_t cutWallMs = 0;
  std::set<int> carefulAcked, localAcked, hostileAcked;
  std::set<int> carefulLost, localLost, hostileLost;  // acknowledged, absent on the new primary
  std::string error;                     // empty when the scenario ran to its end
  // /primary answered 200 on two peers in the same poll (every 50 ms), at some point.
  bool twoWritablePrimaries = false;
};

enum class PartitionKind {
  kAgentCutOff,     // the primary's agent's own proxy to ZooKeeper is cut
  kFollowerCutOff,  // the follower the primary's agent talks to is cut off its leader
};

class PartitionCluster {
 public:
  explicit PartitionCluster(int sessionTimeoutMs = 3000, PartitionKind kind = PartitionKind::kAgentCutOff,
                            std::string zkConfig = {});
  Harness& harness() { return *h_; }
  dugong::testing::TcpProxy& proxy(int i) { return *proxies_.at(static_cast<size_t>(i)); }
  // Starts the cluster, cuts the primary off ZooKeeper with both clients writing, and
  // stops once the careful client wrote on a new primary (or after `deadline`).
  PartitionOutcome run(std::chrono::milliseconds deadline = std::chrono::seconds(60));

 private:
  PartitionKind kind_;
  std::vector<std::unique_ptr<dugong::testing::TcpProxy>> proxies_;
  std::unique_ptr<Harness> h_;
};

}  // namespace dugong::e2e
