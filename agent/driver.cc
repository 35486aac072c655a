#include "agent/driver.h"

#include <utility>

#include "statemachine/overloaded.h"

namespace dugong::agent {

Driver::Driver(Env env, DriverOptions options)
    : env_(env),
      opts_(std::move(options)),
      peer_(std::make_unique<Peer>(PeerOptions{opts_.identity, opts_.singleton, opts_.retryDelayMs})),
      healthTimer_(env_.clock.newTimer()) {}

Driver::~Driver() = default;

template <class T>
std::function<void(T)> Driver::guarded(std::function<void(T)> fn) {
  return [this, alive = std::weak_ptr<int>(alive_), fn = std::move(fn)](T value) {
    if (!alive.expired() && !stopping_) fn(std::move(value));
  };
}

bool Driver::start() {
  env_.postgres.init(guarded<PgInitialized>([this](PgInitialized e) {
    log(LogLevel::kInfo, std::string("postgres found ") + (e.online ? "running" : "stopped") + " and " +
                             (e.setUp ? "set up before" : "never set up"));
    step(e);
  }));
  env_.postgres.startHealthCheck([this, alive = std::weak_ptr<int>(alive_)](bool healthy, const std::string& detail) {
    if (!alive.expired() && !stopping_) onHealth(healthy, detail);
  });
  join();
  return !failed_;
}

void Driver::join() {
  ++counters_.joins;
  CoordinatorCallbacks cb;
  cb.onEvent = guarded<Event>([this](Event e) { step(e); });
  if (auto ok = env_.coordinator.join(std::move(cb)); !ok) {
    carryOut(Fatal{"cannot join the coordinator: " + ok.error()});
  }
}

void Driver::stop(std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  log(LogLevel::kInfo, std::string("stopping: leaving ZooKeeper") +
                           (opts_.stopPostgresOnExit ? " and stopping postgres" : ""));
  for (auto& [id, timer] : timers_) timer->cancel();
  healthTimer_->cancel();
  env_.coordinator.leave();
  env_.postgres.stopHealthCheck();
  if (!opts_.stopPostgresOnExit) return env_.clock.post(std::move(done));
  env_.postgres.apply(PgConfig::none(),
                      [this, alive = std::weak_ptr<int>(alive_), done = std::move(done)](PgConfigApplied r) {
                        if (!r.ok && !alive.expired()) log(LogLevel::kError, "stopping postgres failed: " + r.error);
                        done();
                      });
}

// ---- the state machine's loop ------------------------------------------------------

void Driver::later(Event event) {
  env_.clock.post([this, alive = std::weak_ptr<int>(alive_), event = std::move(event)] {
    if (!alive.expired() && !stopping_) step(event);
  });
}

void Driver::step(const Event& event) {
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
  for (const Action& a : peer_->step(env_.clock.wallMs(), event)) carryOut(a);
}

// A deposed peer's state machine ignores everything. Once an operator has rebuilt this
// peer and removed it from `deposed`, the driver starts a fresh one.
void Driver::restartStateMachineIfRebuilt(const Event& event) {
  if (peer_->role() != Role::kDeposed || pgBusy_) return;
  if (!std::holds_alternative<ClusterStateChanged>(event) && !std::holds_alternative<ZkInitialized>(event)) return;
  if (!lastStateNode_.exists) return;
  auto state = ClusterState::parse(lastStateNode_.data);
  if (!state || containsPeer(state->deposed, opts_.identity.id)) return;
  log(LogLevel::kInfo, "this peer is no longer deposed (generation " + std::to_string(state->generation) +
                           "): it was rebuilt; starting a fresh state machine");
  ++counters_.freshStateMachines;
  peer_ = std::make_unique<Peer>(PeerOptions{opts_.identity, opts_.singleton, opts_.retryDelayMs});
  for (auto& [id, timer] : timers_) timer->cancel();
  env_.postgres.init(guarded<PgInitialized>([this](PgInitialized e) { step(e); }));
  // The event being stepped now delivers the state; the active list comes first.
  if (std::holds_alternative<ClusterStateChanged>(event)) {
    for (const Action& a : peer_->step(env_.clock.wallMs(), ZkInitialized{lastStateNode_, lastActive_})) carryOut(a);
  }
}

void Driver::carryOut(const Action& action) {
  std::visit(
      Overloaded{
          [&](const WriteClusterState& w) {
            ++counters_.stateWrites;
            if (withdrawn_) {
              ++counters_.stateWriteFailures;
              return later(StateWriteFinished{false, "not connected to ZooKeeper (withdrawn)", false, -1});
            }
            env_.coordinator.putClusterState(w.state, w.expectedVersion, w.reason,
                                             guarded<StateWriteFinished>([this](StateWriteFinished r) {
                                               if (!r.ok) ++counters_.stateWriteFailures;
                                               later(r);
                                             }));
          },
          [&](const ApplyPgConfig& a) { applyPg(a.config, true); },
          [&](const FencePg& f) {
            // The state machine fences only with no transition of its own in flight; a
            // restart after a crash may be: the fence then fails and is retried.
            if (pgBusy_) return later(PgFenced{false, "postgres is being restarted", 0});
            pgBusy_ = true;
            env_.postgres.fence(f.newSync, guarded<PgFenced>([this](PgFenced r) {
                                  pgBusy_ = false;
                                  step(r);
                                }));
          },
          [&](const ReadWal&) {
            env_.postgres.readWal(guarded<WalPositionRead>([this](WalPositionRead r) { step(r); }));
          },
          [&](const StartTimer& t) {
            auto& timer = timers_[t.id];
            if (!timer) timer = env_.clock.newTimer();
            timer->start(t.delayMs, [this, alive = std::weak_ptr<int>(alive_), id = t.id] {
              if (!alive.expired() && !stopping_) step(TimerFired{id});
            });
          },
          [&](const LogDecision& d) {
            ++counters_.decisions;
            log(d.level, d.message);
          },
          [&](const Fatal& f) {
            log(LogLevel::kError, "fatal: " + f.reason);
            failed_ = true;
            if (onFatal_) env_.clock.post(onFatal_);
          },
      },
      action);
}

// ---- postgres ------------------------------------------------------------------------

void Driver::applyPg(const PgConfig& config, bool fromPeer) {
  if (pgBusy_) {
    // Only a restart can be in flight when the state machine asks (it never asks twice).
    if (fromPeer) queuedPeerApply_ = config;
    return;
  }
  pgBusy_ = true;
  env_.postgres.apply(config, guarded<PgConfigApplied>([this, config, fromPeer](PgConfigApplied r) {
                        pgBusy_ = false;
                        lastTransitionDone_ = env_.clock.monotonicMs();
                        if (r.ok) {
                          lastApplied_ = config;
                          ++counters_.transitions;
                          noteUnhealthy();
                        } else {
                          ++counters_.transitionFailures;
                          if (!fromPeer) log(LogLevel::kWarn, "restarting postgres failed: " + r.error);
                        }
                        if (r.ok && fromPeer && peer_->role() != roleApplied_) {
                          const Role previous = std::exchange(roleApplied_, peer_->role());
                          if (opts_.onRoleApplied) opts_.onRoleApplied(previous, roleApplied_);
                        }
                        if (fromPeer) step(r);
                        if (queuedPeerApply_ && !pgBusy_ && !stopping_) {
                          PgConfig next = *queuedPeerApply_;
                          queuedPeerApply_.reset();
                          applyPg(next, true);
                        }
                      }));
}

bool Driver::expectPostgresOnline() const { return lastApplied_ && lastApplied_->role != PgRole::kNone; }

void Driver::onHealth(bool healthy, const std::string& detail) {
  healthy_ = healthy;
  if (healthy) {
    if (unhealthySince_) log(LogLevel::kInfo, "postgres is healthy again");
    unhealthySince_.reset();
    if (withdrawn_) {
      log(LogLevel::kInfo, "rejoining ZooKeeper: postgres is healthy again");
      withdrawn_ = false;
      join();
    }
    return;
  }
  unhealthyDetail_ = detail;
  noteUnhealthy();
}

// Postgres should be running but is not answering: start the clock (once), and tick.
void Driver::noteUnhealthy() {
  if (healthy_ || !expectPostgresOnline() || unhealthySince_) return;
  unhealthySince_ = env_.clock.monotonicMs();
  log(LogLevel::kWarn, "postgres is unhealthy: " + unhealthyDetail_);
  healthTick();
}

void Driver::withdraw(int64_t downMs) {
  log(LogLevel::kError, "withdrawing from ZooKeeper: postgres has been unhealthy for " + std::to_string(downMs / 1000) +
                            " s and restarts did not help (" + unhealthyDetail_ + ")");
  ++counters_.withdrawals;
  withdrawn_ = true;
  env_.coordinator.leave();
}

// While postgres is unhealthy: restart it (re-apply its configuration) once it has
// been down for a grace period since the last transition; withdraw from ZooKeeper
// once it has been down for withdrawAfterMs.
void Driver::healthTick() {
  if (stopping_ || healthy_ || !unhealthySince_ || !expectPostgresOnline()) {
    unhealthySince_.reset();
    return;
  }
  const int64_t now = env_.clock.monotonicMs();
  const int64_t down = now - *unhealthySince_;
  if (!withdrawn_ && down >= opts_.withdrawAfterMs) withdraw(down);
  if (!pgBusy_ && down >= opts_.restartGraceMs && now - lastTransitionDone_ >= opts_.restartGraceMs) {
    log(LogLevel::kInfo, std::string("restarting postgres as ") + pgRoleName(lastApplied_->role));
    ++counters_.restarts;
    applyPg(*lastApplied_, false);
  }
  healthTimer_->start(opts_.healthTickMs, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired()) healthTick();
  });
}

}  // namespace dugong::agent
