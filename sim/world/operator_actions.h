// The operator of both simulators: the cluster-state changes of dugong-adm's commands
// (tools/adm) with the checks those commands make, as functions of the current state
// and of what ZooKeeper shows. A simulator writes the result with a test-and-set, as
// dugong-adm does. Rebuild's postgres half is PgFleet::rebuildAsStandby
// (sim_postgres.h); its state part is `rebuiltState`, written after postgres runs as a
// standby of the primary.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/cluster_state.h"
#include "statemachine/result.h"

namespace dugong::simworld {

// dugong-adm freeze: `note` is what the command stores ({"date", "reason"}).
ClusterState frozenState(ClusterState s, nlohmann::json note);
// dugong-adm unfreeze.
ClusterState unfrozenState(ClusterState s);
// dugong-adm promote: the request as written (the peers validate it).
ClusterState promoteState(ClusterState s, nlohmann::json request);
// dugong-adm reap: a deposed peer whose agent is not in ZooKeeper leaves `deposed`.
Result<ClusterState> reapedState(ClusterState s, const std::string& id, const std::vector<std::string>& active);
// Whether dugong-adm rebuild runs for `id` (its refusals), before postgres is touched.
Result<bool> rebuildAllowed(const ClusterState& s, const std::string& id, const std::vector<std::string>& active);
// dugong-adm rebuild, after postgres was rebuilt: the peer leaves `deposed` (the
// primary then appends it as an async).
Result<ClusterState> rebuiltState(ClusterState s, const std::string& id);

}  // namespace dugong::simworld
