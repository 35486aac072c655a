// The simulated postgres' periodic polls (sim_postgres.h): the adapter's health check
// and its writable poll of a primary waiting for its sync to catch up.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "pg/plan/catch_up.h"
#include "pg/plan/standby_names.h"
#include "sim/world/sim_postgres.h"

namespace dugong::simworld {

void SimPostgres::startHealthCheck(std::function<void(bool, const std::string&)> onChange) {
  onHealth_ = std::move(onChange);
  lastHealthy_ = -1;
  uint64_t serial = ++healthSerial_;
  fleet_.queue().after(0, guarded([this, serial] { healthCheck(serial); }));
}

void SimPostgres::stopHealthCheck() {
  onHealth_ = nullptr;
  ++healthSerial_;
}

void SimPostgres::lookAtHealth() { checkHealth(); }

// The pg adapter's health check: SELECT 1 every health interval; the driver hears of
// the first result and of every change.
void SimPostgres::healthCheck(uint64_t serial) {
  if (healthSerial_ != serial) return;
  look(serial);
}

void SimPostgres::checkHealth() {
  if (onHealth_) look(0);
}

void SimPostgres::look(uint64_t pollSerial) {
  const PgModel& m = fleet_.model();
  PgServer& pg = this->pg();
  // A standby that has not streamed for repairStandbyAfter, with its log saying why it
  // cannot, is unhealthy: the driver's health restart then repairs it.
  // Of a sync or an async only: the adapter's check has no upstream peer for a standby
  // leader (pg/controller_status.cc).
  const bool cannotFollow = pg.serving() && pg.isStandby() && pg.config.role != PgRole::kStandbyLeader &&
                            pg.cannotFollowSince >= 0 &&
                            now() - pg.cannotFollowSince >= m.repairAfterMs;
  if (cannotFollow) pg.repairFor = true;
  const bool refused = pg.serving() && now() < pg.refusesNewConnectionsUntil;
  const bool healthy = pg.serving() && !cannotFollow && !refused;
  const bool gone = !pg.running && !pg.transitioning;
  const bool goneNow = gone && !gone_;  // reported again, as the adapter does
  gone_ = gone;
  if (pollSerial != 0 && m.healthIntervalMs > 0) {
    fleet_.queue().after(m.healthIntervalMs, guarded([this, pollSerial] { healthCheck(pollSerial); }));
  }
  if (lastHealthy_ == static_cast<int>(healthy) && !goneNow) return;
  lastHealthy_ = healthy;
  fleet_.trace().trace('P', [&] {
    return id() + " health check: postgres " +
           (healthy        ? "answers"
            : cannotFollow ? "cannot follow its upstream"
            : refused      ? "refuses a new connection (it serves on)"
                           : "does not answer");
  });
  onHealth_(healthy, healthy        ? ""
                     : cannotFollow ? "this standby cannot follow its upstream"
                     : refused      ? "FATAL: sorry, too many clients already"
                                    : "postgres is not running");
}

// The adapter's writable poll (pg/controller.cc pollWritable), every writablePollInterval
// on the query worker while a primary waits for its sync to catch up. It skips its turn
// while a fence or an apply holds the apply lock; its write of the configuration holds
// the lock (a fence or an apply started meanwhile waits for it).
void SimPostgres::schedulePoll() {
  PgServer& pg = this->pg();
  if (pg.pollScheduled) return;
  pg.pollScheduled = true;
  // The flag is the server's: it is cleared even if this adapter is gone by then.
  fleet_.queue().after(fleet_.model().writablePollMs,
                       [&fleet = fleet_, host = host_, self = this, run = run_] {
                         PgServer& p = fleet.server(host);
                         p.pollScheduled = false;
                         if (p.adapterRun == run) self->pollWritable(p.epoch);
                       });
}

void SimPostgres::pollWritable(uint64_t epoch) {
  PgServer& pg = this->pg();
  if (!pg.writablePending) return;
  if (now() < pg.applyLockedUntil || pg.transitioning || !pg.serving() || pg.config.role != PgRole::kPrimary) {
    return schedulePoll();
  }
  pg::CatchUp step;
  if (pg.config.quorum && pg.quorum) {
    // Quorum mode (PgController::quorumCaughtUp): the k-th latest flush of the members
    // streaming synchronously, under the rule the configuration file holds now.
    const pg::QuorumSeen seen{pg.wal.position().value(), pg.quorum->k,
                              fleet_.memberFlushes(host_, pg.quorum->members)};
    step = pg::planCatchUp(pg.pendingTarget, seen);
  } else {
    int s = fleet_.hostOf(pg.pendingSync);
    bool streams =
        s >= 0 && pg.config.downstream && pg.config.downstream->id == pg.pendingSync && fleet_.attachedSync(host_);
    // When it becomes writable: the adapter's catch-up planner (pg/plan/catch_up.h).
    std::optional<pg::SyncSeen> seen;
    if (streams) seen = pg::SyncSeen{pg.wal.size(), fleet_.server(s).wal.size()};
    step = pg::planCatchUp(pg.pendingTarget, seen);
  }
  pg.pendingTarget = step.target;
  if (!step.writable) return schedulePoll();
  int64_t end = std::max(now(), pg.queryBusyUntil) + fleet_.model().writableWrite.draw(fleet_.rng());
  pg.applyLockedUntil = end;
  pg.queryBusyUntil = end;
  fleet_.queue().at(end, guarded([this, epoch] {
    PgServer& p = this->pg();
    if (p.epoch != epoch || !p.writablePending) return;
    p.writablePending = false;
    p.readOnly = false;
    fleet_.trace().trace('P', [&] {
      return id() + " postgres writable: " +
             (p.quorum && p.config.quorum ? pg::renderQuorum(*p.quorum) + " has caught up"
                                          : "its sync " + p.pendingSync + " has caught up");
    });
  }));
}

}  // namespace dugong::simworld
