#include "statemachine/standby.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "statemachine/cluster_state.h"

namespace dugong {

const char* sourceKindName(SourceKind kind) {
  switch (kind) {
    case SourceKind::kDugong: return "dugong";
    case SourceKind::kHosts: return "hosts";
    case SourceKind::kPgbackrest: return "pgbackrest";
  }
  return "?";
}

namespace {

std::string joined(const std::vector<HostPort>& list, const char* separator) {
  std::string out;
  for (const HostPort& h : list) out += (out.empty() ? "" : separator) + h.toString();
  return out;
}

nlohmann::json hostsToJson(const std::vector<HostPort>& list) {
  nlohmann::json a = nlohmann::json::array();
  for (const HostPort& h : list) a.push_back(h.toString());
  return a;
}

// An absolute path with no empty, "." or ".." component and no trailing slash: "/", or
// "/dugong/siteA".
bool absolutePath(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  if (p == "/") return true;
  if (p.back() == '/') return false;
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

// Refuses a key of `j` not in `known` (it would be lost on the next write, or means the
// writer meant another kind).
std::optional<Error> onlyKeys(const nlohmann::json& j, std::initializer_list<const char*> known, const std::string& where,
                              const std::string& what) {
  for (const auto& item : j.items()) {
    // A named copy, not a structured binding: clang 14 cannot capture one.
    const std::string& key = item.key();
    if (std::none_of(known.begin(), known.end(), [&key](const char* k) { return key == k; })) {
      return Error{where + ": " + key + " is not a field of " + what};
    }
  }
  return std::nullopt;
}

Result<std::string> stringField(const nlohmann::json& j, const char* key, const std::string& where, bool mayBeEmpty) {
  auto f = j.find(key);
  if (f == j.end() || !f->is_string()) return Error{where + "." + key + " must be a string"};
  std::string s = f->get<std::string>();
  if (!mayBeEmpty && s.empty()) return Error{where + "." + key + " must not be empty"};
  return s;
}

// A list of "host:port"; `commaSeparated` for a ZooKeeper connect string, else an array.
Result<std::vector<HostPort>> hostList(const nlohmann::json& j, const char* key, const std::string& where,
                                       bool commaSeparated) {
  std::vector<std::string> items;
  auto f = j.find(key);
  if (commaSeparated) {
    auto s = stringField(j, key, where, false);
    if (!s) return Error{s.error()};
    size_t start = 0;
    while (true) {
      size_t comma = s->find(',', start);
      items.push_back(s->substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    if (f == j.end() || !f->is_array()) return Error{where + "." + key + " must be an array of \"host:port\""};
    if (f->empty()) return Error{where + "." + key + " must name at least one host"};
    for (size_t i = 0; i < f->size(); ++i) {
      if (!(*f)[i].is_string()) return Error{where + "." + key + "[" + std::to_string(i) + "] must be a string"};
      items.push_back((*f)[i].get<std::string>());
    }
  }
  std::vector<HostPort> out;
  for (size_t i = 0; i < items.size(); ++i) {
    auto h = HostPort::parse(items[i]);
    if (!h) return Error{where + "." + key + (commaSeparated ? "" : "[" + std::to_string(i) + "]") + ": " + h.error()};
    out.push_back(std::move(h).value());
  }
  return out;
}

Result<SourceRepository> repositoryFromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return Error{where + " must be an object like {\"stanza\": \"siteA\", \"options\": {...}}"};
  if (auto e = onlyKeys(j, {"stanza", "options"}, where, "a repository")) return *e;
  SourceRepository r;
  auto stanza = stringField(j, "stanza", where, false);
  if (!stanza) return Error{stanza.error()};
  r.stanza = stanza.value();
  if (auto o = j.find("options"); o != j.end()) {
    if (!o->is_object()) return Error{where + ".options must be an object of strings"};
    for (const auto& [key, value] : o->items()) {
      if (!value.is_string()) return Error{where + ".options." + key + " must be a string"};
      r.options[key] = value.get<std::string>();
    }
  }
  return r;
}

nlohmann::json repositoryToJson(const SourceRepository& r) {
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [k, v] : r.options) options[k] = v;
  return {{"stanza", r.stanza}, {"options", options}};
}

}  // namespace

std::string HostPort::toString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HostPort> HostPort::parse(const std::string& text) {
  const std::string expected = "expected \"host:port\", got \"" + text + "\"";
  HostPort h;
  size_t colon = 0;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return Error{expected};
    h.host = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string::npos) return Error{expected};
    h.host = text.substr(0, colon);
    if (h.host.find(':') != std::string::npos) return Error{expected + " (an IPv6 address goes in brackets)"};
  }
  const bool hostOk = !h.host.empty() && std::all_of(h.host.begin(), h.host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == ':';
  });
  if (!hostOk) return Error{expected};
  const std::string port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return Error{expected};
  }
  h.port = std::stoi(port);
  if (h.port < 1 || h.port > 65535) return Error{"port " + port + " is out of range (1-65535) in \"" + text + "\""};
  return h;
}

