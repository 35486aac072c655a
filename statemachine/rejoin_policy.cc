#include "statemachine/rejoin_policy.h"

namespace dugong {

const char* rejoinPolicyName(RejoinPolicy policy) {
  switch (policy) {
    case RejoinPolicy::kManual: return "manual";
    case RejoinPolicy::kFollow: return "follow";
    case RejoinPolicy::kRewind: return "rewind";
  }
  return "?";
}

std::optional<RejoinPolicy> parseRejoinPolicy(const std::string& text) {
  for (RejoinPolicy p : {RejoinPolicy::kManual, RejoinPolicy::kFollow, RejoinPolicy::kRewind}) {
    if (text == rejoinPolicyName(p)) return p;
  }
  return std::nullopt;
}

Result<bool> releaseFromDeposed(ClusterState& state, const std::string& self, const std::string& primaryId) {
  int i = indexOfPeer(state.deposed, self);
  if (i < 0) return false;
  if (state.primary.id != primaryId) {
    return Error{"the primary changed (now " + state.primary.id + ", rebuilt from " + primaryId + ")"};
  }
  state.deposed.erase(state.deposed.begin() + i);
  return true;
}

}  // namespace dugong
