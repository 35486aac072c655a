// The one simulated postgres of both simulators (dugong-sim, dugong-cluster-sim), as the
// real pg adapter (pg/adapter.*, pg/controller.*) drives it, and no more:
// - PgServer: one host's postgres. Its data directory (WAL, set up or not) survives
//   crashes and agent restarts; the process (running, configuration, waiting commits)
//   does not survive a crash.
// - PgFleet: every PgServer of a world, with what happens between them: WAL streaming
//   from an upstream (synchronous or not), what a clean stop sends first, a crash, the
//   postgres half of `dugong-adm rebuild`.
// - SimPostgres: the adapter of one run of an agent (agent::Postgres): init, apply
//   (reload, promotion or restart; pg_basebackup / pg_rewind of a standby that cannot
//   follow), fence, WAL reads, the health check, stop/resume/shut down writes, the wait
//   for the upstream's stop, rejoin. Its two workers are modelled: the apply lock (a
//   fence, an apply, stopWrites...; the writable poll's configuration write) and the
//   query worker (WAL reads and the poll), so that a fence can interleave with the
//   catch-up poll. There is no supervisor: a crashed postgres stays down until the
//   driver's health logic re-applies its configuration.
// Every decision is the adapter's own: the postgres planners (pg/plan/: the step of an
// apply, the rebuild choice, the fence target, when writes stop and resume, when a
// primary becomes writable) decide; the model carries the step out in simulated time and
// server state. It also checks one of them: a data directory the rebuild planner lets
// follow must not have diverged (invariant follows-diverged).
//
// What differs between the two tools is a PgModel: how long each step takes (fixed
// steps for the scripts of dugong-sim, seeded ranges for dugong-cluster-sim), whether
// the health check polls or looks after each transition (a script runs until nothing
// is pending), and whether a primary stays read-only until its sync caught up and the
// upstream's stop is awaited (dugong-sim's other peers are scripted: they stream nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver/env.h"
#include "pg/plan/standby_names.h"
#include "pg/plan/writes.h"
#include "sim/world/event_queue.h"
#include "sim/world/rng.h"
#include "sim/world/trace_sink.h"
#include "sim/world/wal.h"