std::string StandbySource::zookeeperConnect() const { return joined(zookeeper, ","); }

std::string StandbySource::describe() const {
  switch (kind) {
    case SourceKind::kDugong: return "dugong " + cluster + " (" + zookeeperConnect() + chroot + root + ")";
    case SourceKind::kHosts: return "hosts " + joined(hosts, ", ");
    case SourceKind::kPgbackrest: return "pgbackrest stanza " + (restore ? restore->stanza : std::string("?"));
  }
  return "?";
}

nlohmann::json StandbySource::toJson() const {
  nlohmann::json j = {{"kind", sourceKindName(kind)}};
  if (kind == SourceKind::kDugong) {
    j["cluster"] = cluster;
    j["zookeeper"] = zookeeperConnect();
    j["chroot"] = chroot;
    j["root"] = root;
  } else if (kind == SourceKind::kHosts) {
    j["hosts"] = hostsToJson(hosts);
  }
  if (restore) j["restore"] = repositoryToJson(*restore);
  return j;
}

Result<StandbySource> StandbySource::fromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return Error{where + " must be an object like {\"kind\": \"dugong\", ...}"};
  StandbySource s;
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string() ||
      (*kind != "dugong" && *kind != "hosts" && *kind != "pgbackrest")) {
    return Error{where + ".kind must be \"dugong\", \"hosts\" or \"pgbackrest\""};
  }
  if (*kind == "dugong") {
    s.kind = SourceKind::kDugong;
    if (auto e = onlyKeys(j, {"kind", "cluster", "zookeeper", "chroot", "root", "restore"}, where, "a dugong source")) {
      return *e;
    }
    auto cluster = stringField(j, "cluster", where, false);
    if (!cluster) return Error{cluster.error()};
    s.cluster = cluster.value();
    auto zk = hostList(j, "zookeeper", where, true);
    if (!zk) return Error{zk.error()};
    s.zookeeper = std::move(zk).value();
    auto chroot = stringField(j, "chroot", where, true);
    if (!chroot) return Error{chroot.error()};
    s.chroot = chroot.value();
    if (!s.chroot.empty() && (!absolutePath(s.chroot) || s.chroot == "/")) {
      return Error{where + ".chroot must be empty or an absolute path like /site, got \"" + s.chroot + "\""};
    }
    auto root = stringField(j, "root", where, false);
    if (!root) return Error{root.error()};
    s.root = root.value();
    if (!absolutePath(s.root) || s.root == "/") {
      return Error{where + ".root must be an absolute path like /dugong/siteA, got \"" + s.root + "\""};
    }
  } else if (*kind == "hosts") {
    s.kind = SourceKind::kHosts;
    if (auto e = onlyKeys(j, {"kind", "hosts", "restore"}, where, "a hosts source")) return *e;
    auto hosts = hostList(j, "hosts", where, false);
    if (!hosts) return Error{hosts.error()};
    s.hosts = std::move(hosts).value();
  } else {
    s.kind = SourceKind::kPgbackrest;
    if (auto e = onlyKeys(j, {"kind", "restore"}, where, "a pgbackrest source")) return *e;
    if (!j.contains("restore")) {
      return Error{where + ".restore is missing: a pgbackrest source is the repository it names"};
    }
  }
  if (auto r = j.find("restore"); r != j.end()) {
    auto repo = repositoryFromJson(*r, where + ".restore");
    if (!repo) return Error{repo.error()};
    s.restore = std::move(repo).value();
  }
  return s;
}

