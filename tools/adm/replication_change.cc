#include "tools/adm/replication_change.h"

#include "tools/adm/table.h"

namespace dugong::adm {

int publishedStateFormat(const std::string& electionData) {
  auto j = nlohmann::json::parse(electionData, nullptr, false);
  if (!j.is_object()) return 0;
  auto f = j.find("stateFormat");
  return f != j.end() && f->is_number_integer() ? f->get<int>() : 0;
}

std::vector<std::string> peersNotReading(const PeerList& active, const std::map<std::string, std::string>& electionData,
                                         int format) {
  std::vector<std::string> out;
  for (const auto& p : active) {
    auto d = electionData.find(p.id);
    if (d == electionData.end() || publishedStateFormat(d->second) < format) out.push_back(p.id);
  }
  return out;
}

std::optional<bool> agentRunsQuorum(const nlohmann::json& status) {
  if (!status.is_object()) return std::nullopt;
  auto peer = status.find("peer");
  if (peer == status.end() || !peer->is_object()) return false;
  auto q = peer->find("quorum");
  return q != peer->end() && q->is_object();
}

ReplicationFacts replicationFacts(const ClusterView& view, const std::map<std::string, std::string>& electionData) {
  ReplicationFacts f;
  f.oneNodeWriteMode = view.state.oneNodeWriteMode;
  f.primary = view.state.primary.id;
  for (const auto& identity : view.active) {
    PresentPeer p;
    p.identity = identity;
    if (auto d = electionData.find(identity.id); d != electionData.end()) p.stateFormat = publishedStateFormat(d->second);
    if (const PeerView* v = view.find(identity.id)) p.runsQuorum = agentRunsQuorum(v->status);
    f.present.push_back(std::move(p));
  }
  return f;
}

Result<ReplicationCheck> checkReplicationChange(const std::optional<pg::ClusterReplication>& before,
                                                const std::optional<pg::ClusterReplication>& next,
                                                const ReplicationFacts& facts) {
  ReplicationCheck out;
  if (before == next) return out;
  if (facts.oneNodeWriteMode) {
    return Error{"the cluster is in one-node-write mode (its primary writes alone, with no standby to wait for): "
                 "replication.* is not changed there; leave one-node-write mode first"};
  }
  if (!next) return out;
  if (auto ok = pg::validateReplication(*next); !ok) return Error{ok.error()};
  if (next->mode != ReplicationMode::kQuorum) return out;
  std::vector<std::string> old, unknown, eligible;
  for (const auto& p : facts.present) {
    const bool reads2 = p.stateFormat >= 2 || p.runsQuorum.value_or(false);
    if (!reads2 && !p.runsQuorum) {
      unknown.push_back(p.identity.id);
    } else if (!reads2) {
      old.push_back(p.identity.id);
    } else if (p.identity.id != facts.primary && !p.identity.tags.nofailover) {
      eligible.push_back(p.identity.id);
    }
  }
  if (!old.empty()) {
    return Error{"mode quorum needs every present peer to read cluster-state format 2, and " + joinWithCommas(old) +
                 (old.size() == 1 ? " does" : " do") +
                 " not (no \"stateFormat\": 2 in its election node, and its agent does not run quorum mode): it "
                 "would halt on the first quorum state; upgrade it (an older dugong reads format 2 only with "
                 "`replication: {mode: quorum}` in its dugong.yaml) and restart its agent first"};
  }
  if (!unknown.empty()) {
    return Error{"mode quorum needs every present peer to read cluster-state format 2, and whether " +
                 joinWithCommas(unknown) + (unknown.size() == 1 ? " does" : " do") +
                 " cannot be told (no \"stateFormat\" in its election node, and its agent does not answer)"};
  }
  if (next->size > static_cast<int>(eligible.size())) {
    out.warnings.push_back("replication.size " + std::to_string(next->size) + " is more than the " +
                           std::to_string(eligible.size()) + " present peers that may be members (" +
                           (eligible.empty() ? std::string("none") : joinWithCommas(eligible)) +
                           "; not the primary, none tagged nofailover): the primary fills the set as peers come");
  }
  return out;
}

}  // namespace dugong::adm
