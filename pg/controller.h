// PgController: the blocking half of the postgres adapter. Every method may block for
// up to the matching timeout of PgOptions; PgAdapter runs them on worker threads.
//
// Thread-safety: init/apply/fence must be called from one thread at a time (the
// adapter's control worker). readWal/status/healthCheck/pollWritable may run
// concurrently with them (the adapter's query worker). pollWritable skips its turn
// while an apply or a fence runs, and a fence waits for a running pollWritable, so a
// poll never writes a configuration read before a fence (which would undo it).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>

#include "pg/cluster_config.h"
#include "pg/command.h"
#include "pg/connection_pool.h"
#include "pg/managed_conf.h"
#include "pg/options.h"
#include "pg/plan/fence.h"
#include "pg/plan/rebuild.h"
#include "pg/plan/transition.h"
#include "pg/plan/writes.h"
#include "pg/pg_status.h"
#include "pg/pgbackrest.h"
#include "pg/replication_slots.h"
#include "pg/slot_drop_queue.h"
#include "pg/sql.h"
#include "pg/quorum_members.h"
#include "pg/sync_standby.h"
#include "pg/wal_receiver_watch.h"
#include "statemachine/event.h"
#include "statemachine/pg_config.h"

namespace dugong::pg {

// What applyClusterConfig did.
struct ClusterConfigApplied {
  std::vector<std::string> changed;  // settings whose effective value changed on this host
  bool hbaChanged = false;
  bool reloaded = false;             // postgres was running and reloaded
};

// How far rejoin() may go to make a stopped ex-primary follow the primary again.
enum class RejoinLimit {
  kFollowOnly,  // only a data directory that can follow as it is (pg_rewind: no rewind required)
  kRewind,      // also pg_rewind a diverged one (its WAL after the fork is discarded)
};

struct PgRejoined {
  bool ok = false;        // postgres runs as a standby of the primary
  bool rewound = false;   // pg_rewind ran: local WAL after the fork was discarded
  std::string discarded;  // when rewound: the WAL range discarded, in plain words
  std::string error;      // when !ok: why; the data directory is left for `dugong-adm rebuild`
};

struct WritesStopped {
  int terminated = 0;                // client sessions terminated
  std::chrono::milliseconds took{0};  // from the call to the last termination
};

class PgController {
 public:
  // REQUIRES: validate(options).ok().
  explicit PgController(PgOptions options);
  PgController(const PgController&) = delete;
  PgController& operator=(const PgController&) = delete;

  const PgOptions& options() const { return options_; }

  // Looks at the data directory and the running postgres (if any). Never changes them.
  PgInitialized init();

  // Reconfigures postgres for `config`, then starts, reloads, promotes, rebuilds or
  // stops it to match. See DESIGN.md "Postgres roles". A primary with a downstream is
  // left read-only; pollWritable() makes it writable once the sync has caught up.
  PgConfigApplied apply(const PgConfig& config);

  // Stops acknowledging commits under the current topology, before a takeover reads
  // its initWal (statemachine/action.h, FencePg). A primary makes commits wait for
  // `newSync` (reload of synchronous_standby_names; a quorum reloaded since the last
  // apply is replaced: this fence is sync mode's); a standby stops streaming (reload
  // with an empty primary_conninfo, then waits until its WAL receiver has stopped). A
  // stopped postgres acknowledges nothing: ok. The next apply() lifts the fence.
  // Verified exactly: a primary's synchronous_standby_names, parsed, names newSync
  // alone, and no walsender but newSync's has a sync priority; a standby has an empty
  // primary_conninfo and no WAL receiver.
  PgFenced fence(const std::optional<PeerIdentity>& newSync);

  // On a running primary: commits wait for any k of `quorum`'s members from now on
  // (dugong.conf rewritten with `ANY k (...)`, reload), verified exactly as a primary's
  // fence is (pg/plan/fence.h checkFence: the setting, parsed, and every walsender's own
  // priority). Step 1 of a membership step's fence, and the reload of a weakening step
  // (docs/decisions/0079-quorum-commit.md 5.2); in force until the next apply. An
  // error says what does not hold (the file stays written: the next apply rewrites it).
  Result<bool> reloadQuorum(const StandbyQuorum& quorum);

