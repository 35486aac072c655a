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

// No peer may hold two places: that state could make two peers act on one role.
std::optional<Error> repeatedPeer(const ClusterState& s) {
  std::vector<std::string_view> seen;  // a handful of peers: a scan costs less than a set's nodes
  seen.reserve(2 + s.async.size() + s.deposed.size());
  auto place = [&seen](const PeerIdentity& peer, const std::string& where) -> std::optional<Error> {
    if (std::find(seen.begin(), seen.end(), peer.id) != seen.end()) {
      return Error{"cluster state: peer \"" + peer.id + "\" appears more than once (again as " + where + ")"};
    }
    seen.push_back(peer.id);
    return std::nullopt;
  };
  if (auto e = place(s.primary, "primary")) return e;
  if (s.sync) {
    if (auto e = place(*s.sync, "sync")) return e;
  }
  for (size_t i = 0; i < s.async.size(); ++i) {
    if (auto e = place(s.async[i], "async[" + std::to_string(i) + "]")) return e;
  }
  for (size_t i = 0; i < s.deposed.size(); ++i) {
    if (auto e = place(s.deposed[i], "deposed[" + std::to_string(i) + "]")) return e;
  }
  return std::nullopt;
}

// The text in the one form serialize() writes (its key order, no spaces, strings of
// printable ASCII without escapes, no promote, a freeze only true or {"date","reason"}),
// read without a JSON tree: a state is read this way thousands of times a second in the
// simulators. Anything else, and any state that breaks a rule, is left to the JSON
// parser and fromJson (nullopt), so the result and every error are theirs.
class SerializedForm {
 public:
  static std::optional<ClusterState> read(std::string_view text) {
    SerializedForm r(text);
    ClusterState s;
    if (!r.literal("{\"async\":") || !r.peers(s.async) || !r.literal(",\"deposed\":") || !r.peers(s.deposed)) {
      return std::nullopt;
    }
    if (r.literal(",\"freeze\":") && !r.freeze(s.freeze)) return std::nullopt;
    if (!r.literal(",\"generation\":") || !r.positive(s.generation)) return std::nullopt;
    if (r.literal(",\"initTimeline\":") && !r.positive(s.initTimeline)) return std::nullopt;
    std::string wal;
    if (!r.literal(",\"initWal\":") || !r.string(wal)) return std::nullopt;
    auto w = WalPosition::parse(wal);
    if (!w) return std::nullopt;
    s.initWal = w.value();
    if (r.literal(",\"oneNodeWriteMode\":") && !r.boolean(s.oneNodeWriteMode)) return std::nullopt;
    if (!r.literal(",\"primary\":") || !r.peer(s.primary) || !r.literal(",\"sync\":")) return std::nullopt;
    if (!r.literal("null")) {
      if (!r.peer(s.sync.emplace())) return std::nullopt;
    } else if (!s.oneNodeWriteMode) {
      return std::nullopt;
    }
    if (!r.literal("}") || r.pos_ != r.text_.size() || repeatedPeer(s)) return std::nullopt;
    return s;
  }

 private:
  explicit SerializedForm(std::string_view text) : text_(text) {}

  bool literal(std::string_view s) {
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }
  bool string(std::string& out) {
    if (!literal("\"")) return false;
    for (size_t end = pos_; end < text_.size(); ++end) {
      const auto c = static_cast<unsigned char>(text_[end]);
      if (c == '"') {
        out.assign(text_.substr(pos_, end - pos_));
        pos_ = end + 1;
        return true;
      }
      if (c < 0x20 || c >= 0x7f || c == '\\') return false;
    }
    return false;
  }
  bool boolean(bool& out) {
    if (literal("true")) {
      out = true;
      return true;
    }
    out = false;
    return literal("false");
  }
  // 1 to 18 digits, the first not 0: an integer of at least 1 that fits an int64_t.
  bool positive(int64_t& out) {
    size_t end = pos_;
    while (end < text_.size() && end - pos_ < 19 && text_[end] >= '0' && text_[end] <= '9') ++end;
    if (end == pos_ || end - pos_ > 18 || text_[pos_] == '0') return false;
    out = 0;
    for (; pos_ < end; ++pos_) out = out * 10 + (text_[pos_] - '0');
    return true;
  }
  // true, or {"date","reason"} (an operator's freeze): as the JSON parser builds them.
  bool freeze(nlohmann::json& out) {
    if (literal("true")) {
      out = true;
      return true;
    }
    std::string date, reason;
    if (!literal("{\"date\":") || !string(date) || !literal(",\"reason\":") || !string(reason) || !literal("}")) {
      return false;
    }
    out = nlohmann::json::object();
    out["date"] = std::move(date);
    out["reason"] = std::move(reason);
    return true;
  }
  bool peer(PeerIdentity& p) {
    if (!literal("{")) return false;
    if (literal("\"backupUrl\":")) {
      if (!string(p.backupUrl.emplace()) || !literal(",")) return false;
    }
    if (!literal("\"id\":") || !string(p.id) || p.id.empty() || !literal(",\"ip\":") || !string(p.ip) ||
        !literal(",\"pgUrl\":") || !string(p.pgUrl)) {
      return false;
    }
    if (literal(",\"tags\":{\"nofailover\":")) {
      if (!boolean(p.tags.nofailover) || !literal(",\"noloadbalance\":") || !boolean(p.tags.noloadbalance) ||
          !literal("}")) {
        return false;
      }
    }
    return literal(",\"zoneId\":") && string(p.zoneId) && literal("}");
  }
  bool peers(PeerList& out) {
    if (!literal("[")) return false;
    if (literal("]")) return true;
    do {
      if (!peer(out.emplace_back())) return false;
    } while (literal(","));
    return literal("]");
  }

  std::string_view text_;
  size_t pos_ = 0;
};

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

  if (auto e = repeatedPeer(s)) return *e;
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
  std::optional<Result<ClusterState>> r;
  if (auto s = SerializedForm::read(text)) {
    r.emplace(std::move(*s));
  } else {
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    r.emplace(j.is_discarded() ? Result<ClusterState>(Error{"cluster state: not valid JSON"}) : fromJson(j));
  }
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
