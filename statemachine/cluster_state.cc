#include "statemachine/cluster_state.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace dugong {

// Fields set one by one, as in PeerIdentity::toJson (the simulators write a state
// thousands of times a second).
nlohmann::json ClusterState::toJson() const {
  nlohmann::json j = nlohmann::json::object();
  j["generation"] = generation;
  j["primary"] = primary.toJson();
  j["sync"] = sync ? sync->toJson() : nlohmann::json(nullptr);
  j["async"] = peersToJson(async);
  j["deposed"] = peersToJson(deposed);
  j["initWal"] = initWal.toString();
  if (initTimeline > 0) j["initTimeline"] = initTimeline;
  if (!freeze.is_null()) j["freeze"] = freeze;
  if (oneNodeWriteMode) j["oneNodeWriteMode"] = true;
  if (!promote.is_null()) j["promote"] = promote;
  if (quorum) {
    j["format"] = format();
    j["quorum"] = {{"k", quorum->k}, {"members", peersToJson(quorum->members)}};
  }
  if (format() == 3) j["format"] = 3;
  if (standby) j["standby"] = standby->toJson();
  if (hasDemote()) j["demote"] = demote;
  return j;
}

namespace {

// Appends `s` as toJson().dump() writes a string: printable ASCII as it is, anything
// else (a quote, a backslash, a control character, UTF-8, invalid UTF-8) by
// nlohmann::json itself, so that the escaping and the errors stay its own.
void appendString(std::string& out, const std::string& s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7f && c != '"' && c != '\\';
  });
  if (!plain) {
    out += nlohmann::json(s).dump();
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

// The keys in nlohmann::json's order (an object's keys are sorted).
void appendPeer(std::string& out, const PeerIdentity& p) {
  out += '{';
  if (p.backupUrl) {
    out += "\"backupUrl\":";
    appendString(out, *p.backupUrl);
    out += ',';
  }
  out += "\"id\":";
  appendString(out, p.id);
  out += ",\"ip\":";
  appendString(out, p.ip);
  out += ",\"pgUrl\":";
  appendString(out, p.pgUrl);
  if (p.tags.any()) {
    out += ",\"tags\":{\"nofailover\":";
    out += p.tags.nofailover ? "true" : "false";
    out += ",\"noloadbalance\":";
    out += p.tags.noloadbalance ? "true" : "false";
    out += '}';
  }
  out += ",\"zoneId\":";
  appendString(out, p.zoneId);
  out += '}';
}

void appendPeers(std::string& out, const PeerList& peers) {
  out += '[';
  for (size_t i = 0; i < peers.size(); ++i) {
    if (i > 0) out += ',';
    appendPeer(out, peers[i]);
  }
  out += ']';
}

}  // namespace

// The fields of toJson() in its (sorted) key order; freeze, promote and demote, kept raw,
// and a standby cluster's `standby`, are dumped by nlohmann::json.
std::string ClusterState::serialize() const {
  std::string out;
  out.reserve(160 + 128 * (2 + async.size() + deposed.size()));
  auto field = [&out](const char* key, const std::string& text) {
    out += key;
    out += text;
  };
  out += "{\"async\":";
  appendPeers(out, async);
  if (hasDemote()) field(",\"demote\":", demote.dump());
  out += ",\"deposed\":";
  appendPeers(out, deposed);
  if (quorum || format() == 3) field(",\"format\":", std::to_string(format()));
  if (!freeze.is_null()) field(",\"freeze\":", freeze.dump());
  field(",\"generation\":", std::to_string(generation));
  if (initTimeline > 0) field(",\"initTimeline\":", std::to_string(initTimeline));
  out += ",\"initWal\":";
  appendString(out, initWal.toString());
  if (oneNodeWriteMode) out += ",\"oneNodeWriteMode\":true";
  out += ",\"primary\":";
  appendPeer(out, primary);
  if (!promote.is_null()) field(",\"promote\":", promote.dump());
  if (quorum) {
    field(",\"quorum\":{\"k\":", std::to_string(quorum->k));
    out += ",\"members\":";
    appendPeers(out, quorum->members);
    out += '}';
  }
  if (standby) field(",\"standby\":", standby->toJson().dump());
  out += ",\"sync\":";
  if (sync) {
    appendPeer(out, *sync);
  } else {
    out += "null";
  }
  out += '}';
  return out;
}