  // A primary's membership step that makes postgres acknowledge less easily (a member
  // removed, k raised), before the step is written (FencePg with a quorum,
  // docs/decisions/0079-quorum-commit.md 5.2, pg/plan/fence.h planQuorumFenceStep):
  // reloadQuorum(`to`); when k grows (from what postgres runs, or `endWalsenders`) every
  // member's walsender is ended and the fence waits until no member streams through one
  // started before the reload was verified; then p0, the primary's flush position, is
  // read, and the fence holds once the k-th latest flush among `to`'s members streaming
  // synchronously has reached it: every commit acknowledged so far is on k members of
  // `to`. Fails when that has not happened within `timeout` (also when postgres is no
  // running primary); `to` stays reloaded until the next apply either way (the state
  // machine applies the state's rule after a failure).
  PgFenced fenceQuorum(const StandbyQuorum& to, bool endWalsenders, std::chrono::milliseconds timeout);

  // The WAL position: pg_current_wal_lsn() on a primary; on a fenced standby, where
  // replay ends once it waits for more WAL (pg/plan/fence.h planStandbyWalEnd), or an
  // error when replay has not ended within promoteTimeout (the received position may lie
  // inside a record, past the promotion's fork: never an initWal); on a standby not
  // fenced, the greater of the last received and replayed positions (a check before the
  // fence, never an initWal). After a fence (until the next apply) the fence is verified
  // again first, in the same postgres run, so that a position read for initWal is never
  // read under a fence that no longer holds.
  WalPositionRead readWal();
  // On a primary: what it sees of its synchronous standby (pg/sync_standby.h).
  Result<SyncStandbyView> syncStandby(const std::string& standbyName) const;
  // On a quorum primary: what it sees of its members, in one look (pg/quorum_members.h).
  Result<QuorumMembersView> quorumMembers(const std::vector<std::string>& memberNames) const;
  // What the data directory holds, from pg_controldata (postgres should be stopped, so
  // that it is final): system identifier, and the furthest of the latest checkpoint and
  // the minimum recovery point (a standby's replay), with its timeline.
  Result<PeerDataState> dataState();

  // Rejoins this peer (a deposed ex-primary) as an async standby of `primary`, as
  // apply() would, but never copies the data directory: within `limit`, else an
  // error and nothing changed (postgres stays stopped). Used by the agent's automatic
  // rejoin; `dugong-adm rebuild` uses apply(), which may also pg_basebackup.
  PgRejoined rejoin(const PeerIdentity& primary, RejoinLimit limit);

  // A planned switchover, on the standby about to take over: waits (at most
  // `timeout`) until its WAL stream from the upstream has ended because the upstream
  // stopped (a primary's walsenders send all of its WAL, the shutdown checkpoint
  // included, before it stops), so that the old primary can follow it afterwards.
  // True: the stream ended; false: still streaming at the deadline, or no stream.
  bool awaitUpstreamStop(std::chrono::milliseconds timeout);

  PgStatus status();

  // Takes the cluster-wide configuration (already validated) as the one to fold into
  // every file written from now on; when the data directory is set up, rewrites
  // dugong.conf (with the role last applied) and pg_hba.conf now, and reloads a running
  // postgres. Settings that need a restart then show in status().pendingRestart.
  // Runs on the control worker (after any apply).
  Result<ClusterConfigApplied> applyClusterConfig(const ClusterConfig& config);
  // Any thread: the backup section of the newest cluster configuration seen, in effect
  // at once for the replica methods (pg/replica_method.cc), before its files are written.
  void noteBackupSection(const std::map<std::string, std::string>& backup);
  // An operator's request (dugong-adm restart / reload): restarts a running postgres in
  // place (fast stop, then start with dugong.conf and pg_hba.conf written again), or
  // reloads it. Errors when postgres is not running. Runs on the control worker.
  Result<bool> restartInPlace();
  Result<bool> reloadNow();

