#include "tools/adm/history_summary.h"

#include "ops/promote_check.h"

namespace dugong::adm {
namespace {

std::string ids(const PeerList& peers) {
  return peers.empty() ? "(none)" : peerIds(peers);
}

std::string freezeReason(const nlohmann::json& freeze) {
  if (freeze.is_object()) {
    auto r = freeze.find("reason");
    if (r != freeze.end() && r->is_string()) return r->get<std::string>();
  }
  return "(no reason given)";
}

std::string describePromote(const nlohmann::json& p) {
  if (!p.is_object()) return p.dump();
  auto str = [&](const char* k) {
    auto it = p.find(k);
    if (it == p.end()) return std::string("?");
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  std::string role = str("role");
  if (role == "async" && p.contains("asyncIndex")) role += "[" + str("asyncIndex") + "]";
  return str("id") + " as " + role + " (generation " + str("generation") + ", expires " + str("expireTime") + ")";
}

std::string quorumSet(const Quorum& q) { return "ANY " + std::to_string(q.k) + " (" + ids(q.members) + ")"; }

void setUp(const ClusterState& s, std::vector<std::string>& out) {
  std::string line = s.standby ? "standby cluster of " + s.standby->source.describe() + " set up: standby leader " +
                                     s.primary.id
                               : "cluster set up: primary " + s.primary.id;
  if (s.oneNodeWriteMode) {
    line += " in one-node-write mode";
  } else if (s.quorum) {
    line += ", quorum " + quorumSet(*s.quorum);
    if (!s.async.empty()) line += ", asyncs " + ids(s.async);
  } else {
    line += ", sync " + (s.sync ? s.sync->id : std::string("(none)"));
    if (!s.async.empty()) line += ", asyncs " + ids(s.async);
  }
  out.push_back(line);
}

}  // namespace

std::vector<std::string> summarizeChange(const std::optional<ClusterState>& before, const ClusterState& after) {
  std::vector<std::string> out;
  if (!before) {
    setUp(after, out);
    if (after.frozen()) out.push_back("frozen: " + freezeReason(after.freeze));
    if (after.hasPromote()) out.push_back("promote requested: " + describePromote(after.promote));
    return out;
  }
  const ClusterState& b = *before;
  const ClusterState& a = after;

  // A standby cluster (docs/decisions/0083): promote-cluster, its request, and the standby
  // leader's own takeovers (written below as a primary's are).
  if (b.standby && !a.standby) {
    out.push_back("promote-cluster: no longer a standby cluster of " + b.standby->source.describe() + "; " +
                  a.primary.id + " is primary");
  } else if (!b.standby && a.standby) {
    out.push_back("now a standby cluster of " + a.standby->source.describe());
  }
  if (a.standby && a.standby->hasPromote() && (!b.standby || b.standby->promote != a.standby->promote)) {
    out.push_back("promote-cluster requested: " + a.standby->promote.dump());
  }
  if (b.standby && b.standby->hasPromote() && a.standby && !a.standby->hasPromote() &&
      b.generation == a.generation) {
    out.push_back("promote-cluster request removed");
  }

  if (b.oneNodeWriteMode != a.oneNodeWriteMode) {
    out.push_back(a.oneNodeWriteMode ? "one-node-write mode on" : "one-node-write mode off");
  }
  if (b.primary.id != a.primary.id) {
    std::string was = roleInState(b, a.primary.id);
    if (was == "sync") {
      out.push_back("sync " + a.primary.id + " took over as primary from " + b.primary.id);
    } else {
      out.push_back(a.primary.id + " became primary (was " + (was.empty() ? "not in the state" : was) +
                    "), replacing " + b.primary.id);
    }
  }
  for (const auto& d : a.deposed) {
    if (!containsPeer(b.deposed, d.id)) out.push_back(d.id + " is deposed");
  }
  // Quorum mode (docs/decisions/0079): a member is a sync; a change of mode or of the set.
  if (!b.quorum && a.quorum) {
    out.push_back("quorum mode: " + quorumSet(*a.quorum));
  } else if (b.quorum && !a.quorum) {
    out.push_back("sync mode: sync " + (a.sync ? a.sync->id : std::string("(none)")));
  } else if (b.quorum && a.quorum && (b.quorum->k != a.quorum->k || peerIds(b.quorum->members) != peerIds(a.quorum->members))) {
    out.push_back("quorum set: " + quorumSet(*b.quorum) + " -> " + quorumSet(*a.quorum));
  }
  const std::string bSync = b.sync ? b.sync->id : "";
  const std::string aSync = a.sync ? a.sync->id : "";
  if (bSync != aSync && !aSync.empty() && roleInState(b, aSync) != "sync") {
    std::string was = roleInState(b, aSync);
    std::string line = was.empty() ? aSync + " became sync" : was + " " + aSync + " became sync";
    if (!bSync.empty()) line += " (was sync " + bSync + ")";
    out.push_back(line);
  }
  if (!bSync.empty() && bSync != aSync) {
    std::string now = roleInState(a, bSync);
    if (now == "async") {
      out.push_back("sync " + bSync + " moved to async");
    } else if (now.empty()) {
      out.push_back("sync " + bSync + " removed");
    }
  }
  // The async chain: additions and removals of peers that were and are asyncs or nothing.
  for (const auto& p : a.async) {
    const bool wasSync = p.id == bSync || (b.quorum && containsPeer(b.quorum->members, p.id));
    if (!containsPeer(b.async, p.id) && !wasSync) out.push_back("async " + p.id + " added");
  }
  for (const auto& p : b.async) {
    if (!containsPeer(a.async, p.id) && roleInState(a, p.id).empty()) out.push_back("async " + p.id + " removed");
  }
  {
    PeerList bCommon, aCommon;
    for (const auto& p : b.async) {
      if (containsPeer(a.async, p.id)) bCommon.push_back(p);
    }
    for (const auto& p : a.async) {
      if (containsPeer(b.async, p.id)) aCommon.push_back(p);
    }
    bool reordered = false;
    for (size_t i = 0; i < bCommon.size(); ++i) reordered |= bCommon[i].id != aCommon[i].id;
    if (reordered) out.push_back("async chain reordered: " + ids(b.async) + " -> " + ids(a.async));
  }
  for (const auto& d : b.deposed) {
    if (!containsPeer(a.deposed, d.id)) {
      std::string now = roleInState(a, d.id);
      out.push_back(d.id + " removed from deposed" + (now.empty() ? "" : " (now " + now + ")"));
    }
  }
  if (b.frozen() && !a.frozen()) out.push_back("unfrozen");
  if (a.frozen() && (!b.frozen() || b.freeze != a.freeze)) out.push_back("frozen: " + freezeReason(a.freeze));
  if (a.hasPromote() && a.promote != b.promote) out.push_back("promote requested: " + describePromote(a.promote));
  if (b.hasPromote() && !a.hasPromote()) {
    bool done = b.promote.is_object() && promoteOutcome(b.promote, a, 0) == PromoteOutcome::kCarriedOut;
    out.push_back(done ? "promote request carried out" : "promote request removed");
  }
  if (out.empty()) out.push_back(b.generation == a.generation && b.initWal == a.initWal ? "no change" : "initWal now " + a.initWal.toString());
  return out;
}

std::string summaryLine(const std::optional<ClusterState>& before, const ClusterState& after) {
  std::string line;
  for (const auto& s : summarizeChange(before, after)) line += (line.empty() ? "" : "; ") + s;
  return line;
}

HistoryItem decodeHistoryRecord(int64_t sequence, const std::string& data) {
  HistoryItem item;
  item.sequence = sequence;
  auto j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    item.error = "history record is not a JSON object";
    item.raw = data;
    return item;
  }
  if (auto t = j.find("time"); t != j.end() && t->is_string()) item.time = t->get<std::string>();
  if (auto r = j.find("reason"); r != j.end() && r->is_string()) item.reason = r->get<std::string>();
  item.raw = j.value("state", nlohmann::json(nullptr));
  auto s = ClusterState::fromJson(item.raw, ClusterState::Formats::kAll);
  if (s) {
    item.state = *s;
  } else {
    item.error = s.error();
  }
  return item;
}

std::vector<std::string> summarizeHistory(const std::vector<HistoryItem>& items) {
  std::vector<std::string> out;
  std::optional<ClusterState> last;
  for (const auto& item : items) {
    if (!item.state) {
      out.push_back("invalid state: " + item.error);
      continue;
    }
    out.push_back(summaryLine(last, *item.state));
    last = item.state;
  }
  return out;
}

}  // namespace dugong::adm
