#include "pg/controller.h"
#include "pg/plan/writes.h"
#include "pg/plan/hot_standby.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "pg/replication_slots.h"
#include "pg/rewound_wal.h"
#include "pg/wal_dir.h"
#include "pg/plan/standby_names.h"

#include "pg/controller_support.h"
#include "pg/plan/transition.h"

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

PgController::PgController(PgOptions options) : options_(std::move(options)) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(options_.osUser.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    uid_ = pw.pw_uid;
    gid_ = pw.pw_gid;
  }
  auto parsed = parseManagedConf(readFile(options_.dataDir + "/" + kManagedConfName));
  if (parsed.ok()) state_ = parsed.value();
  // The cluster's configuration as last applied: a start before ZooKeeper has told it
  // again (a reboot) runs with it, not without the cluster's restart-only settings.
  const std::string kept = readFile(clusterConfigPath());
  if (!kept.empty()) {
    auto config = ClusterConfig::parse(kept);
    if (config) {
      cluster_ = std::move(config.value());
    } else {
      spdlog::warn("pg: ignoring the kept cluster configuration {} ({}): it is applied again once ZooKeeper gives it",
                   clusterConfigPath(), config.error());
    }
  }
}

// ---------------------------------------------------------------- the interface

PgInitialized PgController::init() {
  PgInitialized out;
  out.setUp = isSetUp();
  out.online = out.setUp && isRunning();
  spdlog::info("pg: init: data directory {} is {}set up, postgres is {}", options_.dataDir, out.setUp ? "" : "not ",
               out.online ? "running" : "not running");
  return out;
}

PgConfigApplied PgController::apply(const PgConfig& config) {
  std::lock_guard lock(applyMu_);
  spdlog::info("pg: applying {}", config.toJson().dump());
  {
    std::lock_guard stateLock(stateMu_);
    fence_.reset();
  }
  PgConfigApplied out;
  // Below, "not set up" means no database: an unreadable directory is never rebuilt or
  // bootstrapped over. Role none only stops postgres.
  auto readable = config.role == PgRole::kNone ? Result<bool>(true) : checkDataDirReadable();
  if (!readable) {
    out = failed(readable.error(), isRunning());
  } else {
    switch (config.role) {
      case PgRole::kNone: out = applyNone(); break;
      case PgRole::kPrimary: out = applyPrimary(config); break;
      case PgRole::kSync:
      case PgRole::kAsync: out = applyStandby(config, RebuildRules{options_.useRewind, true}, nullptr); break;
      case PgRole::kStandbyLeader: out = applyStandbyLeader(config); break;
    }
  }
  if (out.ok) {
    spdlog::info("pg: applied role {} (postgres {})", pgRoleName(config.role), out.online ? "running" : "stopped");
  } else {
    spdlog::error("pg: applying role {} failed: {}", pgRoleName(config.role), out.error);
  }
  return out;
}


bool PgController::ranAsPrimary() {
  {
    std::lock_guard lock(stateMu_);
    if (state_.wasPrimary || state_.role == "primary") return true;
  }
  if (isRunning()) {
    auto q = localQuery("SELECT pg_is_in_recovery()");
    return q && !q->rows.empty() && q->rows[0][0] == "f";
  }
  return !hasStandbySignal();
}

// Stopped, and left in recovery (standby.signal, no upstream): a manual start gives a
// read-only standby that streams from nobody, never a writable primary.
PgConfigApplied PgController::applyNone() {
  {
    std::lock_guard lock(stateMu_);
    pending_.reset();
  }
  const bool wasPrimary = isSetUp() && ranAsPrimary();
  checkpointBeforeCleanStop();
  auto s = stop();
  if (!s) return failed(s.error(), isRunning());
  if (isSetUp()) {
    ManagedState st;
    {
      std::lock_guard lock(stateMu_);
      st = state_;
    }
    st.role = "none";
    st.wasPrimary = wasPrimary;
    st.readOnly = true;
    auto w = writeConf(st);
    if (!w) return failed(w.error(), false);
    auto sig = writeFileAsOwner(options_.dataDir + "/standby.signal", "", 0600);
    if (!sig) return failed(sig.error(), false);
  }
  return succeeded(false);
}