namespace {

// The "quorum" field of a format-2 state: {"k": 1, "members": [<identity>, ...]}.
Result<Quorum> quorumFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"cluster state: quorum must be an object like {\"k\": 1, \"members\": [...]}"};
  auto members = j.find("members");
  if (members == j.end()) return Error{"cluster state: quorum.members is missing"};
  auto ml = peersFromJson(*members, "cluster state: quorum.members");
  if (!ml) return Error{ml.error()};
  Quorum q;
  q.members = std::move(ml).value();
  if (q.members.empty()) return Error{"cluster state: quorum.members must name at least one peer"};
  auto k = j.find("k");
  const auto n = static_cast<int64_t>(q.members.size());
  if (k == j.end() || !k->is_number_integer() || k->get<int64_t>() < 1 || k->get<int64_t>() > n) {
    return Error{"cluster state: quorum.k must be an integer from 1 to the number of members (" + std::to_string(n) +
                 ")"};
  }
  q.k = static_cast<int>(k->get<int64_t>());
  return q;
}

}  // namespace

namespace {
// A format-2 state read by a reader that does not take quorum mode: a quorum-mode
// cluster, with k and size from the state's set if it can be read.
std::string quorumRefused(const nlohmann::json& j) {
  std::string shape = "format 2,";
  auto q = j.find("quorum");
  if (q != j.end() && q->is_object() && q->contains("k") && (*q)["k"].is_number_integer() && q->contains("members") &&
      (*q)["members"].is_array()) {
    shape = "format 2, ANY " + std::to_string((*q)["k"].get<int64_t>()) + " of " +
            std::to_string((*q)["members"].size()) + " members:";
  }
  return "cluster state: a quorum-mode cluster (" + shape +
         " docs/decisions/0079), which this reader does not run: nothing is done with it";
}
}  // namespace