  // SELECT 1 within the query timeout. An error message when unhealthy. Also unhealthy:
  // a standby that cannot follow its upstream (options.repairStandbyAfter); the next
  // apply of a standby role then repairs it (rewind, else base backup).
  Result<bool> healthCheck();
  // A live postmaster holds postmaster.pid (not a zombie, not a reused pid). Any thread.
  bool postmasterRunning() const { return isRunning(); }

  // The writes mode (pg/plan/writes.h), set at once on the caller's thread (no lock
  // that a transition holds): a stop or a shutdown of writes is in effect for every
  // configuration written from then on, by any apply, fence or poll, until
  // noteResumeWrites(). While stopped, a primary's configuration is marked
  // writes-stopped (read-only); while shut down, an apply of a primary leaves postgres
  // stopped (a start in flight is stopped). A fresh controller's mode is open.
  void noteStopWrites();
  void noteShutDown();
  void noteResumeWrites();
  WritesMode writesMode() const;

  // Stops a primary from accepting writes, at once (the agent lost ZooKeeper and another
  // peer may take over): new sessions are read-only (libpq's target_session_attrs=
  // read-write passes it by), and every client session is terminated, so a commit
  // waiting for the sync fails rather than succeeds, an open write transaction is gone,
  // and a session that made itself read-write earlier cannot commit. Waits for no
  // transition: the configuration is rewritten from the one last written (a running
  // apply's or fence's included) and postgres reloaded, a postmaster still starting
  // signalled (SIGHUP) as soon as its pid file names it. Stays in effect until
  // resumeWrites(); no apply lifts it. A standby or a stopped postgres: no-op.
  // What is left: a new session that says BEGIN READ WRITE explicitly can still write;
  // with synchronous_commit on, its commit waits for the sync (safe).
  // REQUIRES: noteStopWrites() was called (the adapter does, in its call).
  Result<WritesStopped> stopWrites();
  // Lifts stopWrites() or shutDownWrites(): the primary is writable again, or read-only
  // until its sync has caught up if it was so before. A stopped postgres stays stopped
  // (the next apply starts it). Waits for a running apply. Nothing to do when a stop was
  // noted again since noteResumeWrites().
  Result<bool> resumeWrites();
  // Closes what stopWrites() leaves (the agent's session may have expired): a primary
  // is shut down (fast, immediate if that does not finish), its configuration marked
  // writes-stopped so that any start is read-only. A postmaster that an apply is
  // starting is signalled as soon as its pid file names it (before it accepts a
  // connection), and the apply leaves it stopped. A standby or a stopped postgres: no-op.
  // Until resumeWrites(), an apply of a primary leaves postgres stopped.
  // `signalledBefore`: the caller has sent the signal already (signalPrimaryShutdown).
  // REQUIRES: noteShutDown() was called (the adapter does, in its call).
  Result<bool> shutDownWrites(bool signalledBefore = false);
  // SIGINT (fast shutdown) to the postmaster named in postmaster.pid if it is live and
  // its last configuration a primary's: no apply lock, no file written. True if sent.
  // Any thread.
  bool signalPrimaryShutdown() const;

  // Whether a primary waits for its sync to catch up before it becomes writable.
  bool writablePending() const;
  // One check of the primary's sync: once it streams with sync_state 'sync' and its
  // flush position has reached the primary's position of the moment it was first seen
  // as sync, the primary is made writable (reload). Returns true if writable now.
  bool pollWritable();

  // For tests: called at named points ("pollWritable:beforeWrite": the poll has decided
  // to make the primary writable and is about to write its configuration;
  // "fence:verify": each turn of the fence's verify loop, under the apply lock).
  void setTestHook(std::function<void(const std::string& point)> hook) { testHook_ = std::move(hook); }