// A primary that still accepts writes and is stopped cleanly (the clean handover of a
// planned switchover, docs/rejoin.md) writes a checkpoint first, while it still
// commits: the fast shutdown's checkpoint, during which nothing commits and the sync
// waits for the end of the stream, then has little left to write. Bounded by the
// query timeout; the stop goes ahead whatever it answers (a checkpoint changes no data).
void PgController::checkpointBeforeCleanStop() {
  {
    std::lock_guard lock(stateMu_);
    if (state_.role != "primary" || state_.readOnly) return;
  }
  if (writesMode() != WritesMode::kOpen || !isRunning()) return;
  const auto started = std::chrono::steady_clock::now();
  auto cp = localQuery("CHECKPOINT");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  if (!cp) {
    spdlog::warn("pg: CHECKPOINT before stopping the primary failed after {} ms ({}): stopping it all the same",
                 ms.count(), cp.error());
    return;
  }
  spdlog::info("pg: CHECKPOINT before stopping the primary, while it still accepts writes, took {} ms", ms.count());
}

PgConfigApplied PgController::leftDownForShutdown(const char* when) {
  // As the shutdown of writes itself stops it (pg/plan/writes.h).
  auto s = stop(writesShutdownMode() == WritesShutdown::kImmediate ? StopMode::kImmediate : StopMode::kFast);
  if (!s) return failed("writes are shut down " + std::string(when) + ", and stopping postgres failed: " + s.error(),
                        isRunning());
  spdlog::warn("pg: postgres stays stopped as primary: writes were shut down {} and are not resumed", when);
  return succeeded(false);
}

