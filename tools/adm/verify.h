// The health rules of `dugong-adm verify` (and the "problems" part of `show`). Pure:
// they look at a ClusterView only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/cluster_view.h"

namespace dugong::adm {

struct VerifyOptions {
  // A standby whose replay is further than this behind its upstream is a problem.
  uint64_t maxLagBytes = 64ull << 20;
};

struct Finding {
  bool problem = false;  // false: a check that passed (printed with -v)
  std::string text;
};

// Checks, in this order:
//   - the state itself: a frozen cluster (with its reason), one-node-write mode (noted,
//     not a problem), a promote request that is invalid or expired (a pending valid one
//     is noted);
//   - the primary: in ZooKeeper, its agent answers, postgres online and writable, and
//     (archive_mode on) its WAL archiving not failing; in a standby cluster its standby
//     leader instead, by verifyStandbyLeader (tools/adm/standby_view.h): receiving from
//     the source, not stalled, the source's position read, and the sync not synchronous;
//   - the sync: in ZooKeeper, its agent answers, postgres online, and the primary
//     reports it streaming with sync_state "sync";
//   - in quorum mode (a format-2 state, docs/decisions/0079), instead of the sync: each
//     member as a sync, streaming with sync_state "quorum"; the rule the primary's
//     postgres runs (its agent's applied rule, and no peer outside the set counted)
//     against the state's; and that k members acknowledge. While the primary has a
//     membership step in flight (its /state's peer.quorum.step), a difference the step
//     makes is noted as such, not a problem;
//   - that there is an async at all (without one the sync cannot take over);
//   - that the sync is not tagged nofailover, and that some async is not (else
//     nobody could take over);
//   - each async: in ZooKeeper, its agent answers, postgres online, its upstream
//     reports it streaming;
//   - lag: each standby within maxLagBytes of its upstream, and its replay not paused;
//   - deposed peers waiting for a rebuild; active peers that have no role;
//   - a peer whose agent refused the cluster's configuration (the version and why);
//   - an agent that reports its state machine halted.
std::vector<Finding> verifyCluster(const ClusterView& view, const VerifyOptions& options = {});

inline bool anyProblem(const std::vector<Finding>& findings) {
  for (const auto& f : findings) {
    if (f.problem) return true;
  }
  return false;
}

}  // namespace dugong::adm