 private:
  struct Pending {
    std::string syncId;
    std::optional<uint64_t> targetLsn;
    // Quorum mode: writable once k of these members have caught up (syncId unused).
    std::optional<StandbyQuorum> quorum = std::nullopt;
    // When the wait was last reported in the log (pollWritable, every 10 s).
    std::chrono::steady_clock::time_point reported = std::chrono::steady_clock::now();
  };
  // Logs what pg_stat_replication shows of the sync the primary still waits for.
  void reportSyncWait(const Pending& pending);
  // Quorum mode, one look of pollWritable (controller_quorum.cc): whether k members
  // streaming with sync_state 'quorum' have caught up (pg/plan/catch_up.h); sets the
  // target at the first look where k stream. *flushed: the k-th latest flush, for the log.
  bool quorumCaughtUp(const Pending& pending, std::string* flushed);
  // reloadQuorum under the apply lock, verifying until `deadline`; returns the postgres
  // run verified.
  Result<PgInstance> reloadQuorumLocked(const StandbyQuorum& quorum, std::chrono::steady_clock::time_point deadline);
  // One look of fenceQuorum (pg/plan/fence.h QuorumFenceSeen), in one statement:
  // walsenders of `quorum`'s members started at or before `verifiedAt`, then the flushes
  // of the members streaming synchronously (with `newWalsendersOnly`, through walsenders
  // started after it), then the primary's flush position.
  Result<QuorumFenceSeen> lookAtQuorumFence(const StandbyQuorum& quorum, const std::string& verifiedAt,
                                            bool newWalsendersOnly) const;
  // The pg adapter's form of a primary's quorum (PgConfig::quorum): the members'
  // application names, which are their peer ids.
  static std::optional<StandbyQuorum> standbyQuorum(const std::optional<Quorum>& quorum);

  // --- the data directory
  // Whether it holds a database (pg/plan/transition.h); *error says what could not be
  // read when kUnreadable.
  DataDirFound dataDirFound(std::string* error = nullptr) const;
  // dataDirFound() == kSetUp. apply() and rejoin() first make sure the directory is not
  // unreadable, so that below them "not set up" means no database.
  bool isSetUp() const;
  // An error naming the directory when it cannot be read, before any role's apply.
  Result<bool> checkDataDirReadable() const;
  // A data directory left with the marker of a pg_rewind that did not finish holds this
  // peer's own data: before a rebuild replaces it, it is moved aside to a new name,
  // never removed (an operator decides). Nothing to do otherwise.
  Result<bool> keepAsideUnfinishedRewind();
  bool isRunning() const;
  bool hasStandbySignal() const;
  Result<bool> prepareDataDir(bool wipe);
  Result<bool> writeFileAsOwner(const std::string& path, const std::string& text, mode_t mode);
  // Writes dugong.conf for `state`, with the writes mode folded in (a primary's marked
  // writes-stopped while writes are stopped or shut down), and records what it wrote as
  // state_. Serialised with every other write of it (confMu_).
  // A standby's file is written with its hot-standby floor read again from
  // pg_control (kRead), or with the one read last (kKeep: a fence, which only reloads a
  // running standby, and whose pg_controldata would sit on the takeover's path; any
  // start comes after another apply, which reads it again).
  enum class FloorRead { kRead, kKeep };
  Result<bool> writeConf(const ManagedState& state, FloorRead floor = FloorRead::kRead);
  // writeConf of the configuration last written: the writes mode folded into it now.
  Result<bool> rewriteConfWithWritesMode();
  Result<bool> writeConfLocked(const ManagedState& state, FloorRead floor = FloorRead::kRead);
  // The writes mode's verdict for a primary now (pg/plan/writes.h).
  PrimaryUnderWrites primaryUnderWrites() const { return planPrimaryUnderWrites(writesMode()); }
  // Under an apply: a start, or the apply's end, found writes shut down: postgres is
  // stopped, and the apply reports it so (ok, not running).
  PgConfigApplied leftDownForShutdown(const char* when);
  // Before applyNone's stop: a CHECKPOINT on a running primary that accepts writes, so
  // that its shutdown checkpoint is short (the write gap of a planned switchover).
  void checkpointBeforeCleanStop();
  // While an apply of a primary (or a start) runs: sends `sig` to the postmaster once
  // postmaster.pid names a live one (a starting postmaster reads signals from then on,
  // before it accepts a connection), or gives up when the apply ends. True if sent.
  bool signalStartingPostmaster(int sig) const;
  // This host's options with the cluster's configuration folded in, for a file written
  // for `role` (a standby's never below hotStandbyFloor_).
  PgOptions effectiveOptions(const std::string& role) const;
  // Under applyMu_: marks a primary's configuration writes-stopped (so that no start or
  // reload makes it writable) and returns that configuration; nullopt when postgres is
  // not a primary (nothing accepts writes), or not running unless `evenIfDown`.
  Result<std::optional<ManagedState>> markWritesStopped(bool evenIfDown = false);
  Result<bool> writeHba();
  void setMarker(const std::string& what);
  void clearMarker();