nlohmann::json StandbyMode::toJson() const {
  nlohmann::json j = {{"source", source.toJson()}};
  if (demotedAt) j["demotedAt"] = {{"wal", demotedAt->wal.toString()}, {"timeline", demotedAt->timeline}};
  if (!promote.is_null()) j["promote"] = promote;
  return j;
}

Result<StandbyMode> StandbyMode::fromJson(const nlohmann::json& j) {
  const std::string where = "cluster state: standby";
  if (!j.is_object()) return Error{where + " must be an object like {\"source\": {...}}"};
  if (auto e = onlyKeys(j, {"source", "demotedAt", "promote"}, where, "the standby field")) return *e;
  StandbyMode m;
  auto source = j.find("source");
  if (source == j.end()) return Error{where + ".source is missing"};
  auto s = StandbySource::fromJson(*source, where + ".source");
  if (!s) return Error{s.error()};
  m.source = std::move(s).value();
  if (auto d = j.find("demotedAt"); d != j.end() && !d->is_null()) {
    const std::string at = where + ".demotedAt";
    if (!d->is_object()) return Error{at + " must be an object like {\"wal\": \"0/4FFFF28\", \"timeline\": 2}"};
    if (auto e = onlyKeys(*d, {"wal", "timeline"}, at, "a demotion point")) return *e;
    auto wal = d->find("wal");
    if (wal == d->end() || !wal->is_string()) return Error{at + ".wal must be a string like 0/4FFFF28"};
    auto w = WalPosition::parse(wal->get<std::string>());
    if (!w) return Error{at + ".wal: " + w.error()};
    auto tl = d->find("timeline");
    if (tl == d->end() || !tl->is_number_integer() || tl->get<int64_t>() < 1) {
      return Error{at + ".timeline must be an integer of at least 1"};
    }
    m.demotedAt = DemotionPoint{w.value(), tl->get<int64_t>()};
  }
  if (auto p = j.find("promote"); p != j.end()) m.promote = *p;
  return m;
}

namespace {

// The fields the two requests share: by, generation, expireTime (and sourceGone for
// promote), checked in the order validatePromote checks its own.
struct RequestCommon {
  std::string by;
  int64_t generation = 0;
  EpochMs expireTime = 0;
};

Result<RequestCommon> requestCommon(const nlohmann::json& j, const std::string& what) {
  RequestCommon r;
  auto by = j.find("by");
  if (by == j.end() || !by->is_string()) return Error{what + ": by must be a string"};
  r.by = by->get<std::string>();
  auto gen = j.find("generation");
  if (gen == j.end() || !gen->is_number_integer()) return Error{what + ": generation must be an integer"};
  r.generation = gen->get<int64_t>();
  auto exp = j.find("expireTime");
  if (exp == j.end() || !exp->is_string()) return Error{what + ": expireTime must be a string"};
  auto t = parseTime(exp->get<std::string>());
  if (!t) return Error{what + ": expireTime: " + t.error()};
  r.expireTime = t.value();
  return r;
}

std::optional<Error> currentAndUnexpired(const RequestCommon& r, const ClusterState& state, EpochMs now,
                                         const std::string& what) {
  if (r.generation != state.generation) {
    return Error{what + " is for generation " + std::to_string(r.generation) + " but the cluster is at " +
                 std::to_string(state.generation)};
  }
  if (now > r.expireTime) return Error{what + " expired at " + formatIso8601(r.expireTime)};
  return std::nullopt;
}

}  // namespace

