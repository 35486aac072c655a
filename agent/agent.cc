#include "agent/agent.h"

#include <csignal>
#include <sstream>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "statemachine/wal_position.h"
#include "zk/layout.h"

namespace dugong::agent {
namespace {

constexpr auto kStatusInterval = std::chrono::seconds(1);

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
      clock_(io),
      coordinator_(io, config_.zk, config_.identity),
      statusTimer_(io) {}

Agent::~Agent() {
  if (stopHookWaiter_.joinable()) stopHookWaiter_.join();  // bounded by hooks.timeoutSeconds
}

Result<bool> Agent::start() {
  auto lock = InstanceLock::acquire(config_.instanceLockPath());
  if (!lock) return Error{lock.error()};
  lock_ = std::move(lock).value();
  takeOverWatchdogRecord();
  auto pg = pg::PgAdapter::create(io_, config_.pg);
  if (!pg) return Error{"postgres: " + pg.error()};
  sessionFile_ = std::make_unique<SessionFile>(
      config_.sessionFile,
      SessionOwner::current(config_.identity.id, config_.zk.chroot + config_.zk.effectiveRoot(), config_.pg.dataDir));
  coordinator_.keepSessionAcrossRestarts(savedSession(), [this](zk::SessionCredentials c) {
    if (auto ok = sessionFile_->save(c); !ok) {
      spdlog::error("cannot save the ZooKeeper session for a restart: {}; a restart of this agent will look like "
                    "a failure to its peers",
                    ok.error());
    }
  });
  pg_ = std::move(pg).value();
  postgres_ = std::make_unique<PgPostgres>(*pg_);
  clusterConfig_ = std::make_unique<ClusterConfigFollower>(coordinator_, *pg_,
                                                           zk::Layout(config_.zk.effectiveRoot()).config());
  requests_ = std::make_unique<RequestFollower>(
      coordinator_, *pg_, zk::Layout(config_.zk.effectiveRoot()).request(config_.identity.id),
      [this] { return clock_.wallMs(); });
  DriverOptions options;
  options.identity = config_.identity;
  options.singleton = config_.singleton;
  options.withdrawAfterMs = int64_t{config_.withdrawAfterSeconds} * 1000;
  options.stopPostgresOnExit = config_.stopPostgresOnExit;
  options.keepMembershipOnStop = true;
  options.rejoin = config_.rejoin;
  options.handoverWaitMs = config_.handoverWaitMs;
  // A cluster with no state is set up from the most advanced data; peers that held data
  // reconnect within about a session timeout of each other (an ensemble rebuilt, agents
  // restarted), so the setup waits that long for them when any present peer holds data.
  options.setupFromData = true;
  options.setupWaitMs = config_.zk.sessionTimeoutMs;
  if (!config_.onRoleChangeHook.empty() || !config_.onStartHook.empty() || !config_.onStopHook.empty()) {
    hooks_ = std::make_unique<HookRunner>(config_.hookTimeoutSeconds);
  }
  options.onRoleApplied = [this](Role previous, Role applied) { roleChanged(previous, applied); };
  // Armed from the promotion on (safety review of fcef921, finding 7): an agent that dies
  // between the promotion and the apply's answer leaves a writable primary.
  options.onPrimaryApplyStarting = [this] {
    if (watchdog_) watchdog_->setPrimary(true);
  };
  options.onPrimaryConnectionLoss = [this](bool lost) {
    if (watchdog_) watchdog_->setConnectionLost(lost);
  };
  driver_ = std::make_unique<Driver>(Env{clock_, coordinator_, *postgres_, log_}, options);
  driver_->onFatal([this] {
    exitCode_ = 1;
    if (onFatal_) onFatal_();
  });
  if (!config_.httpHost.empty()) {
    http_ = std::make_unique<HttpServer>(io_, [this](const std::string& path) { return handle(path); });
    if (auto ok = http_->listen(config_.httpHost, config_.httpPort); !ok) return ok;
  }
  spdlog::info("dugong agent {} starting: cluster {}, ZooKeeper {}{}, postgres {} on port {}{}", config_.identity.id,
               config_.zk.cluster, config_.zk.hosts(), " at " + config_.zk.effectiveRoot(), config_.pg.dataDir,
               config_.pg.port, config_.singleton ? ", one-node-write mode" : "");
  driver_->start();
  pollStatus();
  if (!config_.onStartHook.empty()) {
    spdlog::info("agent started: running hook onStart {}", config_.onStartHook);
    runHook("onStart", "start", config_.onStartHook, {config_.zk.cluster, config_.identity.id}, {});
  }
  return true;
}

void Agent::stop(std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  statusTimer_.cancel();
  if (watchdog_ && config_.stopPostgresOnExit) {
    watchdog_->disarm();
  } else if (watchdog_) {
    // Postgres runs on. If this peer is the primary, its watchdog shuts postgres down as
    // for a dead agent unless the next run of this agent ends it first: a stopped agent's
    // session expires as a dead one's does.
    watchdog_->leaveArmed();
    if (driver_ && driver_->appliedRole() == Role::kPrimary) {
      spdlog::warn("stopping as the primary with postgres running on: the watchdog stays and shuts postgres down "
                   "about {} ms from now unless this agent is back first, so that no second writer remains once "
                   "the session expires and the sync takes over",
                   config_.zk.sessionTimeoutMs / 2);
    }
  }
  if (http_) http_->stop();
  // onStop runs once the driver has stopped (its ZooKeeper session kept for a restart, or
  // closed; postgres stopped if configured):
  // the agent waits for it, on another thread, up to hooks.timeoutSeconds.
  auto afterLeaving = [this, done = std::move(done)]() mutable {
    if (!hooks_ || config_.onStopHook.empty()) return done();
    const std::string postgres = config_.stopPostgresOnExit ? "stopped" : "running";
    spdlog::info("agent stopped (postgres {}): running hook onStop {} and waiting for it", postgres,
                 config_.onStopHook);
    runHook("onStop", "stop", config_.onStopHook, {config_.zk.cluster, config_.identity.id},
            {"DUGONG_POSTGRES=" + postgres});
    stopHookWaiter_ = std::thread([this, done = std::move(done)]() mutable {
      hooks_->drain();
      boost::asio::post(io_, std::move(done));
    });
  };
  if (!driver_) return afterLeaving();
  driver_->stop(std::move(afterLeaving));
}

// The session the previous run kept, if this agent wrote it. Anything else starts a new
// session: a file from another host or agent is never used (two agents must never
// share a session).
std::optional<zk::SessionCredentials> Agent::savedSession() {
  auto saved = sessionFile_->load();
  if (!saved) {
    spdlog::warn("not re-attaching to a saved ZooKeeper session: {}; opening a new session", saved.error());
    return std::nullopt;
  }
  if (!*saved) {
    spdlog::info("no saved ZooKeeper session in {}: opening a new session", config_.sessionFile);
    return std::nullopt;
  }
  spdlog::info("re-attaching to the ZooKeeper session saved in {} by this agent's previous run, if it has not "
               "expired",
               config_.sessionFile);
  return *saved;
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

void Agent::roleChanged(Role previous, Role applied) {
  if (watchdog_) watchdog_->setPrimary(applied == Role::kPrimary);
  endPreviousWatchdog(applied);
  if (config_.onRoleChangeHook.empty()) return;
  const auto& state = driver_->peer().clusterState();
  const std::string generation = state ? std::to_string(state->generation) : "0";
  spdlog::info("role {} -> {} applied: running hook onRoleChange {}", roleName(previous), roleName(applied),
               config_.onRoleChangeHook);
  runHook("onRoleChange", "roleChange", config_.onRoleChangeHook,
          {roleName(applied), roleName(previous), config_.zk.cluster, generation},
          {std::string("DUGONG_ROLE=") + roleName(applied), std::string("DUGONG_PREVIOUS_ROLE=") + roleName(previous),
           "DUGONG_GENERATION=" + generation});
}

void Agent::runHook(const std::string& name, const std::string& event, const std::string& path,
                    std::vector<std::string> args, std::vector<std::string> env) {
  env.push_back("DUGONG_EVENT=" + event);
  env.push_back("DUGONG_CLUSTER=" + config_.zk.cluster);
  env.push_back("DUGONG_PEER=" + config_.identity.id);
  hooks_->run(HookCall{name, path, std::move(args), std::move(env)});
}

// ---- the previous run's watchdog -----------------------------------------------------

// Under the instance lock: the watchdog the previous run left (if any) is remembered,
// and this run's own is recorded in its place.
void Agent::takeOverWatchdogRecord() {
  if (!watchdog_) return;
  const std::string path = config_.watchdogRecordPath();
  if (auto previous = readProcessRecord(path); !previous) {
    spdlog::warn("previous run's watchdog: {}; not looking for it", previous.error());
  } else {
    previousWatchdog_ = *previous;
  }
  auto own = processStamp(watchdog_->pid());
  if (!own) return;
  if (auto ok = writeProcessRecord(path, *own); !ok) {
    spdlog::warn("cannot record this run's watchdog ({}): a later run will not end it, and a restart slower "
                 "than half the session timeout will cost a postgres restart",
                 ok.error());
  }
}

// The first role this run applies makes it responsible for postgres: the previous run's
// watchdog, left armed by a clean stop, must not shut down the postgres this run serves.
void Agent::endPreviousWatchdog(Role applied) {
  if (!previousWatchdog_) return;
  const ProcessStamp previous = *previousWatchdog_;
  previousWatchdog_.reset();
  const auto running = processStamp(previous.pid);
  if (!running || !(*running == previous)) return;  // it acted and ended, or was ended
  const bool ended = endProcess(previous, SIGKILL, std::chrono::seconds(1));
  spdlog::info("role {} applied: {} the previous run's watchdog (pid {}), this run answers for postgres now",
               roleName(applied), ended ? "ended" : "could not end", previous.pid);
}

// ---- status --------------------------------------------------------------------------

// Not while writes are stopped (ZooKeeper lost): the driver's flag is up before the
// status poll sees postgres read-only, and stays up until the stop is lifted.
bool Agent::isWritablePrimary() const {
  // The primary role applied, not only decided: until its transition has finished (roles
  // and passwords set up), a running postgres is not yet the cluster's primary.
  return driver_->peer().role() == Role::kPrimary && driver_->appliedRole() == Role::kPrimary &&
         !driver_->writesStopped() && status_.online &&
         !status_.inRecovery && !status_.readOnly && !status_.writesStopped;
}

bool Agent::isStreamingReplica() const {
  return (driver_->peer().role() == Role::kSync || driver_->peer().role() == Role::kAsync) && status_.online && status_.inRecovery &&
         status_.walReceiverStatus == "streaming";
}

nlohmann::json Agent::stateJson() const {
  const bool withdrawn = driver_->withdrawn();
  nlohmann::json zk = {{"connected", false}, {"withdrawn", withdrawn}};
  if (auto s = coordinator_.status(); s.member) {
    zk = {{"connected", s.connected},
          {"initialized", s.initialized},
          {"sessionId", s.sessionId},
          {"electionNode", s.electionNode},
          {"lastError", s.lastError},
          {"withdrawn", withdrawn}};
  }
  return {
      {"peer", driver_->peer().inspect()},
      {"postgres", status_.toJson()},
      {"zookeeper", zk},
      {"health",
       {{"healthy", driver_->healthy()},
        {"writesStopped", driver_->writesStopped()},
        {"transitionInFlight", driver_->pgBusy()},
        {"detail", driver_->healthy() ? "" : driver_->unhealthyDetail()},
        {"writablePrimary", isWritablePrimary()},
        {"streamingReplica", isStreamingReplica()}}},
      {"hooks", hooks_ ? hooks_->status().toJson() : nlohmann::json()},
      {"request", requests_ ? requests_->statusJson() : nlohmann::json()},
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
    m << "dugong_role{role=\"" << roleName(r) << "\"} " << (driver_->peer().role() == r ? 1 : 0) << "\n";
  }
  metric("dugong_generation", "gauge", "Generation of the last cluster state seen.");
  m << "dugong_generation " << (driver_->peer().clusterState() ? driver_->peer().clusterState()->generation : 0) << "\n";
  metric("dugong_cluster_frozen", "gauge", "1 while the last cluster state seen is frozen.");
  m << "dugong_cluster_frozen "
    << (driver_->peer().clusterState() && driver_->peer().clusterState()->frozen() ? 1 : 0) << "\n";
  metric("dugong_zookeeper_connected", "gauge", "1 while the ZooKeeper session is connected.");
  m << "dugong_zookeeper_connected " << (coordinator_.status().connected ? 1 : 0) << "\n";
  metric("dugong_postgres_online", "gauge", "1 while postgres accepts connections.");
  m << "dugong_postgres_online " << (status_.online ? 1 : 0) << "\n";
  metric("dugong_postgres_writable", "gauge", "1 on the writable primary.");
  m << "dugong_postgres_writable " << (isWritablePrimary() ? 1 : 0) << "\n";
  metric("dugong_postgres_pending_restart", "gauge",
         "Settings changed that take effect only when postgres restarts (pg_settings.pending_restart).");
  m << "dugong_postgres_pending_restart " << status_.pendingRestart.size() << "\n";
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
  const DriverCounters& c = driver_->counters();
  counter("dugong_postgres_transitions_total", "Postgres configurations applied.", c.transitions);
  counter("dugong_postgres_transition_failures_total", "Postgres configurations that failed to apply.",
          c.transitionFailures);
  counter("dugong_postgres_restarts_total", "Restarts of an unhealthy postgres.", c.restarts);
  counter("dugong_state_writes_total", "Cluster-state writes attempted.", c.stateWrites);
  counter("dugong_state_write_failures_total", "Cluster-state writes that failed.", c.stateWriteFailures);
  counter("dugong_zookeeper_sessions_total", "ZooKeeper session objects opened.", c.joins);
  counter("dugong_withdrawals_total", "Times the agent left ZooKeeper because postgres was unhealthy.",
          c.withdrawals);
  counter("dugong_decisions_total", "State-machine decisions logged.", c.decisions);
  counter("dugong_zookeeper_connection_losses_total", "ZooKeeper connections lost under a valid session.",
          c.connectionLosses);
  counter("dugong_write_stops_total", "Times writes were stopped because ZooKeeper was unreachable.", c.writeStops);
  counter("dugong_write_resumes_total", "Times stopped writes were resumed with the cluster unchanged.",
          c.writeResumes);
  counter("dugong_postgres_shutdowns_total",
          "Times a primary's postgres was shut down because its ZooKeeper session may have expired.", c.shutDowns);
  counter("dugong_rejoins_total", "Automatic rejoins of this deposed peer that succeeded.", c.rejoins);
  counter("dugong_rejoin_failures_total", "Automatic rejoins refused or failed (the peer stays deposed).",
          c.rejoinFailures);
  counter("dugong_handovers_total", "Planned switchovers for which this primary stopped postgres first.",
          c.handovers);
  const HookStatus hooks = hooks_ ? hooks_->status() : HookStatus{};
  counter("dugong_hook_runs_total", "Hooks run (finished).", hooks.runs);
  counter("dugong_hook_failures_total", "Hooks that failed: non-zero status, killed, or not started.",
          hooks.failures);
  metric("dugong_hook_last_ok", "gauge", "1 when the last hook succeeded (absent before the first).");
  if (hooks.last) m << "dugong_hook_last_ok " << (hooks.last->ok ? 1 : 0) << "\n";
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
            nlohmann::json({{"writablePrimary", ok}, {"role", roleName(driver_->peer().role())}}).dump() + "\n"};
  }
  if (path == "/replica") {
    bool ok = isStreamingReplica();
    return {ok ? 200 : 503, json,
            nlohmann::json({{"streamingReplica", ok}, {"role", roleName(driver_->peer().role())}}).dump() + "\n"};
  }
  return {404, "text/plain; charset=utf-8", "not found: try /ping, /state, /primary, /replica, /metrics\n"};
}

}  // namespace dugong::agent
