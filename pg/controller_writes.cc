#include "pg/controller.h"
#include "pg/controller_support.h"
#include <signal.h>
#include "pg/sql.h"
#include "pg/plan/catch_up.h"
#include "pg/plan/writes.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

Result<std::optional<ManagedState>> PgController::markWritesStopped(bool evenIfDown) {
  ManagedState want;
  {
    std::lock_guard lock(stateMu_);
    want = state_;
  }
  // pg/plan/writes.h: only a primary accepts writes. isRunning() only when it matters.
  WritesFacts facts;
  facts.primary = want.role == "primary";
  facts.running = evenIfDown || isRunning();
  if (!mustStopWrites(facts, evenIfDown)) return std::optional<ManagedState>();
  want.writesStopped = true;
  if (auto w = writeConf(want); !w) return Error{w.error()};
  return std::optional<ManagedState>(want);
}

void PgController::noteStopWrites() {
  std::lock_guard lock(modeMu_);
  writesMode_ = afterStopWrites(writesMode_);
}

void PgController::noteShutDown() {
  std::lock_guard lock(modeMu_);
  writesMode_ = afterShutDown(writesMode_);
}

void PgController::noteResumeWrites() {
  std::lock_guard lock(modeMu_);
  writesMode_ = afterResume(writesMode_);
}

WritesMode PgController::writesMode() const {
  std::lock_guard lock(modeMu_);
  return writesMode_;
}