namespace dugong::simworld {

// How long a step takes: uniform in [lo, hi] from the world's rng, or exactly lo (and
// no number drawn) when lo == hi.
// A configuration in plain words ("sync from node1 restore node1").
std::string describeConfig(const PgConfig& c);

struct Latency {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t draw(Rng& rng) const { return lo == hi ? lo : rng.between(lo, hi); }
};

struct PgModel {
  Latency init = {};           // the adapter's first look at postgres
  Latency fence = {};          // rewrite the configuration and reload
  Latency walRead = {};        // one query
  Latency syncSample = {};     // the primary's sample of its sync (one query)
  Latency reload = {};         // an apply that keeps serving (new sync, new upstream)
  Latency restart = {};        // an apply that restarts or promotes postgres
  Latency slowReload = {};     // ... while a slow-postgres fault lasts
  Latency slowRestart = {};
  Latency startStop = {};      // added when an apply starts or stops postgres
  Latency promoteStream = {};  // a promoted standby stops streaming after this
  Latency writes = {};         // stopWrites, resumeWrites
  Latency shutDown = {};       // shutDownWrites
  Latency rejoin = {};
  Latency upstreamPoll = {};   // awaitUpstreamStop's look at the WAL receiver
  Latency writableWrite = {};  // the writable poll's configuration write
  int64_t upstreamPollMs = 50;
  // The health check runs every healthIntervalMs; 0: it looks once when it starts and
  // after each apply (and when told: lookAtHealth), and nothing is pending meanwhile.
  int64_t healthIntervalMs = 1000;
  int64_t repairAfterMs = 3000;  // postgres.repairStandbyAfterSeconds
  int64_t writablePollMs = 200;  // the adapter's writablePollInterval
  // postgres.promoteTimeout: how long a fenced standby's WAL read waits for its replay
  // to reach the end of what it received (pg/plan/fence.h planStandbyWalEnd). Shorter
  // than the agent's default (60 s), within the simulator's bound on a step in flight.
  int64_t promoteTimeoutMs = 10000;
  // A primary with a sync is read-only until its writable poll saw the sync catch up.
  bool readOnlyUntilSyncCaughtUp = true;
  // awaitUpstreamStop polls the WAL receiver (false: answers false at once, as an
  // environment that does not model it).
  bool awaitsUpstreamStop = true;
  // streamSample tells whether the WAL receiver streams (false: nullopt, as an
  // environment that does not tell; dugong-sim's scripted peers publish nothing either).
  bool tellsStreaming = true;
};

struct PgServer {
  std::string id;  // the peer it belongs to
  Wal wal;
  bool setUp = false;
  bool running = false;
  bool transitioning = false;  // an ApplyPgConfig is being carried out
  bool reloading = false;      // ... by a reload that keeps serving (primary -> primary)
  bool crashedInTransition = false;
  bool standbySignal = false;  // last ran as a standby (a data directory that follows)
  // Stopped with no shutdown checkpoint (killed, or an immediate shutdown): a rejoin runs
  // its crash recovery first (pg/controller_rebuild.cc finishCrashRecovery).
  bool stoppedUncleanly = false;
  // A checkpoint removed the WAL segments pg_rewind reads (the last checkpoint before a
  // fork on): a rewind fails ("could not find previous WAL record") until a copy.
  bool rewindWalGone = false;
  int64_t brokenUntil = 0;     // crashed, and will not start again until then
  // The adapter's view of a standby that cannot follow (pg/controller.cc healthCheck):
  // not streaming since, with evidence in its log (its upstream's timeline forked
  // before its position); and the repair its next standby apply carries out.
  int64_t cannotFollowSince = -1;
  bool repairFor = false;
  bool repairing = false;  // the apply in progress repairs (stop, pg_rewind, start)
  PgConfig config;         // what it runs with
  // One of the settings hot standby needs at least as high as on the primary
  // (pg/hot_standby.h): max_connections. This host's own value (its configuration, before
  // the adapter raises a standby's to the floor), the running postgres' value, and the
  // primary's value its pg_control holds: a primary's is its own running value (written
  // at its start or promotion); a standby takes its upstream's with the WAL it receives,
  // and the source's with a copy or a rewind. A standby's start below it fails.
  long ownMaxConnections = 100;
  long runMaxConnections = 100;
  long controlMaxConnections = 100;
  // A primary fenced for a new sync (config.downstream): the sync it had, which commits
  // also wait for until the next apply (the adapter's FIRST 2 of both).
  std::optional<PeerIdentity> alsoSync;
  // Quorum mode (docs/decisions/0079-quorum-commit.md section 7). A primary's `ANY k
  // (members)` as its configuration file says now (nullopt: no quorum; a sync x is the
  // rule {1, [x]} to its walsenders), and its walsenders, one per standby streaming from
  // it: each runs the rule it read last. A reload reaches each walsender after a drawn
  // delay; its sync priority (whether its rule names it) is observable, its k is not
  // (P3); a walsender started later starts with the file's rule. A commit is released
  // once the k-th latest flush among the standbys with a priority has reached it, k
  // being any such walsender's own (PgFleet::quorumReleased).
  struct Walsender {
    int64_t startedAt = 0;
    std::optional<pg::StandbyQuorum> rule;
    std::optional<pg::StandbyQuorum> next;  // a reload it has not processed yet
    int64_t nextAt = 0;
  };
  std::optional<pg::StandbyQuorum> quorum;
  std::map<std::string, Walsender> walsenders;  // by standby id
  // As a standby: its walsender was ended (pg_terminate_backend); it connects again then.
  int64_t reconnectAt = 0;
  // The adapter's managed configuration (pg/controller.cc): a primary with a sync is
  // read-only until its writable poll saw the sync stream synchronously up to the WAL
  // position of the poll's first look; a primary that was writable stays writable when
  // its sync changes. Survives crashes (it is a file).
  bool readOnly = true;
  // Stopped writes (the adapter's stopWrites/shutDownWrites, in its managed
  // configuration): new sessions are read-only; until resumeWrites (the adapter's writes
  // mode keeps it through any apply of a primary).
  bool writesStopped = false;
  bool writablePending = false;  // the poll waits for pendingSync to catch up
  std::string pendingSync;
  std::optional<size_t> pendingTarget;
  bool applyReadOnly = true;  // what the apply in progress will leave
  // The adapter's two workers share the apply lock: the poll's write of the
  // configuration holds it (a fence or an apply waits), a fence or an apply holds it
  // (the poll skips its turn). The query worker runs WAL reads and the poll in turn.
  int64_t applyLockedUntil = 0;
  int64_t queryBusyUntil = 0;
  bool pollScheduled = false;
  bool promoting = false;        // a running standby being promoted: serves reads meanwhile
  std::vector<WalMark> waiting;  // primary: commits written, not yet acknowledged
  int64_t stalledUntil = 0;      // as a standby, receives nothing until then
  // A standby received the first bytes of a record whose rest never came (its upstream
  // stopped sending mid-record): its received position is that far past its last whole
  // record, where replay ends and where its promotion begins the new timeline. Gone with
  // the next record it receives, or its promotion.
  uint64_t partialBytes = 0;
  // A standby's replay reaches the end of what it received only then (replay lag): until
  // then it has replayed one record less.
  int64_t replayedAt = 0;
  int64_t slowUntil = 0;         // transitions are slow until then
  // Serves (and commits), but a fresh connection, as the agent's health check opens, is
  // refused until then (connection slots exhausted, overload).
  int64_t refusesNewConnectionsUntil = 0;
  uint64_t epoch = 0;            // bumps on every crash and transition
  // Identifies a run of postgres (the adapter reports the postmaster's start time):
  // changes on every start, never on a reload or a promotion.
  uint64_t instance = 1;
  // The run of the agent whose adapter drives it (0: none): what the adapter's scheduled
  // callbacks check (plain counters: no atomic reference counts in the hot path).
  uint64_t adapterRun = 0;