// Writes stopped or shut down by the driver stay so through this apply, whenever they
// were noted (pg/plan/writes.h): the configuration written is marked writes-stopped, and
// a shutdown is looked at again after each step that starts or reloads postgres.
PgConfigApplied PgController::applyPrimary(const PgConfig& config) {
  const FlagInFlight inFlight{primaryApplyInFlight_};
  ManagedState previous;
  {
    std::lock_guard lock(stateMu_);
    previous = state_;
    pending_.reset();
  }
  ManagedState want;
  want.role = "primary";
  if (config.downstream) want.syncId = config.downstream->id;
  want.quorum = standbyQuorum(config.quorum);
  // Read-only until the sync (quorum mode: k members) has caught up (pg/plan/transition.h).
  PrimaryFacts facts;
  facts.hasDownstream = config.downstream.has_value() || want.quorum.has_value();
  facts.wasWritablePrimary = previous.role == "primary" && !previous.readOnly;
  want.readOnly = planPrimary(facts).readOnly;

  bool running = isRunning();
  if (!primaryUnderWrites().run) {
    if (isSetUp()) {
      if (auto w = writeConf(want); !w) return failed(w.error(), running);
    }
    return leftDownForShutdown("before this apply");
  }
  // Only a new cluster's first primary creates its data directory (pg/plan/transition.h).
  PrimaryDirFacts dir;
  std::string unreadable;
  dir.found = dataDirFound(&unreadable);
  dir.running = running;
  dir.newCluster = config.newCluster;
  dir.initWal = config.initWal;
  dir.initTimeline = config.initTimeline;
  if (dir.found == DataDirFound::kSetUp && config.initTimeline != 0) {
    auto history = readNewestTimelineHistory(options_.dataDir + "/pg_wal");
    if (history) {
      dir.history = std::move(history.value());
    } else {
      dir.historyError = history.error();
    }
  }
  const PrimaryDirPlan dirPlan = planPrimaryDataDir(dir);
  if (dirPlan.step == PrimaryDirStep::kFail) {
    return failed(dirPlan.why + " (" + options_.dataDir + (unreadable.empty() ? "" : ": " + unreadable) + ")", running);
  }
  if (dirPlan.step == PrimaryDirStep::kRefuse && dir.found == DataDirFound::kSetUp) {
    // Running on it already (an agent restarted beside it): it serves nothing more.
    if (running) {
      if (auto st = stop(); !st) spdlog::error("pg: stopping postgres on another history failed: {}", st.error());
    }
    return refused(dirPlan.why + ". If " + options_.dataDir + " was restored from a copy, put back the data it "
                       "replaced and restart the agent; otherwise stop this agent so that the sync takes over, "
                       "then rebuild this peer from the new primary (dugong-adm rebuild)",
                   isRunning());
  }
  if (dirPlan.step == PrimaryDirStep::kRefuse) {
    std::error_code ec;
    return refused(dirPlan.why + ". " + options_.dataDir + " has no PG_VERSION or global/pg_control" +
                       (fs::exists(markerPath(), ec) ? " (or " + markerPath() + " marks it incomplete)" : "") +
                       ". If its file system is not mounted or the directory was moved, put it back and restart "
                       "the agent; if its data is lost, stop this agent so that the sync takes over, then rebuild "
                       "this peer from the new primary (dugong-adm rebuild)",
                   false);
  }
  if (dirPlan.step == PrimaryDirStep::kBootstrap) {
    spdlog::info("pg: the first primary of a new cluster, with no data directory yet: creating it");
    bool otherSystem = false;
    auto i = bootstrapDataDir(config.downstream, &otherSystem);
    if (!i) return otherSystem ? refused(i.error(), false) : failed(i.error(), false);
    auto w = writeConf(want);
    if (!w) return failed(w.error(), false);
    auto s = start();
    if (!primaryUnderWrites().run) return leftDownForShutdown("while it started");
    if (!s) return failed(s.error(), isRunning());
    auto b = bootstrapRoles();
    if (!b) return failed(b.error(), true);
    clearMarker();
  } else {
    if (!running && previous.role == "none" && previous.wasPrimary) {
      // Left in recovery by role none only so that a manual start could not write: it
      // was a primary, and resumes as one without a promotion (no new timeline).
      std::error_code ec;
      fs::remove(options_.dataDir + "/standby.signal", ec);
    }
    bool inRecovery = hasStandbySignal();
    if (running) {
      auto q = localQuery("SELECT pg_is_in_recovery()");
      if (!q) return failed("cannot ask postgres whether it is in recovery: " + q.error(), true);
      inRecovery = q->rows[0][0] == "t";
    }
    facts.inRecovery = inRecovery;
    const PrimaryPlan plan = planPrimary(facts);
    want.readOnly = plan.readOnly;
    auto w = writeConf(want);
    if (!w) return failed(w.error(), running);
    if (running) {
      auto r = reload();
      if (!r) return failed(r.error(), true);
    } else {
      // A stopped standby starts as a standby (standby.signal stays) and is promoted
      // below, so that it switches to a new timeline.
      auto s = start();
      if (!primaryUnderWrites().run) return leftDownForShutdown("while it started");
      if (!s) return failed(s.error(), isRunning());
      // A stop noted during the start may have missed the configuration the postmaster
      // read first (it was signalled once its pid file was there): read again.
      if (primaryUnderWrites().writesStopped) {
        if (auto r = reload(); !r) return failed(r.error(), true);
      }
    }
    auto ws = waitSettings(want);
    if (!primaryUnderWrites().run) return leftDownForShutdown("during this apply");
    if (!ws) return failed(ws.error(), true);
    if (plan.promote) {
      reserveWalForOldUpstream(previous);
      auto p = promote();
      if (!primaryUnderWrites().run) return leftDownForShutdown("during the promotion");
      if (!p) return failed(p.error(), true);
    }
  }
  discardOldDataDir();
  if (want.readOnly) {
    // Stale slots are dropped once writable (pollWritable): not on a failover's path.
    std::lock_guard lock(stateMu_);
    pending_ = Pending{want.syncId.value_or(""), std::nullopt, want.quorum};
  } else {
    dropStaleSlots(want.syncId);
  }
  return succeeded(true);
}


