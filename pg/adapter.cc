#include "pg/adapter.h"

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

namespace dugong::pg {

Result<std::unique_ptr<PgAdapter>> PgAdapter::create(boost::asio::io_context& loop, PgOptions options) {
  auto v = validate(options);
  if (!v) return Error{"postgres options: " + v.error()};
  return std::unique_ptr<PgAdapter>(new PgAdapter(loop, std::move(options)));
}

PgAdapter::PgAdapter(boost::asio::io_context& loop, PgOptions options)
    : loop_(loop), controller_(std::move(options)), healthTimer_(loop), writableTimer_(loop) {}

PgAdapter::~PgAdapter() {
  alive_.reset();
  healthTimer_.cancel();
  writableTimer_.cancel();
  control_.join();
  query_.join();
  writes_.join();
  catchUp_.join();
}

template <class T>
void PgAdapter::onWorker(boost::asio::thread_pool& worker, std::function<T()> work, std::function<void(T)> done) {
  std::weak_ptr<int> alive = alive_;
  boost::asio::post(worker, [this, alive, work = std::move(work), done = std::move(done)]() mutable {
    if (alive.expired()) return;
    T result = work();
    boost::asio::post(loop_, [alive, done = std::move(done), result = std::move(result)]() mutable {
      if (alive.expired()) return;
      done(std::move(result));
    });
  });
}

void PgAdapter::init(std::function<void(PgInitialized)> done) {
  onWorker<PgInitialized>(control_, [this] { return controller_.init(); }, std::move(done));
}

void PgAdapter::apply(PgConfig config, std::function<void(PgConfigApplied)> done) {
  onWorker<PgConfigApplied>(
      control_, [this, config = std::move(config)] { return controller_.apply(config); },
      [this, done = std::move(done)](PgConfigApplied r) {
        if (controller_.writablePending()) scheduleWritablePoll(true);
        done(std::move(r));
      });
}

void PgAdapter::fence(std::optional<PeerIdentity> newSync, std::function<void(PgFenced)> done) {
  onWorker<PgFenced>(
      control_, [this, newSync = std::move(newSync)] { return controller_.fence(newSync); }, std::move(done));
}

void PgAdapter::fenceQuorum(StandbyQuorum to, bool endWalsenders, std::chrono::milliseconds timeout,
                            std::function<void(PgFenced)> done) {
  onWorker<PgFenced>(
      control_,
      [this, to = std::move(to), endWalsenders, timeout] { return controller_.fenceQuorum(to, endWalsenders, timeout); },
      std::move(done));
}

void PgAdapter::awaitUpstreamStop(std::chrono::milliseconds timeout, std::function<void(bool)> done) {
  onWorker<bool>(control_, [this, timeout] { return controller_.awaitUpstreamStop(timeout); }, std::move(done));
}

void PgAdapter::rejoin(PeerIdentity primary, RejoinLimit limit, std::function<void(PgRejoined)> done) {
  onWorker<PgRejoined>(
      control_, [this, primary = std::move(primary), limit] { return controller_.rejoin(primary, limit); },
      std::move(done));
}

void PgAdapter::applyClusterConfig(ClusterConfig config, std::function<void(Result<ClusterConfigApplied>)> done) {
  // At once, not behind an apply already queued: how a new data directory is made.
  controller_.noteBackupSection(config.backup);
  onWorker<Result<ClusterConfigApplied>>(
      control_, [this, config = std::move(config)] { return controller_.applyClusterConfig(config); },
      std::move(done));
}

void PgAdapter::restartInPlace(std::function<void(Result<bool>)> done) {
  onWorker<Result<bool>>(control_, [this] { return controller_.restartInPlace(); }, std::move(done));
}

void PgAdapter::reloadNow(std::function<void(Result<bool>)> done) {
  onWorker<Result<bool>>(control_, [this] { return controller_.reloadNow(); }, std::move(done));
}

void PgAdapter::readWal(std::function<void(WalPositionRead)> done) {
  onWorker<WalPositionRead>(query_, [this] { return controller_.readWal(); }, std::move(done));
}

void PgAdapter::syncStandby(std::string standbyName, std::function<void(Result<SyncStandbyView>)> done) {
  onWorker<Result<SyncStandbyView>>(
      query_, [this, name = std::move(standbyName)] { return controller_.syncStandby(name); }, std::move(done));
}

void PgAdapter::quorumMembers(std::vector<std::string> memberNames,
                              std::function<void(Result<QuorumMembersView>)> done) {
  onWorker<Result<QuorumMembersView>>(
      query_, [this, names = std::move(memberNames)] { return controller_.quorumMembers(names); }, std::move(done));
}

void PgAdapter::stopWrites(std::function<void(Result<WritesStopped>)> done) {
  // In effect for any configuration written from now on, before the worker runs.
  controller_.noteStopWrites();
  onWorker<Result<WritesStopped>>(writes_, [this] { return controller_.stopWrites(); }, std::move(done));
}

void PgAdapter::dataState(std::function<void(Result<PeerDataState>)> done) {
  onWorker<Result<PeerDataState>>(control_, [this] { return controller_.dataState(); }, std::move(done));
}

void PgAdapter::resumeWrites(std::function<void(Result<bool>)> done) {
  controller_.noteResumeWrites();
  onWorker<Result<bool>>(writes_, [this] { return controller_.resumeWrites(); }, std::move(done));
}

void PgAdapter::shutDownWrites(std::function<void(Result<bool>)> done) {
  // The signal at once, on the caller's thread: the worker may be busy with a stop of
  // writes that waits for the apply lock.
  controller_.noteShutDown();
  const bool signalled = controller_.signalPrimaryShutdown();
  onWorker<Result<bool>>(
      writes_, [this, signalled] { return controller_.shutDownWrites(signalled); }, std::move(done));
}

void PgAdapter::status(std::function<void(PgStatus)> done) {
  onWorker<PgStatus>(query_, [this] { return controller_.status(); }, std::move(done));
}

void PgAdapter::startHealthCheck(std::function<void(bool, const std::string&)> onChange) {
  onHealthChange_ = std::move(onChange);
  healthRunning_ = true;
  lastHealthy_ = -1;
  healthTimer_.expires_after(std::chrono::milliseconds(0));
  scheduleHealth();
}

void PgAdapter::stopHealthCheck() {
  healthRunning_ = false;
  healthTimer_.cancel();
}

void PgAdapter::scheduleHealth() {
  healthTimer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
    if (ec || alive.expired() || !healthRunning_) return;
    healthTimer_.expires_after(controller_.options().healthInterval);
    scheduleHealth();
    if (healthInFlight_) return;  // the previous check is still running: it is bounded
    healthInFlight_ = true;
    struct Health {
      bool ok = false;
      std::string detail;
      bool gone = false;
    };
    onWorker<Health>(
        query_,
        [this] {
          auto r = controller_.healthCheck();
          if (r.ok()) return Health{true, std::string(), false};
          const bool gone = !controller_.postmasterRunning();
          return Health{false, gone ? "the postmaster is gone (" + r.error() + ")" : r.error(), gone};
        },
        [this](Health h) {
          healthInFlight_ = false;
          if (!healthRunning_) return;
          // A killed postmaster may still be exiting at the first failed check: its
          // disappearance is reported too, so that the restart need not wait.
          const bool goneNow = h.gone && !postmasterGone_;
          postmasterGone_ = h.gone;
          int now = h.ok ? 1 : 0;
          if (now == lastHealthy_ && !goneNow) return;
          lastHealthy_ = now;
          if (h.ok) {
            spdlog::info("pg: postgres is healthy");
          } else {
            spdlog::warn("pg: postgres is unhealthy: {}", h.detail);
          }
          if (onHealthChange_) onHealthChange_(h.ok, h.detail);
        });
  });
}

void PgAdapter::scheduleWritablePoll(bool now) {
  if (writablePolling_) return;
  writablePolling_ = true;
  // The first check right after the apply: the new sync may already stream.
  writableTimer_.expires_after(now ? std::chrono::milliseconds(0) : controller_.options().writablePollInterval);
  writableTimer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    onWorker<bool>(
        catchUp_, [this] { return controller_.pollWritable(); },
        [this](bool) {
          writablePolling_ = false;
          if (controller_.writablePending()) scheduleWritablePoll();
        });
  });
}

}  // namespace dugong::pg
