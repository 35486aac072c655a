// Follows the cluster-wide postgres configuration (<root>/config, pg/cluster_config.h):
// each version seen in ZooKeeper is validated and handed to the postgres adapter, which
// rewrites dugong.conf and pg_hba.conf and reloads postgres, whatever this peer's role.
// A configuration that does not validate (or of a newer format), or that holds what this
// host does not allow (pg/cluster_config_guard.h: a setting that runs a command, a value
// that breaks a guarantee, an unsafe hba line, unless clusterConfig.allowUnsafe lists it),
// is refused with one log line and the last one applied stays in effect. The settings
// this host's own postgres.settings override are logged once per version. One application at a time; a version that
// arrives meanwhile is applied next (only the newest).
//
// Replication (docs/decisions/0079-quorum-commit.md section 2, 0089): every agent hands
// the state machine what is wanted of replication (ReplicationWanted, through
// ZkCoordinator::deliverReplicationWanted) at each version it accepts: the cluster
// configuration's replication block when it has one, which wins as every cluster-wide
// setting does (one primary moves the whole cluster's state), else this host's
// dugong.yaml block when it has one (the fallback). Nothing is delivered before the node
// is first read, nor when neither has a block, so the primary keeps the state's mode.
//
// Threading: on the agent's io_context, like everything in the agent.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/daemon_env.h"
#include "pg/adapter.h"
#include "pg/cluster_config.h"
#include "pg/cluster_config_guard.h"

namespace dugong::agent {

class ClusterConfigFollower {
 public:
  // REQUIRES: `coordinator` and `pg` outlive this object.
  // `host`: what this host's dugong.yaml allows; `hostSettings`: its postgres.settings;
  // `hostReplication`: its replication block (nullopt: none).
  ClusterConfigFollower(ZkCoordinator& coordinator, pg::PgAdapter& pg, std::string path, pg::HostAllowance host,
                        std::map<std::string, std::string> hostSettings,
                        std::optional<ReplicationWanted> hostReplication = std::nullopt);
  ClusterConfigFollower(const ClusterConfigFollower&) = delete;
  ClusterConfigFollower& operator=(const ClusterConfigFollower&) = delete;

  // The version of <root>/config last applied (-1: none yet, or the node is absent).
  int32_t appliedVersion() const { return appliedVersion_; }
  // Why the newest version seen was refused ("" when it was not).
  const std::string& refusal() const { return refusal_; }
  // For /state: {"appliedVersion": N or null, "appliedAt": ms or null, "refused":
  // "version M: why" or null, "shadowed": the cluster's settings this host's own
  // postgres.settings override (operator review P5), "replication": {"mode", "k", "size",
  // "from": "cluster" or "host"} as last delivered, or null}.
  nlohmann::json statusJson() const;

 private:
  void onNode(StateNode node);
  void deliverReplication(int32_t version, const std::optional<pg::ClusterReplication>& cluster);
  void applyNext();
  void refuse(int32_t version, const std::string& why);

  pg::PgAdapter& pg_;
  std::string path_;
  pg::HostAllowance host_;
  std::map<std::string, std::string> hostSettings_;
  ZkCoordinator& coordinator_;
  std::optional<ReplicationWanted> hostReplication_;
  std::optional<std::pair<ReplicationWanted, std::string>> replicationDelivered_;  // and from where
  std::string refusal_;  // why refusedVersion_ was refused; "" once a version as new is applied
  int32_t refusedVersion_ = -1;
  std::optional<std::pair<int32_t, pg::ClusterConfig>> next_;  // waiting for the one in flight
  bool inFlight_ = false;
  int32_t appliedVersion_ = -1;
  int64_t appliedAtMs_ = 0;
  std::vector<std::string> shadowed_;  // of the newest version seen  // when it was applied (wall clock): a later status sample shows its pending restarts
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace dugong::agent