Result<StandbyPromoteRequest> validateStandbyPromote(const nlohmann::json& j, const ClusterState& state, EpochMs now) {
  const std::string what = "promote-cluster request";
  if (!j.is_object()) return Error{what + " is not an object"};
  if (auto e = onlyKeys(j, {"by", "sourceGone", "generation", "expireTime"}, what, "a promote-cluster request")) {
    return *e;
  }
  auto common = requestCommon(j, what);
  if (!common) return Error{common.error()};
  StandbyPromoteRequest r;
  auto gone = j.find("sourceGone");
  if (gone == j.end() || !gone->is_boolean()) return Error{what + ": sourceGone must be a boolean"};
  r.sourceGone = gone->get<bool>();
  if (!state.standby) return Error{what + ": the cluster is not a standby cluster"};
  if (auto e = currentAndUnexpired(*common, state, now, what)) return *e;
  r.by = common->by;
  r.generation = common->generation;
  r.expireTime = common->expireTime;
  return r;
}

Result<DemoteRequest> validateDemote(const nlohmann::json& j, const ClusterState& state, EpochMs now) {
  const std::string what = "demote-cluster request";
  if (!j.is_object()) return Error{what + " is not an object"};
  if (auto e = onlyKeys(j, {"source", "by", "generation", "expireTime"}, what, "a demote-cluster request")) return *e;
  auto common = requestCommon(j, what);
  if (!common) return Error{common.error()};
  auto source = j.find("source");
  if (source == j.end()) return Error{what + ": source is missing"};
  auto s = StandbySource::fromJson(*source, what + ": source");
  if (!s) return Error{s.error()};
  if (state.standby) return Error{what + ": the cluster is a standby cluster already"};
  if (auto e = currentAndUnexpired(*common, state, now, what)) return *e;
  DemoteRequest r;
  r.source = std::move(s).value();
  r.by = common->by;
  r.generation = common->generation;
  r.expireTime = common->expireTime;
  return r;
}

nlohmann::json SourceEndpoint::toJson() const {
  nlohmann::json j = {{"kind", sourceKindName(kind)}, {"slot", slotName}};
  if (peer) j["peer"] = peer->toJson();
  if (!cluster.empty()) j["cluster"] = cluster;
  if (!hosts.empty()) j["hosts"] = hostsToJson(hosts);
  if (restore) j["restore"] = repositoryToJson(*restore);
  return j;
}

std::string SourceEndpoint::describe() const {
  std::string out = sourceKindName(kind);
  if (!cluster.empty()) out += " " + cluster;
  if (peer) out += " peer " + peer->id;
  if (!hosts.empty()) out += " " + joined(hosts, ", ");
  if (restore) out += " (restoring from stanza " + restore->stanza + ")";
  return out;
}

bool SourceEndpoint::operator==(const SourceEndpoint& o) const {
  const bool samePeer = peer.has_value() == o.peer.has_value() &&
                        (!peer || (peer->id == o.peer->id && peer->pgUrl == o.peer->pgUrl));
  return kind == o.kind && samePeer && cluster == o.cluster && hosts == o.hosts && restore == o.restore &&
         slotName == o.slotName;
}

std::optional<std::string> standbyStateNotRun(const ClusterState& state) {
  const std::string notYet = " is not run by this dugong yet (docs/decisions/0083, phase 8 runs a standby cluster of "
                             "any source, its promote-cluster, and demote-cluster toward a hosts or dugong source with "
                             "no repository): nothing is done with it";
  // A demotion toward a repository (its rewind against an archive, 0083 5.2) is not built.
  if (!state.hasDemote()) return std::nullopt;
  // A request whose source does not parse is the primary's to remove (validateDemote).
  auto source = state.demote.is_object() && state.demote.contains("source")
                    ? StandbySource::fromJson(state.demote["source"], "demote.source")
                    : Result<StandbySource>(Error{"no source"});
  if (!source || (source->kind != SourceKind::kPgbackrest && !source->restore)) return std::nullopt;
  const std::string why = source->restore ? "a source with a repository (restore, stanza " + source->restore->stanza + ")"
                                          : "a pgbackrest source (" + source->describe() + ")";
  return "cluster state: a demote-cluster request toward " + why + notYet;
}

