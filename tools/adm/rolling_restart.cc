#include "tools/adm/rolling_restart.h"

#include "ops/cluster_view.h"

namespace dugong::adm {

std::optional<std::string> roleChangedSince(const ClusterState& planned, const ClusterState& now,
                                            const std::string& id, const std::string& role) {
  const std::string held = roleInState(now, id);
  // A sync and an async restart alike (the walk waits for either to stream again): one
  // that the primary moved between them meanwhile is still a standby.
  auto standby = [](const std::string& r) { return r == "sync" || r == "async"; };
  const std::string rerun = ": nothing more restarted; run `dugong-adm restart --rolling` (or --pending) again, "
                            "which plans on the roles as they are now";
  if (held != role && !(standby(held) && standby(role))) {
    return "the roles changed since this restart began: " + id + " was " + role + " (generation " +
           std::to_string(planned.generation) + ") and is " + (held.empty() ? std::string("in no role") : held) +
           " now (generation " + std::to_string(now.generation) + ")" + rerun;
  }
  if (now.primary.id != planned.primary.id) {
    return "the primary changed since this restart began: " + planned.primary.id + " (generation " +
           std::to_string(planned.generation) + ") is now " + now.primary.id + " (generation " +
           std::to_string(now.generation) + ")" + rerun;
  }
  return std::nullopt;
}

std::string replayBoundPassed(const std::string& id, const std::string& role, WalPosition target,
                              std::optional<WalPosition> at, std::chrono::seconds bound) {
  return role + " " + id + " has not replayed the primary's WAL up to " + target.toString() + " within " +
         std::to_string(bound.count()) + " s (--wait; it is at " +
         (at ? at->toString() : std::string("an unknown position")) +
         "): not restarted, nor the peers after it. Its replay may be paused or held back by a query on it "
         "(max_standby_streaming_delay): `dugong-adm verify`, then run `dugong-adm restart --rolling` again";
}

}  // namespace dugong::adm
