// Carries out operators' requests to this agent (agent/operator_request.h): watches
// <root>/requests/<this peer's id>; a new, unexpired request restarts or reloads
// postgres through the adapter (after any transition in flight), once. The HTTP API's
// POST /restart and /reload come in through carryOut(): the same step, log and /state
// report. One request at a time: a request node that arrives while another request
// runs waits for it; carryOut() is refused. One line of log per request, with its
// outcome.
//
// Threading: on the agent's io_context.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent/daemon_env.h"
#include "agent/operator_request.h"
#include "pg/adapter.h"

namespace dugong::agent {

class RequestFollower {
 public:
  // REQUIRES: `coordinator` and `pg` outlive this object. `now` gives wall-clock ms.
  RequestFollower(ZkCoordinator& coordinator, pg::PgAdapter& pg, std::string path, std::function<EpochMs()> now);
  RequestFollower(const RequestFollower&) = delete;
  RequestFollower& operator=(const RequestFollower&) = delete;

  // The last request seen (null before the first).
  nlohmann::json statusJson() const { return last_ ? last_->toJson() : nlohmann::json(); }

  // Carries out `request` (its expiry is not looked at: the caller asked just now) and
  // calls `done` with its outcome ("done" or "failed"). When another request is running,
  // nothing is done, `done` is never called, and that request is returned.
  std::optional<RequestStatus> carryOut(const OperatorRequest& request,
                                        std::function<void(const RequestStatus&)> done);

 private:
  void onNode(const StateNode& node);
  void run(const OperatorRequest& r, std::function<void(const RequestStatus&)> done);
  void finish(const std::string& state, const std::string& detail);
  bool running() const { return last_ && last_->state == "running"; }

  pg::PgAdapter& pg_;
  std::string path_;
  std::function<EpochMs()> now_;
  std::optional<RequestStatus> last_;
  std::string lastNodeId_;                // the last request node carried out (or refused)
  std::optional<StateNode> waitingNode_;  // arrived while a request ran
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace dugong::agent
