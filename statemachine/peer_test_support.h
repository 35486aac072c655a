// What the Peer tests (peer_test.cc, peer_setup_test.cc) share: peer identities and
// reading a step's actions.
#pragma once

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

}  // namespace dugong::peer_test
