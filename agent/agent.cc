#include "agent/agent.h"

#include <algorithm>
#include <chrono>
#include <csignal>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "agent/http_api.h"
#include "ops/http_client.h"
#include "dugong/version.h"
#include "zk/ensemble_conf.h"
#include "zk/layout.h"

namespace dugong::agent {

namespace {

// The tickTime the primary's lease counts with (driver/lease.h): the ensemble's
// own, asked with the four-letter word `conf` at start (docs/design.md "The primary's
// lease"), or the one configured (zookeeper.tickTimeMs), whichever is larger; 0 (half
// the session timeout) when neither is known.
int leaseTickTime(const AgentConfig& config) {
  const auto conf = zk::readEnsembleConf(config.zk.connectString, std::chrono::seconds(1));
  const int stated = config.zkTickTimeMs;
  if (!conf) {
    spdlog::info("lease: the ensemble does not answer `conf` (add it to 4lw.commands.whitelist to have it checked); "
                 "tickTime taken as {}",
                 stated > 0 ? std::to_string(stated) + " ms (zookeeper.tickTimeMs)"
                            : std::string("half the session timeout, ZooKeeper's floor"));
    return stated;
  }
  if (stated > 0 && stated < conf->tickTimeMs) {
    spdlog::error("lease: zookeeper.tickTimeMs {} is below the ensemble's tickTime {} ms ({} answered `conf`): the "
                  "ensemble's is used; fix the configuration",
                  stated, conf->tickTimeMs, conf->server);
  } else {
    spdlog::info("lease: the ensemble's tickTime is {} ms, sessions {}..{} ms ({} answered `conf`)", conf->tickTimeMs,
                 conf->minSessionTimeoutMs, conf->maxSessionTimeoutMs, conf->server);
  }
  return std::max(stated, conf->tickTimeMs);
}

}  // namespace
namespace {

constexpr auto kStatusInterval = std::chrono::seconds(1);

// The status timer's tick, which is also the loop's beat to the watchdog: a second, or
// an eighth of the session timeout if that is shorter, so that it comes at least four
// times within the watchdog's bound for a hung loop (half the session timeout).
std::chrono::milliseconds tickInterval(const AgentConfig& config) {
  return std::min<std::chrono::milliseconds>(kStatusInterval,
                                             std::chrono::milliseconds(std::max(config.zk.sessionTimeoutMs / 8, 10)));
}

}  // namespace

Agent::Agent(boost::asio::io_context& io, AgentConfig config)
    : io_(io),
      config_(std::move(config)),
      clock_(io),
      coordinator_(io, config_.zk, config_.identity, clock_),
      peers_(io, config_),
      statusTimer_(io),
      tickInterval_(tickInterval(config_)) {}

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
  postgres_ = std::make_unique<PgPostgres>(*pg_, status_);
  // The follower delivers what is wanted of replication (the cluster configuration's
  // replication block, else this host's), which the state machine, reading every format
  // and running quorum mode's rules (options.quorum below; docs/decisions/0079, 0089),
  // moves the state to as primary.
  clusterConfig_ = std::make_unique<ClusterConfigFollower>(
      coordinator_, *pg_, zk::Layout(config_.zk.effectiveRoot()).config(),
      pg::HostAllowance{.allowUnsafe = config_.clusterConfigAllowUnsafe, .superuser = config_.pg.superuser},
      config_.pg.settings, config_.replication);
  requests_ = std::make_unique<RequestFollower>(
      coordinator_, *pg_, zk::Layout(config_.zk.effectiveRoot()).request(config_.identity.id),
      [this] { return clock_.wallMs(); });
  driver::DriverOptions options;
  options.identity = config_.identity;
  options.singleton = config_.singleton;
  options.withdrawAfterMs = int64_t{config_.withdrawAfterSeconds} * 1000;
  options.stopPostgresOnExit = config_.stopPostgresOnExit;
  options.keepMembershipOnStop = true;
  options.rejoin = config_.rejoin;
  options.handoverWaitMs = config_.handoverWaitMs;
  options.syncReplaceAfterMs = config_.syncReplaceAfterMs;
  options.syncReplaceHoldMs = config_.syncReplaceHoldMs;
  options.syncConnectGraceMs = config_.syncConnectGraceMs;
  // A cluster with no state is set up from the most advanced data; peers that held data
  // reconnect within about a session timeout of each other (an ensemble rebuilt, agents
  // restarted), so the setup waits that long for them when any present peer holds data.
  options.setupFromData = true;
  options.setupWaitMs = config_.zk.sessionTimeoutMs;
  options.standbySource = config_.standbySource;
  options.quorum = true;
  if (!config_.onRoleChangeHook.empty() || !config_.onStartHook.empty() || !config_.onStopHook.empty()) {
    hooks_ = std::make_unique<HookRunner>(config_.hookTimeoutSeconds);
  }
  options.onRoleApplied = [this](Role previous, Role applied) { roleChanged(previous, applied); };
  // Armed from the promotion on: an agent that dies
  // between the promotion and the apply's answer leaves a writable primary.
  options.onPrimaryApplyStarting = [this] {
    if (watchdog_) watchdog_->setPrimary(true);
  };
  options.onPrimaryConnectionLoss = [this](bool lost) {
    if (watchdog_) watchdog_->setConnectionLost(lost);
  };
  options.lease.tickTimeMs = leaseTickTime(config_);
  options.onLeaseDeadline = [this](int64_t deadlineMs) {
    if (watchdog_) watchdog_->setLeaseDeadline(deadlineMs);
  };
  // The failsafe asks the sync's agent over HTTP, so this agent answers there too.
  options.failsafe = config_.zkFailsafe && config_.zk.lease && !config_.httpHost.empty();
  options.failsafeDurationMs = config_.zk.sessionTimeoutMs;
  // A promise is recorded before it is answered, and held by the next run whatever its
  // configuration (review of 2f035ac, finding 1).
  promises_ = std::make_unique<PromiseRecord>(config_.promiseRecordPath());
  options.earlierPromiseMs = earlierPromiseMs();
  options.recordPromise = [this](int64_t untilMs) {
    return promises_->save(untilMs - clock_.monotonicMs(), BootClock::now());
  };
  driver_ = std::make_unique<driver::Runner>(driver::Env{clock_, coordinator_, *postgres_, log_, &peers_}, options);
  driver_->onFatal([this] {
    exitCode_ = 1;
    if (onFatal_) onFatal_();
  });
  if (!config_.httpHost.empty()) {
    setHttpsCaFile(config_.httpCaFile);  // before the switchover's thread reads agents
    switchover_ = std::make_unique<Switchover>(config_.zk, config_.identity.id);
    http_ = std::make_unique<HttpServer>(
        io_, [this](const HttpRequest& request, HttpServer::Respond respond) { handle(request, std::move(respond)); });
    if (auto ok = http_->listen(config_.httpHost, config_.httpPort, HttpTls{config_.httpCertFile, config_.httpKeyFile});
        !ok) {
      return ok;
    }
  }
  spdlog::info("dugong {} agent {} starting: cluster {}, ZooKeeper {}{}, postgres {} on port {}{}{}", kVersion,
               config_.identity.id,
               config_.zk.cluster, config_.zk.hosts(), " at " + config_.zk.effectiveRoot(), config_.pg.dataDir,
               config_.pg.port, config_.singleton ? ", one-node-write mode" : "",
               config_.identity.tags.any() ? ", tags " + config_.identity.tags.toJson().dump() : "");
  driver_->start();
  tick();
  if (!config_.onStartHook.empty()) {
    spdlog::info("agent started: running hook onStart {}", config_.onStartHook);
    runHook("onStart", "start", config_.onStartHook, {config_.zk.cluster, config_.identity.id}, {});
  }
  return true;
}

