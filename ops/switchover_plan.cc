#include "ops/switchover_plan.h"

namespace dugong::adm {
namespace {

SwitchoverPlan refuse(int status, std::string reason) { return {std::nullopt, {status, std::move(reason)}}; }

}  // namespace

SwitchoverPlan planSwitchover(const ClusterState& s, const SwitchoverAsk& ask) {
  if (ask.leader && *ask.leader != s.primary.id) {
    return refuse(412, "the leader given, " + *ask.leader + ", is not the primary: the primary is " + s.primary.id +
                           " (generation " + std::to_string(s.generation) + "); nothing was changed");
  }
  if (s.frozen()) {
    return refuse(409, "the cluster is frozen (" + s.freeze.dump() + "): no switchover until `dugong-adm unfreeze`");
  }
  if (s.oneNodeWriteMode) {
    return refuse(409, "the cluster is in one-node-write mode: there is no peer to switch over to");
  }
  if (!ask.candidate) {
    const PeerIdentity* sync = firstSync(s);
    if (sync == nullptr) return refuse(409, "there is no sync to switch over to");
    return {SwitchoverTarget{sync->id, "sync", 1}, {}};
  }
  const std::string& id = *ask.candidate;
  const std::string role = roleInState(s, id);
  if (role == "primary") return refuse(409, id + " is the primary already: nothing to switch over");
  if (role == "deposed") return refuse(409, id + " is deposed: it must be rebuilt before it can take over");
  if (role.empty()) {
    std::string known = s.primary.id + " (primary)";
    if (s.sync) known += ", " + s.sync->id + " (sync)";
    if (s.quorum) {
      for (const auto& m : s.quorum->members) known += ", " + m.id + " (sync)";
    }
    for (const auto& a : s.async) known += ", " + a.id + " (async)";
    return refuse(404, "no peer " + id + " in the cluster; its peers are " + known);
  }
  if (role == "sync") return {SwitchoverTarget{id, "sync", 1}, {}};
  if (s.quorum) {  // the primary carries out no async's promotion in quorum mode (0079)
    return refuse(409, id + " is an async, which in quorum mode takes over only once it is a member of the "
                            "synchronous set (" + peerIds(s.quorum->members) +
                            "): switch over to a member, or raise replication.size first");
  }
  return {SwitchoverTarget{id, "async", indexOfPeer(s.async, id) + 2}, {}};
}

}  // namespace dugong::adm
