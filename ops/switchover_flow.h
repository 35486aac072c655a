// A switchover carried out: the candidate becomes the primary through promote requests
// (ops/promote_flow.h), one at a time, each written once the previous one has been
// carried out: an async moves up the chain to async[0], then becomes the sync, then the
// sync takes over (ops/switchover_plan.h). `dugong-adm switchover` and the agent's
// POST /switchover (agent/switchover.h) both run it.
//
// The first step is checked against the cluster as it is (planSwitchover, then the
// promote request's own checks: frozen, streaming, lag, nofailover): a refusal there
// changes nothing. A candidate that its upstream's last sample (its agent's, once a
// second) does not show streaming is looked at again for up to 2.5 s before that refusal
// is final: a stream that began a moment ago is waited for, not refused. A later step's checks are retried while the cluster settles from the
// last one (the new sync streams synchronously only once the primary has applied the
// generation), up to settleTimeout.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ops/switchover_plan.h"
#include "zk/client.h"

namespace dugong::adm {

struct SwitchoverOptions {
  SwitchoverAsk ask;
  // Who asks, for the history records: "dugong-adm switchover by USER@HOST", "the agent
  // of peer1".
  std::string by;
  std::chrono::seconds writableTimeout{60};
  std::chrono::seconds settleTimeout{60};
  // Polled while waiting: true makes it stop (the request already written stays until it
  // is carried out or expires).
  std::function<bool()> stop;
  // One line for the operator per step (optional).
  std::function<void(const std::string&)> progress;
};

struct SwitchoverDone {
  // 200: the candidate is the writable primary. 404, 409, 412: refused before anything
  // was written (switchover_plan.h, or the first promote request's checks: 409). 503: a
  // step failed, ZooKeeper could not be read, or the new primary is not writable in time.
  int status = 503;
  std::string error;                              // when status != 200
  std::string candidate;                          // the peer asked for (the sync when none was named)
  int requests = 0;                               // promote requests it takes (switchover_plan.h)
  std::optional<double> writableAfterSeconds;     // from the last step carried out
  nlohmann::json steps = nlohmann::json::array(); // {"request", "outcome", "message"} per request written
  bool refusedBeforeWriting() const { return status == 404 || status == 409 || status == 412; }
};

SwitchoverDone runSwitchover(zk::Client& client, const std::string& cluster, const SwitchoverOptions& options);

// Only the first step's checks, writing nothing: the target, or the refusal (status
// 404/409/412 as above; 503 when the cluster could not be read).
SwitchoverDone checkSwitchover(zk::Client& client, const std::string& cluster, const SwitchoverAsk& ask);

}  // namespace dugong::adm
