#include "sim/world/sim_postgres.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "pg/plan/hot_standby.h"
#include "pg/plan/catch_up.h"
#include "pg/plan/fence.h"
#include "pg/plan/rebuild.h"
#include "pg/plan/transition.h"
#include "pg/plan/writes.h"

namespace dugong::simworld {

namespace {

// What the pg adapter's health check reads in a diverged standby's log (pg/controller_status.cc):
// a fork, never missing WAL (the model keeps all of it).
const char kCannotFollowEvidence[] = "requested timeline is not a child of this server's history";

// The data directory as the rebuild planner (pg/plan/rebuild.h) sees it. Role none leaves
// a model server's standby.signal as it was: no signal means it last ran as a primary.
pg::RebuildFacts rebuildFacts(const PgServer& pg) {
  pg::RebuildFacts f;
  f.setUp = pg.setUp;
  f.repair = pg.repairing ? kCannotFollowEvidence : "";
  f.hasStandbySignal = pg.standbySignal;
  f.wasPrimary = !pg.standbySignal;
  return f;
}

// Whether a data directory the rebuild planner let follow `source` can: its WAL a prefix
// of the source's. Checked by the world, not decided by it: a standby started on a
// diverged history never streams, and reports a rejoin that did not happen.
bool follows(const Wal& wal, const Wal& source) { return !wal.divergedFrom(source) && wal.size() <= source.size(); }

// pg_rewind against `source` (nullptr: it cannot be asked): what it finds, and with
// `atOnce`, the rewind itself. Without timelines in this model, a data directory ahead of
// the source forked there (a promoted peer behind it): a divergence.
// A data directory whose checkpoint removed the WAL from the last checkpoint before the
// fork on: pg_rewind (and its dry run) fails reading it.
pg::Divergence compareWith(PgServer& pg, const Wal* source, bool atOnce, size_t* discarded) {
  if (!source) return pg::Divergence::kUnknown;
  if (follows(pg.wal, *source)) return pg::Divergence::kCanFollow;
  if (pg.rewindWalGone) return pg::Divergence::kUnknown;
  if (!atOnce) return pg::Divergence::kDiverged;
  *discarded = pg.wal.rewindTo(*source);
  return pg::Divergence::kRewound;
}

// The adapter's crash recovery before a comparison (PgController::finishCrashRecovery), of
// a data directory that last ran as a primary and was not shut down cleanly: its two
// checkpoints remove the WAL before their redo point unless its settings keep every
// segment (pg/plan/rebuild.h). A copy or a rewind brings the WAL back.
void finishCrashRecovery(PgServer& pg) {
  if (!pg.stoppedUncleanly || pg.standbySignal) return;
  pg.stoppedUncleanly = false;
  bool keeps = false;
  for (const auto& [name, value] : pg::crashRecoverySettingsKeepingWal()) {
    keeps = keeps || (name == "archive_mode" && value == "on");
  }
  if (!keeps) pg.rewindWalGone = true;
}

}  // namespace

// The members' application names, their peer ids (agent/daemon_env.cc's conversion).
pg::StandbyQuorum standbyQuorum(const Quorum& quorum) {
  pg::StandbyQuorum q{quorum.k, {}};
  for (const auto& m : quorum.members) q.members.push_back(m.id);
  return q;
}

std::optional<driver::StreamSample> SimPostgres::streamSample() const {
  if (!fleet_.model().tellsStreaming) return std::nullopt;
  const PgServer& s = fleet_.server(host_);
  std::string from;
  if (s.isStandby() && s.config.upstream) {
    const int u = fleet_.hostOf(s.config.upstream->id);
    if (u >= 0 && fleet_.streamsFrom(host_, u)) from = s.config.upstream->id;
  }
  return driver::StreamSample{s.serving(), from};
}

SimPostgres::SimPostgres(PgFleet& fleet, int host, SimPostgresHooks hooks)
    : fleet_(fleet), host_(host), hooks_(std::move(hooks)), run_(fleet.nextAdapterRun()) {
  pg().adapterRun = run_;
}

SimPostgres::~SimPostgres() {
  if (pg().adapterRun == run_) pg().adapterRun = 0;
}

void SimPostgres::init(std::function<void(PgInitialized)> done) {
  fleet_.queue().after(fleet_.model().init.draw(fleet_.initRng()), guarded([this, done = std::move(done)] {
    PgInitialized e{pg().running, pg().setUp};
    hooks_.deliver(e, [&] { done(e); });
  }));
}

// A peer never applies two postgres transitions at once (DESIGN.md): the world checks
// what the driver asks for.
void SimPostgres::beginTransition(const char* what) {
  if (transitions_ > 0 && hooks_.violation) {
    hooks_.violation("two-transitions", id() + " asked postgres for a " + what + " while a transition was in flight");
  }
  ++transitions_;
  transitionSince_ = now();
}

void SimPostgres::apply(const PgConfig& config, std::function<void(PgConfigApplied)> done) {
  beginTransition("reconfiguration");
  pendingApply_ = std::move(done);
  // A standby leader of a dugong source (docs/decisions/0083) streams from the source peer
  // its endpoint names, as a standby from its upstream (pg/controller_standby_leader.cc:
  // primary_conninfo to that peer's host and port); with none named, the one its last
  // apply followed as this source's leader, else none (pg/plan/transition.h).
  PgConfig model = config;
  if (model.role == PgRole::kStandbyLeader && model.source) {
    const PgServer& p = pg();
    std::optional<SourceEndpoint> last;
    if (p.config.role == PgRole::kStandbyLeader) last = p.config.source;
    model.source = pg::planLeaderEndpoint(*model.source, last);
    if (model.source->peer) model.upstream = model.source->peer;
  }
  carryOut(model);
}

void SimPostgres::carryOut(const PgConfig& cfg) {
  PgServer& pg = this->pg();
  fleet_.trace().trace('A', [&] { return id() + " -> apply postgres " + describeConfig(cfg); });
  if (now() < pg.applyLockedUntil) {  // the poll is writing the configuration: wait for the apply lock
    fleet_.queue().at(pg.applyLockedUntil, guarded([this, cfg] { carryOut(cfg); }));
    return;
  }
  const PgModel& m = fleet_.model();
  Rng& rng = fleet_.rng();
  // A new synchronous standby of a primary, or a new upstream of a running standby, is
  // a reload; a running standby is promoted without a restart (it serves reads and,
  // until the reload that clears its upstream, streams meanwhile); anything else
  // restarts.
  // A standby apply after the health check found that it cannot follow repairs it:
  // stop, pg_rewind (else pg_basebackup), start; the adapter forgets the repair either way.
  // The steps are the pg adapter's own planners' (pg/plan/transition.h).
  const bool leader = cfg.role == PgRole::kStandbyLeader;
  const bool standbyRole = cfg.role == PgRole::kSync || cfg.role == PgRole::kAsync || leader;
  // The adapter repairs a sync or an async, never a standby leader (0083 "Phase 2 as
  // built": left for later).
  pg.repairing = standbyRole && !leader && std::exchange(pg.repairFor, false);
  bool reload = false;
  bool promotion = false;
  if (standbyRole) {
    pg::StandbyFacts f;
    f.running = pg.serving();
    f.setUp = pg.setUp;
    f.inRecovery = pg.serving() && pg.isStandby();
    f.hasStandbySignal = pg.standbySignal;
    f.wasPrimary = !pg.standbySignal;
    f.sameUpstream = pg.config.upstream && cfg.upstream && pg.config.upstream->id == cfg.upstream->id;
    f.repair = pg.repairing;
    reload = pg::planStandby(f) != pg::StandbyStep::kRestart;
  }
  const bool startsOrStops = pg.running != (cfg.role != PgRole::kNone);
  pg::PrimaryFacts primary;
  primary.hasDownstream = cfg.downstream.has_value() || cfg.quorum.has_value();
  primary.wasWritablePrimary = pg.config.role == PgRole::kPrimary && !pg.readOnly;
  primary.inRecovery = pg.serving() ? pg.isStandby() : pg.standbySignal;
  const pg::PrimaryPlan primaryPlan = pg::planPrimary(primary);
  if (cfg.role == PgRole::kPrimary) {
    reload = pg.serving() && pg.config.role == PgRole::kPrimary;
    promotion = pg.serving() && primaryPlan.promote;  // a running standby: no restart
  }
  pg.applyReadOnly = m.readOnlyUntilSyncCaughtUp && primaryPlan.readOnly;
  pg.writablePending = false;
  pg.transitioning = true;
  pg.reloading = reload || promotion;
  pg.promoting = promotion;
  pg.crashedInTransition = false;
  uint64_t epoch = ++pg.epoch;
  if (!reload && !promotion) {  // restart: stops serving and streaming now
    fleet_.cleanStop(host_);
  }
  if (promotion) {
    fleet_.queue().after(m.promoteStream.draw(rng), guarded([this, epoch] {
      PgServer& p = this->pg();
      if (p.epoch != epoch || !p.config.upstream) return;
      p.config.upstream.reset();
      fleet_.trace().trace('P', [&] { return id() + " postgres stops streaming: promoting"; });
    }));
  }
  if (hooks_.applyStarting) hooks_.applyStarting(cfg);
  // A reload (new synchronous standby) takes milliseconds; a restart or a promotion
  // takes longer. The apply holds the apply lock throughout.
  bool slow = now() < pg.slowUntil;
  int64_t latency = reload ? (slow ? m.slowReload.draw(rng) : m.reload.draw(rng))
                           : (slow ? m.slowRestart.draw(rng) : m.restart.draw(rng));
  if (startsOrStops) latency += m.startStop.draw(rng);
  pg.applyLockedUntil = now() + latency;
  fleet_.queue().after(latency, guarded([this, cfg] { finishApply(cfg); }));
}

void SimPostgres::finishApply(PgConfig cfg) {
  PgServer& pg = this->pg();
  TraceSink& trace = fleet_.trace();
  bool reload = pg.reloading && !pg.promoting;
  const bool promotion = pg.promoting;
  pg.transitioning = false;
  pg.reloading = false;
  pg.promoting = false;
  std::string error;
  bool refusedApply = false;  // the peer halts for an operator
  if (pg.crashedInTransition) {
    error = "postgres crashed during the transition";
  } else if (cfg.role != PgRole::kNone && now() < pg.brokenUntil) {
    error = "postgres would not start";
  } else if (cfg.role == PgRole::kPrimary) {
    // What the pg adapter does with the data directory first, as its planner
    // (pg/plan/transition.h) decides: only a new cluster's first primary runs initdb.
    pg::PrimaryDirFacts dir;
    dir.found = pg.setUp ? pg::DataDirFound::kSetUp : pg::DataDirFound::kMissing;
    dir.running = pg.running && pg.setUp;
    dir.newCluster = cfg.newCluster;
    dir.initWal = cfg.initWal;
    dir.initTimeline = cfg.initTimeline;
    if (pg.setUp) dir.history = pg.wal.history();
    const pg::PrimaryDirPlan plan = pg::planPrimaryDataDir(dir);
    if (plan.step == pg::PrimaryDirStep::kBootstrap) {
      pg.setUp = true;
      trace.trace('P', [&] { return id() + " postgres: initdb"; });
    } else if (plan.step != pg::PrimaryDirStep::kUse) {
      error = plan.why;
      refusedApply = plan.step == pg::PrimaryDirStep::kRefuse;
    }
  } else if (cfg.role == PgRole::kStandbyLeader && !reload) {
    error = startStandbyLeader(cfg, &refusedApply);
  } else if (cfg.role != PgRole::kNone && !reload) {
    // What the pg adapter does for a standby that is not running as one (applyStandby),
    // as its rebuild planner (pg/plan/rebuild.h) decides: copy, compare (pg_rewind), or
    // start as it is; the model only carries it out.
    const PeerIdentity* from = cfg.restorePeer ? &*cfg.restorePeer : (cfg.upstream ? &*cfg.upstream : nullptr);
    int restore = fleet_.hostOf(from ? from->id : "");
    const Wal* source = restore >= 0 && fleet_.server(restore).running ? &fleet_.server(restore).wal : nullptr;
    const pg::RebuildRules rules;
    const pg::RebuildStart first = pg::planRebuildStart(rebuildFacts(pg), rules);
    bool copy = first.step == pg::RebuildStep::kBasebackup;
    if (first.step == pg::RebuildStep::kCompare) {
      const bool verified = source != nullptr;
      size_t discarded = 0;
      finishCrashRecovery(pg);
      const pg::Divergence d = compareWith(pg, source, pg::rewindAtOnce(rules, verified), &discarded);
      const pg::RebuildOutcome outcome = pg::planAfterCompare(d, verified, false, rules);
      if ((outcome == pg::RebuildOutcome::kFollow || outcome == pg::RebuildOutcome::kFollowRewound) && source &&
          !follows(pg.wal, *source) && hooks_.violation) {
        hooks_.violation("follows-diverged", id() + " was let follow " + fleet_.server(restore).id + " (" +
                                                 pg::divergenceName(d) + ") on a history that diverged from it");
      }
      switch (outcome) {
        case pg::RebuildOutcome::kFollow: break;
        case pg::RebuildOutcome::kFollowRewound:
          pg.controlMaxConnections = fleet_.server(restore).controlMaxConnections;  // pg_rewind copies pg_control
          trace.trace('P', [&] {
            return id() + " postgres rewound to follow " + fleet_.server(restore).id + " (" +
                   std::to_string(discarded) + " records discarded" + (pg.repairing ? ", a repair" : "") + ")";
          });
          break;
        case pg::RebuildOutcome::kBasebackup: copy = true; break;
        default:
          error = std::string("it may not follow (") + pg::divergenceName(d) + ") and cannot be rebuilt" +
                  (source ? "" : ": the restore peer is not running");
      }
    }
    if (copy && !source) {
      error = "no usable data directory and the restore peer is not running";
    } else if (copy) {
      pg.wal = *source;
      pg.controlMaxConnections = fleet_.server(restore).controlMaxConnections;
      pg.setUp = true;
      pg.rewindWalGone = false;
      pg.stoppedUncleanly = false;
      trace.trace('P', [&] {
        return id() + " postgres rebuilt from " + fleet_.server(restore).id + " (" + std::to_string(pg.wal.size()) +
               " records)";
      });
    }
    if (error.empty()) error = startWithHotStandbyFloor(pg, cfg.role);
  }
  pg.repairing = false;
  if (cfg.role != PgRole::kNone && !reload) pg.cannotFollowSince = -1;
  --transitions_;
  auto done = std::move(pendingApply_);
  pendingApply_ = nullptr;
  if (!error.empty()) {
    pg.running = false;
    pg.waiting.clear();
    trace.trace('P', [&] { return id() + " postgres transition to " + pgRoleName(cfg.role) + " failed: " + error; });
    if (fleet_.model().healthIntervalMs == 0) checkHealth();
    PgConfigApplied r{false, error, false, refusedApply};
    hooks_.deliver(r, [&] { done(r); });
    return;
  }
  // A primary under the writes mode in effect now, whenever it was set (pg/plan/writes.h):
  // read-only while stopped, left stopped while shut down.
  const pg::PrimaryUnderWrites under =
      cfg.role == PgRole::kPrimary ? pg::planPrimaryUnderWrites(writesMode_) : pg::PrimaryUnderWrites{};
  if (!under.run && pg.running) {
    if (pg::writesShutdownMode() == pg::WritesShutdown::kImmediate) {
      fleet_.immediateStop(host_);
    } else {
      fleet_.cleanStop(host_);
    }
  }
  // Quorum mode: the walsenders take the rule written (PgServer::quorum).
  if (cfg.role == PgRole::kPrimary && cfg.quorum) {
    fleet_.reloadQuorum(host_, standbyQuorum(*cfg.quorum));
  } else if (pg.quorum) {
    pg.quorum.reset();
    pg.walsenders.clear();
  }
  pg.config = cfg;
  pg.alsoSync.reset();
  pg.running = cfg.role != PgRole::kNone && under.run;
  if (pg.running && cfg.role == PgRole::kPrimary && promotion) {
    pg.controlMaxConnections = pg.runMaxConnections;  // the end of recovery records what it runs
  } else if (pg.running && cfg.role == PgRole::kPrimary && !reload) {
    startWithHotStandbyFloor(pg, cfg.role);
  }
  if (pg.running && cfg.role == PgRole::kPrimary) {
    // Running as a primary again: a later fork comes after its start's checkpoint.
    pg.rewindWalGone = false;
    pg.stoppedUncleanly = false;
  }
  pg.writesStopped = under.writesStopped;  // the apply rewrote the managed configuration
  pg.readOnly = cfg.role != PgRole::kPrimary || pg.applyReadOnly;
  if (!pg.running && cfg.role == PgRole::kPrimary) {
    trace.trace('P', [&] { return id() + " postgres stays stopped as primary: writes are shut down"; });
    if (fleet_.model().healthIntervalMs == 0) checkHealth();
    PgConfigApplied r{true, "", false};
    hooks_.deliver(r, [&] { done(r); });
    return;
  }
  if (cfg.role == PgRole::kPrimary && pg.readOnly) {
    pg.writablePending = true;
    pg.pendingSync = cfg.downstream ? cfg.downstream->id : "";
    pg.pendingTarget.reset();
    schedulePoll();
  }
  if (cfg.role == PgRole::kPrimary && pg.standbySignal) {
    pg.wal.promote(fleet_.newTimeline());  // out of recovery: a new timeline, after the last whole record
    pg.partialBytes = 0;
    pg.replayedAt = 0;
    trace.trace('P', [&] { return id() + " postgres promoted to timeline " + std::to_string(pg.wal.timeline()); });
  }
  if (cfg.role == PgRole::kPrimary) pg.standbySignal = false;
  if (pg.isStandby()) pg.standbySignal = true;
  trace.trace('P', [&] {
    return id() + " postgres now " + describeConfig(cfg) + (pg.running ? ", running" : ", stopped") + ", WAL " +
           std::to_string(pg.wal.size());
  });
  if (fleet_.model().healthIntervalMs == 0) checkHealth();
  PgConfigApplied r{true, "", pg.running};
  hooks_.deliver(r, [&] { done(r); });
}

// What the adapter's applyStandbyLeader does with a standby leader that is not running
// as one (pg/controller_standby_leader.cc): a new standby cluster's first leader with no
// data directory copies it from its source peer (pg_basebackup); a later one refuses; a
// data directory that last ran as a primary is refused unless a demotion began (not
// modelled: the simulated source is scripted); then postgres starts in recovery. The
// error, or empty (`refused`: the peer halts for an operator).
std::string SimPostgres::startStandbyLeader(const PgConfig& cfg, bool* refused) {
  PgServer& pg = this->pg();
  const int from = fleet_.hostOf(cfg.upstream ? cfg.upstream->id : "");
  if (!pg.setUp) {
    if (!cfg.newCluster) {
      *refused = true;
      return "a standby leader of a later generation found no data directory";
    }
    if (from < 0 || !fleet_.server(from).serving()) return "the source peer does not answer: no pg_basebackup";
    pg.wal = fleet_.server(from).wal;
    pg.controlMaxConnections = fleet_.server(from).controlMaxConnections;
    pg.setUp = true;
    pg.rewindWalGone = false;
    pg.stoppedUncleanly = false;
    pg.standbySignal = true;
    fleet_.trace().trace('P', [&] {
      return id() + " postgres copied from the source peer " + fleet_.server(from).id + " (" +
             std::to_string(pg.wal.size()) + " records)";
    });
  } else if (!pg.standbySignal && !cfg.demoted) {
    *refused = true;
    return "this data directory last ran as a primary: a standby leader is made of it only by demote-cluster";
  }
  return startWithHotStandbyFloor(pg, cfg.role);
}

void SimPostgres::fence(const std::optional<PeerIdentity>& newSync, std::function<void(PgFenced)> done) {
  beginTransition("fence");
  fleet_.trace().trace('A', [&] { return id() + " -> fence" + (newSync ? " (commits wait for " + newSync->id + ")" : ""); });
  // The fence takes the apply lock (waiting for a poll that writes the configuration),
  // rewrites the configuration and reloads; the poll skips its turns meanwhile. A slow
  // postgres reloads slowly, the fence's reload too.
  PgServer& p = pg();
  const PgModel& m = fleet_.model();
  int64_t end = std::max(now(), p.applyLockedUntil) +
                (now() < p.slowUntil ? m.slowReload.draw(fleet_.rng()) : m.fence.draw(fleet_.rng()));
  p.applyLockedUntil = end;
  fleet_.queue().at(end, guarded([this, newSync, done = std::move(done)] {
    PgServer& pg = this->pg();
    PgFenced r;
    if (pg.transitioning) {
      r.error = "postgres is in a transition";
    } else {
      r.ok = true;  // a stopped postgres acknowledges nothing
      r.instance = pg.running ? pg.instance : 0;
      const bool primary = pg.running && pg.config.role == PgRole::kPrimary;
      if (primary || (pg.running && pg.isStandby())) {
        // A reload, to what the adapter's fence planner (pg/plan/fence.h) wants: a
        // standby stops streaming; a primary's commits wait for the new sync, and for the
        // sync of the last apply (kept when fenced again for another new sync).
        auto idOf = [](const std::optional<PeerIdentity>& peer) {
          return peer ? std::optional<std::string>(peer->id) : std::nullopt;
        };
        auto target = pg::planFence(pg::FenceFrom{!primary, idOf(pg.config.downstream), idOf(pg.alsoSync)}, idOf(newSync));
        if (!target) {
          r = PgFenced{false, target.error(), 0};
        } else if (primary) {
          std::optional<PeerIdentity> also;
          for (const auto& had : {pg.alsoSync, pg.config.downstream}) {
            if (!also && had && had->id == target->alsoSyncId) also = had;
          }
          pg.alsoSync = also;
          pg.config.downstream = newSync;
          pg.writablePending = false;  // and it stays as writable as it is until the next apply
        } else {
          pg.config.upstream.reset();  // stops streaming
        }
      }
    }
    --transitions_;
    if (r.ok && hooks_.fenced) hooks_.fenced();
    hooks_.deliver(r, [&] { done(r); });
  }));
}

void SimPostgres::readWal(std::function<void(WalPositionRead)> done) {
  fleet_.trace().trace('A', [&] { return id() + " -> read WAL"; });
  ++walReads_;
  walReadSince_ = now();
  // On the adapter's query worker, after whatever it is doing (a poll's write).
  PgServer& p = pg();
  int64_t end = std::max(now(), p.queryBusyUntil) + fleet_.model().walRead.draw(fleet_.rng());
  p.queryBusyUntil = end;
  fleet_.queue().at(end, guarded([this, done = std::move(done)] { answerWalRead(now(), std::move(done)); }));
}

// As the adapter reads a WAL end (pg/controller.cc readWalEnd): a primary's position; a
// standby's through the fence planner: before a fence the greater of received and
// replayed, once fenced where replay ends (waiting for a lagging replay up to
// promoteTimeout), never the received position.
void SimPostgres::answerWalRead(int64_t started, std::function<void(WalPositionRead)> done) {
  const PgServer& pg = this->pg();
  WalPositionRead r;
  if (!pg.serving()) {
    r.error = "postgres is not running";
  } else {
    const WalPosition whole = pg.wal.position();
    std::optional<WalPosition> position = whole;
    if (pg.isStandby()) {
      const bool replayEnded = now() >= pg.replayedAt;
      const uint64_t behind = replayEnded || pg.wal.size() == 0 ? 0 : pg.wal.recordBytes();
      pg::StandbyWalSeen seen;
      seen.startupWait = replayEnded ? "RecoveryWalStream" : "";
      seen.replayed = WalPosition(whole.value() - behind).toString();
      const bool fenced = !pg.config.upstream;  // a fenced standby stops streaming
      const bool gaveUp = now() - started >= fleet_.model().promoteTimeoutMs;
      switch (pg::planStandbyWalEnd(seen, fenced, gaveUp)) {
        case pg::StandbyWalEnd::kNotFenced:
          position = WalPosition(whole.value() + pg.partialBytes);
          break;
        case pg::StandbyWalEnd::kReplayed:
          position = WalPosition(whole.value() - behind);
          break;
        case pg::StandbyWalEnd::kWaitForReplay: {  // asked again when replay has ended, or at the deadline
          const int64_t next = std::min(pg.replayedAt, started + fleet_.model().promoteTimeoutMs);
          fleet_.queue().at(next, guarded([this, started, done = std::move(done)]() mutable {
            answerWalRead(started, std::move(done));
          }));
          return;
        }
        default:
          position.reset();
          r.error = "replay has not reached the end of this standby's WAL after " +
                    std::to_string(now() - started) + " ms: no initWal";
      }
    }
    if (position) {
      r.position = *position;
      r.history = pg.wal.history();
      r.instance = pg.instance;
    }
  }
  --walReads_;
  hooks_.deliver(r, [&] { done(r); });
}

void SimPostgres::sampleSyncStandby(const std::string& standbyId,
                                    std::function<void(Result<driver::SyncReplicationSample>)> done) {
  PgServer& p = pg();
  int64_t end = std::max(now(), p.queryBusyUntil) + fleet_.model().syncSample.draw(fleet_.rng());
  p.queryBusyUntil = end;
  fleet_.queue().at(end, guarded([this, standbyId, done = std::move(done)] {
    const PgServer& pg = this->pg();
    if (!pg.serving() || pg.config.role != PgRole::kPrimary) return done(Error{"postgres is not running as primary"});
    driver::SyncReplicationSample s;
    const int sync = fleet_.hostOf(standbyId);
    s.streaming = sync >= 0 && fleet_.streamsFrom(sync, host_);
    if (s.streaming) s.flushed = fleet_.server(sync).wal.position();
    s.waitingCommits = static_cast<int>(pg.waiting.size());
    fleet_.trace().trace('P', [&] {
      return id() + " sync " + standbyId + (s.streaming ? " flushed " + s.flushed->toString() : " not streaming") + ", " +
             std::to_string(s.waitingCommits) + " commits waiting";
    });
    done(s);
  }));
}

template <class F>
void SimPostgres::underApplyLock(int64_t latency, F fn) {
  PgServer& p = pg();
  const int64_t end = std::max(now(), p.applyLockedUntil) + latency;
  p.applyLockedUntil = end;
  fleet_.queue().at(end, guarded(std::move(fn)));
}

// The adapter's stopWrites: the mode at once (any configuration written from now on is
// writes-stopped), and without waiting for the apply lock a running primary's new
// sessions become read-only and every client session is terminated (commits waiting
// for the sync fail: never acknowledged).
void SimPostgres::stopWrites(std::function<void(Result<int>)> done) {
  fleet_.trace().trace('A', [&] { return id() + " -> stop writes"; });
  writesMode_ = pg::afterStopWrites(writesMode_);
  fleet_.queue().after(fleet_.model().writes.draw(fleet_.rng()), guarded([this, done = std::move(done)] {
    PgServer& pg = this->pg();
    int terminated = 0;
    if (writesMode_ != pg::WritesMode::kOpen &&
        pg::mustStopWrites({pg.serving(), pg.config.role == PgRole::kPrimary, pg.writesStopped}, false)) {
      pg.writesStopped = true;
      terminated = static_cast<int>(pg.waiting.size());
      pg.waiting.clear();
      fleet_.trace().trace('P', [&] { return id() + " postgres: writes stopped"; });
    }
    done(terminated);
  }));
}

// The adapter's resumeWrites: the mode at once; the configuration under the apply lock,
// unless stopped again meanwhile.
void SimPostgres::resumeWrites(std::function<void(Result<bool>)> done) {
  fleet_.trace().trace('A', [&] { return id() + " -> resume writes"; });
  writesMode_ = pg::afterResume(writesMode_);
  underApplyLock(fleet_.model().writes.draw(fleet_.rng()), [this, done = std::move(done)] {
    PgServer& pg = this->pg();
    if (writesMode_ == pg::WritesMode::kOpen &&
        pg::mustResumeWrites({pg.serving(), pg.config.role == PgRole::kPrimary, pg.writesStopped})) {
      fleet_.trace().trace('P', [&] { return id() + " postgres: writes resumed"; });
      pg.writesStopped = false;
    }
    done(true);
  });
}

// The adapter's shutDownWrites: the mode and the signal at once, whatever holds the apply
// lock: a running primary is stopped (pg_ctl stop -m fast: its client sessions go at
// once, its walsenders send what they have first); one that an apply is starting stays
// stopped (finishApply).
void SimPostgres::shutDownWrites(std::function<void(Result<bool>)> done) {
  fleet_.trace().trace('A', [&] { return id() + " -> shut postgres down"; });
  writesMode_ = pg::afterShutDown(writesMode_);
  PgServer& p = pg();
  const int64_t latency = fleet_.model().shutDown.draw(fleet_.rng());
  fleet_.queue().at(now(), guarded([this] {
    PgServer& pg = this->pg();
    if (writesMode_ != pg::WritesMode::kShutDown ||
        !pg::mustStopWrites({pg.serving(), pg.config.role == PgRole::kPrimary, pg.writesStopped}, false)) {
      return;
    }
    pg.writesStopped = true;
    if (pg::writesShutdownMode() == pg::WritesShutdown::kImmediate) {
      fleet_.trace().trace('P', [&] { return id() + " postgres shuts down: writes stopped for good"; });
      fleet_.immediateStop(host_);
    } else {
      // The walsenders send the rest, then the shutdown checkpoint removes the WAL
      // before its redo point (the end), which a rewind would read.
      fleet_.trace().trace('P', [&] { return id() + " postgres shuts down (fast): writes stopped for good"; });
      fleet_.cleanStop(host_);
    }
  }));
  const int64_t end = std::max(now(), p.applyLockedUntil) + latency;
  p.applyLockedUntil = end;
  fleet_.queue().at(end, guarded([done = std::move(done)] { done(true); }));
}

// The adapter's awaitUpstreamStop: polls its WAL receiver; true once a stream it saw
// has ended (its upstream stopped, after sending all of its WAL), false when there was
// no stream, or still one at the deadline.
void SimPostgres::awaitUpstreamStop(int64_t timeoutMs, std::function<void(bool)> done) {
  if (!fleet_.model().awaitsUpstreamStop) return driver::Postgres::awaitUpstreamStop(timeoutMs, std::move(done));
  fleet_.trace().trace('A', [&] { return id() + " -> wait for the upstream's WAL stream to end"; });
  pollUpstream(now() + timeoutMs, false, std::move(done));
}

void SimPostgres::pollUpstream(int64_t deadline, bool sawStream, std::function<void(bool)> done) {
  fleet_.queue().after(
      fleet_.model().upstreamPoll.draw(fleet_.rng()),
      guarded([this, deadline, sawStream, done = std::move(done)]() mutable {
        const PgServer& pg = this->pg();
        if (!pg.serving() || !pg.isStandby()) {
          fleet_.trace().trace('P', [&] { return id() + " not waiting for the upstream: not a standby"; });
          return done(false);
        }
        const int u = pg.config.upstream ? fleet_.hostOf(pg.config.upstream->id) : -1;
        const bool streaming = u >= 0 && fleet_.streamsFrom(host_, u);
        if (!streaming) {
          fleet_.trace().trace('P', [&] {
            return id() + (sawStream ? " the upstream's WAL stream ended" : " not waiting for the upstream: no WAL stream");
          });
          return done(sawStream);
        }
        if (now() >= deadline) return done(false);
        fleet_.queue().after(fleet_.model().upstreamPollMs, guarded([this, deadline, done = std::move(done)]() mutable {
          pollUpstream(deadline, true, std::move(done));
        }));
      }));
}

// The adapter's rejoin (pg/controller.cc): under the apply lock, the stopped ex-primary
// becomes an async standby of `primary` without a copy: as it is when its WAL is a
// prefix of the primary's (pg_rewind's "no rewind required"), rewound with kRewind;
// otherwise nothing changes.
void SimPostgres::rejoin(const PeerIdentity& primary, RejoinPolicy policy,
                         std::function<void(driver::RejoinFinished)> done) {
  beginTransition("rejoin");
  fleet_.trace().trace('A', [&] { return id() + " -> rejoin as a standby of " + primary.id; });
  underApplyLock(fleet_.model().rejoin.draw(fleet_.rng()), [this, primary, policy, done = std::move(done)] {
    PgServer& pg = this->pg();
    --transitions_;
    driver::RejoinFinished r;
    const int p = fleet_.hostOf(primary.id);
    if (!pg.setUp) {
      r.error = "the data directory is not set up";
    } else if (pg.running || pg.transitioning) {
      r.error = "postgres is running";
    } else if (p < 0 || !fleet_.server(p).running) {
      r.error = "cannot reach " + primary.id + " to compare with";
    } else {
      // The adapter's rejoin: its standby apply with no copy allowed, as the rebuild
      // planner (pg/plan/rebuild.h) decides.
      const pg::RebuildRules rules{policy == RejoinPolicy::kRewind, false};
      const Wal* source = &fleet_.server(p).wal;
      const pg::RebuildStart first = pg::planRebuildStart(rebuildFacts(pg), rules);
      pg::RebuildOutcome outcome = pg::RebuildOutcome::kFollow;
      size_t discarded = 0;
      if (first.step == pg::RebuildStep::kCompare) {
        finishCrashRecovery(pg);
        const pg::Divergence d = compareWith(pg, source, pg::rewindAtOnce(rules, true), &discarded);
        outcome = pg::planAfterCompare(d, true, false, rules);
        if ((outcome == pg::RebuildOutcome::kFollow || outcome == pg::RebuildOutcome::kFollowRewound) &&
            !follows(pg.wal, *source) && hooks_.violation) {
          hooks_.violation("follows-diverged", id() + " rejoined " + primary.id + " (" + pg::divergenceName(d) +
                                                   ") on a history that diverged from it");
        }
      } else if (first.step != pg::RebuildStep::kStartAsIs) {
        outcome = pg::RebuildOutcome::kFailNoCopy;
      }
      if (outcome != pg::RebuildOutcome::kFollow && outcome != pg::RebuildOutcome::kFollowRewound) {
        r.error = "it cannot follow without discarding WAL";
      } else {
        if (outcome == pg::RebuildOutcome::kFollowRewound) {
          r.rewound = true;
          r.discarded = std::to_string(discarded) + " records";
          pg.controlMaxConnections = fleet_.server(p).controlMaxConnections;  // pg_rewind copies pg_control
        }
        r.error = startWithHotStandbyFloor(pg, PgRole::kAsync);
      }
      if (r.error.empty()) {
        pg.config = PgConfig::standby(PgRole::kAsync, primary, primary);
        pg.running = true;
        pg.standbySignal = true;
        pg.readOnly = true;
        pg.writesStopped = false;
        pg.writablePending = false;
        pg.waiting.clear();
        pg.cannotFollowSince = -1;
        ++pg.instance;
        ++pg.epoch;
        r.ok = true;
      }
    }
    fleet_.trace().trace('P', [&] {
      return id() + " postgres rejoin " + (r.ok ? "done" : "refused: " + r.error) +
             (r.rewound ? " (rewound, " + r.discarded + " discarded)" : "");
    });
    done(r);
  });
}

}  // namespace dugong::simworld