bool PgController::signalStartingPostmaster(int sig) const {
  while (primaryApplyInFlight_ || startInFlight_) {
    if (auto pid = livePostmasterPid(options_.dataDir)) return ::kill(*pid, sig) == 0;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

std::string PgController::endClientSessionsSql() {
  return "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
         "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
         "AND NOT (client_addr IS NULL AND application_name = " +
         quoteLiteral(kAgentApplicationName) + ")";
}

// No apply lock: a transition in flight (a restart in crash recovery, a fence's verify
// loop) holds it for seconds. The configuration is rewritten from the one last written
// (by that transition, if it wrote one), with the stop folded in; a transition that
// writes after this folds it in too.
Result<WritesStopped> PgController::stopWrites() {
  const auto started = std::chrono::steady_clock::now();
  WritesStopped out;
  ManagedState last;
  {
    std::lock_guard lock(stateMu_);
    last = state_;
  }
  // pg/plan/writes.h: only a primary accepts writes (a primary being applied counts).
  WritesFacts facts;
  facts.primary = last.role == "primary" || primaryApplyInFlight_;
  facts.running = startInFlight_ || isRunning();
  if (!mustStopWrites(facts, false)) return out;
  if (last.role == "primary") {
    if (auto w = rewriteConfWithWritesMode(); !w) return Error{"stopping writes: " + w.error()};
  }
  // Every client session goes, over TCP or the Unix socket (a connection pooler running
  // as the postgres user connects there): those waiting for their sync (their clients
  // get an error, not a success), those with an open write transaction, and those that
  // may have made themselves read-write. Only the agent's own connections stay (this one,
  // and the agent's others on the socket, by their application_name), so that its
  // status and WAL queries running meanwhile do not fail. Reload and the first round in
  // one round trip, at once; once new sessions are read-only, a second round for
  // sessions that started while the reload was under way.
  const std::string terminate = endClientSessionsSql();
  auto first = localQuery("SELECT pg_reload_conf(); " + terminate);
  if (!first) {
    // Not answering: a postmaster that an apply is starting reads the configuration
    // again before it accepts any connection once signalled; the driver tries again.
    const bool signalled = signalStartingPostmaster(SIGHUP);
    return Error{"stopping writes: " + first.error() +
                 (signalled ? " (the starting postmaster was told to read its configuration again)" : "")};
  }
  ManagedState stopped;
  {
    std::lock_guard lock(stateMu_);
    stopped = state_;
  }
  stopped.writesStopped = true;
  auto ws = waitSettings(stopped);
  if (!ws) return Error{"stopping writes: " + ws.error()};
  auto second = localQuery(terminate + " AND backend_start < statement_timestamp()");
  if (!second) return Error{"stopping writes: terminating client sessions: " + second.error()};
  out.terminated =
      std::stoi(first->rows.at(0)[0].value_or("0")) + std::stoi(second->rows.at(0)[0].value_or("0"));
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  spdlog::warn("pg: writes stopped: the primary is read-only, {} client sessions terminated ({} ms)", out.terminated,
               out.took.count());
  return out;
}

namespace {
int shutdownSignal() { return writesShutdownMode() == WritesShutdown::kImmediate ? SIGQUIT : SIGINT; }
}  // namespace

bool PgController::signalPrimaryShutdown() const {
  {
    std::lock_guard lock(stateMu_);
    if (state_.role != "primary") return false;  // a standby accepts no writes
  }
  auto pid = livePostmasterPid(options_.dataDir);
  // pg/plan/writes.h: immediate, so that no shutdown checkpoint removes the WAL a rewind
  // of this peer would read.
  if (!pid || ::kill(*pid, shutdownSignal()) != 0) return false;
  spdlog::warn("pg: asked the primary's postmaster (pid {}) for {} shutdown: no session can commit on it{}", *pid,
               shutdownSignal() == SIGQUIT ? "an immediate" : "a fast",
               shutdownSignal() == SIGQUIT ? ", and its WAL is kept for a rewind" : "");
  return true;
}

// The signal first, with no lock and no file written: neither a transition holding the
// apply lock (a restart, a fence) nor a file system that cannot take the managed
// configuration can delay the shutdown. Then,
// under the lock, what a later start needs: the configuration marked write-stopped, and
// pg_ctl's own (immediate) stop to wait for the postmaster's end.
Result<bool> PgController::shutDownWrites(bool signalledBefore) {
  const auto started = std::chrono::steady_clock::now();
  bool signalled = signalPrimaryShutdown() || signalledBefore;
  // A primary being started: its postmaster as soon as it is there (the apply then
  // leaves it stopped, see applyPrimary).
  if (!signalled && primaryApplyInFlight_ && signalStartingPostmaster(shutdownSignal())) {
    signalled = true;
    spdlog::warn("pg: asked the starting primary's postmaster to shut down: it accepts no connection");
  }
  std::lock_guard applyLock(applyMu_);
  auto marked = markWritesStopped(signalled);
  if (!marked) {
    if (!signalled) return Error{"shutting down: " + marked.error()};
    spdlog::error("pg: the primary is shutting down, but its configuration could not be marked write-stopped ({}): "
                  "a start by hand would be writable",
                  marked.error());
  } else if (!shutDownStops(signalled, marked->has_value())) {
    return true;
  }
  auto s = stop(writesShutdownMode() == WritesShutdown::kImmediate ? StopMode::kImmediate : StopMode::kFast);
  if (!s) return Error{"shutting down: " + s.error()};
  spdlog::warn("pg: the primary is shut down: no session can commit on it ({} ms)",
               msSince(started));
  return true;
}

Result<bool> PgController::resumeWrites() {
  std::lock_guard applyLock(applyMu_);
  if (writesMode() != WritesMode::kOpen) return true;  // stopped again since: that stop holds
  ManagedState want;
  {
    std::lock_guard lock(stateMu_);
    want = state_;
  }
  WritesFacts facts;
  facts.primary = want.role == "primary";
  facts.writesStopped = want.writesStopped;
  facts.running = isRunning();
  if (!mustResumeWrites(facts)) return true;
  want.writesStopped = false;
  auto w = writeConf(want);
  if (w && facts.running) w = reload();
  if (w && facts.running) w = waitSettings(want);
  if (!w) return Error{"resuming writes: " + w.error()};
  spdlog::info("pg: writes resumed: the primary is {}", want.readOnly ? "read-only until its sync has caught up"
                                                                       : "writable");
  return true;
}

bool PgController::writablePending() const {
  std::lock_guard lock(stateMu_);
  return pending_.has_value();
}

void PgController::reportSyncWait(const Pending& pending) {
  {
    std::lock_guard lock(stateMu_);
    if (pending_) pending_->reported = std::chrono::steady_clock::now();
  }
  auto q = localQuery("SELECT coalesce(json_agg(json_build_array(application_name, state, sync_state, sync_priority, "
                      "flush_lsn::text)), '[]')::text, current_setting('synchronous_standby_names'), "
                      "pg_current_wal_lsn()::text FROM pg_stat_replication");
  if (!q) {
    spdlog::warn("pg: still read-only, waiting for sync {} to stream synchronously ({})", pending.syncId, q.error());
    return;
  }
  const Row& row = q->rows.at(0);
  spdlog::warn("pg: still read-only, waiting for sync {} to stream synchronously: the walsenders [name, state, "
               "sync_state, priority, flush] are {}, synchronous_standby_names is '{}', this primary is at {}",
               pending.syncId, row[0].value_or("[]"), row[1].value_or(""), row[2].value_or("?"));
  // A walsender of the sync that has streamed for 10 s without a sync priority, although
  // the setting names it, is ended: the standby reconnects, and a new walsender reads
  // its priority afresh.
  auto ended = localQuery("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication WHERE application_name = " +
                          quoteLiteral(pending.syncId) + " AND state = 'streaming' AND sync_priority = 0");
  if (ended && !ended->rows.empty() && ended->rows[0][0].value_or("0") != "0") {
    spdlog::warn("pg: ended the walsender of sync {}: it streamed without a sync priority although "
                 "synchronous_standby_names names it; the standby reconnects",
                 pending.syncId);
  }
}

bool PgController::pollWritable() {
  std::unique_lock applyLock(applyMu_, std::try_to_lock);
  if (!applyLock.owns_lock()) return false;
  Pending pending;
  ManagedState state;
  {
    std::lock_guard lock(stateMu_);
    if (!pending_) return state_.role == "primary" && !state_.readOnly;
    pending = *pending_;
    state = state_;
  }
  std::string flushed;
  if (pending.quorum) {
    if (!quorumCaughtUp(pending, &flushed)) return false;
  } else {
    auto q = localQuery("SELECT pg_current_wal_lsn()::text, flush_lsn::text FROM pg_stat_replication "
                        "WHERE application_name = " + quoteLiteral(pending.syncId) +
                        " AND state = 'streaming' AND sync_state = 'sync'");
    if (!q || q->rows.empty() || !q->rows[0][0] || !q->rows[0][1]) {
      if (std::chrono::steady_clock::now() - pending.reported >= 10s) reportSyncWait(pending);
      return false;
    }
    auto current = WalPosition::parse(*q->rows[0][0]);
    auto flush = WalPosition::parse(*q->rows[0][1]);
    if (!current || !flush) return false;
    // When it becomes writable (pg/plan/catch_up.h).
    const CatchUp step = planCatchUp(pending.targetLsn, SyncSeen{current->value(), flush->value()});
    if (step.targetSet) {
      pending.targetLsn = step.target;
      std::lock_guard lock(stateMu_);
      if (pending_) pending_->targetLsn = pending.targetLsn;
      spdlog::info("pg: sync {} streams synchronously; waiting for it to reach {}", pending.syncId,
                   current->toString());
    }
    if (!step.writable) return false;
    flushed = flush->toString();
  }
  if (testHook_) testHook_("pollWritable:beforeWrite");
  state.readOnly = false;
  auto w = writeConf(state);
  if (w) w = reload();
  if (w) w = waitSettings(state);
  if (!w) {
    spdlog::error("pg: could not make the primary writable: {}", w.error());
    return false;
  }
  {
    std::lock_guard lock(stateMu_);
    pending_.reset();
  }
  const std::string who = pending.quorum ? renderQuorum(*pending.quorum) : "sync " + pending.syncId;
  spdlog::info("pg: {} has caught up (flush {}): the primary is writable", who, flushed);
  dropStaleSlots(pending.quorum ? std::nullopt : std::optional<std::string>(pending.syncId));
  return true;
}

}  // namespace dugong::pg
