// Operator promote requests (the `promote` field of the cluster state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "statemachine/cluster_state.h"
#include "statemachine/result.h"
#include "statemachine/time_format.h"

namespace dugong {

struct PromoteRequest {
  std::string id;                   // the peer to promote
  std::string role;                 // its current role: "sync" or "async"
  std::optional<int64_t> asyncIndex;  // its place in the async chain, for "async"
  int64_t generation = 0;           // the generation the request was made in
  EpochMs expireTime = 0;
};

// Validates a raw promote request against the state it was found in, at time `now`, in
// this order, and says the first reason it is invalid:
//   1. schema: id string; role "sync" or "async"; asyncIndex integer or absent;
//      generation integer; expireTime string;
//   2. expireTime parses (ISO-8601 or epoch ms);
//   3. generation equals the state's;
//   4. expireTime has not passed;
//   5. for async: asyncIndex is present, in range, and async[asyncIndex] is `id`;
//   6. for sync: `id` is the state's sync (in quorum mode, format 2: a member).
Result<PromoteRequest> validatePromote(const nlohmann::json& promote, const ClusterState& state, EpochMs now);

}  // namespace dugong
