#include "agent/agent.h"
#include "statemachine/overloaded.h"

#include <sstream>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "statemachine/wal_position.h"

namespace dugong::agent {
namespace {

EpochMs wallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr auto kStatusInterval = std::chrono::seconds(1);
constexpr auto kHealthTick = std::chrono::seconds(1);
// How long postgres must be down, and how long since the last transition, before the
// agent restarts it: a transition in progress or a just-started postgres is not a crash.
constexpr auto kRestartGrace = std::chrono::seconds(3);

std::optional<uint64_t> lsnBytes(const std::optional<std::string>& lsn) {
  if (!lsn) return std::nullopt;
  auto w = WalPosition::parse(*lsn);
  if (!w) return std::nullopt;
  return w->value();
}

}  // namespace

Agent::Agent(boost::asio::io_context& io, AgentConfig config)
    : io_(io),
      config_(std::move(config)),
      peer_(std::make_unique<Peer>(PeerOptions{config_.identity, config_.singleton, 1000})),
      statusTimer_(io),
      healthTimer_(io) {}

Agent::~Agent() = default;

Result<bool> Agent::start() {
  auto pg = pg::PgAdapter::create(io_, config_.pg);
  if (!pg) return Error{"postgres: " + pg.error()};
  pg_ = std::move(pg).value();
  if (!config_.httpHost.empty()) {
    http_ = std::make_unique<HttpServer>(io_, [this](const std::string& path) { return handle(path); });
    if (auto ok = http_->listen(config_.httpHost, config_.httpPort); !ok) return ok;
  }
  spdlog::info("dugong agent {} starting: cluster {}, ZooKeeper {}{}, postgres {} on port {}{}", config_.identity.id,
               config_.zk.cluster, config_.zk.hosts(), " at " + config_.zk.effectiveRoot(), config_.pg.dataDir,
               config_.pg.port, config_.singleton ? ", one-node-write mode" : "");
  std::weak_ptr<int> alive = alive_;
  pg_->init([this, alive](PgInitialized e) {
    if (alive.expired()) return;
    spdlog::info("postgres found {} and {}", e.online ? "running" : "stopped",
                 e.setUp ? "set up before" : "never set up");
    step(e);
  });
  pg_->startHealthCheck([this, alive](bool healthy, const std::string& detail) {
    if (!alive.expired()) onHealth(healthy, detail);
  });
  startSession();
  pollStatus();
  return true;
}

void Agent::startSession() {
  zk_ = std::make_unique<zk::Session>(io_, config_.zk, config_.identity, [this](Event e) { step(e); });
  ++counters_.zkSessions;
  if (auto ok = zk_->start(); !ok) {
    spdlog::critical("ZooKeeper: {}", ok.error());
    exitCode_ = 1;
    if (onFatal_) onFatal_();
  }
}

void Agent::stop(std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  spdlog::info("stopping: leaving ZooKeeper{}", config_.stopPostgresOnExit ? " and stopping postgres" : "");
  for (auto& [id, timer] : timers_) timer->cancel();
  statusTimer_.cancel();
  healthTimer_.cancel();
  if (http_) http_->stop();
  zk_.reset();
  if (!pg_) return done();
  pg_->stopHealthCheck();
  if (!config_.stopPostgresOnExit) return done();
  pg_->apply(PgConfig::none(), [done](PgConfigApplied r) {
    if (!r.ok) spdlog::error("stopping postgres failed: {}", r.error);
    done();
  });
}

// ---- the state machine's loop ------------------------------------------------------

void Agent::post(Event event) {
  std::weak_ptr<int> alive = alive_;
  boost::asio::post(io_, [this, alive, event = std::move(event)] {
    if (!alive.expired()) step(event);
  });
}

void Agent::step(const Event& event) {
  if (stopping_) return;
  if (auto* init = std::get_if<ZkInitialized>(&event)) {
    lastStateNode_ = init->state;
    lastActive_ = init->active;
  } else if (auto* change = std::get_if<ClusterStateChanged>(&event)) {
    lastStateNode_ = change->state;
  } else if (auto* active = std::get_if<ActivePeersChanged>(&event)) {
    lastActive_ = active->active;
  }
  restartStateMachineIfRebuilt(event);
  for (const Action& a : peer_->step(wallClockMs(), event)) carryOut(a);
}

void Agent::restartStateMachineIfRebuilt(const Event& event) {
  if (peer_->role() != Role::kDeposed || pgBusy_) return;
  if (!std::holds_alternative<ClusterStateChanged>(event) && !std::holds_alternative<ZkInitialized>(event)) return;
  if (!lastStateNode_.exists) return;
  auto state = ClusterState::parse(lastStateNode_.data);
  if (!state || containsPeer(state->deposed, config_.identity.id)) return;
  spdlog::info("this peer is no longer deposed (generation {}): it was rebuilt; starting a fresh state machine",
               state->generation);
  peer_ = std::make_unique<Peer>(PeerOptions{config_.identity, config_.singleton, 1000});
  for (auto& [id, timer] : timers_) timer->cancel();
  std::weak_ptr<int> alive = alive_;
  pg_->init([this, alive](PgInitialized e) {
    if (!alive.expired()) step(e);
  });
  // The event being stepped now delivers the state; the active list comes first.
  if (std::holds_alternative<ClusterStateChanged>(event)) {
    for (const Action& a : peer_->step(wallClockMs(), ZkInitialized{lastStateNode_, lastActive_})) carryOut(a);
  }
}

void Agent::carryOut(const Action& action) {
  std::weak_ptr<int> alive = alive_;
  std::visit(
      Overloaded{
          [&](const WriteClusterState& w) {
            ++counters_.stateWrites;
            if (!zk_) {
              ++counters_.stateWriteFailures;
              return post(StateWriteFinished{false, "not connected to ZooKeeper (withdrawn)", false, -1});
            }
            zk_->putClusterState(
                w.state, w.expectedVersion,
                [this, alive](StateWriteFinished r) {
                  if (alive.expired()) return;
                  if (!r.ok) ++counters_.stateWriteFailures;
                  post(r);
                },
                w.reason);
          },
          [&](const ApplyPgConfig& a) { applyPg(a.config, true); },
          [&](const FencePg& f) {
            // The state machine fences only with no transition of its own in flight; a
            // restart after a crash may be: the fence then fails and is retried.
            if (pgBusy_) return post(PgFenced{false, "postgres is being restarted"});
            pgBusy_ = true;
            pg_->fence(f.newSync, [this, alive](PgFenced r) {
              if (alive.expired()) return;
              pgBusy_ = false;
              step(r);
            });
          },
          [&](const ReadWal&) {
            pg_->readWal([this, alive](WalPositionRead r) {
              if (!alive.expired()) step(r);
            });
          },
          [&](const StartTimer& t) {
            auto& timer = timers_[t.id];
            if (!timer) timer = std::make_unique<boost::asio::steady_timer>(io_);
            timer->expires_after(std::chrono::milliseconds(t.delayMs));
            timer->async_wait([this, alive, id = t.id](const boost::system::error_code& ec) {
              if (!ec && !alive.expired()) step(TimerFired{id});
            });
          },
          [&](const LogDecision& d) {
            ++counters_.decisions;
            switch (d.level) {
              case LogLevel::kDebug:
                spdlog::debug("{}", d.message);
                break;
              case LogLevel::kInfo:
                spdlog::info("{}", d.message);
                break;
              case LogLevel::kWarn:
                spdlog::warn("{}", d.message);
                break;
              case LogLevel::kError:
                spdlog::error("{}", d.message);
                break;
            }
          },
          [&](const Fatal& f) {
            spdlog::critical("fatal: {}", f.reason);
            exitCode_ = 1;
            if (onFatal_) boost::asio::post(io_, onFatal_);
          },
      },
      action);
}

// ---- postgres ------------------------------------------------------------------------

void Agent::applyPg(const PgConfig& config, bool fromPeer) {
  if (pgBusy_) {
    // Only a restart can be in flight when the state machine asks (it never asks twice).
    if (fromPeer) queuedPeerApply_ = config;
    return;
  }
  pgBusy_ = true;
  std::weak_ptr<int> alive = alive_;
  pg_->apply(config, [this, alive, config, fromPeer](PgConfigApplied r) {
    if (alive.expired()) return;
    pgBusy_ = false;
    lastTransitionDone_ = std::chrono::steady_clock::now();
    if (r.ok) {
      lastApplied_ = config;
      ++counters_.transitions;
      noteUnhealthy();
    } else {
      ++counters_.transitionFailures;
      if (!fromPeer) spdlog::warn("restarting postgres failed: {}", r.error);
    }
    if (fromPeer) step(r);
    if (queuedPeerApply_ && !pgBusy_) {
      PgConfig next = *queuedPeerApply_;
      queuedPeerApply_.reset();
      applyPg(next, true);
    }
  });
}

bool Agent::expectPostgresOnline() const { return lastApplied_ && lastApplied_->role != PgRole::kNone; }

void Agent::onHealth(bool healthy, const std::string& detail) {
  healthy_ = healthy;
  if (healthy) {
    if (unhealthySince_) spdlog::info("postgres is healthy again");
    unhealthySince_.reset();
    if (withdrawn_ && !stopping_) {
      spdlog::info("rejoining ZooKeeper: postgres is healthy again");
      withdrawn_ = false;
      startSession();
    }
    return;
  }
  unhealthyDetail_ = detail;
  noteUnhealthy();
}

// Postgres should be running but is not answering: start the clock (once), and tick.
void Agent::noteUnhealthy() {
  if (healthy_ || !expectPostgresOnline() || unhealthySince_) return;
  unhealthySince_ = std::chrono::steady_clock::now();
  spdlog::warn("postgres is unhealthy: {}", unhealthyDetail_);
  healthTick();
}

// While postgres is unhealthy: restart it (re-apply its configuration) once it has
// been down for a grace period since the last transition; withdraw from ZooKeeper
// once it has been down for health.withdrawAfterSeconds.
void Agent::healthTick() {
  if (stopping_ || healthy_ || !unhealthySince_ || !expectPostgresOnline()) {
    unhealthySince_.reset();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  const auto down = now - *unhealthySince_;
  if (!withdrawn_ && down >= std::chrono::seconds(config_.withdrawAfterSeconds)) {
    spdlog::error("withdrawing from ZooKeeper: postgres has been unhealthy for {} s and restarts did not help ({})",
                  std::chrono::duration_cast<std::chrono::seconds>(down).count(), unhealthyDetail_);
    ++counters_.withdrawals;
    withdrawn_ = true;
    zk_.reset();
  }
  if (!pgBusy_ && down >= kRestartGrace && now - lastTransitionDone_ >= kRestartGrace) {
    spdlog::info("restarting postgres as {}", pgRoleName(lastApplied_->role));
    ++counters_.restarts;
    applyPg(*lastApplied_, false);
  }
  std::weak_ptr<int> alive = alive_;
  healthTimer_.expires_after(kHealthTick);
  healthTimer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (!ec && !alive.expired()) healthTick();
  });
}

