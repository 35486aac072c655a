// A standby cluster as dugong-adm shows and checks it (docs/decisions/0083, phase 3):
// "standby cluster of <source>", the source's host its leader streams from, the lag
// (the leader's /state postgres.source, pg/source_lag.h), and the verify rules of a
// standby cluster's leader. Pure: they look at a ClusterView only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/cluster_view.h"

namespace dugong::adm {

// The state is a standby state (format 3 with `standby`).
bool isStandbyCluster(const ClusterView& view);

// The leader's lag sample (its /state's postgres.source), or null when the leader did
// not answer or publishes none.
nlohmann::json leaderLag(const ClusterView& view);

// The lines `show` adds for a standby cluster, label then text: "standby" ("standby
// cluster of hosts ..."), "source primary" (the host the leader streams from), "lag",
// "promote-cluster" (a pending request). Empty for a normal cluster.
std::vector<std::pair<std::string, std::string>> standbyShowLines(const ClusterView& view);
// The same for `show --json`: {"of", "leader", "sourcePrimary", "lag", "promote"}; null
// for a normal cluster.
nlohmann::json standbyShowJson(const ClusterView& view);

// In the rows of `show`, `peers` and `pg-status`: the state's primary of a standby
// cluster is its standby leader.
void labelStandbyLeader(const ClusterView& view, std::vector<StatusRow>& rows);

struct StandbyVerifyOptions {
  // The received position not moving for this long while the source's moves is a
  // problem (a sample a second: longer than a checkpoint's quiet spell of WAL).
  int64_t maxStallMs = 30'000;
};

// The standby leader's checks, in place of the primary's "writable" (problem, ok):
//   - it is in ZooKeeper, its agent answers, postgres online, in recovery;
//   - a WAL receiver streams from the source;
//   - its received position moves while the source's does (no stall longer than
//     maxStallMs), and the source answers its position reads;
//   - its lag, noted (not judged: the source's load decides it).
// Each finding as verify's: {problem, text}.
std::vector<std::pair<bool, std::string>> verifyStandbyLeader(const ClusterView& view,
                                                              const StandbyVerifyOptions& options = {});

}  // namespace dugong::adm