Result<ClusterState> ClusterState::fromJson(const nlohmann::json& j, Formats formats) {
  if (!j.is_object()) return Error{"cluster state: expected a JSON object"};
  ClusterState s;
  int64_t format = 1;
  if (auto f = j.find("format"); f != j.end()) {
    if (!f->is_number_integer() || f->get<int64_t>() < 1) {
      return Error{"cluster state: format must be an integer of at least 1"};
    }
    format = f->get<int64_t>();
    if (format > kClusterStateFormat) {
      return Error{"cluster state: format " + std::to_string(format) + " is newer than the format " +
                   std::to_string(kClusterStateFormat) +
                   " this dugong knows (written by a newer version); upgrade this dugong: nothing is done with it"};
    }
    if (format == 2 && formats != Formats::kSyncAndQuorum && formats != Formats::kAll) return Error{quorumRefused(j)};
    if (format == 3 && formats != Formats::kSyncAndStandby && formats != Formats::kAll) {
      return Error{"cluster state: format 3 (a standby cluster or a demote-cluster request, docs/decisions/0083) is "
                   "not run by this dugong yet: nothing is done with it"};
    }
  }
  if (auto q = j.find("quorum"); q != j.end() && !q->is_null()) {
    if (format != 2) return Error{"cluster state: the quorum field needs format 2"};
    auto parsed = quorumFromJson(*q);
    if (!parsed) return Error{parsed.error()};
    s.quorum = std::move(parsed).value();
  } else if (format == 2) {
    return Error{"cluster state: format 2 needs the quorum field ({\"k\": 1, \"members\": [...]})"};
  }

  if (auto sb = j.find("standby"); sb != j.end() && !sb->is_null()) {
    if (format != 3) return Error{"cluster state: the standby field needs format 3"};
    auto parsed = StandbyMode::fromJson(*sb);
    if (!parsed) return Error{parsed.error()};
    s.standby = std::move(parsed).value();
  }
  if (auto dm = j.find("demote"); dm != j.end() && !dm->is_null()) {
    if (format != 3) return Error{"cluster state: the demote field needs format 3"};
    if (s.standby) {
      return Error{"cluster state: a standby state cannot carry a demote request (the cluster is a standby already)"};
    }
    s.demote = *dm;
  }
  if (format == 3 && !s.standby && !s.hasDemote()) {
    return Error{"cluster state: format 3 needs the standby field or a demote request"};
  }

  auto gen = j.find("generation");
  if (gen == j.end() || !gen->is_number_integer()) return Error{"cluster state: generation must be an integer"};
  s.generation = gen->get<int64_t>();
  if (s.generation < 1) return Error{"cluster state: generation must be at least 1"};

  auto primary = j.find("primary");
  if (primary == j.end()) return Error{"cluster state: primary is missing"};
  auto p = PeerIdentity::fromJson(*primary, "cluster state: primary");
  if (!p) return Error{p.error()};
  s.primary = std::move(p).value();

  if (auto onwm = j.find("oneNodeWriteMode"); onwm != j.end() && !onwm->is_null()) {
    if (!onwm->is_boolean()) return Error{"cluster state: oneNodeWriteMode must be a boolean"};
    s.oneNodeWriteMode = onwm->get<bool>();
  }

  if (s.standby && s.oneNodeWriteMode) {
    return Error{"cluster state: a standby state cannot be in one-node-write mode (its leader takes no writes)"};
  }
  if (s.quorum && s.oneNodeWriteMode) {
    return Error{"cluster state: a format 2 state cannot be in one-node-write mode (one-node-write mode has no quorum)"};
  }

  auto sync = j.find("sync");
  if (sync == j.end() || sync->is_null()) {
    if (!s.oneNodeWriteMode && !s.quorum) {
      return Error{"cluster state: sync may be null only in one-node-write mode or in a format 2 state"};
    }
  } else if (s.quorum) {
    return Error{"cluster state: sync must be null in a format 2 state (its synchronous standbys are quorum.members)"};
  } else {
    auto sp = PeerIdentity::fromJson(*sync, "cluster state: sync");
    if (!sp) return Error{sp.error()};
    s.sync = std::move(sp).value();
  }

  auto async = j.find("async");
  if (async == j.end()) return Error{"cluster state: async is missing"};
  auto al = peersFromJson(*async, "cluster state: async");
  if (!al) return Error{al.error()};
  s.async = std::move(al).value();

  if (auto dep = j.find("deposed"); dep != j.end() && !dep->is_null()) {
    auto dl = peersFromJson(*dep, "cluster state: deposed");
    if (!dl) return Error{dl.error()};
    s.deposed = std::move(dl).value();
  }

  auto wal = j.find("initWal");
  if (wal == j.end() || !wal->is_string()) return Error{"cluster state: initWal must be a string like 0/16B3748"};
  auto w = WalPosition::parse(wal->get<std::string>());
  if (!w) return Error{"cluster state: initWal: " + w.error()};
  s.initWal = w.value();

  if (auto tl = j.find("initTimeline"); tl != j.end() && !tl->is_null()) {
    if (!tl->is_number_integer() || tl->get<int64_t>() < 1) {
      return Error{"cluster state: initTimeline must be an integer of at least 1"};
    }
    s.initTimeline = tl->get<int64_t>();
  }

  if (auto fr = j.find("freeze"); fr != j.end() && !fr->is_null()) {
    if (!fr->is_boolean() && !fr->is_object()) {
      return Error{"cluster state: freeze must be true, false or an object like {\"date\", \"reason\"}"};
    }
    if (*fr != false) s.freeze = *fr;
  }

  if (auto pr = j.find("promote"); pr != j.end()) s.promote = *pr;

  // No peer may hold two places: that state could make two peers act on one role.
  std::vector<std::string_view> seen;  // a handful of peers: a scan costs less than a set's nodes
  seen.reserve(2 + s.async.size() + s.deposed.size() + (s.quorum ? s.quorum->members.size() : 0));
  auto place = [&seen](const PeerIdentity& peer, const std::string& where) -> std::optional<Error> {
    if (std::find(seen.begin(), seen.end(), peer.id) != seen.end()) {
      return Error{"cluster state: peer \"" + peer.id + "\" appears more than once (again as " + where + ")"};
    }
    seen.push_back(peer.id);
    return std::nullopt;
  };
  if (auto e = place(s.primary, "primary")) return *e;
  if (s.sync) {
    if (auto e = place(*s.sync, "sync")) return *e;
  }
  if (s.quorum) {
    for (size_t i = 0; i < s.quorum->members.size(); ++i) {
      if (auto e = place(s.quorum->members[i], "quorum.members[" + std::to_string(i) + "]")) return *e;
    }
  }
  for (size_t i = 0; i < s.async.size(); ++i) {
    if (auto e = place(s.async[i], "async[" + std::to_string(i) + "]")) return *e;
  }
  for (size_t i = 0; i < s.deposed.size(); ++i) {
    if (auto e = place(s.deposed[i], "deposed[" + std::to_string(i) + "]")) return *e;
  }
  return s;
}

