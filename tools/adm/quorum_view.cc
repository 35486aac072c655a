#include "tools/adm/quorum_view.h"

#include "statemachine/quorum.h"

namespace dugong::adm {

std::string replicationLine(const ClusterState& state) {
  if (!state.quorum) return "sync";
  const Quorum& q = *state.quorum;
  const int n = static_cast<int>(q.members.size());
  return "quorum: ANY " + std::to_string(q.k) + " (" + peerIds(q.members) + "): a commit waits for " +
         std::to_string(q.k) + " of " + std::to_string(n) + " members, a takeover reads " +
         std::to_string(readQuorum(n, q.k)) + " of them";
}

nlohmann::json replicationJson(const ClusterState& state) {
  if (!state.quorum) return {{"mode", "sync"}, {"sync", state.sync ? nlohmann::json(state.sync->id) : nullptr}};
  const Quorum& q = *state.quorum;
  nlohmann::json members = nlohmann::json::array();
  for (const auto& m : q.members) members.push_back(m.id);
  return {{"mode", "quorum"},
          {"k", q.k},
          {"members", members},
          {"readQuorum", readQuorum(static_cast<int>(q.members.size()), q.k)}};
}

void labelQuorumMembers(const ClusterState& state, std::vector<StatusRow>& rows) {
  if (!state.quorum) return;
  const auto& members = state.quorum->members;
  for (auto& r : rows) {
    const int i = indexOfPeer(members, r.id);
    if (i < 0) continue;
    r.role = "sync";
    r.cells["role"] = "sync (member " + std::to_string(i + 1) + " of " + std::to_string(members.size()) + ")";
  }
}

}  // namespace dugong::adm
