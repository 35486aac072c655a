// Helpers for the zk tests: identities and states, an event recorder that runs the
// io_context until a condition holds (bounded, never a fixed sleep), and the ZooKeeper a
// case works on.
#pragma once

#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "statemachine/cluster_state.h"
#include "statemachine/event.h"
#include "zk/client.h"
#include "zk/session.h"
#include "zk/testing/shared_zookeeper.h"
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

// `connect` may name a chroot after the servers ("host:port/chroot", CaseZooKeeper).
inline ZkOptions options(const std::string& connect, const std::string& cluster, int sessionTimeoutMs = 4000) {
  ZkOptions o;
  const auto slash = connect.find('/');
  o.connectString = connect.substr(0, slash);
  if (slash != std::string::npos) o.chroot = connect.substr(slash);
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

// The ZooKeeper of a case that neither stops, pauses, restarts nor cuts its server (record
// 0091). In a ctest run, the run's one server (the fixture zk_zookeeper of
// zk/CMakeLists.txt sets DUGONG_CLUSTER_FIXTURES; zk/testing/shared_zookeeper.h), under a
// chroot of the case's own, named after the case and its process; run by hand, a
// standalone server of the case's own, started at the first connectString(). A case
// that disturbs its server starts one of its own (ZooKeeperCluster) instead.
class CaseZooKeeper {
 public:
  // "host:port/chroot" (options() and client() take it), or the own server's.
  const std::string& connectString() {
    if (connect_.empty()) connect_ = open();
    return connect_;
  }

 private:
  std::string open() {
    const auto shared = dugong::testing::sharedZooKeeperConnect();
    if (!shared) {
      own_ = testing::ZooKeeperCluster::standalone();
      return own_->connectString();
    }
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "case";
    for (char& ch : name) {
      if (ch == '/') ch = '.';
    }
    const std::string chroot = "/" + name + "-" + std::to_string(::getpid());
    ZkOptions maker;
    maker.connectString = *shared;
    maker.root = chroot;
    auto made = Client::connect(maker, kWait);
    auto layout = made ? made.value()->ensureLayout() : Result<bool>(Error{made.error()});
    if (!layout) throw std::runtime_error("cannot make " + chroot + " on the shared ZooKeeper: " + layout.error());
    return *shared + chroot;
  }

  std::unique_ptr<testing::ZooKeeperCluster> own_;
  std::string connect_;
};

inline std::unique_ptr<Client> client(const std::string& connect, const std::string& cluster) {
  auto c = Client::connect(options(connect, cluster));
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error());
  return c.ok() ? std::move(c).value() : nullptr;
}

}  // namespace dugong::zk::test
