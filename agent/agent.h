// The dugong agent: one per postgres instance. The driver (driver/driver.h: the state
// machine, its actions, postgres' health, withdrawal) on the daemon's environment
// (agent/daemon_env.h: Asio timers, the ZooKeeper session, the pg adapter), plus the
// status endpoints.
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
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/cluster_config_follower.h"
#include "agent/config.h"
#include "agent/daemon_env.h"
#include "driver/driver.h"
#include "agent/hooks.h"
#include "agent/http_api.h"
#include "agent/http_server.h"
#include "agent/instance_lock.h"
#include "agent/request_follower.h"
#include "agent/session_file.h"
#include "agent/process_stamp.h"
#include "agent/promise_record.h"
#include "agent/status_report.h"
#include "agent/switchover.h"
#include "agent/watchdog.h"
#include "pg/adapter.h"
#include "pg/pg_status.h"

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
  // Stops this run of the agent, keeping its ZooKeeper session (and election node) for
  // a restart (agent/session_file.h), stops postgres if configured to, then calls
  // `done`. Postgres keeps running otherwise. The process must then exit without
  // waiting for the session (sessionDetached()).
  void stop(std::function<void()> done);
  bool sessionDetached() const { return coordinator_.detached(); }
  // Non-zero after a fatal error (the agent then stops itself through `onFatal`).
  int exitCode() const { return exitCode_ != 0 || (driver_ && driver_->failed()) ? 1 : 0; }
  void onFatal(std::function<void()> cb) { onFatal_ = std::move(cb); }
  // The watchdog process (agent/watchdog.h), forked by main before any thread: told on
  // each applied role whether this peer is the primary, disarmed when the agent stops.
  void setWatchdog(std::unique_ptr<Watchdog> watchdog) { watchdog_ = std::move(watchdog); }
  // The loop has returned (the agent stopped): its beats to the watchdog end, so that the
  // exit that follows is not taken for a hung loop.
  void loopEnded();

  // The HTTP API (agent/http_api.h), answered on the loop.
  void handle(const HttpRequest& request, HttpServer::Respond respond);
  int httpPort() const { return http_ ? http_->port() : 0; }

 private:
  void operatorRequest(const HttpRequest& request, const std::string& action, HttpServer::Respond respond);
  void failsafeRequest(const FailsafeCall& call, HttpServer::Respond respond);
  void tick();
  StatusSources statusSources() const;
  std::optional<zk::SessionCredentials> savedSession();
  // How long this run holds its takeovers for the promises of earlier runs (recorded
  // again as this run's own, so that a restart within it keeps it).
  int64_t earlierPromiseMs();
  void roleChanged(Role previous, Role applied);
  void takeOverWatchdogRecord();
  void endPreviousWatchdog(Role applied);
  // Queues hook `name` at `path` with DUGONG_EVENT, DUGONG_CLUSTER and DUGONG_PEER added
  // to `env`.
  void runHook(const std::string& name, const std::string& event, const std::string& path,
               std::vector<std::string> args, std::vector<std::string> env);

  boost::asio::io_context& io_;
  AgentConfig config_;
  AsioClock clock_;
  ZkCoordinator coordinator_;
  HttpPeerLink peers_;
  SeenNonces failsafeNonces_;  // of the failsafe requests this agent accepted lately
  SpdlogSink log_;
  std::unique_ptr<InstanceLock> lock_;
  std::unique_ptr<SessionFile> sessionFile_;
  std::unique_ptr<PromiseRecord> promises_;
  std::unique_ptr<pg::PgAdapter> pg_;
  std::unique_ptr<PgPostgres> postgres_;
  std::unique_ptr<ClusterConfigFollower> clusterConfig_;  // applies <root>/config to postgres
  std::unique_ptr<RequestFollower> requests_;             // restart/reload requests for this peer
  std::unique_ptr<HookRunner> hooks_;  // null: no hook configured
  std::unique_ptr<driver::Runner> driver_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<Switchover> switchover_;
  boost::asio::steady_timer statusTimer_;  // polls postgres' status; its tick is the watchdog's beat
  std::chrono::milliseconds tickInterval_;
  std::chrono::steady_clock::time_point lastStatusPoll_;
  bool statusInFlight_ = false;
  std::unique_ptr<Watchdog> watchdog_;
  std::optional<ProcessStamp> previousWatchdog_;  // left armed by the previous run's clean stop
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  pg::PgStatus status_;
  int exitCode_ = 0;
  bool stopping_ = false;
  std::thread stopHookWaiter_;  // waits for onStop off the loop, then calls stop()'s done
  std::function<void()> onFatal_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace dugong::agent
