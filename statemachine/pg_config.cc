#include "statemachine/pg_config.h"

namespace dugong {

const char* pgRoleName(PgRole role) {
  switch (role) {
    case PgRole::kPrimary:
      return "primary";
    case PgRole::kSync:
      return "sync";
    case PgRole::kAsync:
      return "async";
    case PgRole::kStandbyLeader:
      return "standby-leader";
    case PgRole::kNone:
      break;
  }
  return "none";
}

PgConfig PgConfig::primary(std::optional<PeerIdentity> downstream) {
  PgConfig c;
  c.role = PgRole::kPrimary;
  c.downstream = std::move(downstream);
  return c;
}

PgConfig PgConfig::firstPrimary(std::optional<PeerIdentity> downstream) {
  PgConfig c = primary(std::move(downstream));
  c.newCluster = true;
  return c;
}

PgConfig PgConfig::standby(PgRole role, PeerIdentity upstream, PeerIdentity restorePeer) {
  PgConfig c;
  c.role = role;
  c.upstream = std::move(upstream);
  c.restorePeer = std::move(restorePeer);
  return c;
}

PgConfig PgConfig::standbyLeader(SourceEndpoint source, bool newCluster) {
  PgConfig c;
  c.role = PgRole::kStandbyLeader;
  c.source = std::move(source);
  c.newCluster = newCluster;
  return c;
}

nlohmann::json PgConfig::toJson() const {
  auto peer = [](const std::optional<PeerIdentity>& p) { return p ? p->toJson() : nlohmann::json(nullptr); };
  nlohmann::json j = {{"role", pgRoleName(role)},
                      {"upstream", peer(upstream)},
                      {"downstream", peer(downstream)},
                      {"restorePeer", peer(restorePeer)}};
  if (newCluster) j["newCluster"] = true;
  if (initTimeline > 0) {
    j["initWal"] = initWal.toString();
    j["initTimeline"] = initTimeline;
  }
  if (quorum) {
    nlohmann::json members = nlohmann::json::array();
    for (const auto& m : quorum->members) members.push_back(m.toJson());
    j["quorum"] = {{"k", quorum->k}, {"members", members}};
  }
  if (source) j["source"] = source->toJson();
  if (demoted) j["demoted"] = true;
  if (repairAtOnce) j["repairAtOnce"] = true;
  return j;
}

}  // namespace dugong