  // --- running programs
  CommandResult run(const std::string& tool, std::vector<std::string> args, std::chrono::milliseconds timeout,
                    std::map<std::string, std::string> env = {});
  Result<bool> initdb();
  Result<bool> start();
  // pg_ctl stop -m fast, then -m immediate, then SIGKILL of the postmaster's process
  // group (at once for a stopped postmaster).
  // kFast: a shutdown checkpoint (a clean stop, which a standby of the same timeline can
  // follow), immediate after stopTimeout; kImmediate: no checkpoint, so none removes WAL
  // (the shutdown of a primary's writes: a rewind may need that WAL).
  enum class StopMode { kFast, kImmediate };
  Result<bool> stop(StopMode mode = StopMode::kFast);
  Result<bool> killPostmasterGroup(pid_t pid, const std::string& why);
  Result<bool> reload();
  Result<bool> promote();
  Result<bool> waitSettings(const ManagedState& state);
  Result<bool> bootstrapRoles();
  // Checks that `fence` is in effect; returns the postgres run that was checked.
  Result<PgInstance> verifyFence(const FenceTarget& fence);
  // Ends every client session, over TCP or the Unix socket, but the agent's own (this one,
  // and its others on the socket, by their application_name); answers their count.
  static std::string endClientSessionsSql();
  // readWal's position and the postgres run it was read in (pg/controller.cc).
  Result<std::pair<std::string, PgInstance>> readWalEnd(bool fencedStandby);
  // The data directory last ran as a primary (see ManagedState::wasPrimary).
  bool ranAsPrimary();

  // --- replication slots
  // Makes sure this standby's slot exists on `upstream`; drops its slot on the
  // previous upstream when it moved. Failures are logged: streaming works without.
  std::optional<std::string> prepareSlot(const PeerIdentity& upstream, const ManagedState& previous);
  // A replication connection to `peer` (for slots).
  Result<std::string> replicationConninfo(const PeerIdentity& peer) const;
  // On a primary: drops the dugong slots of peers other than `keepFor` that have been
  // inactive at every call for options.dropInactiveSlotAfter.
  void dropStaleSlots(const std::optional<std::string>& keepFor);

