// A promote request written and followed to its outcome: what `dugong-adm promote` and
// the agent's POST /switchover (agent/switchover.h) both do once a request has been
// built by buildPromoteRequest (ops/promote_check.h).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ops/cluster.h"
#include "ops/promote_check.h"

namespace dugong::adm {

// Writes `request` with a bounded test-and-set that re-checks, on each attempt, that
// the generation is still `generation`, no other valid request is pending, the cluster
// is not frozen and the request still fits the state. `reason` goes to the history.
Result<UpdateResult> writePromoteRequest(zk::Client& client, const nlohmann::json& request, int64_t generation,
                                         const std::string& reason);

struct PromoteWait {
  PromoteOutcome outcome = PromoteOutcome::kPending;  // kPending: the state could not be read
  ClusterState last;      // the last state read
  double seconds = 0;     // from the write to the outcome
  std::string readError;  // the last read's error, for kPending
  std::string message;    // what happened, for operators
};

// Polls the state every 100 ms until the request is carried out, removed or expired
// (or `stop` says so, or the state stays unreadable 10 s past the expiry). An expired
// request that is still exactly ours is removed, with `reason` in the history.
PromoteWait waitForPromote(zk::Client& client, const nlohmann::json& request, ClusterState written,
                           const std::string& reason, const std::function<bool()>& stop = {});

// Waits up to `timeout` (or until `stop` says so) for GET <agent>/primary to answer 200.
// Returns the time it took.
std::optional<double> waitWritable(const PeerIdentity& peer, std::chrono::seconds timeout,
                                   const std::function<bool()>& stop = {});

}  // namespace dugong::adm