PgFenced PgController::fence(const std::optional<PeerIdentity>& newSync) {
  // Serialized with apply() and pollWritable(): a poll that read the configuration
  // before this fence must not write it back after it.
  std::lock_guard applyLock(applyMu_);
  auto fail = [](const std::string& why) { return PgFenced{false, why, 0}; };
  if (!isRunning()) return PgFenced{true, "", 0};
  auto rec = localQuery("SELECT pg_is_in_recovery()");
  if (!rec) return fail("cannot ask postgres whether it is in recovery: " + rec.error());
  const bool standby = rec->rows[0][0] == "t";
  ManagedState want;
  {
    std::lock_guard lock(stateMu_);
    want = state_;
    pending_.reset();  // a fenced primary stays as it is until the next apply
  }
  // What the fence establishes (pg/plan/fence.h).
  auto planned = planFence(FenceFrom{standby, want.syncId, want.alsoSyncId},
                           newSync ? std::optional<std::string>(newSync->id) : std::nullopt);
  if (!planned) return fail(planned.error());
  const FenceTarget fence = planned.value();
  if (fence.standby) {
    // No more WAL by streaming, and replay runs unhindered to the end of what it has,
    // which becomes initWal (pg/plan/fence.h, planStandbyWalEnd).
    want.primaryConninfo.clear();
    want.replayUnhindered = true;
  } else {
    want.syncId = fence.syncId;
    want.alsoSyncId = fence.alsoSyncId;
    want.quorum.reset();  // a fence for a new sync is sync mode's: the sync and the one it had
  }
  auto w = writeConf(want, FloorRead::kKeep);
  if (!w) return fail(w.error());
  auto r = reload();
  if (!r) return fail(r.error());
  auto deadline = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(options_.queryTimeout, 10s);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (testHook_) testHook_("fence:verify");
    auto v = verifyFence(fence);
    if (v) {
      spdlog::info("pg: fenced: {}", describeFence(fence));
      PgFenced done{true, "", v.value()};
      if (fence.standby && want.role == "standby-leader") done.source = observeSourceAfterFence();
      std::lock_guard lock(stateMu_);
      fence_ = fence;
      return done;
    }
    last = v.error();
    std::this_thread::sleep_for(20ms);
  }
  return fail("the fence did not take effect: " + last);
}

namespace {
// "'a', 'b'": a list for IN (...).
std::string quoteLiterals(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ", ") + quoteLiteral(v);
  return out;
}
}  // namespace

Result<PgInstance> PgController::verifyFence(const FenceTarget& fence) {
  FenceSeen seen;
  std::optional<std::string> instance;
  if (fence.standby) {
    auto q = localQuery(std::string("SELECT current_setting('primary_conninfo'), "
                                    "(SELECT count(*) FROM pg_stat_wal_receiver), pg_is_in_recovery(), "
                                    "current_setting('restore_command'), ") +
                        kInstanceSql);
    if (!q) return Error{q.error()};
    const Row& row = q->rows.at(0);
    seen.primaryConninfo = row[0].value_or("");
    seen.walReceivers = std::stol(row[1].value_or("0"));
    seen.inRecovery = row[2] == "t";
    seen.restoreCommand = row[3].value_or("");
    instance = row[4];
  } else {
    // The setting, parsed, and what every walsender itself uses: only the new sync (and
    // the current one), or a quorum's members, may have a sync priority, since only a
    // walsender with one releases waiting commits; the new sync's (every member's) must
    // have one.
    std::vector<std::string> mustHave{fence.syncId};
    if (fence.quorum) mustHave = fence.quorum->members;
    std::vector<std::string> mayHave = mustHave;
    if (!fence.quorum && fence.alsoSyncId) mayHave.push_back(*fence.alsoSyncId);
    auto q = localQuery("SELECT current_setting('synchronous_standby_names'), "
                        "(SELECT count(*) FROM pg_stat_replication WHERE application_name NOT IN (" +
                        quoteLiterals(mayHave) +
                        ") AND (sync_priority > 0 OR sync_state <> 'async')), "
                        "(SELECT count(*) FROM pg_stat_replication WHERE application_name IN (" +
                        quoteLiterals(mustHave) + ") AND sync_priority = 0), pg_is_in_recovery(), " + kInstanceSql);
    if (!q) return Error{q.error()};
    const Row& row = q->rows.at(0);
    seen.syncNames = row[0].value_or("");
    seen.othersWithPriority = std::stol(row[1].value_or("0"));
    seen.syncWithoutPriority = std::stol(row[2].value_or("0"));
    seen.inRecovery = row[3] != "f";
    instance = row[4];
  }
  if (auto held = checkFence(fence, seen); !held) return Error{held.error()};
  return static_cast<PgInstance>(std::stoull(instance.value_or("0")));
}