  // --- rebuilding
  // kAhead: same timeline, but further than the source: only a base backup helps.
  // A data directory that was not shut down cleanly (a killed primary) is recovered in
  // single-user mode, without any client, so that pg_rewind can compare and rewind it.
  // true: it was recovered; false: it was already shut down cleanly.
  // `ownSignal`: a standby.signal there was written by applyNone() to a stopped
  // ex-primary (not by a standby's recovery), and is set aside meanwhile.
  Result<bool> finishCrashRecovery(bool ownSignal);
  // pg_controldata's value for `key` ("Latest checkpoint location:") in `dataDir`
  // (default: this peer's data directory).
  Result<std::string> controlValue(const std::string& key, const std::string& dataDir = "");
  void removeStaleLockFiles();
  // Whether a start failed because a killed postmaster's backends still hold its shared
  // memory; if so, waits a moment before the caller tries again.
  static bool killedBackendsHoldMemory(const std::string& output);
  // The dry run: whether the data directory can follow `source` as it is.
  Divergence checkDivergence(const PeerIdentity& source, std::string* detail);
  // One real pg_rewind run (no separate dry run reading the same WAL first): kCanFollow
  // or kAhead when no rewind was required (nothing changed), kRewound (with the WAL
  // range discarded in *discarded), or kUnknown when pg_rewind failed.
  Divergence rewindIfDiverged(const PeerIdentity& source, std::string* detail, std::string* discarded);
  // After "no rewind required" on the same timeline: whether the local data directory
  // is ahead of `source` (it has WAL the source does not have).
  Divergence aheadOnSameTimeline(const PeerIdentity& source, const std::string& queryConninfo, std::string* detail);
  // Where the checkpoint record starting at `start` ends (pg_waldump reads its length).
  Result<WalPosition> checkpointRecordEnd(const WalPosition& start);
  std::string sourceQueryConninfo(const std::string& conninfo) const;
  // Asks `source` for a checkpoint, so that its pg_control (which pg_rewind reads) shows
  // the timeline it promoted to.
  void checkpointSource(const PeerIdentity& source, const std::string& queryConninfo);
  PgConfigApplied applyStandby(const PgConfig& config, const RebuildRules& rules, PgRejoined* report);
  // Refuses (an error naming both system identifiers and the operator's command) when
  // the data directory holds another database system than `source`'s. `*verified` is
  // false when `source` could not be asked (nothing is refused then). Returns true
  // when the systems differ and the operator's command allows replacing it.
  Result<bool> guardOtherSystem(const PeerIdentity& source, bool* verified);
  Result<std::string> localSystemId();
  CommandResult rewind(const PeerIdentity& source);
  Result<bool> basebackup(const PeerIdentity& source);
  // pg_basebackup into the data directory (the old one kept aside until it works) from
  // what `connect` names (-h/-p, or -d with a connection string), `from` in messages.
  Result<bool> basebackupFrom(const std::string& from, std::vector<std::string> connect);
  // --- pgBackRest (pg/pgbackrest.h): replica methods (pg/replica_method.cc) and the
  // bootstrap from a backup (pg/backup_bootstrap.cc)
  // The cluster's backup settings (defaults when the section is absent or invalid).
  BackupSettings backupSettings() const;
  Result<StanzaInfo> stanzaInfo(const std::string& stanza, const std::map<std::string, std::string>& repo);
  // A new data directory from `source`'s system by the cluster's replica methods in
  // order; each failure is logged with its reason before the next is tried.
  Result<bool> createReplica(const PeerIdentity& source);
  // The newest backup of the stanza, restored as a standby (old data directory aside
  // until it is complete); refused when the stanza holds another system than source's.
  Result<bool> restoreReplica(const PeerIdentity& source, const BackupSettings& backup);
  // Where restoreReplica restores into, from the old data directory (oldDataDir()) and
  // the backup's system.
  RestoreIntoPlan planRestoreIntoOld(const std::string& backupSystem);
  // The new data directory as a copy of oldDataDir() (cp -a --reflink=auto), without
  // postmaster.pid; on failure nothing is left of the copy.
  Result<bool> copyOldDataDir();
  // A brand-new cluster's data directory: initdb, or restoreCluster (postgres.bootstrap).
  // `downstream`: the sync the new primary is to serve. *refused: the backup belongs to
  // another database system (pg/pgbackrest.h bootstrapRefusal), and nothing was changed.
  Result<bool> bootstrapDataDir(const std::optional<PeerIdentity>& downstream, bool* refused);
  // The systems a bootstrap from `info`'s newest backup is compared with.
  BootstrapSystems bootstrapSystems(const StanzaInfo& info, const std::optional<PeerIdentity>& downstream);
  // The system `peer` serves (IDENTIFY_SYSTEM), or an error when it cannot be asked.
  Result<std::string> remoteSystemId(const PeerIdentity& peer);
  // Restores the stanza's newest backup, recovers it to the target and promotes it,
  // then stops it, ready for applyPrimary's start and roles.
  Result<bool> restoreCluster(const std::optional<PeerIdentity>& downstream, bool* refused);
  void discardOldDataDir();