SourceEndpoint hostsEndpoint(const StandbySource& source) {
  SourceEndpoint e;
  e.kind = SourceKind::kHosts;
  e.hosts = source.hosts;
  e.restore = source.restore;
  return e;
}

SourceEndpoint repositoryEndpoint(const StandbySource& source) {
  SourceEndpoint e;
  e.kind = SourceKind::kPgbackrest;
  e.restore = source.restore;
  return e;
}

SourceEndpoint sourceEndpoint(const StandbySource& source, const std::optional<PeerIdentity>& upstream) {
  switch (source.kind) {
    case SourceKind::kDugong: return dugongEndpoint(source, upstream);
    case SourceKind::kHosts: return hostsEndpoint(source);
    case SourceKind::kPgbackrest: return repositoryEndpoint(source);
  }
  return hostsEndpoint(source);
}

SourceEndpoint dugongEndpoint(const StandbySource& source, const std::optional<PeerIdentity>& upstream) {
  SourceEndpoint e;
  e.kind = SourceKind::kDugong;
  e.peer = upstream;
  e.cluster = source.cluster;
  e.restore = source.restore;
  return e;
}

namespace {

// "h1:5432,h2:5432" into `out`; the first error with `expected`.
std::optional<Error> parseHostList(const std::string& list, const std::string& expected, std::vector<HostPort>* out) {
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    auto h = HostPort::parse(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!h) return Error{h.error() + " in " + expected};
    out->push_back(std::move(h).value());
    if (comma == std::string::npos) return std::nullopt;
    start = comma + 1;
  }
}

}  // namespace

Result<StandbySource> parseSourceUrl(const std::string& url) {
  const std::string expected = "expected \"hosts://host:port[,host:port...]\", "
                               "\"dugong://zkhost:port[,zkhost:port...]/root\" or \"pgbackrest://stanza\", got \"" +
                               url + "\"";
  const std::string repositoryPrefix = "pgbackrest://";
  if (url.rfind(repositoryPrefix, 0) == 0) {
    // The stanza only: its repository options are not part of the form (dugong.yaml's
    // standby.restore.options, checked by pgBackRest's rules in the agent).
    const std::string stanza = url.substr(repositoryPrefix.size());
    if (stanza.empty()) return Error{"no stanza in " + expected};
    if (!std::all_of(stanza.begin(), stanza.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
        })) {
      return Error{"the stanza \"" + stanza + "\" has a character other than a letter, a digit, '-' or '_' in " +
                   expected};
    }
    StandbySource s;
    s.kind = SourceKind::kPgbackrest;
    s.restore = SourceRepository{stanza, {}};
    return s;
  }
  StandbySource s;
  const std::string hostsPrefix = "hosts://";
  const std::string dugongPrefix = "dugong://";
  if (url.rfind(hostsPrefix, 0) == 0) {
    s.kind = SourceKind::kHosts;
    if (auto e = parseHostList(url.substr(hostsPrefix.size()), expected, &s.hosts)) return *e;
    return s;
  }
  if (url.rfind(dugongPrefix, 0) != 0) return Error{expected};
  s.kind = SourceKind::kDugong;
  const std::string rest = url.substr(dugongPrefix.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) return Error{"no root after the ensemble in " + expected};
  if (auto e = parseHostList(rest.substr(0, slash), expected, &s.zookeeper)) return *e;
  s.root = rest.substr(slash);
  s.cluster = s.root.substr(s.root.rfind('/') + 1);
  // The state's own rules (an absolute root, no empty, "." or ".." part, not "/").
  auto checked = StandbySource::fromJson(s.toJson(), "standby.source");
  if (!checked) return Error{checked.error() + " in " + expected};
  return s;
}

