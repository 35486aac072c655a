// PgAdapter: the postgres adapter as the agent uses it, on the agent's one io_context.
//
// Every operation runs on a worker thread and its result is posted back to the
// io_context, so the event loop never blocks. Two workers: the control worker runs
// init/apply (which may take minutes: a rebuild), in order; the query worker runs
// readWal/status/health checks/the primary's sync check (bounded by queryTimeout),
// so that status stays available during a rebuild.
//
// Callbacks run on the io_context. After the adapter is destroyed no callback runs.
// The destructor waits for a running command to finish (each is bounded by its timeout).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "pg/controller.h"
#include "pg/options.h"
#include "pg/pg_status.h"
#include "statemachine/event.h"
#include "statemachine/pg_config.h"
#include "statemachine/result.h"

namespace dugong::pg {

class PgAdapter {
 public:
  // Validates the options (see validate()); errors are returned, nothing is touched.
  static Result<std::unique_ptr<PgAdapter>> create(boost::asio::io_context& loop, PgOptions options);
  ~PgAdapter();
  PgAdapter(const PgAdapter&) = delete;
  PgAdapter& operator=(const PgAdapter&) = delete;

  const PgOptions& options() const { return controller_.options(); }

  void init(std::function<void(PgInitialized)> done);
  // Reconfigures and starts/stops/promotes/rebuilds postgres to match `config`.
  void apply(PgConfig config, std::function<void(PgConfigApplied)> done);
  // See PgController::fence. Runs on the control worker, after any apply.
  void fence(std::optional<PeerIdentity> newSync, std::function<void(PgFenced)> done);
  // See PgController::fenceQuorum. On the control worker, like a fence.
  void fenceQuorum(StandbyQuorum to, bool endWalsenders, std::chrono::milliseconds timeout,
                   std::function<void(PgFenced)> done);
  void readWal(std::function<void(WalPositionRead)> done);
  // See PgController::syncStandby. On the query worker.
  void syncStandby(std::string standbyName, std::function<void(Result<SyncStandbyView>)> done);
  // See PgController::quorumMembers. On the query worker.
  void quorumMembers(std::vector<std::string> memberNames, std::function<void(Result<QuorumMembersView>)> done);
  void dataState(std::function<void(Result<PeerDataState>)> done);
  // See PgController::awaitUpstreamStop. On the control worker, before a fence.
  void awaitUpstreamStop(std::chrono::milliseconds timeout, std::function<void(bool)> done);
  // See PgController::rejoin. On the control worker, like apply.
  void rejoin(PeerIdentity primary, RejoinLimit limit, std::function<void(PgRejoined)> done);
  // See PgController::stopWrites / resumeWrites. The writes mode is set in the call
  // (sticky: no apply lifts a stop, only resumeWrites); the rest on a worker of their
  // own, so that they never queue behind a slow query, a rebuild or a transition (a stop
  // waits for no apply; a resume waits for a running one).
  void stopWrites(std::function<void(Result<WritesStopped>)> done);
  void resumeWrites(std::function<void(Result<bool>)> done);
  // See PgController::shutDownWrites: the postmaster is signalled at once (in the call),
  // the rest on the same worker as stopWrites.
  void shutDownWrites(std::function<void(Result<bool>)> done);
  void status(std::function<void(PgStatus)> done);
  // See PgController::applyClusterConfig. On the control worker, like apply.
  void applyClusterConfig(ClusterConfig config, std::function<void(Result<ClusterConfigApplied>)> done);
  // See PgController::restartInPlace / reloadNow. On the control worker, like apply.
  void restartInPlace(std::function<void(Result<bool>)> done);
  void reloadNow(std::function<void(Result<bool>)> done);

  // Starts the periodic health check (SELECT 1 every healthInterval, bounded by
  // queryTimeout). `onChange(healthy, detail)` runs for the first result and then for
  // each change between healthy and unhealthy. Also drives the primary's check of its
  // sync (every writablePollInterval while it waits), which needs no caller.
  void startHealthCheck(std::function<void(bool healthy, const std::string& detail)> onChange);
  void stopHealthCheck();
  // For tests: see PgController::setTestHook (the hook runs on the workers).
  void setTestHook(std::function<void(const std::string& point)> hook) { controller_.setTestHook(std::move(hook)); }

  // The last health check failed and found no live postmaster (postmaster.pid names
  // no running postgres process: it crashed or was killed).
  bool postmasterGone() const { return postmasterGone_; }

 private:
  PgAdapter(boost::asio::io_context& loop, PgOptions options);
  template <class T>
  void onWorker(boost::asio::thread_pool& worker, std::function<T()> work, std::function<void(T)> done);
  void scheduleHealth();
  void scheduleWritablePoll(bool now = false);

  boost::asio::io_context& loop_;
  PgController controller_;
  boost::asio::thread_pool control_{1};
  boost::asio::thread_pool query_{1};
  boost::asio::thread_pool writes_{1};
  // The primary's catch-up poll alone: it opens writes, so it never waits behind a status
  // read or a WAL read on the query worker (one took 600 ms after a promotion).
  boost::asio::thread_pool catchUp_{1};
  boost::asio::steady_timer healthTimer_;
  boost::asio::steady_timer writableTimer_;
  std::function<void(bool, const std::string&)> onHealthChange_;
  bool healthRunning_ = false;
  bool healthInFlight_ = false;
  bool writablePolling_ = false;
  int lastHealthy_ = -1;  // -1 unknown, 0 unhealthy, 1 healthy
  bool postmasterGone_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace dugong::pg
