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

// The fields of toJson() in its (sorted) key order; freeze and promote, kept raw, are
// dumped by nlohmann::json.
std::string ClusterState::serialize() const {
  std::string out;
  out.reserve(160 + 128 * (2 + async.size() + deposed.size()));
  out += "{\"async\":";
  appendPeers(out, async);
  out += ",\"deposed\":";
  appendPeers(out, deposed);
  auto field = [&out](const char* key, const std::string& text) {
    out += key;
    out += text;
  };
  if (!freeze.is_null()) field(",\"freeze\":", freeze.dump());
  field(",\"generation\":", std::to_string(generation));
  if (initTimeline > 0) field(",\"initTimeline\":", std::to_string(initTimeline));
  out += ",\"initWal\":";
  appendString(out, initWal.toString());
  if (oneNodeWriteMode) out += ",\"oneNodeWriteMode\":true";
  out += ",\"primary\":";
  appendPeer(out, primary);
  if (!promote.is_null()) field(",\"promote\":", promote.dump());
  out += ",\"sync\":";
  if (sync) {
    appendPeer(out, *sync);
  } else {
    out += "null";
  }
  out += '}';
  return out;
}

// The state's format: an absent "format" is format 1, Manatee's fields as they are (so
// this build writes none). A later build that changes the meaning of the state writes
// "format": 2 or more; this build refuses such a state as invalid (a clear error, and no
// action taken on it) rather than misread it.
constexpr int64_t kClusterStateFormat = 1;

Result<ClusterState> ClusterState::fromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"cluster state: expected a JSON object"};
  ClusterState s;
  if (auto f = j.find("format"); f != j.end()) {
    if (!f->is_number_integer() || f->get<int64_t>() < 1) {
      return Error{"cluster state: format must be an integer of at least 1"};
    }
    if (f->get<int64_t>() > kClusterStateFormat) {
      return Error{"cluster state: format " + std::to_string(f->get<int64_t>()) + " is newer than the format " +
                   std::to_string(kClusterStateFormat) +
                   " this dugong knows (written by a newer version); upgrade this dugong: nothing is done with it"};
    }
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

  auto sync = j.find("sync");
  if (sync == j.end() || sync->is_null()) {
    if (!s.oneNodeWriteMode) return Error{"cluster state: sync may be null only in one-node-write mode"};
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
  seen.reserve(2 + s.async.size() + s.deposed.size());
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
  for (size_t i = 0; i < s.async.size(); ++i) {
    if (auto e = place(s.async[i], "async[" + std::to_string(i) + "]")) return *e;
  }
  for (size_t i = 0; i < s.deposed.size(); ++i) {
    if (auto e = place(s.deposed[i], "deposed[" + std::to_string(i) + "]")) return *e;
  }
  return s;
}

Result<ClusterState> ClusterState::parse(std::string_view text) {
  // Every peer parses the same text after each write (N peers in one simulator process,
  // and again after a reconnect): the last few texts parsed on this thread, and their
  // results, are kept, so the same text is parsed once.
  struct Parsed {
    std::string text;
    std::optional<Result<ClusterState>> result;
  };
  thread_local std::array<Parsed, 4> recent;
  thread_local size_t next = 0;
  for (const Parsed& p : recent) {
    if (p.result && p.text == text) return *p.result;
  }
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  Result<ClusterState> r = j.is_discarded() ? Result<ClusterState>(Error{"cluster state: not valid JSON"}) : fromJson(j);
  Parsed& slot = recent[next];
  next = (next + 1) % recent.size();
  slot.text.assign(text);
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
  return j;
}

}  // namespace dugong
