#include "sim/world/operator_actions.h"

#include <algorithm>
#include <utility>

namespace dugong::simworld {
namespace {

bool isActive(const std::vector<std::string>& active, const std::string& id) {
  return std::find(active.begin(), active.end(), id) != active.end();
}

}  // namespace

ClusterState frozenState(ClusterState s, nlohmann::json note) {
  s.freeze = std::move(note);
  return s;
}

ClusterState unfrozenState(ClusterState s) {
  s.freeze = nullptr;
  return s;
}

ClusterState promoteState(ClusterState s, nlohmann::json request) {
  s.promote = std::move(request);
  return s;
}

Result<ClusterState> reapedState(ClusterState s, const std::string& id, const std::vector<std::string>& active) {
  int i = indexOfPeer(s.deposed, id);
  if (i < 0) return Error{id + " is not deposed; nothing reaped"};
  if (isActive(active, id)) return Error{id + " is still in ZooKeeper (its agent runs): rebuild it instead"};
  s.deposed.erase(s.deposed.begin() + i);
  return s;
}

Result<bool> rebuildAllowed(const ClusterState& s, const std::string& id, const std::vector<std::string>& active) {
  if (s.primary.id == id || (s.sync && s.sync->id == id)) {
    return Error{id + " is the primary or the sync: it is never rebuilt"};
  }
  if (s.oneNodeWriteMode) return Error{"the cluster is in one-node-write mode: no rebuild to do"};
  if (!containsPeer(s.deposed, id) && isActive(active, id)) return Error{id + " is not deposed and its agent runs"};
  if (!isActive(active, s.primary.id)) return Error{"the primary " + s.primary.id + " is not in ZooKeeper"};
  return true;
}

Result<ClusterState> rebuiltState(ClusterState s, const std::string& id) {
  int i = indexOfPeer(s.deposed, id);
  if (i < 0) return Error{id + " is not deposed"};
  s.deposed.erase(s.deposed.begin() + i);
  return s;
}

}  // namespace dugong::simworld
