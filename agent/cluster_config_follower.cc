#include "agent/cluster_config_follower.h"

#include <chrono>

#include <spdlog/spdlog.h>

namespace dugong::agent {

ClusterConfigFollower::ClusterConfigFollower(ZkCoordinator& coordinator, pg::PgAdapter& pg, std::string path,
                                             pg::HostAllowance host, std::map<std::string, std::string> hostSettings,
                                             std::optional<ReplicationWanted> hostReplication)
    : pg_(pg),
      path_(std::move(path)),
      host_(std::move(host)),
      hostSettings_(std::move(hostSettings)),
      coordinator_(coordinator),
      hostReplication_(hostReplication) {
  std::weak_ptr<int> alive = alive_;
  coordinator.watchNode(path_, [this, alive](StateNode node) {
    if (!alive.expired()) onNode(std::move(node));
  });
}

nlohmann::json ClusterConfigFollower::statusJson() const {
  nlohmann::json replication;
  if (replicationDelivered_) {
    const auto& [w, from] = *replicationDelivered_;
    replication = pg::ClusterReplication{w.mode, w.k, w.size}.toJson();
    replication["from"] = from;
  }
  return {{"appliedVersion", appliedVersion_ >= 0 ? nlohmann::json(appliedVersion_) : nlohmann::json()},
          {"appliedAt", appliedVersion_ >= 0 ? nlohmann::json(appliedAtMs_) : nlohmann::json()},
          {"shadowed", shadowed_},
          {"refused", refusal_.empty() ? nlohmann::json() : nlohmann::json(refusal_)},
          {"replication", replication}};
}

void ClusterConfigFollower::deliverReplication(int32_t version, const std::optional<pg::ClusterReplication>& cluster) {
  if (!cluster && !hostReplication_) return;  // no wish: the state's mode is kept
  const ReplicationWanted wanted = cluster ? cluster->wanted() : *hostReplication_;
  const std::string from = cluster ? "cluster" : "host";
  if (replicationDelivered_) {
    const auto& [w, f] = *replicationDelivered_;
    if (w.mode == wanted.mode && w.k == wanted.k && w.size == wanted.size && f == from) return;
  }
  replicationDelivered_ = {wanted, from};
  spdlog::info("replication wanted: {} (from {})",
               pg::ClusterReplication{wanted.mode, wanted.k, wanted.size}.describe(),
               cluster ? "the cluster configuration, version " + std::to_string(version)
                       : std::string("this host's dugong.yaml: the cluster configuration has no replication block"));
  coordinator_.deliverReplicationWanted(wanted);
}

void ClusterConfigFollower::refuse(int32_t version, const std::string& why) {
  if (version < refusedVersion_) return;  // a newer version's refusal stays
  refusedVersion_ = version;
  refusal_ = "version " + std::to_string(version) + ": " + why;
}

void ClusterConfigFollower::onNode(StateNode node) {
  if (!node.exists || node.version < refusedVersion_) {  // removed, or removed and written again
    refusedVersion_ = -1;
    refusal_.clear();
  }
  pg::ClusterConfig config;  // absent: no cluster-wide settings
  if (node.exists) {
    auto parsed = pg::ClusterConfig::parse(node.data);
    auto valid = parsed ? pg::validateClusterConfig(*parsed) : Result<bool>(Error{parsed.error()});
    if (valid) valid = pg::checkAllowed(*parsed, host_);
    if (!valid) {
      refuse(node.version, valid.error());
      spdlog::error("cluster configuration {} version {} refused on this host; postgres keeps the last one applied "
                    "({}): {}",
                    path_, node.version,
                    appliedVersion_ >= 0 ? "version " + std::to_string(appliedVersion_) : std::string("none yet"),
                    valid.error());
      return;
    }
    config = std::move(parsed).value();
  }
  deliverReplication(node.version, config.replication);
  pg::PgOptions host;
  host.settings = hostSettings_;
  shadowed_ = pg::shadowedSettings(host, config);
  if (const auto& shadowed = shadowed_; !shadowed.empty()) {
    std::string names;
    for (const auto& k : shadowed) names += (names.empty() ? "" : ", ") + k;
    spdlog::warn("cluster configuration version {}: this host's postgres.settings set {} too; its own value is the "
                 "one in effect here, the cluster's has no effect on this host",
                 node.version, names);
  }
  next_ = {node.exists ? node.version : -1, std::move(config)};
  applyNext();
}

void ClusterConfigFollower::applyNext() {
  if (inFlight_ || !next_) return;
  const int32_t version = next_->first;
  pg::ClusterConfig config = std::move(next_->second);
  next_.reset();
  inFlight_ = true;
  std::weak_ptr<int> alive = alive_;
  pg_.applyClusterConfig(config, [this, alive, version](Result<pg::ClusterConfigApplied> r) {
    if (alive.expired()) return;
    inFlight_ = false;
    if (!r) {
      refuse(version, r.error());
      spdlog::error("cluster configuration version {} could not be applied: {}; tried again at its next change",
                    version, r.error());
    } else {
      appliedVersion_ = version;
      appliedAtMs_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
      if (refusedVersion_ <= version) refusal_.clear();
      std::string changed;
      for (const auto& k : r->changed) changed += (changed.empty() ? "" : ", ") + k;
      spdlog::info("cluster configuration version {} applied: settings changed: {}; hba {}; {}", version,
                   changed.empty() ? "none" : changed, r->hbaChanged ? "changed" : "unchanged",
                   r->reloaded ? "postgres reloaded" : "postgres not running, files written for its start");
    }
    applyNext();
  });
}

}  // namespace dugong::agent