void Agent::stop(std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  // The status timer ticks on: the loop beats to the watchdog until it ends (a stop that
  // hangs is a hung loop too); main ends the beats once the loop has returned.
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
  if (switchover_) switchover_->cancel();
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

int64_t Agent::earlierPromiseMs() {
  const BootClock now = BootClock::now();
  auto recorded = promises_->remainingAt(now);
  int64_t hold = 0;
  if (!recorded) {
    hold = driver::kFailsafeMaxDurationMs;
    spdlog::error("failsafe: the record of earlier promises is unreadable ({}): this peer takes over from no primary "
                  "for the longest promise, {} ms",
                  recorded.error(), hold);
  } else if (!*recorded) {
    // The first run here of a release that records promises: an earlier release held its
    // promises for its own session timeout at its start.
    hold = config_.zk.sessionTimeoutMs;
    spdlog::info("failsafe: no record of earlier promises in {}: this peer takes over from no primary for {} ms (an "
                 "earlier release of this agent may have promised so without recording it)",
                 promises_->path(), hold);
  } else {
    hold = **recorded;
  }
  if (auto ok = promises_->save(hold, now); !ok) {
    spdlog::error("failsafe: cannot record the hold of earlier promises ({}): a restart within {} ms may forget it, "
                  "and promises are refused while the record cannot be written",
                  ok.error(), hold);
  }
  return hold;
}

// Each tick: a beat to the watchdog (the loop runs), and every kStatusInterval a poll of
// postgres' status unless one is in flight (a slow query must not silence the beat).
void Agent::tick() {
  if (watchdog_) watchdog_->beat();
  clock_.checkForSuspend();
  const auto now = std::chrono::steady_clock::now();
  std::weak_ptr<int> alive = alive_;
  if (!stopping_ && !statusInFlight_ && now - lastStatusPoll_ >= kStatusInterval) {
    statusInFlight_ = true;
    lastStatusPoll_ = now;
    pg_->status([this, alive](pg::PgStatus s) {
      if (alive.expired()) return;
      statusInFlight_ = false;
      status_ = std::move(s);
    });
  }
  statusTimer_.expires_after(tickInterval_);
  statusTimer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (!ec && !alive.expired()) tick();
  });
}

