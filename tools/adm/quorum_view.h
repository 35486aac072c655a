// A quorum-mode cluster as dugong-adm shows it (docs/decisions/0079-quorum-commit.md 6.5):
// the mode, k and the synchronous set of a format-2 state, and each member's row labelled
// as a synchronous standby. Pure: they look at a cluster state and rows only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/cluster_view.h"
#include "statemachine/cluster_state.h"

namespace dugong::adm {

// `show`'s "replication" line: "quorum: ANY 1 (db2, db3): a commit waits for 1 of 2
// members, a takeover reads 2 of them"; "sync" for a state of sync mode.
std::string replicationLine(const ClusterState& state);
// The same for `show --json`: {"mode": "quorum", "k", "members": [ids], "readQuorum"}, or
// {"mode": "sync", "sync": id or null}.
nlohmann::json replicationJson(const ClusterState& state);

// In the rows of `show`: a member of the set is a synchronous standby, "sync (member i of
// N)" (listed by ops/cluster_view.h as unassigned, since the state names no sync).
void labelQuorumMembers(const ClusterState& state, std::vector<StatusRow>& rows);

}  // namespace dugong::adm
