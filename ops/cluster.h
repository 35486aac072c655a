// Reading and changing a cluster from outside its peers, as dugong-adm and the agent's
// POST /switchover do: the connection to ZooKeeper, reading the cluster (state, active
// peers, agent statuses) and the bounded test-and-set update of the state.
#pragma once

#include <chrono>
#include <map>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ops/cluster_view.h"
#include "statemachine/cluster_state.h"
#include "statemachine/result.h"
#include "zk/client.h"
#include "zk/options.h"

namespace dugong::adm {

// Connects within the timeout. The error says which servers could not be reached.
Result<std::unique_ptr<zk::Client>> connectZk(const zk::ZkOptions& options, std::chrono::milliseconds timeout);

struct StateRead {
  ClusterState state;
  int32_t version = -1;
};
// Reads and validates the state. A missing state node is an error naming the path
// ("no cluster at /dugong/x: ..."), as is an invalid state. `formats`: what the caller
// reads; every format by default (docs/decisions/0089).
Result<StateRead> readClusterState(zk::Client& client,
                                   ClusterState::Formats formats = ClusterState::Formats::kAll);

// The cluster as ZooKeeper and (with `agents`) the peers' agents see it now. Agents are
// asked in parallel, each bounded by `agentTimeout`.
Result<ClusterView> fetchView(zk::Client& client, const std::string& cluster, bool agents,
                              std::chrono::milliseconds agentTimeout = std::chrono::seconds(3),
                              ClusterState::Formats formats = ClusterState::Formats::kAll);

// What each present peer's election node holds, by peer id (nodes whose identity does
// not parse are left out).
std::map<std::string, std::string> electionDataById(const std::vector<zk::ElectionEntry>& nodes);

// Wall-clock now, in ms since the epoch.
EpochMs nowMs();

// A bounded test-and-set update. Each attempt re-reads the state and calls `change` on
// a copy: an error refuses (nothing is written), false means there is nothing to do,
// true writes the copy with the version read. A lost race re-reads and tries again, up
// to `attempts` times. A write whose outcome is unknown (connection lost) is resolved by
// re-reading: if the state now equals the one written, it counts as written. A change
// that leaves a state its readers refuse (a quorum or standby state put in one-node-write
// mode, say) is refused with their reason, and nothing is written.
struct UpdateResult {
  bool written = false;  // false: `change` said there was nothing to do
  ClusterState state;    // the state now in ZooKeeper (as written, or as read)
  int32_t version = -1;
  int attempts = 0;
};
Result<UpdateResult> updateState(zk::Client& client, const std::function<Result<bool>(ClusterState&)>& change,
                                 const std::string& reason, int attempts = 5,
                                 ClusterState::Formats formats = ClusterState::Formats::kAll);

}  // namespace dugong::adm