void Agent::pollStatus() {
  if (stopping_) return;
  std::weak_ptr<int> alive = alive_;
  pg_->status([this, alive](pg::PgStatus s) {
    if (alive.expired()) return;
    status_ = std::move(s);
    statusTimer_.expires_after(kStatusInterval);
    statusTimer_.async_wait([this, alive](const boost::system::error_code& ec) {
      if (!ec && !alive.expired()) pollStatus();
    });
  });
}

// ---- status --------------------------------------------------------------------------

bool Agent::isWritablePrimary() const {
  return peer_->role() == Role::kPrimary && status_.online && !status_.inRecovery && !status_.readOnly;
}

bool Agent::isStreamingReplica() const {
  return (peer_->role() == Role::kSync || peer_->role() == Role::kAsync) && status_.online && status_.inRecovery &&
         status_.walReceiverStatus == "streaming";
}

nlohmann::json Agent::stateJson() const {
  nlohmann::json zk = {{"connected", false}, {"withdrawn", withdrawn_}};
  if (zk_) {
    auto s = zk_->status();
    zk = {{"connected", s.connected},
          {"initialized", s.initialized},
          {"sessionId", s.sessionId},
          {"electionNode", s.electionNode},
          {"lastError", s.lastError},
          {"withdrawn", withdrawn_}};
  }
  return {
      {"peer", peer_->inspect()},
      {"postgres", status_.toJson()},
      {"zookeeper", zk},
      {"health",
       {{"healthy", healthy_},
        {"detail", healthy_ ? "" : unhealthyDetail_},
        {"writablePrimary", isWritablePrimary()},
        {"streamingReplica", isStreamingReplica()}}},
      {"agent",
       {{"id", config_.identity.id},
        {"cluster", config_.zk.cluster},
        {"uptimeSeconds",
         std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_).count()}}},
  };
}