  // --- roles
  PgConfigApplied applyNone();
  PgConfigApplied applyPrimary(const PgConfig& config);
  // A standby cluster's leader (pg/controller_standby_leader.cc, docs/decisions/0083
  // 3.1, 4.1): in recovery, streaming from its source; made from the source by
  // pg_basebackup when it is a new cluster's first leader with no data directory.
  PgConfigApplied applyStandbyLeader(const PgConfig& config);
  // A connection string to a `hosts` source: every host, target_session_attrs=primary
  // (0083 P5), the replication role; with its password for primary_conninfo, without
  // it for a command line (the password goes by PGPASSWORD, clientEnv()).
  Result<std::string> sourceConninfo(const SourceEndpoint& source, bool withPassword) const;
  // A new standby cluster's first leader from its source's repository (0083 4.1):
  // `pgbackrest restore --type=standby` of the stanza's newest backup into an empty data
  // directory, with pgBackRest's own restore_command taken out of postgresql.auto.conf
  // (dugong.conf's is the managed one).
  Result<bool> restoreLeaderFromRepository(const SourceRepository& repo);
  // A standby leader's lag to its source (pg/source_lag.h), sampled at each status():
  // IDENTIFY_SYSTEM of the source over the leader's replication conninfo, and the leader's
  // received and replayed positions. nullopt unless a standby leader was applied.
  std::optional<SourceLag> sampleSourceLag();
  // A standby leader's source, asked host by host with target_session_attrs=primary
  // (IDENTIFY_SYSTEM over the leader's replication conninfo): the one that answers is its
  // writable host.
  SourceRead readSource(const SourceEndpoint& source) const;
  // A `pgbackrest` source's position (0083 3.5): the end of the archive's newest segment
  // (pgbackrest info), read at most once a minute; the last read in between.
  SourceRead readRepository(const SourceEndpoint& source);
  // After a standby leader's fence (streaming stopped): what its promote-cluster check
  // needs of the source (PgFenced::source). nullopt when this postgres is no standby leader.
  std::optional<SourceObservation> observeSourceAfterFence();
  // demote-cluster (pg/controller_demotion.cc): where a primary shut down cleanly ended
  // its WAL (its shutdown checkpoint), for readWal() of a stopped postgres; and the
  // demoted standby leader's comparison with the source, rewound if it diverged (an
  // answer to return when it cannot go on; nullopt: it can follow now, postgres stopped).
  WalPositionRead readStoppedWal();
  std::optional<PgConfigApplied> rewindForDemotion(const SourceEndpoint& source, bool running);

  // --- connections
  std::string localConninfo() const;
  Result<std::string> peerConninfo(const PeerIdentity& peer, bool forReplication) const;
  std::map<std::string, std::string> clientEnv() const;
  Result<QueryResult> localQuery(const std::string& sql) const;
  std::string logTail() const;
  // Creates this standby's slot on its upstream again when its server log's tail says
  // the upstream refuses it as missing.
  void recreateMissingSlot(const PeerIdentity& upstream, const std::string& slot, const std::string& logTail);
  // A standby about to be promoted: keeps its WAL for the upstream it replaces (the
  // deposed primary) in a slot named after that peer, created in recovery, so that it
  // reserves from the last restartpoint, at or before the last checkpoint before the
  // fork. See docs/design.md "WAL retention for a deposed primary".
  void reserveWalForOldUpstream(const ManagedState& previous);
  // On a primary (from the health check, about once a minute): dropStaleSlots, unless an
  // apply or a catch-up poll runs.
  void sweepInactiveSlots();