ObservedSourceState ObservedSourceState::of(const ClusterState& state) {
  ObservedSourceState o;
  o.generation = state.generation;
  o.primary = state.primary.id;
  o.oneNodeWriteMode = state.oneNodeWriteMode;
  o.standby = state.standby;
  o.primaryPeer = state.primary;
  o.syncPeer = state.sync;
  // A quorum-mode source (0079): its first member stands for its sync (0089).
  if (state.quorum && !state.quorum->members.empty()) o.syncPeer = state.quorum->members.front();
  if (o.syncPeer) o.sync = o.syncPeer->id;
  return o;
}

PeerIdentity sourceUpstream(const ObservedSourceState& observed) {
  return observed.syncPeer ? *observed.syncPeer : observed.primaryPeer;
}

namespace {

// "siteA" for a dugong source, else how describe() names it.
std::string sourceName(const StandbySource& s) { return s.kind == SourceKind::kDugong ? s.cluster : s.describe(); }

// The writable primary this cluster can see in its source, if any (0083 6.1, rule 2).
std::optional<std::string> visibleWritablePrimary(const StandbySource& source, const SourceObservation& seen) {
  if (!seen.reachable) return std::nullopt;
  const std::string name = sourceName(source);
  if (source.kind == SourceKind::kHosts && !seen.writableHosts.empty()) {
    return "the source " + name + " has a writable host, " + seen.writableHosts.front().toString() +
           " (not in recovery)";
  }
  if (source.kind != SourceKind::kDugong) return std::nullopt;
  const auto& st = seen.state;
  if (seen.primaryWritable == true) {
    return "the source " + name + " has a writable primary" + (st ? ", " + st->primary : std::string()) +
           " (its /primary answers 200)";
  }
  if (st && !st->standby && seen.primaryPresent) {
    return "the source " + name + " has a writable primary, " + st->primary + " (generation " +
           std::to_string(st->generation) + ", present)";
  }
  return std::nullopt;
}

// Whether `named` (a source's standby.source) names this cluster.
bool namesThisCluster(const StandbySource& named, const PromoteClusterView& view) {
  return named.kind == SourceKind::kDugong && named.cluster == view.cluster && named.chroot == view.chroot &&
         named.root == view.root;
}

}  // namespace

