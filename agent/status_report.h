// What the agent reports about itself: the /state document, the /metrics text, and the
// two predicates the load-balancer endpoints rest on. Pure functions of a snapshot of
// the driver, the ZooKeeper session and the last postgres status.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "driver/driver.h"
#include "driver/env.h"
#include "agent/hooks.h"
#include "pg/pg_status.h"
#include "statemachine/cluster_state.h"
#include "statemachine/identity.h"
#include "statemachine/peer.h"

namespace dugong::agent {

struct StatusSources {
  const driver::Runner& driver;
  driver::CoordinatorStatus zk;
  const pg::PgStatus& postgres;
  std::optional<HookStatus> hooks;  // nullopt: no hook configured
  nlohmann::json request;           // the last operator request (agent/request_follower.h)
  const PeerIdentity& identity;
  std::string cluster;
  int64_t uptimeSeconds = 0;
  // The cluster configuration (agent/cluster_config_follower.h): the version applied,
  // and why the newest one was refused, if it was.
  nlohmann::json clusterConfig;
};

// The primary role applied, not only decided (until its transition has finished, roles
// and passwords set up, a running postgres is not yet the cluster's primary), and not
// while writes are stopped (ZooKeeper lost: the driver's flag is up before the status
// poll sees postgres read-only, and stays up until the stop is lifted).
bool isWritablePrimary(const driver::Runner& driver, const pg::PgStatus& postgres);
// The sync, an async or a standby cluster's leader running the configuration its role
// wants (no transition in flight, no newer one waiting), in recovery, its WAL receiver
// streaming.
bool isStreamingReplica(const driver::Runner& driver, const pg::PgStatus& postgres);
// A standby cluster's leader following its source (docs/decisions/0083 9.1): streaming
// from it, as isStreamingReplica; from a pgBackRest repository, which streams nothing,
// running its wanted configuration in recovery with the repository read by its last lag
// sample (leaderFollowsSource).
bool isStreamingStandbyLeader(const driver::Runner& driver, const pg::PgStatus& postgres);
bool leaderFollowsSource(SourceKind kind, bool streamingReplica, bool runsWantedConfig, const pg::PgStatus& postgres);
// On a standby: the WAL it has received but not yet replayed, in bytes (receive - replay).
std::optional<uint64_t> replayBacklogBytes(const pg::PgStatus& postgres);

nlohmann::json stateJson(const StatusSources& s);
// Prometheus text format 0.0.4.
std::string metricsText(const StatusSources& s);
// Its replication gauges (docs/decisions/0079 6.5): the mode of the last cluster state
// seen; in quorum mode k, the set's size, the members a takeover reads, and on the
// writable primary the members that acknowledge commits now (streaming, sync_state
// "quorum"): fewer than k and commits wait.
std::string replicationMetricsText(Role role, bool writablePrimary, const std::optional<ClusterState>& state,
                                   const pg::PgStatus& postgres);

}  // namespace dugong::agent
