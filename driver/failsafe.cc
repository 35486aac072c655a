#include "driver/failsafe.h"

#include <algorithm>
#include <functional>

namespace dugong::driver {

namespace {
// Why `request` does not come from the primary of the generation the asked peer sees,
// with that peer its sync (nullopt: it does).
std::optional<std::string> notFromThePrimaryOfItsSync(const FailsafeRequest& request, const FailsafeGranterView& view) {
  if (!view.state) return "this peer has read no cluster state";
  const ClusterState& s = *view.state;
  const std::string gen = std::to_string(s.generation);
  if (s.generation != request.generation) {
    return "this peer sees generation " + gen + ", not " + std::to_string(request.generation);
  }
  // Quorum mode: any member of the set can take over, and each promises as the sync does
  // (docs/decisions/0079 4.7).
  if (s.quorum) {
    if (!containsPeer(s.quorum->members, view.selfId)) {
      return "this peer is not a member of generation " + gen + "'s synchronous set";
    }
  } else if (!s.sync || s.sync->id != view.selfId) {
    return "this peer is not the sync of generation " + gen;
  }
  if (s.primary.id != request.primaryId) {
    return request.primaryId + " is not the primary of generation " + gen + " (" + s.primary.id + " is)";
  }
  return std::nullopt;
}
}  // namespace

FailsafeAnswer decideFailsafeGrant(const FailsafeRequest& request, const FailsafeGranterView& view) {
  auto refuse = [](std::string why) { return FailsafeAnswer{false, std::move(why)}; };
  if (!view.enabled) return refuse("the failsafe is off on this peer (zookeeper.failsafe)");
  if (request.durationMs <= 0 || request.durationMs > kFailsafeMaxDurationMs) {
    return refuse("a promise of " + std::to_string(request.durationMs) + " ms is out of bounds (1.." +
                  std::to_string(kFailsafeMaxDurationMs) + ")");
  }
  if (request.durationMs > view.maxDurationMs) {
    return refuse("a promise of " + std::to_string(request.durationMs) + " ms is longer than this peer's own (" +
                  std::to_string(view.maxDurationMs) +
                  " ms, its session timeout), which a restart of its agent without the record of its promises "
                  "would hold for; give every peer the same zookeeper.sessionTimeoutMs");
  }
  if (auto why = notFromThePrimaryOfItsSync(request, view)) return refuse(*why);
  if (view.takingOver) return refuse("this peer is taking over already");
  if (!view.switchoverToSelf.empty()) return refuse("a switchover to this peer is requested: it takes over");
  if (!view.leaseInUse) {
    return refuse("this peer cannot tell whether it reaches ZooKeeper (no round trips through the leader)");
  }
  if (view.reachesZooKeeper) {
    return refuse("this peer reaches ZooKeeper (its last round trip through the leader was confirmed): the normal "
                  "rules apply");
  }
  return FailsafeAnswer{true, "no takeover by " + view.selfId + " for " + std::to_string(request.durationMs) +
                                  " ms from the request's arrival: it cannot reach ZooKeeper either"};
}

FailsafeAnswer decideFailsafeRelease(const FailsafeRequest& request, const FailsafeGranterView& view) {
  auto refuse = [](std::string why) { return FailsafeAnswer{false, std::move(why)}; };
  if (auto why = notFromThePrimaryOfItsSync(request, view)) return refuse(*why);
  if (view.switchoverToSelf.empty()) return refuse("this peer sees no switchover to itself requested");
  if (view.switchoverToSelf != request.promote) {
    return refuse("the switchover this peer sees requested is not the one released for");
  }
  return FailsafeAnswer{true, view.selfId + " is free of its promises to " + request.primaryId +
                                  ", which stopped postgres to hand over"};
}

bool reachesZooKeeper(int64_t lastSentAtMs, int64_t intervalMs, int64_t nowMs) {
  return nowMs - lastSentAtMs < intervalMs + intervalMs / 2;
}

int64_t extendPromise(std::optional<int64_t> promisedUntilMs, int64_t receivedAtMs, int64_t durationMs) {
  const int64_t next = receivedAtMs + durationMs;
  return promisedUntilMs ? std::max(*promisedUntilMs, next) : next;
}

std::optional<int64_t> kthLatestGrant(std::vector<int64_t> ends, int k) {
  if (k < 1 || ends.size() < static_cast<size_t>(k)) return std::nullopt;
  std::sort(ends.begin(), ends.end(), std::greater<>());
  return ends[static_cast<size_t>(k) - 1];
}

PeerList promisers(const ClusterState& state) { return state.quorum ? state.quorum->members : PeerList{*state.sync}; }

int64_t failsafePermissionEndMs(int64_t sentAtMs, int64_t durationMs, int64_t stopMarginMs) {
  const int64_t clockRate = (durationMs + 99) / 100;
  return sentAtMs + durationMs - clockRate - stopMarginMs;
}

}  // namespace dugong::driver
