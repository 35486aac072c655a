// The checks `dugong-adm promote` makes before it writes a promote request, and how it
// tells afterwards whether the request was carried out. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "statemachine/result.h"
#include "ops/cluster_view.h"

namespace dugong::adm {

struct PromoteArgs {
  std::string id;                      // the peer to promote
  std::string role;                    // its current role: "sync" or "async"
  std::optional<int64_t> asyncIndex;   // for "async": its index (found from the state when absent)
  int64_t expireSeconds = 60;          // how long the request stays valid
  uint64_t lagToIgnore = 16ull << 20;  // the candidate may lag its upstream by this many bytes
};

// Validates the request against the view, in this order, and returns the first reason
// to refuse, or the `promote` object to write ({"id", "role", "asyncIndex"?,
// "generation", "expireTime"}):
//   - arguments: role is "sync" or "async"; expireSeconds in [1, 86400]; asyncIndex
//     only for "async", and >= 0;
//   - the cluster is not frozen and not in one-node-write mode;
//   - no valid promote request is pending already;
//   - the peer holds that role (and that async index) in the state;
//   - sync: the sync is not tagged nofailover, and an async without that tag is in
//     ZooKeeper to become the new sync; async[0]: it is not tagged nofailover, and the
//     primary is in ZooKeeper to carry it out;
//   - the peer is in ZooKeeper, its agent answers, its postgres is online, its upstream
//     reports it streaming (synchronously, for the sync), and it lags its upstream by
//     at most lagToIgnore bytes.
Result<nlohmann::json> buildPromoteRequest(const ClusterView& view, const PromoteArgs& args);

enum class PromoteOutcome {
  kPending,     // the request is still in the state and has not expired
  kCarriedOut,  // the peer holds its new place
  kRemoved,     // the request is gone but the peer did not move (refused, or overtaken)
  kExpired,     // the request is still there but its expireTime has passed
};
const char* outcomeName(PromoteOutcome o);

// What became of `request` (as written by buildPromoteRequest) in `state` at `now`.
PromoteOutcome promoteOutcome(const nlohmann::json& request, const ClusterState& state, EpochMs now);

}  // namespace dugong::adm