PromoteClusterVerdict promoteClusterRefusal(const ClusterState& state, bool sourceGone, const PromoteClusterView& view) {
  auto refuse = [](std::string why) { return PromoteClusterVerdict{std::move(why), std::nullopt}; };
  if (!state.standby) return refuse("the cluster is not a standby cluster: there is nothing to promote");
  if (state.frozen()) return refuse("the cluster is frozen: unfreeze it first");
  const std::string& leader = state.primary.id;
  if (!view.leaderPresent) {
    return refuse("the standby leader " + leader + " is not present: wait for its sync to take over as standby leader");
  }
  if (!view.leaderRunsAsStandbyLeader) {
    return refuse("the standby leader " + leader + "'s postgres does not run as standby leader yet: wait for it");
  }
  const StandbySource& source = state.standby->source;
  const std::string name = sourceName(source);
  const SourceObservation& seen = view.source;
  if (auto writable = visibleWritablePrimary(source, seen)) {
    return refuse(*writable + ": demote that site (dugong-adm demote-cluster) or stop it first; --source-gone does " +
                  "not override a primary this cluster can see");
  }
  std::string needsFlag;  // why the flag is needed, when it is
  const auto& st = seen.state;
  if (source.kind == SourceKind::kPgbackrest) {
    needsFlag = "the source is a pgBackRest repository (stanza " + (source.restore ? source.restore->stanza : "?") +
                "): no primary can be seen there";
  } else if (!seen.reachable) {
    needsFlag = "the source " + name + " cannot be reached" + (seen.lastSeen.empty() ? "" : " (" + seen.lastSeen + ")");
  } else if (source.kind == SourceKind::kHosts) {
    needsFlag = "the source " + name + " has no writable host now, but it is not gone";
  } else if (!st) {
    needsFlag = "the source " + name + " has no cluster state";
  } else if (!st->standby) {
    needsFlag = "the source " + name + " has no writable primary now (its primary " + st->primary +
                " is absent; its sync may take over at any moment), but it is not gone";
  } else if (namesThisCluster(st->standby->source, view) && !st->standby->demotedAt) {
    return refuse("the source " + name + " is a standby cluster of this one, not demoted by demote-cluster: a loop " +
                  "made by hand; set this cluster's source right first (dugong-adm standby set-source)");
  } else if (!st->standby->demotedAt) {
    needsFlag = "the source " + name + " is a standby cluster of " + st->standby->source.describe() +
                ", not demoted";
  } else if (!namesThisCluster(st->standby->source, view)) {
    needsFlag = "the source " + name + " was demoted toward another cluster (" + st->standby->source.describe() +
                "), which may be writable";
  } else {
    const DemotionPoint& point = *st->standby->demotedAt;
    if (view.leaderTimeline == point.timeline) return PromoteClusterVerdict{std::nullopt, point};
    if (view.leaderTimeline && *view.leaderTimeline < point.timeline && !sourceGone) {
      // Still behind the source's history (a failover of the source before its demotion
      // not replayed yet): the advice is to wait, not --source-gone, which would promote
      // without what the source acknowledged past this leader's replay.
      return refuse("the source " + name + "'s demotion (" + point.wal.toString() + " on timeline " +
                    std::to_string(point.timeline) + ") has not reached this cluster yet (its leader is on timeline " +
                    std::to_string(*view.leaderTimeline) + ", before it): ask again once the leader has replayed " +
                    "it (its lag in dugong-adm show); --source-gone would promote without it, losing what the " +
                    "source acknowledged past the leader's replay");
    }
    needsFlag = "the source " + name + "'s demotion (" + point.wal.toString() + " on timeline " +
                std::to_string(point.timeline) + ") is not at the end of this cluster's history (its leader is " +
                (view.leaderTimeline ? "on timeline " + std::to_string(*view.leaderTimeline) : "on a timeline not read") +
                "): a stale demotion";
  }
  if (sourceGone) return PromoteClusterVerdict{};
  return refuse(needsFlag + ": if it is gone, promote-cluster --source-gone (what this cluster did not receive is lost)");
}

std::optional<std::string> demoteClusterRefusal(const ClusterState& state, const StandbySource& source,
                                                const DemoteClusterView& view) {
  if (state.standby) {
    return "the cluster is a standby cluster of " + state.standby->source.describe() +
           " already: there is nothing to demote";
  }
  if (state.hasDemote()) return "a demote-cluster request is pending already (" + state.demote.dump() + ")";
  if (state.frozen()) return "the cluster is frozen: unfreeze it first";
  if (state.oneNodeWriteMode) return "the cluster is in one-node-write mode: it has no sync to hand its WAL to";
  if (state.quorum) return "the cluster is in quorum mode: a quorum cluster is not demoted by this dugong";
  if (source.kind == SourceKind::kPgbackrest || source.restore) {
    return "a demotion toward " + source.describe() + " is not run by this dugong yet (docs/decisions/0083, phase 5 "
           "demotes toward a hosts or dugong source with no repository)";
  }
  for (const HostPort& h : source.hosts) {
    for (const HostPort& own : view.ownHosts) {
      if (h == own) return "the source names " + h.toString() + ", a peer of this cluster: it would follow itself";
    }
  }
  if (!view.primaryPresent) {
    return "the primary " + state.primary.id + " is not present: wait for the cluster to be healthy (its sync "
           "takes over first)";
  }
  const std::string sync = state.sync ? state.sync->id : "none";
  if (!view.syncPresent) return "the sync " + sync + " is not present: wait for a healthy sync";
  if (!view.syncStreams) {
    return "the sync " + sync + " does not stream synchronously (" + view.syncDetail +
           "): the demotion hands the primary's last WAL to it; wait for it to catch up";
  }
  return std::nullopt;
}

}  // namespace dugong