bool PgController::awaitUpstreamStop(std::chrono::milliseconds timeout) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + timeout;
  bool sawStream = false;
  bool reserved = false;
  for (;;) {
    auto q = localQuery("SELECT pg_is_in_recovery(), (SELECT status FROM pg_stat_wal_receiver), "
                        "pg_last_wal_receive_lsn()::text");
    if (!q || q->rows.empty() || q->rows[0][0] != "t") {
      spdlog::info("pg: not waiting for the upstream to stop: {}", q ? "not a standby" : q.error());
      return false;
    }
    const bool streaming = q->rows[0][1] == "streaming";
    if (streaming) sawStream = true;
    if (streaming && !reserved) {
      // The promotion keeps WAL for the upstream it replaces (reserveWalForOldUpstream);
      // reserved now, while this standby only waits, it is off the takeover's path, and
      // the promotion finds it there.
      reserved = true;
      ManagedState now;
      {
        std::lock_guard lock(stateMu_);
        now = state_;
      }
      reserveWalForOldUpstream(now);
      continue;  // the stream may have ended meanwhile: looked at again at once
    }
    if (!streaming && sawStream) {
      spdlog::info("pg: the upstream's WAL stream ended after {} ms (received up to {}): it stopped",
                   msSince(started),
                   q->rows[0][2].value_or("?"));
      return true;
    }
    if (!streaming && !sawStream) {
      spdlog::info("pg: not waiting for the upstream to stop: no WAL stream ({})", q->rows[0][1].value_or("none"));
      return false;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      spdlog::warn("pg: the upstream still streams after {} ms: taking over without waiting longer", timeout.count());
      return false;
    }
    // Every 10 ms: the takeover waits on this, and the query is three function calls.
    std::this_thread::sleep_for(10ms);
  }
}


Result<SyncStandbyView> PgController::syncStandby(const std::string& standbyName) const {
  auto r = localQuery(syncStandbyQuery(standbyName));
  if (!r) return Error{r.error()};
  return parseSyncStandbyView(*r);
}

WalPositionRead PgController::readWal() {
  WalPositionRead out;
  std::optional<FenceTarget> fence;
  {
    std::lock_guard lock(stateMu_);
    fence = fence_;
  }
  std::optional<PgInstance> fencedRun;
  if (fence) {
    auto v = verifyFence(*fence);
    if (!v) {
      out.error = "the fence no longer holds: " + v.error();
      return out;
    }
    fencedRun = v.value();
  }
  if (!fence && !isRunning()) return readStoppedWal();  // a demoted primary (controller_demotion.cc)
  auto position = readWalEnd(fence && fence->standby);
  if (!position) {
    out.error = position.error();
    return out;
  }
  auto pos = WalPosition::parse(position->first);
  if (!pos) {
    out.error = pos.error();
    return out;
  }
  // Its timelines, which tell histories apart where positions do not (the initWal
  // check, statemachine/peer.cc): read from pg_wal after the position, so the segments
  // holding it are there.
  auto history = readTimelineHistory(options_.dataDir + "/pg_wal", pos.value());
  if (!history) {
    out.error = "cannot read the timelines of the WAL: " + history.error();
    return out;
  }
  out.position = pos.value();
  out.history = std::move(history.value());
  out.instance = position->second;
  if (fencedRun && *fencedRun != out.instance) {
    out.position.reset();
    out.error = "postgres restarted while the WAL position was read under a fence";
  }
  return out;
}