  bool serving() const { return running && (!transitioning || reloading); }
  // A standby leader (a standby cluster's, docs/decisions/0083) is a standby too: in
  // recovery, streaming from its source peer (`config.upstream`, set by the adapter from
  // the configuration's source endpoint).
  bool isStandby() const {
    return config.role == PgRole::kSync || config.role == PgRole::kAsync || config.role == PgRole::kStandbyLeader;
  }
  // The agent (and its adapter's workers) went: no transition, lock or poll is left.
  void adapterGone();
};

// A start of postgres for `role` on `pg`, as PostgreSQL checks it (the hot-standby floor);
// the error, or empty. A standby's reception of WAL from its upstream, with the primary's
// value its pg_control takes. Shared by the fleet and the adapter (pg_fleet.cc).
std::string startWithHotStandbyFloor(PgServer& pg, PgRole role);
void receive(PgServer& standby, const PgServer& upstream, size_t max);

class PgFleet {
 public:
  // A world's fast way from a peer id to its host (-1: none), e.g. from a naming
  // convention; the replication tick looks up every standby's upstream.
  using HostOf = int (*)(const std::string& id);

  // `rng` draws every postgres latency and replication step but the first look
  // (`initRng`, the agent's start). Without `hostOf`, hosts are found by their ids.
  PgFleet(EventQueue& queue, Rng& rng, Rng& initRng, TraceSink& trace, PgModel model, HostOf byId = nullptr)
      : q_(queue), rng_(rng), initRng_(initRng), trace_(trace), model_(std::move(model)), hostOf_(byId) {}

  // Registers a host's postgres; hosts are numbered in the order added. `server`
  // outlives the fleet.
  int add(PgServer& server) {
    servers_.push_back(&server);
    return static_cast<int>(servers_.size()) - 1;
  }
  PgServer& server(int n) { return *servers_[static_cast<size_t>(n)]; }
  const PgServer& server(int n) const { return *servers_[static_cast<size_t>(n)]; }
  int size() const { return static_cast<int>(servers_.size()); }
  // A new adapter run's number (never 0).
  uint64_t nextAdapterRun() { return ++lastAdapterRun_; }
  // The timeline a promotion moves on to: unique in the world. Postgres takes the
  // newest timeline it knows of plus one, which is unique as long as every promotion
  // happens on a peer that knows the newest (docs/state-machine.md "The initWal check
  // compares histories").
  int64_t newTimeline() { return ++lastTimeline_; }
  // The host of peer `id`; -1 when no postgres of this world belongs to it.
  int hostOf(const std::string& id) const {
    if (!hostOf_) return findHost(id);
    const int n = hostOf_(id);
    if (n < 0 && searchOthers_) return findHost(id);
    return n < size() ? n : -1;
  }

  // Hosts whose ids `byId` does not know (a standby cluster's scripted source,
  // sim_source.h) are found by their ids from now on.
  void searchOtherHosts() { searchOthers_ = true; }