void Agent::loopEnded() {
  statusTimer_.cancel();
  if (watchdog_) watchdog_->endBeats();
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

// ---- status and the HTTP API ----------------------------------------------------------

StatusSources Agent::statusSources() const {
  return {*driver_,
          coordinator_.status(),
          status_,
          hooks_ ? std::optional<HookStatus>(hooks_->status()) : std::nullopt,
          requests_ ? requests_->statusJson() : nlohmann::json(),
          config_.identity,
          config_.zk.cluster,
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_).count(),
          clusterConfig_ ? clusterConfig_->statusJson() : nlohmann::json()};
}

void Agent::handle(const HttpRequest& request, HttpServer::Respond respond) {
  ApiStatus s;
  s.role = driver_->peer().role();
  s.postgresOnline = status_.online;
  s.writablePrimary = isWritablePrimary(*driver_, status_);
  s.streamingReplica = isStreamingReplica(*driver_, status_);
  s.streamingStandbyLeader = isStreamingStandbyLeader(*driver_, status_);
  s.replayBacklogBytes = replayBacklogBytes(status_);
  s.noloadbalance = config_.identity.tags.noloadbalance;
  s.quorum = apiQuorum(s.role, driver_->peer().clusterState(), status_);
  s.state = [this] { return stateJson(statusSources()); };
  s.metrics = [this] { return metricsText(statusSources()); };
  Routed routed = route(request, s, ApiAccess{config_.httpSecret});
  if (routed.failsafe) return failsafeRequest(*routed.failsafe, std::move(respond));
  if (routed.operatorAction) return operatorRequest(request, *routed.operatorAction, std::move(respond));
  if (!routed.switchover) {
    if (request.method == "POST") {
      auto j = nlohmann::json::parse(routed.reply.body, nullptr, false);
      spdlog::info("{} {} refused with {}: {}", request.method, request.path, routed.reply.status,
                   j.is_object() ? j.value("error", std::string("?")) : routed.reply.body);
    }
    return respond(std::move(routed.reply));
  }
  if (stopping_) return respond(jsonError(503, "the agent is stopping"));
  const std::string to = routed.switchover->candidate.value_or("the sync") +
                         (routed.switchover->leader ? " from " + *routed.switchover->leader : "");
  spdlog::info("POST /switchover to {}: accepted (credential and body), checking the cluster", to);
  if (!switchover_->start(*routed.switchover, respond)) {
    spdlog::info("POST /switchover to {}: refused, another switchover is running", to);
    respond(jsonError(409, "another switchover is running"));
  }
}

