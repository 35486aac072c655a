#include "ops/cluster_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dugong::adm {

std::string roleInState(const ClusterState& s, const std::string& id) {
  if (s.primary.id == id) return "primary";
  if (s.sync && s.sync->id == id) return "sync";
  if (s.quorum && containsPeer(s.quorum->members, id)) return "sync";  // a member (0079)
  if (containsPeer(s.async, id)) return "async";
  if (containsPeer(s.deposed, id)) return "deposed";
  return "";
}

const PeerIdentity* firstSync(const ClusterState& s) {
  if (s.sync) return &*s.sync;
  if (s.quorum && !s.quorum->members.empty()) return &s.quorum->members.front();
  return nullptr;
}
namespace {

const nlohmann::json& at(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

const nlohmann::json& pg(const PeerView& p) { return at(p.status, "postgres"); }

bool flag(const nlohmann::json& j) { return j.is_boolean() && j.get<bool>(); }

std::optional<std::string> text(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  return std::nullopt;
}

std::optional<WalPosition> lsn(const nlohmann::json& j) {
  auto t = text(j);
  if (!t) return std::nullopt;
  auto w = WalPosition::parse(*t);
  if (!w) return std::nullopt;
  return *w;
}

nlohmann::json orNull(const std::optional<std::string>& s) { return s ? nlohmann::json(*s) : nlohmann::json(nullptr); }

}  // namespace

std::string PeerView::roleLabel(bool withIndex) const {
  if (role == "async" && withIndex) return "async[" + std::to_string(asyncIndex) + "]";
  if (member() && withIndex) return "member";
  return role;
}

const PeerView* ClusterView::find(const std::string& id) const {
  for (const auto& p : peers) {
    if (p.identity.id == id) return &p;
  }
  return nullptr;
}

namespace {

// The peer the async chain hangs from: the sync, or the first member of a quorum set.

}  // namespace

const PeerView* ClusterView::downstreamOf(const std::string& id) const {
  const PeerIdentity* head = firstSync(state);
  if (id == state.primary.id) return head ? find(head->id) : nullptr;
  std::string prev = head ? head->id : std::string();
  for (const auto& a : state.async) {
    if (prev == id) return find(a.id);
    prev = a.id;
  }
  return nullptr;
}

const PeerView* ClusterView::upstreamOf(const std::string& id) const {
  if (state.sync && state.sync->id == id) return find(state.primary.id);
  if (state.quorum && containsPeer(state.quorum->members, id)) return find(state.primary.id);
  int i = indexOfPeer(state.async, id);
  if (i < 0) return nullptr;
  if (i == 0) {
    const PeerIdentity* head = firstSync(state);
    return head ? find(head->id) : nullptr;
  }
  return find(state.async[static_cast<size_t>(i - 1)].id);
}

std::vector<PeerView> listPeers(const ClusterState& state, const PeerList& active) {
  std::vector<PeerView> out;
  auto add = [&](const PeerIdentity& id, const std::string& role, int index) -> PeerView& {
    PeerView v;
    int a = indexOfPeer(active, id.id);
    v.identity = a >= 0 ? active[static_cast<size_t>(a)] : id;
    v.role = role;
    v.asyncIndex = index;
    v.active = a >= 0;
    out.push_back(std::move(v));
    return out.back();
  };
  add(state.primary, "primary", -1);
  if (state.sync) add(*state.sync, "sync", -1);
  if (state.quorum) {
    for (size_t i = 0; i < state.quorum->members.size(); ++i) {
      add(state.quorum->members[i], "sync", -1).memberIndex = static_cast<int>(i);
    }
  }
  for (size_t i = 0; i < state.async.size(); ++i) add(state.async[i], "async", static_cast<int>(i));
  for (const auto& d : state.deposed) add(d, "deposed", -1);
  for (const auto& p : active) {
    bool known = std::any_of(out.begin(), out.end(), [&](const PeerView& v) { return v.identity.id == p.id; });
    if (!known) add(p, "unassigned", -1);
  }
  return out;
}

std::string whyActive(const PeerView& p) {
  if (p.reachable()) return "its agent runs";
  return "its ZooKeeper session is still open, though its agent does not answer (" +
         (p.agentError.empty() ? std::string("no status URL") : p.agentError) +
         "): a stopped agent's session ends at its timeout, or at once with `dugong --leave` on that host";
}

std::optional<std::string> agentUrl(const PeerIdentity& peer) {
  if (!peer.backupUrl || peer.backupUrl->empty()) return std::nullopt;
  std::string url = *peer.backupUrl;
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

bool pgOnline(const PeerView& p) { return flag(at(pg(p), "online")); }

bool pgWritable(const PeerView& p) {
  return pgOnline(p) && !flag(at(pg(p), "inRecovery")) && !flag(at(pg(p), "readOnly"));
}

std::optional<WalPosition> ownWal(const PeerView& p) {
  if (!pgOnline(p)) return std::nullopt;
  if (!flag(at(pg(p), "inRecovery"))) return lsn(at(pg(p), "currentLsn"));
  auto r = lsn(at(pg(p), "receiveLsn"));
  auto y = lsn(at(pg(p), "replayLsn"));
  if (r && y) return std::max(*r, *y);
  return r ? r : y;
}

std::optional<double> replayLagSeconds(const PeerView& p) {
  const auto& j = at(pg(p), "replayLagSeconds");
  if (j.is_number()) return j.get<double>();
  return std::nullopt;
}

bool replayPaused(const PeerView& p) { return flag(at(pg(p), "replayPaused")); }

std::string lastRejoinError(const PeerView& p) {
  if (!p.reachable()) return "";
  const auto rejoin = p.status.find("rejoin");
  if (rejoin == p.status.end() || !rejoin->is_object()) return "";
  const auto error = rejoin->find("lastError");
  return error != rejoin->end() && error->is_string() ? error->get<std::string>() : "";
}

std::optional<std::string> walReceiverStatus(const PeerView& p) { return text(at(pg(p), "walReceiverStatus")); }

std::optional<nlohmann::json> replicationRow(const PeerView& upstream, const std::string& downstreamId) {
  const auto& rows = at(pg(upstream), "replication");
  if (!rows.is_array()) return std::nullopt;
  for (const auto& r : rows) {
    if (at(r, "applicationName") == downstreamId) return r;
  }
  return std::nullopt;
}

const PeerView* quorumWaitedMember(const ClusterView& view) {
  const ClusterState& s = view.state;
  const PeerView* primary = view.find(s.primary.id);
  if (!s.quorum || primary == nullptr) return nullptr;
  std::vector<std::pair<WalPosition, const PeerView*>> acknowledging;
  for (const auto& m : s.quorum->members) {
    auto row = replicationRow(*primary, m.id);
    if (!row || at(*row, "state") != "streaming" || at(*row, "syncState") != "quorum") continue;
    const PeerView* p = view.find(m.id);
    if (auto flush = lsn(at(*row, "flushLsn")); flush && p) acknowledging.emplace_back(*flush, p);
  }
  const size_t k = static_cast<size_t>(s.quorum->k);
  if (k < 1 || acknowledging.size() < k) return nullptr;
  // Latest first; ties keep the set's order.
  std::stable_sort(acknowledging.begin(), acknowledging.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  return acknowledging[k - 1].second;
}

std::optional<uint64_t> lagBytes(const PeerView& upstream, const std::string& downstreamId) {
  auto row = replicationRow(upstream, downstreamId);
  auto own = ownWal(upstream);
  if (!row || !own) return std::nullopt;
  auto replay = lsn(at(*row, "replayLsn"));
  if (!replay) return std::nullopt;
  return *own > *replay ? own->value() - replay->value() : 0;
}

std::string formatLagSeconds(std::optional<double> seconds) {
  if (!seconds || !std::isfinite(*seconds)) return "-";
  auto total = static_cast<long long>(std::max(0.0, *seconds));
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lldm%02llds", total / 60, total % 60);
  return buf;
}

const std::vector<std::string>& allColumns() {
  static const std::vector<std::string> k = {"role",  "peer",  "zone", "ip",     "active", "pg",
                                             "timeline", "wal", "repl", "sent",  "write",  "flush",
                                             "replay", "lagbytes", "lag", "tags", "pgurl", "url"};
  return k;
}
const std::vector<std::string>& peersDefaultColumns() {
  static const std::vector<std::string> k = {"role", "peer", "zone", "ip", "active", "tags"};
  return k;
}
const std::vector<std::string>& pgStatusDefaultColumns() {
  static const std::vector<std::string> k = {"role", "peer", "pg", "repl", "sent", "flush", "replay", "lag", "tags"};
  return k;
}
const std::vector<std::string>& pgStatusWideColumns() {
  static const std::vector<std::string> k = {"role",  "peer",  "zone",  "ip",     "active",   "pg",  "timeline",
                                             "wal",   "repl",  "sent",  "write",  "flush",    "replay", "lagbytes",
                                             "lag",   "tags"};
  return k;
}
const std::vector<std::string>& knownRoles() {
  static const std::vector<std::string> k = {"primary", "sync", "async", "deposed", "unassigned"};
  return k;
}

std::string StatusRow::cell(const std::string& column) const {
  auto it = cells.find(column);
  if (it == cells.end() || it->is_null()) return "-";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

std::vector<StatusRow> statusRows(const ClusterView& view) {
  std::vector<StatusRow> out;
  for (const auto& p : view.peers) {
    StatusRow r;
    r.role = p.role;
    r.id = p.identity.id;
    nlohmann::json c;
    c["role"] = p.roleLabel(false);
    c["peer"] = p.identity.id;
    c["zone"] = p.identity.zoneId;
    c["ip"] = p.identity.ip;
    c["pgurl"] = p.identity.pgUrl;
    c["url"] = orNull(agentUrl(p.identity));
    c["active"] = p.active ? "yes" : "no";
    std::string tags;
    if (p.identity.tags.nofailover) tags = "nofailover";
    if (p.identity.tags.noloadbalance) tags += (tags.empty() ? "" : ",") + std::string("noloadbalance");
    c["tags"] = tags.empty() ? nlohmann::json(nullptr) : nlohmann::json(tags);
    c["pg"] = !p.reachable() ? "unknown" : pgOnline(p) ? "ok" : "fail";
    const auto& tl = at(pg(p), "timeline");
    c["timeline"] = tl.is_number_integer() ? tl : nlohmann::json(nullptr);
    auto wal = ownWal(p);
    c["wal"] = wal ? nlohmann::json(wal->toString()) : nlohmann::json(nullptr);
    for (const char* k : {"repl", "sent", "write", "flush", "replay", "lagbytes"}) c[k] = nullptr;
    const PeerView* down = p.role == "primary" && view.state.quorum ? quorumWaitedMember(view)
                                                                      : view.downstreamOf(p.identity.id);
    if (down != nullptr) {
      if (auto row = replicationRow(p, down->identity.id)) {
        c["repl"] = orNull(text(at(*row, "syncState")));
        c["sent"] = orNull(text(at(*row, "sentLsn")));
        c["write"] = orNull(text(at(*row, "writeLsn")));
        c["flush"] = orNull(text(at(*row, "flushLsn")));
        c["replay"] = orNull(text(at(*row, "replayLsn")));
        if (auto b = lagBytes(p, down->identity.id)) c["lagbytes"] = *b;
      }
    }
    bool standby = p.role == "sync" || p.role == "async";
    c["lag"] = standby && p.reachable() ? nlohmann::json(formatLagSeconds(replayLagSeconds(p))) : nullptr;
    r.cells = std::move(c);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<StatusRow> filterRole(std::vector<StatusRow> rows, const std::string& role) {
  if (role.empty()) return rows;
  rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const StatusRow& r) { return r.role != role; }), rows.end());
  return rows;
}

}  // namespace dugong::adm
