// Rejoining a deposed peer (docs/rejoin.md): the policy the
// agent follows, and the cluster-state edit that returns a deposed peer to the cluster
// once its postgres follows the primary, shared by the agent's automatic rejoin and
// `dugong-adm rebuild`.
#pragma once

#include <optional>
#include <string>

#include "statemachine/cluster_state.h"
#include "statemachine/result.h"

namespace dugong {

// The configuration key `rejoin`.
enum class RejoinPolicy {
  kManual,  // Manatee's behaviour: a deposed peer waits for `dugong-adm rebuild`
  kFollow,  // rejoin at once when the data directory can follow the primary as it is
  kRewind,  // also pg_rewind a diverged ex-primary (its WAL after the fork is discarded)
};

const char* rejoinPolicyName(RejoinPolicy policy);
std::optional<RejoinPolicy> parseRejoinPolicy(const std::string& text);

// Removes `self` from `state.deposed`, provided the primary is still `primaryId` (the
// peer it was rebuilt from). False: `self` is not deposed (nothing to do). An error
// when the primary changed meanwhile.
Result<bool> releaseFromDeposed(ClusterState& state, const std::string& self, const std::string& primaryId);

}  // namespace dugong