// A primary's position, or a standby's (pg/plan/fence.h, planStandbyWalEnd): fenced,
// where replay ends, asked in two statements (the startup's wait, then the replay
// position) until then, for at most promoteTimeout (the time a promotion has to replay
// the same WAL); the received position never.
Result<std::pair<std::string, PgInstance>> PgController::readWalEnd(bool fencedStandby) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + options_.promoteTimeout;
  StandbyWalSeen seen;
  std::string received;
  for (;;) {
    // Statement 1: is the startup process waiting for WAL (or for a client session)?
    auto before = localQuery(
        "SELECT pg_is_in_recovery(), s.wait_event_type, s.wait_event, "
        "CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() <> 'not paused' END "
        "FROM (SELECT 1) one LEFT JOIN pg_stat_activity s ON s.backend_type = 'startup'");
    if (!before) return Error{before.error()};
    if (before->rows.empty()) return Error{"postgres reports no recovery state"};
    // Statement 2, after it: the position.
    auto after = localQuery(
        "SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
        "ELSE pg_current_wal_lsn() END::text, "
        "GREATEST(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::text, pg_last_wal_receive_lsn()::text, " +
        std::string(kInstanceSql));
    if (!after) return Error{after.error()};
    if (after->rows.empty() || !after->rows[0][1]) return Error{"postgres reports no WAL position"};
    const Row& a = after->rows[0];
    const PgInstance instance = std::stoull(a[4].value_or("0"));
    const bool standbyBefore = before->rows[0][0] == "t";
    const bool standbyAfter = a[0] == "t";
    if (!standbyBefore && !standbyAfter) return std::pair{*a[1], instance};  // a primary: where it writes
    if (standbyBefore != standbyAfter) continue;  // promoted in between: ask again
    const Row& b = before->rows[0];
    seen.startupWaitType = b[1].value_or("");
    seen.startupWait = b[2].value_or("");
    seen.paused = b[3] == "t";
    seen.replayed = a[1].value_or("");
    received = a[3].value_or("");
    const bool gaveUp = std::chrono::steady_clock::now() >= deadline;
    switch (planStandbyWalEnd(seen, fencedStandby, gaveUp)) {
      case StandbyWalEnd::kNotFenced:
        return std::pair{a[2].value_or(*a[1]), instance};
      case StandbyWalEnd::kReplayed:
        if (seen.replayed != received) {
          spdlog::info("pg: this standby's WAL ends at {}, where replay stopped (received up to {}, with no complete "
                       "record beyond)",
                       seen.replayed, received.empty() ? "none" : received);
        }
        return std::pair{seen.replayed, instance};
      case StandbyWalEnd::kReplayDidNotEnd:
        // Logged by the state machine, which retries the takeover step.
        return Error{"replay has not reached the end of this standby's WAL after " +
                     std::to_string(msSince(started)) + " ms (the startup process waits on " +
                     (seen.startupWait.empty() ? "nothing" : seen.startupWait) + ", replayed " + seen.replayed +
                     ", received " + (received.empty() ? "none" : received) +
                     "); the received position may end inside a record, past the promotion's fork: no initWal"};
      case StandbyWalEnd::kEndClientSessions: {
        auto ended = localQuery(endClientSessionsSql());
        if (!ended) return Error{"ending the client sessions that hold replay back: " + ended.error()};
        if (ended->rows.at(0)[0].value_or("0") == "0") break;  // none left: the startup has not noticed yet
        spdlog::warn("pg: replay of the fenced standby waits on {} ({}), which a client session holds: {} client "
                     "sessions terminated, so that it reaches the WAL's end",
                     seen.startupWait, seen.startupWaitType, ended->rows.at(0)[0].value_or("0"));
        break;
      }
      case StandbyWalEnd::kResumeReplay: {
        auto resumed = localQuery("SELECT pg_wal_replay_resume()");
        if (!resumed) return Error{"resuming the paused replay: " + resumed.error()};
        spdlog::warn("pg: replay of the fenced standby was paused at {}: resumed, as the promotion would, so that "
                     "it reaches the WAL's end",
                     seen.replayed);
        break;
      }
      case StandbyWalEnd::kWaitForReplay: break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}
}  // namespace dugong::pg
