#include "tools/adm/standby_view.h"

#include <cstdio>

namespace dugong::adm {
namespace {

const PeerView* leaderOf(const ClusterView& view) { return view.find(view.state.primary.id); }

std::string str(const nlohmann::json& j, const char* key);

// "10.0.0.5:5432 (the leader streams from it)", from the leader's last position read.
std::string sourcePrimaryText(const nlohmann::json& lag) {
  if (!lag.is_object()) return "unknown: the leader does not answer";
  const std::string primary = str(lag, "sourcePrimary");
  const std::string from = str(lag, "streamingFrom");
  const bool answered = lag.value("sourceReachable", false);
  if (primary.empty()) return "none seen: " + str(lag, "sourceError");
  std::string text = primary + (answered ? "" : " when last seen (it does not answer now)");
  text += from == primary ? ", the leader streams from it"
          : from.empty()  ? ", the leader's WAL receiver does not stream"
                          : ", the leader streams from " + from;
  return text;
}

std::string str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t integer(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace

bool isStandbyCluster(const ClusterView& view) { return view.state.standby.has_value(); }

nlohmann::json leaderLag(const ClusterView& view) {
  const PeerView* leader = leaderOf(view);
  if (!isStandbyCluster(view) || !leader || !leader->reachable()) return nullptr;
  const auto pg = leader->status.find("postgres");
  if (pg == leader->status.end() || !pg->is_object()) return nullptr;
  const auto source = pg->find("source");
  return source != pg->end() && source->is_object() ? *source : nlohmann::json(nullptr);
}

namespace {

// A dugong source: the source peer the leader's agent says it streams from (its /state
// peer.sourceUpstream, 0083 3.2), and what it last saw of the source; "" otherwise.
std::string sourceUpstreamText(const ClusterView& view) {
  const PeerView* leader = leaderOf(view);
  if (view.state.standby->source.kind != SourceKind::kDugong) return "";
  if (!leader || !leader->reachable()) return "unknown: the leader does not answer";
  const nlohmann::json peer = leader->status.value("peer", nlohmann::json::object());
  const nlohmann::json up = peer.value("sourceUpstream", nlohmann::json(nullptr));
  const std::string seen = str(peer, "sourceSeen");
  const std::string id = up.is_object() ? str(up, "id") : "";
  return (id.empty() ? std::string("none chosen yet") : id) + (seen.empty() ? "" : " (" + seen + ")");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> standbyShowLines(const ClusterView& view) {
  if (!isStandbyCluster(view)) return {};
  const StandbyMode& mode = *view.state.standby;
  const nlohmann::json lag = leaderLag(view);
  std::vector<std::pair<std::string, std::string>> out;
  out.push_back({"standby", "standby cluster of " + mode.source.describe() + ", standby leader " +
                                view.state.primary.id + " (nothing here accepts writes)"});
  if (const std::string up = sourceUpstreamText(view); !up.empty()) {
    out.push_back({"source peer followed", up});
  } else {
    out.push_back({"source primary", sourcePrimaryText(lag)});
  }
  out.push_back({"lag", lag.is_object() ? str(lag, "summary") : "unknown: the leader publishes no lag"});
  if (mode.hasPromote()) out.push_back({"promote-cluster", mode.promote.dump()});
  return out;
}

nlohmann::json standbyShowJson(const ClusterView& view) {
  if (!isStandbyCluster(view)) return nullptr;
  const nlohmann::json lag = leaderLag(view);
  const std::string from = lag.is_object() ? str(lag, "sourcePrimary") : "";
  return {{"of", view.state.standby->source.describe()},
          {"source", view.state.standby->source.toJson()},
          {"leader", view.state.primary.id},
          {"sourcePrimary", from.empty() ? nlohmann::json(nullptr) : nlohmann::json(from)},
          {"lag", lag},
          {"promote", view.state.standby->promote}};
}

void labelStandbyLeader(const ClusterView& view, std::vector<StatusRow>& rows) {
  if (!isStandbyCluster(view)) return;
  for (auto& r : rows) {
    if (r.id != view.state.primary.id || r.role != "primary") continue;
    r.role = "standby-leader";
    r.cells["role"] = "standby-leader";
  }
}

std::vector<std::pair<bool, std::string>> verifyStandbyLeader(const ClusterView& view,
                                                              const StandbyVerifyOptions& o) {
  std::vector<std::pair<bool, std::string>> out;
  auto problem = [&](std::string t) { out.push_back({true, std::move(t)}); };
  auto ok = [&](std::string t) { out.push_back({false, std::move(t)}); };
  const PeerView* leader = leaderOf(view);
  const std::string name = "standby leader " + view.state.primary.id;
  const std::string of = view.state.standby->source.describe();
  if (!leader || !leader->active) {
    problem(name + " is not in ZooKeeper (its agent is down or cut off): its sync takes over when an async is present");
    return out;
  }
  if (!leader->reachable()) {
    problem(name + ": its agent does not answer" + (leader->agentError.empty() ? "" : " (" + leader->agentError + ")"));
    return out;
  }
  if (!pgOnline(*leader)) {
    problem(name + ": postgres is not accepting connections");
    return out;
  }
  if (pgWritable(*leader)) problem(name + " runs postgres out of recovery: a standby cluster must accept no writes");
  const nlohmann::json lag = leaderLag(view);
  if (!lag.is_object()) {
    problem(name + " publishes no lag to its source yet (it has not run as standby leader since its agent started)");
    return out;
  }
  const std::string receiver = str(lag, "walReceiverStatus");
  if (receiver != "streaming") {
    problem(name + " does not receive from " + of + ": " +
            (receiver.empty() ? std::string("no WAL receiver") : "its WAL receiver is " + receiver) +
            " (its postgres log says why; the source down, or refusing the replication role)");
  } else {
    ok(name + " streams from " + of + (str(lag, "streamingFrom").empty() ? "" : " at " + str(lag, "streamingFrom")));
  }
  const int64_t stalledSince = integer(lag, "receivingStalledSince");
  const int64_t sampledAt = integer(lag, "sampledAt");
  if (stalledSince != 0 && sampledAt - stalledSince >= o.maxStallMs) {
    problem(name + " has received nothing for " + std::to_string((sampledAt - stalledSince) / 1000) +
            " s while " + of + " moved on (received " + str(lag, "receivedLsn") + ", the source at " +
            str(lag, "sourceWal") + ")");
  }
  const auto reachable = lag.find("sourceReachable");
  if (reachable != lag.end() && reachable->is_boolean() && !reachable->get<bool>()) {
    problem(name + " cannot read the position of " + of + ": " + str(lag, "sourceError") + "; " + str(lag, "summary"));
  } else {
    ok(name + ": " + str(lag, "summary"));
  }
  return out;
}

}  // namespace dugong::adm
