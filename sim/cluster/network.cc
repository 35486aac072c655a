// The agents' network in the cluster simulator: it carries the failsafe's request
// (driver/failsafe.h) from a primary to its sync and the answer back, with delays and the
// links the faults cut (quorum-loss, faults/zookeeper.cc).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

void NodeEnv::askFailsafe(const PeerIdentity& to, const driver::FailsafeRequest& request, int64_t timeoutMs,
                          std::function<void(Result<driver::FailsafeAnswer>)> done) {
  w_.askFailsafe(n_, inc_, to, request, timeoutMs, std::move(done));
}

void World::cutLink(int a, int b, int64_t until) {
  auto& u = linkCutUntil_[{std::min(a, b), std::max(a, b)}];
  u = std::max(u, until);
}

bool World::linkCut(int a, int b) const {
  auto it = linkCutUntil_.find({std::min(a, b), std::max(a, b)});
  return it != linkCutUntil_.end() && now_ < it->second;
}

// Most messages take milliseconds; some wait behind a busy link or a busy agent.
int64_t World::networkDelay() { return rngNet_.chance(80) ? rngNet_.between(200, 2000) : rngNet_.between(1, 20); }

// The request reaches the asked agent unless the link is cut (or that agent is down) as
// it travels; so does the answer. The asker hears the answer or, at its bound, an error.
void World::askFailsafe(int from, uint64_t inc, const PeerIdentity& to, const driver::FailsafeRequest& request,
                        int64_t timeoutMs, std::function<void(Result<driver::FailsafeAnswer>)> done) {
  const int target = nodeOf(to.id);
  auto answered = std::make_shared<bool>(false);
  auto finish = [this, from, inc, answered, done = std::move(done)](Result<driver::FailsafeAnswer> r) {
    if (*answered) return;
    *answered = true;
    if (alive(from, inc)) done(std::move(r));
  };
  const std::string asker = node(from).identity.id;
  trace('N', [&] {
    return asker + " -> " + to.id + ": failsafe " + (request.release ? "release" : "request") + " (generation " +
           std::to_string(request.generation) + ", " + std::to_string(request.durationMs) + " ms)";
  });
  after(timeoutMs, [finish] { finish(Error{"no answer in time"}); });
  if (target < 0) return;
  after(networkDelay(), [this, from, target, request, finish, asker] {
    if (linkCut(from, target) || !node(target).up || !node(target).driver || node(target).driver->paused()) {
      return trace('N', [&] { return "failsafe request from " + asker + " lost on its way"; });
    }
    driver::FailsafeAnswer a = node(target).driver->onFailsafeRequest(request);
    if (!request.release) checkPromise(target, asker, a);
    trace('N', [&] {
      return node(target).identity.id + " -> " + asker + ": " + (a.granted ? "promised" : "refused") + " (" + a.reason + ")";
    });
    after(networkDelay(), [this, from, target, a, finish] {
      if (linkCut(from, target)) return trace('N', [&] { return std::string("failsafe answer lost on its way"); });
      finish(a);
    });
  });
}

}  // namespace dugong::clustersim::world_internal
