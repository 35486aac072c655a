// Helpers for the dugong-adm unit tests: identities, states and agent statuses.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/cluster_view.h"

namespace dugong::adm::testing {

inline PeerIdentity peer(const std::string& id) {
  PeerIdentity p;
  p.id = id;
  p.ip = "10.0.0." + std::to_string(id.size());
  p.pgUrl = "tcp://postgres@" + p.ip + ":5432/postgres";
  p.zoneId = "zone-" + id;
  p.backupUrl = "http://" + p.ip + ":8008/";
  return p;
}

// Generation 1: primary a, sync b, asyncs c (and more).
inline ClusterState threePeers(const std::vector<std::string>& asyncs = {"c"}) {
  ClusterState s;
  s.generation = 1;
  s.primary = peer("a");
  s.sync = peer("b");
  for (const auto& id : asyncs) s.async.push_back(peer(id));
  s.initWal = WalPosition(0x3000000);
  return s;
}

inline nlohmann::json replRow(const std::string& app, const std::string& syncState, const std::string& replay,
                              const std::string& state = "streaming") {
  return {{"applicationName", app}, {"state", state},     {"syncState", syncState}, {"sentLsn", replay},
          {"writeLsn", replay},     {"flushLsn", replay}, {"replayLsn", replay}};
}

inline nlohmann::json primaryStatus(const std::string& current, nlohmann::json rows, bool readOnly = false) {
  return {{"peer", {{"role", "primary"}}},
          {"postgres",
           {{"online", true}, {"inRecovery", false}, {"readOnly", readOnly}, {"timeline", 1},
            {"currentLsn", current}, {"replication", std::move(rows)}}}};
}

inline nlohmann::json standbyStatus(const std::string& lsn, nlohmann::json rows, double lag = 0.5) {
  return {{"peer", {{"role", "standby"}}},
          {"postgres",
           {{"online", true}, {"inRecovery", true}, {"readOnly", true}, {"timeline", 1}, {"receiveLsn", lsn},
            {"replayLsn", lsn}, {"replayLagSeconds", lag}, {"walReceiverStatus", "streaming"},
            {"replication", std::move(rows)}}}};
}

// A format-2 (quorum-mode) state: primary a, ANY k of `members`, asyncs `asyncs`.
inline ClusterState quorumPeers(int k, const std::vector<std::string>& members,
                                const std::vector<std::string>& asyncs = {}) {
  ClusterState s = threePeers(asyncs);
  s.sync.reset();
  Quorum q;
  q.k = k;
  for (const auto& id : members) q.members.push_back(peer(id));
  s.quorum = q;
  return s;
}

// The rule a primary's agent applied to its postgres (its /state's peer.pg.applied).
inline nlohmann::json appliedQuorum(int k, const std::vector<std::string>& members) {
  nlohmann::json ids = nlohmann::json::array();
  for (const auto& id : members) ids.push_back(peer(id).toJson());
  return {{"role", "primary"}, {"quorum", {{"k", k}, {"members", ids}}}};
}

// A healthy view of `state`: every peer active and answering, all streaming at 0/5000000
// (in quorum mode every member streams from the primary with sync_state quorum, and the
// primary's agent applied the state's rule).
inline ClusterView healthyView(const ClusterState& state) {
  ClusterView v;
  v.cluster = "test";
  v.root = "/dugong/test";
  v.state = state;
  v.version = 3;
  v.now = 1700000000000;
  v.active.push_back(state.primary);
  if (state.sync) v.active.push_back(*state.sync);
  if (state.quorum) v.active.insert(v.active.end(), state.quorum->members.begin(), state.quorum->members.end());
  for (const auto& a : state.async) v.active.push_back(a);
  v.peers = listPeers(state, v.active);
  const std::string lsn = "0/5000000";
  for (auto& p : v.peers) {
    nlohmann::json rows = nlohmann::json::array();
    if (p.role == "primary" && state.quorum) {
      for (const auto& m : state.quorum->members) rows.push_back(replRow(m.id, "quorum", lsn));
    } else if (const PeerView* down = v.downstreamOf(p.identity.id)) {
      rows.push_back(replRow(down->identity.id, p.role == "primary" ? "sync" : "async", lsn));
    }
    p.status = p.role == "primary" ? primaryStatus(lsn, rows) : standbyStatus(lsn, rows);
  }
  if (state.quorum) {
    std::vector<std::string> ids;
    for (const auto& m : state.quorum->members) ids.push_back(m.id);
    v.peers.front().status["peer"]["pg"]["applied"] = appliedQuorum(state.quorum->k, ids);
    v.peers.front().status["peer"]["quorum"] = {{"mode", "quorum"}, {"step", nullptr}};
  }
  return v;
}

inline PeerView& mutablePeer(ClusterView& v, const std::string& id) {
  for (auto& p : v.peers) {
    if (p.identity.id == id) return p;
  }
  throw std::runtime_error("no peer " + id);
}

}  // namespace dugong::adm::testing