  // A standby's WAL receiver streams from `upstream`.
  bool streamsFrom(int standby, int upstream) const;
  // A primary's synchronous standby streams from it.
  bool attachedSync(int primary) const;
  // Quorum mode (PgServer::quorum): the walsenders of `primary` as they are now (one per
  // standby streaming from it, each having processed the reloads due by now).
  void refreshWalsenders(int primary);
  // A reload of `primary`'s configuration to `rule`: each walsender takes it 0-20 ms later.
  void reloadQuorum(int primary, const std::optional<pg::StandbyQuorum>& rule);
  // Whether standby `id`'s walsender of `primary` has a sync priority (its rule names it).
  static bool prioritized(const PgServer& primary, const std::string& id);
  // The WAL records released to the commits waiting on `primary`: the greatest, over the
  // walsenders with a priority, of the k-th latest flush (k their own) among those.
  size_t quorumReleased(int primary);
  // The flushes (in records) of the standbys with a priority (sync_state 'quorum') among
  // `members`, through walsenders started after `after` when given.
  std::vector<uint64_t> memberFlushes(int primary, const std::vector<std::string>& members,
                                      std::optional<int64_t> after = std::nullopt);
  // Standbys receive WAL from their upstreams (one replication tick). A standby that
  // diverged from its upstream cannot follow it (its log says so).
  void stream();
  // A clean stop (pg_ctl stop -m fast): client sessions go at once, the walsenders first
  // send all WAL to the standbys streaming from it.
  void cleanStop(int n);
  // An immediate shutdown: the walsenders send nothing more, and nothing is checkpointed.
  void immediateStop(int n);
  // Postgres dies (a transition in progress fails).
  void kill(int n);
  // Postgres crashes and cannot start again for `brokenFor` (e.g. its port is held).
  void crash(int n, int64_t brokenFor);
  // dugong-adm rebuild's postgres half, on host `n` beside its agent: it runs as an async
  // standby of `primary` (host `p`), rebuilt from it first when it cannot follow.
  // Returns the error when postgres does not start (it stays stopped), else empty.
  std::string rebuildAsStandby(int n, int p, const PeerIdentity& primary);
  // An operator's restart of a running standby (`dugong-adm restart`, the adapter's
  // restartInPlace) on host `n`: under the apply lock, a clean stop, then a start with its
  // configuration written again. `done(error)` when it is over (not if the postgres
  // crashed or a transition began meanwhile).
  void restartInPlace(int n, std::function<void(const std::string& error)> done);

  EventQueue& queue() { return q_; }
  int64_t now() const { return q_.now(); }
  Rng& rng() { return rng_; }
  Rng& initRng() { return initRng_; }
  TraceSink& trace() { return trace_; }
  const PgModel& model() const { return model_; }

 private:
  EventQueue& q_;
  Rng& rng_;
  Rng& initRng_;
  TraceSink& trace_;
  int findHost(const std::string& id) const;

  PgModel model_;
  HostOf hostOf_;
  bool searchOthers_ = false;
  std::vector<PgServer*> servers_;
  uint64_t lastAdapterRun_ = 0;
  int64_t lastTimeline_ = 1;  // initdb's
};

// What the world does with the adapter's reports; set by the world, per agent run.
struct SimPostgresHooks {
  // Hands a completion to the driver (`call` runs its callback), traced and checked.
  std::function<void(const Event& ev, const std::function<void()>& call)> deliver;
  // The driver broke the adapter's contract (two transitions at once).
  std::function<void(const std::string& invariant, const std::string& detail)> violation;
  // A fence succeeded, before the driver hears of it.
  std::function<void()> fenced;
  // A quorum step's fence held, for `members` (before the driver hears of it).
  std::function<void(const std::vector<std::string>& members)> quorumFenced;
  // An apply starts carrying out `config` (after waiting for the apply lock).
  std::function<void(const PgConfig& config)> applyStarting;
};

// The members' application names, their peer ids (agent/daemon_env.cc's conversion):
// the rule a quorum primary's model postgres runs.
pg::StandbyQuorum standbyQuorum(const Quorum& quorum);

class SimPostgres final : public driver::Postgres {
 public:
  SimPostgres(PgFleet& fleet, int host, SimPostgresHooks hooks);
  ~SimPostgres() override;

