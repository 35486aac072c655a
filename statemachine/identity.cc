#include "statemachine/identity.h"

#include <algorithm>

namespace dugong {

nlohmann::json PeerTags::toJson() const { return {{"noloadbalance", noloadbalance}, {"nofailover", nofailover}}; }

// Fields set one by one rather than from an initializer list, which builds a two-element
// array per field before it becomes an object (an identity is written for every peer
// of every cluster state written). Same object: its keys are ordered whatever the order.
nlohmann::json PeerIdentity::toJson() const {
  nlohmann::json j = nlohmann::json::object();
  j["id"] = id;
  j["ip"] = ip;
  j["pgUrl"] = pgUrl;
  j["zoneId"] = zoneId;
  if (backupUrl) j["backupUrl"] = *backupUrl;
  if (tags.any()) j["tags"] = tags.toJson();
  return j;
}

Result<PeerIdentity> PeerIdentity::fromJson(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) return Error{what + ": expected a peer identity object, found " + j.dump()};
  PeerIdentity p;
  for (auto [key, field] : {std::pair{"id", &p.id}, {"ip", &p.ip}, {"pgUrl", &p.pgUrl}, {"zoneId", &p.zoneId}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Error{what + "." + key + ": expected a string"};
    *field = it->get<std::string>();
  }
  if (p.id.empty()) return Error{what + ".id: must not be empty"};
  if (auto it = j.find("backupUrl"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return Error{what + ".backupUrl: expected a string"};
    p.backupUrl = it->get<std::string>();
  }
  if (auto it = j.find("tags"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Error{what + ".tags: expected an object"};
    for (auto [key, field] : {std::pair{"noloadbalance", &p.tags.noloadbalance}, {"nofailover", &p.tags.nofailover}}) {
      auto t = it->find(key);
      if (t == it->end()) continue;
      if (!t->is_boolean()) return Error{what + ".tags." + key + ": expected true or false"};
      *field = t->get<bool>();
    }
  }
  return p;
}

bool containsPeer(const PeerList& peers, const std::string& id) { return indexOfPeer(peers, id) >= 0; }

int indexOfPeer(const PeerList& peers, const std::string& id) {
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

nlohmann::json peersToJson(const PeerList& peers) {
  nlohmann::json j = nlohmann::json::array();
  j.get_ref<nlohmann::json::array_t&>().reserve(peers.size());
  for (const auto& p : peers) j.push_back(p.toJson());
  return j;
}

Result<PeerList> peersFromJson(const nlohmann::json& j, const std::string& what) {
  if (!j.is_array()) return Error{what + ": expected an array of peer identities"};
  PeerList out;
  for (size_t i = 0; i < j.size(); ++i) {
    auto p = PeerIdentity::fromJson(j[i], what + "[" + std::to_string(i) + "]");
    if (!p) return Error{p.error()};
    out.push_back(std::move(p).value());
  }
  return out;
}

std::string peerIds(const PeerList& peers) {
  std::string s;
  for (size_t i = 0; i < peers.size(); ++i) s += (i ? ", " : "") + peers[i].id;
  return s;
}

std::string peerIdList(const PeerList& peers) { return "[" + peerIds(peers) + "]"; }

bool sameIds(const PeerList& a, const PeerList& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const PeerIdentity& x, const PeerIdentity& y) { return x.id == y.id; });
}

}  // namespace dugong
