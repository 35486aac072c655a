// Helpers for the zk tests: identities and states, and an event recorder that runs
// the io_context until a condition holds (bounded, never a fixed sleep).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "statemachine/cluster_state.h"
#include "statemachine/event.h"
#include "zk/client.h"
#include "zk/session.h"
#include "zk/testing/zookeeper_server.h"

namespace dugong::zk::test {

inline constexpr std::chrono::seconds kWait{30};

inline PeerIdentity peer(const std::string& id) {
  PeerIdentity p;
  p.id = id;
  p.ip = "127.0.0.1";
  p.pgUrl = "tcp://postgres@127.0.0.1:5432/postgres";
  p.zoneId = "z1";
  return p;
}

inline ClusterState state(int64_t generation, const std::string& primary = "a", const std::string& sync = "b") {
  ClusterState s;
  s.generation = generation;
  s.primary = peer(primary);
  s.sync = peer(sync);
  s.initWal = WalPosition::parse("0/16B3748").value();
  return s;
}

inline std::vector<std::string> ids(const PeerList& peers) {
  std::vector<std::string> out;
  for (const auto& p : peers) out.push_back(p.id);
  return out;
}

// Runs `io` until `pred` holds or `timeout` passes. Returns pred().
inline bool runUntil(boost::asio::io_context& io, const std::function<bool()>& pred,
                     std::chrono::milliseconds timeout = kWait) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto work = boost::asio::make_work_guard(io);  // run_for waits instead of spinning
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    io.restart();
    io.run_for(std::chrono::milliseconds(20));
  }
  return true;
}

inline ZkOptions options(const std::string& connect, const std::string& cluster, int sessionTimeoutMs = 4000) {
  ZkOptions o;
  o.connectString = connect;
  o.cluster = cluster;
  o.sessionTimeoutMs = sessionTimeoutMs;
  o.backoffInitialMs = 50;
  o.backoffMaxMs = 1000;
  return o;
}

// One peer's session with everything it delivered.
class Peer {
 public:
  Peer(boost::asio::io_context& io, ZkOptions opts, const std::string& id)
      : io_(io), session_(std::make_unique<Session>(io, std::move(opts), peer(id), [this](Event e) {
          events.push_back(std::move(e));
        })) {}

  void start() { ASSERT_TRUE(session_->start().ok()); }
  Session& session() { return *session_; }
  void destroy() { session_.reset(); }

  int count(size_t from = 0) const { return static_cast<int>(events.size() - from); }
  template <class T>
  std::vector<T> all(size_t from = 0) const {
    std::vector<T> out;
    for (size_t i = from; i < events.size(); ++i) {
      if (auto* e = std::get_if<T>(&events[i])) out.push_back(*e);
    }
    return out;
  }
  template <class T>
  const T* last() const {
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (auto* e = std::get_if<T>(&*it)) return e;
    }
    return nullptr;
  }
  // The active peers as last delivered (by init or change).
  std::vector<std::string> active() const {
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (auto* i = std::get_if<ZkInitialized>(&*it)) return ids(i->active);
      if (auto* c = std::get_if<ActivePeersChanged>(&*it)) return ids(c->active);
    }
    return {};
  }
  // The state as last delivered.
  StateNode state() const {
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (auto* i = std::get_if<ZkInitialized>(&*it)) return i->state;
      if (auto* c = std::get_if<ClusterStateChanged>(&*it)) return c->state;
    }
    return {};
  }
  int inits() const { return static_cast<int>(all<ZkInitialized>().size()); }

  bool waitInit(int n = 1) {
    return runUntil(io_, [&] { return inits() >= n; });
  }

  // Writes and waits for the result.
  StateWriteFinished put(const ClusterState& s, int32_t expected, const std::string& reason = "test") {
    std::optional<StateWriteFinished> result;
    session_->putClusterState(s, expected, [&](StateWriteFinished f) { result = f; }, reason);
    EXPECT_TRUE(runUntil(io_, [&] { return result.has_value(); }));
    return result.value_or(StateWriteFinished{false, "no answer", false, -1});
  }

  std::vector<Event> events;

 private:
  boost::asio::io_context& io_;
  std::unique_ptr<Session> session_;
};

inline std::unique_ptr<Client> client(const std::string& connect, const std::string& cluster) {
  auto c = Client::connect(options(connect, cluster));
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error());
  return c.ok() ? std::move(c).value() : nullptr;
}

}  // namespace dugong::zk::test
