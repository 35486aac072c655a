// What a switchover (`dugong-adm switchover`, the agent's POST /switchover) asks of the
// cluster before its first promote request: which peer becomes the primary, and how
// many promote requests that takes. Pure: the state in, the target or the refusal out.
//
// The state machine moves a peer one place per promote request (Manatee's `promote`:
// the sync takes over; async[0] becomes the sync; async[N] moves to async[N-1]), so a
// switchover to async[N] is N + 2 requests, each written once the previous one has been
// carried out (ops/switchover_flow.h).
#pragma once

#include <optional>
#include <string>

#include "statemachine/cluster_state.h"
#include "ops/cluster_view.h"

namespace dugong::adm {

// What the operator asked for. Both optional: no candidate means the sync; a leader,
// when given, must name the current primary (Patroni's `leader`, a guard against acting
// on a cluster that changed since the operator looked at it).
struct SwitchoverAsk {
  std::optional<std::string> candidate;
  std::optional<std::string> leader;
};

// Why a switchover is refused before anything is written, with the HTTP status POST
// /switchover answers (the CLI maps it to an exit code).
struct SwitchoverRefusal {
  int status = 409;  // 404 no such peer; 409 not possible now; 412 the leader is not the primary
  std::string reason;
};

struct SwitchoverTarget {
  std::string id;    // the peer that becomes the primary
  std::string role;  // its role now: "sync" or "async"
  int requests = 1;  // promote requests it takes: 1 for the sync, N + 2 for async[N]
};

// Refused, in this order: a leader that is not the primary (412); the cluster frozen or
// in one-node-write mode (409); a candidate that is the primary already (409), deposed
// (409, it must be rebuilt first) or not in the state (404); no candidate and no sync
// (409). Whether the candidate streams, lags, is tagged nofailover or is in ZooKeeper is
// checked by each promote request's own checks (ops/promote_check.h), against the
// peers as they are then.
struct SwitchoverPlan {
  std::optional<SwitchoverTarget> target;
  SwitchoverRefusal refusal;  // when !target
};
SwitchoverPlan planSwitchover(const ClusterState& state, const SwitchoverAsk& ask);

}  // namespace dugong::adm