  std::string oldDataDir() const { return options_.dataDir + ".dugong-old"; }
  std::string markerPath() const { return options_.dataDir + ".dugong-incomplete"; }
  // The cluster configuration last applied, kept beside the data directory (root's, 0600:
  // it may hold backup secrets) and read at construction.
  std::string clusterConfigPath() const { return options_.dataDir + ".dugong-cluster-config.json"; }
  Result<bool> keepClusterConfig(const ClusterConfig& config) const;

  PgOptions options_;
  // The cluster-wide configuration (pg/cluster_config.h), folded into options_ by
  // effectiveOptions() wherever postgres' files are written.
  mutable std::mutex clusterMu_;
  ClusterConfig cluster_;
  std::map<std::string, std::string> backupSection_;  // noteBackupSection; under clusterMu_
  // A standby's floor for the settings hot standby needs at least as high as on its
  // primary (the primary's values, from pg_controldata, which replays them): what a
  // standby writes is never lower, so it always starts. Refreshed at every write of a
  // standby's dugong.conf. Under clusterMu_.
  std::map<std::string, long> hotStandbyFloor_;
  void refreshHotStandbyFloor();
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  // localQuery's kept connections to the local socket (routine queries several times a
  // second: a fresh connection for each was most of the agent's CPU at rest).
  mutable ConnectionPool localPool_{localConninfo(), options_.queryTimeout};

  std::mutex applyMu_;            // held by apply; pollWritable only try_locks it
  mutable std::mutex modeMu_;     // guards writesMode_ (held only to read or flip it)
  WritesMode writesMode_ = WritesMode::kOpen;
  std::mutex confMu_;             // held for each write of dugong.conf (with state_'s update)
  std::atomic<bool> startInFlight_{false};         // start() runs pg_ctl start
  std::atomic<bool> primaryApplyInFlight_{false};  // applyPrimary runs
  mutable std::mutex stateMu_;    // guards state_ and pending_
  ManagedState state_;
  std::optional<Pending> pending_;
  // The source the last standby-leader apply followed, and its last lag sample (both
  // under stateMu_; pg/source_lag.h).
  std::optional<SourceEndpoint> standbySource_;
  std::optional<SourceLag> sourceLag_;
  // readRepository's last read and when (reset by each standby-leader apply).
  std::optional<SourceRead> repositoryRead_;
  std::chrono::steady_clock::time_point repositoryReadAt_{};
  std::optional<FenceTarget> fence_;  // in effect since the last fence(), until the next apply()
  // A standby that does not stream: since when, why (for status), and whether the next
  // apply repairs it (guarded by stateMu_).
  std::optional<std::chrono::steady_clock::time_point> notStreamingSince_;
  std::string streamProblem_;
  std::optional<std::chrono::steady_clock::time_point> streamReported_;  // logged (healthCheck)
  WalReceiverWatch receiverWatch_;  // both samplers' (guarded by stateMu_)
  // The data directory was copied from the restore peer while the upstream (another
  // peer) could not be reached: the upstream, copied later, may never have had the WAL
  // this copy needs next. Its refusal is then repaired without waiting repairStandbyAfter
  // (guarded by stateMu_; cleared once it streams).
  bool copiedBeforeUpstream_ = false;
  // Inactive slots of peers other than the sync, and since when each has been seen so
  // (dropStaleSlots; under applyMu_).
  std::map<std::string, std::chrono::steady_clock::time_point> inactiveSlotsSince_;
  std::chrono::steady_clock::time_point lastSlotSweep_{};  // under stateMu_
  std::string repairFor_;  // non-empty: the next standby apply repairs, for this reason
  // The standby's configuration says so (PgConfig::repairAtOnce, a demotion's generation):
  // a standby that cannot follow is repaired without waiting repairStandbyAfter.
  bool repairAtOnce_ = false;
  std::function<void(const std::string&)> testHook_;
  // Last: destroyed first, while what its drops use still exists.
  SlotDropQueue slotDrops_{[this](const std::string& conninfo, const std::string& slot) {
                             return dropSlot(conninfo, slot, options_.queryTimeout);
                           },
                           std::chrono::seconds(3), 100};
};

}  // namespace dugong::pg
