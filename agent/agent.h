// The dugong agent: one per postgres instance. Wires the ZooKeeper session and the
// postgres adapter to the pure state machine on ONE io_context, carries out the state
// machine's actions in order, watches postgres' health and serves the status endpoints.
//
// Threading: everything runs on the io_context's single thread; the adapters post
// their completions into it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/config.h"
#include "agent/http_server.h"
#include "pg/adapter.h"
#include "statemachine/peer.h"
#include "zk/session.h"

namespace dugong::agent {

class Agent {
 public:
  // REQUIRES: `io` outlives the Agent and runs on one thread.
  Agent(boost::asio::io_context& io, AgentConfig config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Starts postgres' adapter, the HTTP server and the ZooKeeper session. Errors (bad
  // options, HTTP address in use) are returned before anything is changed.
  Result<bool> start();
  // Leaves ZooKeeper (closing the session removes this peer's election node), stops
  // postgres if configured to, then calls `done`. Postgres keeps running otherwise.
  void stop(std::function<void()> done);
  // Non-zero after a fatal error (the agent then stops itself through `onFatal`).
  int exitCode() const { return exitCode_; }
  void onFatal(std::function<void()> cb) { onFatal_ = std::move(cb); }

  // The status endpoints: /ping, /state, /primary, /replica, /metrics.
  HttpReply handle(const std::string& path) const;
  int httpPort() const { return http_ ? http_->port() : 0; }

  nlohmann::json stateJson() const;
  std::string metricsText() const;
  bool isWritablePrimary() const;
  bool isStreamingReplica() const;

 private:
  void step(const Event& event);
  // A deposed peer's state machine ignores everything. Once an operator has rebuilt
  // this peer and removed it from `deposed`, the agent starts a fresh one.
  void restartStateMachineIfRebuilt(const Event& event);
  void carryOut(const Action& action);
  void post(Event event);
  void startSession();
  void applyPg(const PgConfig& config, bool fromPeer);
  void onHealth(bool healthy, const std::string& detail);
  void noteUnhealthy();
  void healthTick();
  void pollStatus();
  bool expectPostgresOnline() const;

  boost::asio::io_context& io_;
  AgentConfig config_;
  std::unique_ptr<Peer> peer_;
  // What ZooKeeper last told us, to start a fresh state machine after a rebuild.
  StateNode lastStateNode_;
  PeerList lastActive_;
  std::unique_ptr<pg::PgAdapter> pg_;
  std::unique_ptr<zk::Session> zk_;
  std::unique_ptr<HttpServer> http_;
  std::map<TimerId, std::unique_ptr<boost::asio::steady_timer>> timers_;
  boost::asio::steady_timer statusTimer_;
  boost::asio::steady_timer healthTimer_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);

  // Postgres: one transition at a time, whether the state machine or a restart after
  // a crash asked for it.
  bool pgBusy_ = false;
  std::optional<PgConfig> queuedPeerApply_;
  std::optional<PgConfig> lastApplied_;
  pg::PgStatus status_;
  bool healthy_ = true;
  std::optional<std::chrono::steady_clock::time_point> unhealthySince_;
  std::chrono::steady_clock::time_point lastTransitionDone_{};
  std::string unhealthyDetail_;
  bool withdrawn_ = false;
  bool stopping_ = false;
  int exitCode_ = 0;
  std::function<void()> onFatal_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  struct Counters {
    uint64_t transitions = 0, transitionFailures = 0, restarts = 0;
    uint64_t stateWrites = 0, stateWriteFailures = 0;
    uint64_t zkSessions = 0, withdrawals = 0, decisions = 0;
  } counters_;
};

}  // namespace dugong::agent
