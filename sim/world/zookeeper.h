// The simulated ZooKeeper's data, shared by both simulators: the cluster-state node
// (changed only by a test-and-set on its version, each change with a history record)
// and the election (one ephemeral sequential node per session; the active peers are
// the peers holding a node, in the order of their first one). This is what the ensemble
// stores; sessions and the delivery to each agent are in sim_coordinator.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "statemachine/event.h"

namespace dugong::simworld {

class ZkStateNode {
 public:
  bool exists() const { return exists_; }
  int32_t version() const { return version_; }
  const std::string& data() const { return data_; }
  StateNode node() const { return StateNode{exists_, data_, version_}; }
  int historyRecords() const { return history_; }

  // Whether a test-and-set expecting `expectedVersion` (-1: create) succeeds now.
  bool accepts(int32_t expectedVersion) const {
    return expectedVersion == -1 ? !exists_ : exists_ && version_ == expectedVersion;
  }
  // Stores `data` as the next version, with a history record: a successful
  // test-and-set. Returns the new version.
  int32_t put(std::string data) {
    data_ = std::move(data);
    version_ = exists_ ? version_ + 1 : 0;
    exists_ = true;
    ++history_;
    return version_;
  }

 private:
  bool exists_ = false;
  std::string data_;
  int32_t version_ = -1;
  int history_ = 0;
};

class ZkElection {
 public:
  // A session of `peer` creates its election node.
  uint64_t join(uint64_t session, const std::string& peer) {
    nodes_.push_back(Node{nextSeq_, session, peer});
    return nextSeq_++;
  }
  // The session ended (closed or expired): its node goes.
  void leave(uint64_t session) {
    std::erase_if(nodes_, [session](const Node& e) { return e.session == session; });
  }
  bool holds(const std::string& peer) const {
    return std::any_of(nodes_.begin(), nodes_.end(), [&peer](const Node& e) { return e.peer == peer; });
  }
  // The session of `peer`'s first election node (in session order), or 0 for none: the
  // node a peer's reports are read from, and a takeover's write checks.
  uint64_t firstSessionOf(const std::string& peer) const {
    for (const Node& e : nodes_) {
      if (e.peer == peer) return e.session;
    }
    return 0;
  }
  // Calls fn(peer, session) for each peer's first election node, in session order.
  template <class F>
  void forEachFirst(F fn) const {
    std::vector<const std::string*> seen;
    for (const Node& e : nodes_) {
      if (std::any_of(seen.begin(), seen.end(), [&e](const std::string* p) { return *p == e.peer; })) continue;
      seen.push_back(&e.peer);
      fn(e.peer, e.session);
    }
  }
  // The active peers, in the order of their first election node.
  std::vector<std::string> active() const {
    std::vector<std::string> out;
    for (const Node& e : nodes_) {
      if (std::find(out.begin(), out.end(), e.peer) == out.end()) out.push_back(e.peer);
    }
    return out;
  }

 private:
  struct Node {
    uint64_t seq = 0;
    uint64_t session = 0;
    std::string peer;
  };
  std::vector<Node> nodes_;
  uint64_t nextSeq_ = 0;
};

}  // namespace dugong::simworld
