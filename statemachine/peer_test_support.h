// What the Peer tests (peer_test.cc, peer_history_test.cc, peer_setup_test.cc) share:
// peer identities, cluster states, a harness that steps one peer, and reading a step's
// actions.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "statemachine/peer.h"

namespace dugong::peer_test {

inline PeerIdentity ident(const std::string& id) {
  return {id, "10.0.0.9", "tcp://postgres@" + id + ":5432/postgres", id, {}};
}

inline PeerList peers(const std::vector<std::string>& ids) {
  PeerList out;
  for (const auto& id : ids) out.push_back(ident(id));
  return out;
}

// The actions of type T, in order.
template <class T>
std::vector<T> only(const std::vector<Action>& actions) {
  std::vector<T> out;
  for (const auto& a : actions) {
    if (auto* x = std::get_if<T>(&a)) out.push_back(*x);
  }
  return out;
}

// Some decision logged among `actions` contains `text`.
inline bool logged(const std::vector<Action>& actions, const std::string& text) {
  for (const auto& l : only<LogDecision>(actions)) {
    if (l.message.find(text) != std::string::npos) return true;
  }
  return false;
}

inline constexpr EpochMs kT0 = 1767225600000;

inline StateNode node(const ClusterState& s, int32_t version) { return {true, s.serialize(), version}; }

inline ClusterState cluster(int64_t gen, const std::string& primary, const std::string& sync,
                     std::vector<std::string> async = {}, std::vector<std::string> deposed = {}) {
  ClusterState s;
  s.generation = gen;
  s.primary = ident(primary);
  s.sync = ident(sync);
  for (const auto& a : async) s.async.push_back(ident(a));
  for (const auto& d : deposed) s.deposed.push_back(ident(d));
  return s;
}

// Steps one Peer ("me") with a clock that moves 1 ms per event.
struct Harness {
  explicit Harness(bool singleton = false, PeerIdentity self = ident("me"))
      : peer(PeerOptions{std::move(self), singleton, 1000}) {}
  explicit Harness(PeerOptions options) : peer(std::move(options)) {}
  std::vector<Action> step(const Event& e) { return peer.step(now++, e); }
  std::vector<Action> start(std::optional<ClusterState> s, std::vector<std::string> active, bool online = false,
                            bool setUp = false, int32_t version = 0) {
    auto a = step(PgInitialized{online, setUp});
    auto b = step(ZkInitialized{s ? node(*s, version) : StateNode{}, peers(std::move(active))});
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  // As start(), for a peer the state names primary: its confirmation of the state (a
  // write back at `version`) lands as version + 1.
  std::vector<Action> startAsPrimary(const ClusterState& s, std::vector<std::string> active, int32_t version = 0) {
    auto a = start(s, std::move(active), false, false, version);
    auto b = step(StateWriteFinished{true, "", false, version + 1});
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  // Completes a pending apply successfully.
  std::vector<Action> applied(bool online) { return step(PgConfigApplied{true, "", online}); }
  Peer peer;
  EpochMs now = kT0;
};

}  // namespace dugong::peer_test
