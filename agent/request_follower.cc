#include "agent/request_follower.h"

#include <spdlog/spdlog.h>

namespace dugong::agent {

RequestFollower::RequestFollower(ZkCoordinator& coordinator, pg::PgAdapter& pg, std::string path,
                                 std::function<EpochMs()> now)
    : pg_(pg), path_(std::move(path)), now_(std::move(now)) {
  std::weak_ptr<int> alive = alive_;
  coordinator.watchNode(path_, [this, alive](StateNode node) {
    if (!alive.expired()) onNode(node);
  });
}

void RequestFollower::onNode(const StateNode& node) {
  if (!node.exists) return;
  auto r = OperatorRequest::parse(node.data);
  if (!r) {
    spdlog::warn("operator request at {} ignored: {}", path_, r.error());
    return;
  }
  if (last_ && last_->id == r->id) return;  // already carried out (or running)
  last_ = RequestStatus{r->id, r->action, "running", ""};
  if (r->expireTime < now_()) {
    finish("refused", "expired at " + formatIso8601(r->expireTime) + " before this agent saw it");
    return;
  }
  spdlog::info("operator request {} from {}: {} postgres", r->id, r->by.empty() ? "an operator" : r->by, r->action);
  std::weak_ptr<int> alive = alive_;
  auto done = [this, alive, id = r->id](Result<bool> ok) {
    if (alive.expired() || !last_ || last_->id != id) return;
    finish(ok ? "done" : "failed", ok ? "" : ok.error());
  };
  if (r->action == "restart") {
    pg_.restartInPlace(done);
  } else {
    pg_.reloadNow(done);
  }
}

void RequestFollower::finish(const std::string& state, const std::string& detail) {
  last_->state = state;
  last_->detail = detail;
  if (state == "done") {
    spdlog::info("operator request {} ({}): done", last_->id, last_->action);
  } else {
    spdlog::warn("operator request {} ({}): {}: {}", last_->id, last_->action, state, detail);
  }
}

}  // namespace dugong::agent