Result<ClusterState> ClusterState::parse(std::string_view text, Formats formats) {
  // Every peer parses the same text after each write (N peers in one simulator process,
  // and again after a reconnect): the last few texts parsed on this thread, and their
  // results, are kept, so the same text is parsed once.
  struct Parsed {
    std::string text;
    Formats formats = Formats::kSyncOnly;
    std::optional<Result<ClusterState>> result;
  };
  thread_local std::array<Parsed, 4> recent;
  thread_local size_t next = 0;
  for (const Parsed& p : recent) {
    if (p.result && p.formats == formats && p.text == text) return *p.result;
  }
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  Result<ClusterState> r = j.is_discarded() ? Result<ClusterState>(Error{"cluster state: not valid JSON"}) : fromJson(j, formats);
  Parsed& slot = recent[next];
  next = (next + 1) % recent.size();
  slot.text.assign(text);
  slot.formats = formats;
  slot.result = std::move(r);
  return *slot.result;
}

nlohmann::json summarizeState(const ClusterState& state) {
  auto ids = [](const PeerList& peers) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& p : peers) a.push_back(p.id);
    return a;
  };
  nlohmann::json j = {
      {"generation", state.generation},
      {"primary", state.primary.id},
      {"sync", state.sync ? nlohmann::json(state.sync->id) : nlohmann::json(nullptr)},
      {"async", ids(state.async)},
      {"deposed", ids(state.deposed)},
      {"initWal", state.initWal.toString()},
  };
  if (state.initTimeline > 0) j["initTimeline"] = state.initTimeline;
  if (!state.freeze.is_null()) j["freeze"] = state.freeze;
  if (state.oneNodeWriteMode) j["oneNodeWriteMode"] = true;
  if (!state.promote.is_null()) j["promote"] = state.promote;
  if (state.quorum) {
    j["format"] = state.format();
    j["quorum"] = {{"k", state.quorum->k}, {"members", ids(state.quorum->members)}};
  }
  if (state.format() == 3) j["format"] = 3;
  if (state.standby) j["standby"] = state.standby->toJson();
  if (state.hasDemote()) j["demote"] = state.demote;
  return j;
}

}  // namespace dugong