  void init(std::function<void(PgInitialized)> done) override;
  void apply(const PgConfig& config, std::function<void(PgConfigApplied)> done) override;
  void fence(const std::optional<PeerIdentity>& newSync, std::function<void(PgFenced)> done) override;
  // A quorum step's fence, as the adapter's PgController::fenceQuorum carries it out with
  // the same planners (pg/plan/fence.h): the reload verified by checkFence, then
  // planQuorumFenceStep look by look, under the apply lock, within `timeoutMs`.
  void fenceQuorum(const Quorum& quorum, bool endWalsenders, int64_t timeoutMs,
                   std::function<void(PgFenced)> done) override;
  // On the query worker: the primary's flush position, then each member's walsender.
  void sampleQuorumMembers(const std::vector<std::string>& memberIds,
                           std::function<void(Result<driver::QuorumReplicationSample>)> done) override;
  void readWal(std::function<void(WalPositionRead)> done) override;
  // On the query worker: the sync's walsender streams from this primary (a stalled
  // standby's walsender streams too, and its flush position stays), its WAL position,
  // and the commits waiting on this primary.
  void sampleSyncStandby(const std::string& standbyId,
                         std::function<void(Result<driver::SyncReplicationSample>)> done) override;
  void startHealthCheck(std::function<void(bool, const std::string&)> onChange) override;
  void stopHealthCheck() override;
  // As the adapter's health check reports: no postmaster at all (crashed, killed, or
  // stopped), as opposed to one that is starting or reloading.
  bool postmasterGone() const override { return gone_; }
  // As the agent's status poll sees it: serving, and streaming from the upstream its
  // configuration names (PgFleet::streamsFrom).
  std::optional<driver::StreamSample> streamSample() const override;
  void stopWrites(std::function<void(Result<int>)> done) override;
  void resumeWrites(std::function<void(Result<bool>)> done) override;
  void shutDownWrites(std::function<void(Result<bool>)> done) override;
  void awaitUpstreamStop(int64_t timeoutMs, std::function<void(bool)> done) override;
  void rejoin(const PeerIdentity& primary, RejoinPolicy policy,
              std::function<void(driver::RejoinFinished)> done) override;

  // A health check that does not poll (PgModel::healthIntervalMs 0) looks now.
  void lookAtHealth();

  // In flight, for the world's liveness checks.
  int transitions() const { return transitions_; }  // applies, fences and rejoins
  int64_t transitionSince() const { return transitionSince_; }
  int walReads() const { return walReads_; }
  int64_t walReadSince() const { return walReadSince_; }

 private:
  // Runs `fn` later unless this adapter is gone by then.
  template <class F>
  auto guarded(F fn) {
    return [&fleet = fleet_, host = host_, run = run_, fn = std::move(fn)]() mutable {
      if (fleet.server(host).adapterRun == run) fn();
    };
  }
  PgServer& pg() { return fleet_.server(host_); }
  const std::string& id() const { return fleet_.server(host_).id; }
  int64_t now() const { return fleet_.now(); }
  // The answer of a WAL read begun at `started` (readWal), or a later look while a fenced
  // standby's replay has not ended.
  void answerWalRead(int64_t started, std::function<void(WalPositionRead)> done);
  void beginTransition(const char* what);
  void carryOut(const PgConfig& config);
  std::string startStandbyLeader(const PgConfig& cfg, bool* refused);
  void finishApply(PgConfig config);
  // Runs `fn` once the apply lock is free, holding it for `latency` ms.
  template <class F>
  void underApplyLock(int64_t latency, F fn);
  void healthCheck(uint64_t serial);
  void checkHealth();
  // One look of the health check; a polling one (pollSerial != 0) schedules its next.
  void look(uint64_t pollSerial);
  void schedulePoll();
  void pollWritable(uint64_t epoch);
  void pollUpstream(int64_t deadline, bool sawStream, std::function<void(bool)> done);
  // fenceQuorum's verification of its reload (step 1), then its looks (steps 2-4).
  struct QuorumFenceRun;
  void verifyQuorumReload(std::shared_ptr<QuorumFenceRun> run);
  void lookAtQuorumFence(std::shared_ptr<QuorumFenceRun> run);
  void endQuorumFence(const std::shared_ptr<QuorumFenceRun>& run, PgFenced r);

  PgFleet& fleet_;
  int host_;
  SimPostgresHooks hooks_;
  uint64_t run_;

  std::function<void(PgConfigApplied)> pendingApply_;
  int transitions_ = 0;
  int64_t transitionSince_ = 0;
  int walReads_ = 0;
  int64_t walReadSince_ = 0;
  std::function<void(bool, const std::string&)> onHealth_;
  uint64_t healthSerial_ = 0;
  int lastHealthy_ = -1;
  bool gone_ = false;  // the last health check found no postmaster
  // The adapter's writes mode (pg/plan/writes.h): set in the call of a stop, a shutdown
  // or a resume; an apply of a primary leaves what pg::planPrimaryUnderWrites says.
  pg::WritesMode writesMode_ = pg::WritesMode::kOpen;
};

}  // namespace dugong::simworld
