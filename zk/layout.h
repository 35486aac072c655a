// The cluster's nodes in ZooKeeper (DESIGN.md):
//   <root>/state               the cluster state, JSON, versioned
//   <root>/election/<id>-<seq> one ephemeral sequential node per live peer (identity JSON)
//   <root>/history/<seq>       persistent sequential {"time", "state", "reason"?}
//   <root>/config              the cluster-wide postgres configuration, JSON, versioned
//                              (pg/cluster_config.h); absent until first written
//   <root>/config-history/<seq> persistent sequential {"time", "state", "reason"?}: one
//                              record per configuration write, the configuration in "state"
//   <root>/requests/<peer id>  an operator's request to one agent (restart or reload
//                              postgres), answered in the same node (agent/request.h)
// Pure helpers: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/identity.h"
#include "statemachine/result.h"
#include "statemachine/time_format.h"

namespace dugong::zk {

class Layout {
 public:
  explicit Layout(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  std::string state() const { return root_ + "/state"; }
  std::string election() const { return root_ + "/election"; }
  std::string history() const { return root_ + "/history"; }
  std::string config() const { return root_ + "/config"; }
  std::string configHistory() const { return root_ + "/config-history"; }
  std::string configHistoryPrefix() const { return configHistory() + "/"; }
  std::string requests() const { return root_ + "/requests"; }
  std::string request(const std::string& peerId) const { return requests() + "/" + peerId; }
  // The prefix passed to a sequential create of this peer's election node.
  std::string electionPrefix(const std::string& peerId) const { return election() + "/" + peerId + "-"; }
  std::string historyPrefix() const { return history() + "/"; }
  // The persistent nodes that must exist, parents first ("/dugong", "/dugong/c", ...).
  std::vector<std::string> persistentNodes() const;

 private:
  std::string root_;
};

// The sequence number ZooKeeper appended to a sequential node name ("db1-0000000042"
// -> 42), or nothing if the name does not end in "-<digits>" (or is all digits, for
// history nodes: "0000000007" -> 7, with allowBare).
std::optional<int64_t> sequenceOf(std::string_view name, bool allowBare = false);

// The peer id encoded in an election node name ("db-1-0000000042" -> "db-1").
std::optional<std::string> peerIdOf(std::string_view electionNodeName);

// Election children sorted by sequence number (session order); names that are not
// election nodes are dropped.
std::vector<std::string> sortElectionNodes(std::vector<std::string> names);

// History children sorted by sequence number; other names are dropped.
std::vector<std::string> sortHistoryNodes(std::vector<std::string> names);

// Identities in session order, keeping only the first node of a peer id that appears
// twice (a restarted peer whose previous session has not expired yet).
PeerList dedupeById(const PeerList& peers);

// The history record for a state write: {"time", "state", "reason"?}. The state is the
// parsed JSON of `stateBytes`, or the raw string when it is not JSON.
std::string historyRecord(EpochMs now, std::string_view stateBytes, const std::string& reason);

struct HistoryEntry {
  std::string node;      // "0000000042"
  int64_t sequence = 0;
  std::string data;      // the record's bytes
};

}  // namespace dugong::zk
