// A peer's identity, as stored in its election node and in the cluster state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/result.h"

namespace dugong {

// An operator's marks on a peer (dugong.yaml `tags`), published with its identity.
//   noloadbalance: the replica endpoints of its agent answer 503 (kept out of read pools);
//   nofailover: the state machine never makes it the sync, so it never takes over.
struct PeerTags {
  bool noloadbalance = false;
  bool nofailover = false;

  bool any() const { return noloadbalance || nofailover; }
  nlohmann::json toJson() const;  // {"noloadbalance": b, "nofailover": b}
};

// {"id", "ip", "pgUrl", "zoneId", "backupUrl"?, "tags"?}. Peers are compared by id only;
// the other fields are for reaching the peer and for operators. "tags" is written only
// when a tag is set, so that untagged identities keep Manatee's form.
struct PeerIdentity {
  std::string id;
  std::string ip;
  std::string pgUrl;  // tcp://postgres@10.0.0.5:5432/postgres
  std::string zoneId;
  std::optional<std::string> backupUrl;
  PeerTags tags = {};  // a default initializer: brace-initialized identities may omit it

  nlohmann::json toJson() const;
  // Checks the schema: id, ip, pgUrl and zoneId are strings, id is not empty, backupUrl
  // is a string when present, tags an object of booleans when present. `what` names the value in the error ("sync", "async[2]").
  static Result<PeerIdentity> fromJson(const nlohmann::json& j, const std::string& what);

  bool sameAs(const PeerIdentity& other) const { return id == other.id; }
};

using PeerList = std::vector<PeerIdentity>;

// True if `peers` holds a peer with this id.
bool containsPeer(const PeerList& peers, const std::string& id);
// The position of the peer with this id, or -1.
int indexOfPeer(const PeerList& peers, const std::string& id);
// "a, b" ("" for none): the peers' ids, the one way a list of peers is written.
std::string peerIds(const PeerList& peers);
// "[a, b]": the same in brackets, for logs and reasons.
std::string peerIdList(const PeerList& peers);
// The same ids in the same order.
bool sameIds(const PeerList& a, const PeerList& b);

nlohmann::json peersToJson(const PeerList& peers);
Result<PeerList> peersFromJson(const nlohmann::json& j, const std::string& what);

}  // namespace dugong
