// Carries out operators' requests to this agent (agent/operator_request.h): watches
// <root>/requests/<this peer's id>; a new, unexpired request restarts or reloads
// postgres through the adapter (after any transition in flight), once. One line of log
// per request, with its outcome.
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

 private:
  void onNode(const StateNode& node);
  void finish(const std::string& state, const std::string& detail);

  pg::PgAdapter& pg_;
  std::string path_;
  std::function<EpochMs()> now_;
  std::optional<RequestStatus> last_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace dugong::agent
