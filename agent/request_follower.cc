#include "agent/request_follower.h"

#include <utility>

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
  if (!node.exists) {
    waitingNode_.reset();  // withdrawn (dugong-adm gave up) before its turn
    return;
  }
  auto r = OperatorRequest::parse(node.data);
  if (!r) {
    spdlog::warn("operator request at {} ignored: {}", path_, r.error());
    return;
  }
  if (lastNodeId_ == r->id) return;  // already carried out (or running)
  if (running()) {
    waitingNode_ = node;  // the latest node; looked at again once the running request ends
    return;
  }
  lastNodeId_ = r->id;
  if (r->expireTime < now_()) {
    last_ = RequestStatus{r->id, r->action, "running", ""};
    finish("refused", "expired at " + formatIso8601(r->expireTime) + " before this agent saw it");
    return;
  }
  run(*r, nullptr);
}

std::optional<RequestStatus> RequestFollower::carryOut(const OperatorRequest& request,
                                                       std::function<void(const RequestStatus&)> done) {
  if (running()) return last_;
  run(request, std::move(done));
  return std::nullopt;
}

// The step both ways share: the adapter's restart or reload, reported in /state.
void RequestFollower::run(const OperatorRequest& r, std::function<void(const RequestStatus&)> done) {
  last_ = RequestStatus{r.id, r.action, "running", ""};
  spdlog::info("operator request {} from {}: {} postgres", r.id, r.by.empty() ? "an operator" : r.by, r.action);
  std::weak_ptr<int> alive = alive_;
  auto finished = [this, alive, id = r.id, done = std::move(done)](Result<bool> ok) {
    if (alive.expired() || !last_ || last_->id != id) return;
    finish(ok ? "done" : "failed", ok ? "" : ok.error());
    if (done) done(*last_);
    if (waitingNode_ && !running()) onNode(*std::exchange(waitingNode_, std::nullopt));
  };
  if (r.action == "restart") {
    pg_.restartInPlace(std::move(finished));
  } else {
    pg_.reloadNow(std::move(finished));
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
