// The cluster-wide replication setting (`dugong-adm config set replication.mode=quorum
// replication.k=1 replication.size=2`, docs/decisions/0079-quorum-commit.md 6.5): what
// is checked against the cluster before it is written, beside the configuration's own
// rules (pg::validateReplication). Pure: it looks at facts read before.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/cluster_view.h"
#include "pg/cluster_config.h"
#include "statemachine/result.h"

namespace dugong::adm {

// A peer with an election node, as the check needs it.
struct PresentPeer {
  PeerIdentity identity;  // from its election node (its tags are the ones in force)
  // The highest cluster-state format it reads, as its election node publishes it
  // ("stateFormat"; 0 when it publishes none).
  int stateFormat = 0;
  // Its agent's /state: whether it runs quorum mode's rules (peer.quorum is there: it reads
  // format 2); nullopt when the agent did not answer.
  std::optional<bool> runsQuorum;
};

struct ReplicationFacts {
  bool oneNodeWriteMode = false;
  std::string primary;  // "" without a state
  std::vector<PresentPeer> present;
};

// "stateFormat" of an election node's JSON (0 when absent or not a whole number).
int publishedStateFormat(const std::string& electionData);
// The present peers (`active`) whose election node publishes no "stateFormat" of at least
// `format`: agents older than a state a command would write (they would halt on it).
std::vector<std::string> peersNotReading(const PeerList& active, const std::map<std::string, std::string>& electionData,
                                         int format);
// Whether an agent's /state says it runs quorum mode (nullopt: no status).
std::optional<bool> agentRunsQuorum(const nlohmann::json& status);
// The facts from a view of the cluster (its state, present peers and agents' statuses)
// and the election nodes' data by peer id.
ReplicationFacts replicationFacts(const ClusterView& view, const std::map<std::string, std::string>& electionData);

struct ReplicationCheck {
  std::vector<std::string> warnings;  // written anyway; each said on one line
};

// Checks a change of the replication block from `before` (nullopt: none) to `next`
// (nullopt: the block removed). Nothing changed: nothing checked. Refused (the error, one
// line): the cluster in one-node-write mode; mode quorum while a present peer reads
// format 1 only (it would halt on the first format-2 state: neither its election node
// publishes stateFormat 2 nor its agent runs quorum mode, or its agent cannot tell).
// Warned: a size larger than the present peers that may be members (not the primary,
// not tagged nofailover): the primary fills the set as they come.
Result<ReplicationCheck> checkReplicationChange(const std::optional<pg::ClusterReplication>& before,
                                                const std::optional<pg::ClusterReplication>& next,
                                                const ReplicationFacts& facts);

}  // namespace dugong::adm