std::string Agent::metricsText() const {
  std::ostringstream m;
  auto metric = [&m](const char* name, const char* type, const char* help) {
    m << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  };
  metric("dugong_up", "gauge", "1 while the agent runs.");
  m << "dugong_up 1\n";
  metric("dugong_role", "gauge", "1 for this peer's current role.");
  for (Role r : {Role::kUnknown, Role::kUnassigned, Role::kPrimary, Role::kSync, Role::kAsync, Role::kDeposed}) {
    m << "dugong_role{role=\"" << roleName(r) << "\"} " << (peer_->role() == r ? 1 : 0) << "\n";
  }
  metric("dugong_generation", "gauge", "Generation of the last cluster state seen.");
  m << "dugong_generation " << (peer_->clusterState() ? peer_->clusterState()->generation : 0) << "\n";
  metric("dugong_zookeeper_connected", "gauge", "1 while the ZooKeeper session is connected.");
  m << "dugong_zookeeper_connected " << (zk_ && zk_->status().connected ? 1 : 0) << "\n";
  metric("dugong_postgres_online", "gauge", "1 while postgres accepts connections.");
  m << "dugong_postgres_online " << (status_.online ? 1 : 0) << "\n";
  metric("dugong_postgres_writable", "gauge", "1 on the writable primary.");
  m << "dugong_postgres_writable " << (isWritablePrimary() ? 1 : 0) << "\n";
  metric("dugong_wal_position_bytes", "gauge", "WAL positions of the local postgres, as byte offsets.");
  for (auto [kind, lsn] : {std::pair{"current", &status_.currentLsn}, {"receive", &status_.receiveLsn},
                           {"replay", &status_.replayLsn}}) {
    if (auto b = lsnBytes(*lsn)) m << "dugong_wal_position_bytes{kind=\"" << kind << "\"} " << *b << "\n";
  }
  metric("dugong_replication_lag_bytes", "gauge", "On a primary: how far each standby's replay is behind.");
  auto current = lsnBytes(status_.currentLsn);
  for (const auto& row : status_.replication) {
    auto replay = lsnBytes(row.replayLsn);
    if (current && replay) {
      m << "dugong_replication_lag_bytes{standby=\"" << row.applicationName << "\",sync_state=\"" << row.syncState
        << "\"} " << (*current > *replay ? *current - *replay : 0) << "\n";
    }
  }
  metric("dugong_replay_lag_seconds", "gauge", "On a standby: age of the last replayed transaction.");
  if (status_.replayLagSeconds) m << "dugong_replay_lag_seconds " << *status_.replayLagSeconds << "\n";
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    metric(name, "counter", help);
    m << name << " " << v << "\n";
  };
  counter("dugong_postgres_transitions_total", "Postgres configurations applied.", counters_.transitions);
  counter("dugong_postgres_transition_failures_total", "Postgres configurations that failed to apply.",
          counters_.transitionFailures);
  counter("dugong_postgres_restarts_total", "Restarts of an unhealthy postgres.", counters_.restarts);
  counter("dugong_state_writes_total", "Cluster-state writes attempted.", counters_.stateWrites);
  counter("dugong_state_write_failures_total", "Cluster-state writes that failed.", counters_.stateWriteFailures);
  counter("dugong_zookeeper_sessions_total", "ZooKeeper session objects opened.", counters_.zkSessions);
  counter("dugong_withdrawals_total", "Times the agent left ZooKeeper because postgres was unhealthy.",
          counters_.withdrawals);
  counter("dugong_decisions_total", "State-machine decisions logged.", counters_.decisions);
  return m.str();
}

HttpReply Agent::handle(const std::string& path) const {
  const std::string json = "application/json";
  if (path == "/ping") return {200, "text/plain; charset=utf-8", "ok\n"};
  if (path == "/state") return {200, json, stateJson().dump(2) + "\n"};
  if (path == "/metrics") return {200, "text/plain; version=0.0.4; charset=utf-8", metricsText()};
  if (path == "/primary") {
    bool ok = isWritablePrimary();
    return {ok ? 200 : 503, json,
            nlohmann::json({{"writablePrimary", ok}, {"role", roleName(peer_->role())}}).dump() + "\n"};
  }
  if (path == "/replica") {
    bool ok = isStreamingReplica();
    return {ok ? 200 : 503, json,
            nlohmann::json({{"streamingReplica", ok}, {"role", roleName(peer_->role())}}).dump() + "\n"};
  }
  return {404, "text/plain; charset=utf-8", "not found: try /ping, /state, /primary, /replica, /metrics\n"};
}

}  // namespace dugong::agent