// POST /failsafe: a request this agent's key vouches for (agent/failsafe_message.h) is
// decided by the driver at once (it logs its decision); the answer carries the key's MAC.
void Agent::failsafeRequest(const FailsafeCall& call, HttpServer::Respond respond) {
  if (stopping_) return respond(jsonError(503, "the agent is stopping"));
  if (auto ok = acceptFailsafeCall(call, config_.zk.cluster, config_.identity.id, config_.peerKey); !ok) {
    spdlog::warn("POST /failsafe from {} refused, no promise given: {}", call.request.primaryId, ok.error());
    return respond(jsonError(401, "refused: " + ok.error()));
  }
  if (config_.peerKey && !failsafeNonces_.firstSight(call.nonce)) {
    spdlog::warn("POST /failsafe from {} refused, no promise given: a replay (its nonce was seen before)",
                 call.request.primaryId);
    return respond(jsonError(401, "refused: a replay (this request's nonce was seen before)"));
  }
  respond(failsafeReply(call, driver_->onFailsafeRequest(call.request), config_.peerKey));
}

// POST /restart, /reload: this peer's postgres, by the request follower's own step
// (as `dugong-adm restart ID` / `reload ID` would), answered once done. A primary is
// restarted in place too (docs/design.md, "POST /restart and /reload").
void Agent::operatorRequest(const HttpRequest& request, const std::string& action, HttpServer::Respond respond) {
  const std::string what = request.method + " " + request.path;
  if (stopping_) {
    spdlog::info("{}: refused with 503, the agent is stopping", what);
    return respond(jsonError(503, "the agent is stopping"));
  }
  const Role role = driver_->peer().role();
  OperatorRequest r;
  r.id = "http-" + config_.identity.id + "-" + std::to_string(clock_.wallMs());
  r.action = action;
  // The follower logs the request with `by`: the line of the accepted decision.
  r.by = what + " over HTTP";
  if (role == Role::kPrimary && action == "restart") r.by += " on the primary, whose writes wait while it restarts";
  auto busy = requests_->carryOut(r, [this, role, respond](const RequestStatus& outcome) {
    nlohmann::json body = {{"peer", config_.identity.id}, {"role", roleName(role)}, {"action", outcome.action},
                           {"request", outcome.id}, {"state", outcome.state}};
    if (outcome.state == "done") {
      // The outcome's line of log is the follower's.
      body["done"] = outcome.action == "restart" ? "postgres restarted" : "postgres reloaded its configuration";
      return respond({200, "application/json", body.dump() + "\n"});
    }
    body["error"] = outcome.detail;
    respond({503, "application/json", body.dump() + "\n"});
  });
  if (busy) {
    spdlog::info("{}: refused with 409, operator request {} ({}) is running", what, busy->id, busy->action);
    return respond(jsonError(409, "another operator request is running on this peer: " + busy->id + " (" +
                                      busy->action + "); try again once it has ended"));
  }
}

}  // namespace dugong::agent
