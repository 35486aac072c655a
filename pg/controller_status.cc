#include "pg/controller.h"
#include "pg/controller_support.h"
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {
// How long a copy that its later-copied upstream refuses waits for its repair.
constexpr std::chrono::seconds kRepairCopyBeforeUpstreamAfter{3};
}  // namespace

Result<bool> PgController::healthCheck() {
  // A fresh connection, not a kept one: the check is that postgres still takes new
  // sessions. A hung postmaster (or one that stopped forking) leaves existing backends
  // answering.
  // pg_current_logfile(): where postgres writes its log when logging_collector is on
  // (NULL when off: then stderr, the file pg_ctl -l names).
  auto q = runQuery(localConninfo(),
                    "SELECT pg_is_in_recovery(), (SELECT status FROM pg_stat_wal_receiver), pg_current_logfile(), "
                    "(SELECT pid FROM pg_stat_wal_receiver)",
                    options_.queryTimeout);
  if (!q) return Error{q.error()};
  std::string upstream;
  PeerIdentity upstreamPeer;
  std::optional<std::string> slot;
  {
    std::lock_guard lock(stateMu_);
    if (state_.role == "sync" || state_.role == "async") {
      upstream = state_.upstreamId.value_or("");
      upstreamPeer.id = upstream;
      upstreamPeer.pgUrl = state_.upstreamUrl.value_or("");
      slot = state_.slotName;
    }
  }
  const auto& row = q->rows.at(0);
  bool streams = false;
  {
    std::lock_guard lock(stateMu_);
    streams = receiverWatch_.streams(row[1], row.size() > 3 ? row[3] : std::nullopt, std::chrono::steady_clock::now());
  }
  // A receiver its upstream refuses at once is not streaming, however it looked when sampled.
  const bool notStreaming = !upstream.empty() && row[0] == "t" && !streams;
  // Why not: the server log's tail, read once.
  std::string serverLog = options_.logPath();
  if (row.size() > 2 && row[2] && !row[2]->empty()) {
    serverLog = (*row[2])[0] == '/' ? *row[2] : options_.dataDir + "/" + *row[2];
  }
  const std::string logTail = notStreaming ? lastLines(readFile(serverLog), 20) : "";
  if (notStreaming && slot && !upstreamPeer.pgUrl.empty()) recreateMissingSlot(upstreamPeer, *slot, logTail);
  bool sweep = false;
  if (row[0] == "f") {
    std::lock_guard lock(stateMu_);
    sweep = std::chrono::steady_clock::now() - lastSlotSweep_ >= std::chrono::seconds(60);
  }
  if (sweep) sweepInactiveSlots();
  std::lock_guard lock(stateMu_);
  if (!notStreaming) {
    notStreamingSince_.reset();
    streamReported_.reset();
    streamProblem_.clear();
    if (streams) copiedBeforeUpstream_ = false;
    return true;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!notStreamingSince_) notStreamingSince_ = now;
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - *notStreamingSince_);
  auto evidence = cannotFollowEvidence(logTail);
  streamProblem_ = "not streaming from " + upstream + " for " + std::to_string(secs.count()) + " s (WAL receiver " +
                   row[1].value_or("absent") + ")" + (evidence ? ": " + *evidence : "");
  if (secs >= 10s && (!streamReported_ || now - *streamReported_ >= 30s)) {
    // Rate-limited: what the operator needs to see why, e.g. the upstream's refusal.
    streamReported_ = now;
    const auto why = lineWith(logTail, "FATAL:");
    spdlog::warn("pg: this standby is {}{}", streamProblem_, why ? "; its server log says: " + *why : "");
  }
  // A copy taken from the primary while its upstream was down, refused by that upstream
  // for WAL it never had: waiting changes nothing, and the copy is new (docs/postgres.md).
  const bool neverHadIt = copiedBeforeUpstream_ && evidence && evidence->find("has already been removed") != std::string::npos;
  // In a demotion's generation (PgConfig::repairAtOnce) the fork is known: its WAL forked
  // with the old primary's, which its own apply rewound.
  const auto after = repairAtOnce_ ? std::chrono::seconds(0)
                     : neverHadIt  ? std::min<std::chrono::seconds>(options_.repairStandbyAfter, kRepairCopyBeforeUpstreamAfter)
                                   : options_.repairStandbyAfter;
  if (!evidence || now - *notStreamingSince_ < after) return true;
  repairFor_ = *evidence;
  return Error{"this standby cannot follow its upstream " + upstream + " (" + streamProblem_ +
               "); the next apply repairs it by pg_rewind, else pg_basebackup"};
}

PgStatus PgController::status() {
  PgStatus s;
  s.sampledAtMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  {
    std::lock_guard lock(stateMu_);
    s.role = state_.role;
    if (state_.role == "sync" || state_.role == "async") s.upstream = state_.upstreamId;
    if (state_.role == "primary") s.sync = state_.syncId;
    s.waitingForSync = pending_.has_value();
    s.writesStopped = state_.writesStopped;
  }
  auto q = localQuery(
      "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only'), "
      "CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END, "
      "pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text, "
      // Replay lag: none once replay has reached what was received, else the time since
      // the last transaction replayed (which keeps growing on an idle cluster).
      "CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0::float8 "
      "ELSE EXTRACT(EPOCH FROM (now() - pg_last_xact_replay_timestamp()))::float8 END, "
      "CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_walfile_name(pg_current_wal_lsn()) END, "
      "COALESCE((SELECT received_tli FROM pg_stat_wal_receiver), "
      "         (SELECT timeline_id FROM pg_control_checkpoint())), "
      "(SELECT status FROM pg_stat_wal_receiver), "
      // The walsenders in the same round trip, as one JSON array of rows.
      "(SELECT json_agg(json_build_array(application_name, state, sync_state, sent_lsn::text, write_lsn::text, "
      "                                  flush_lsn::text, replay_lsn::text) ORDER BY application_name) "
      " FROM pg_stat_replication), "
      // Settings changed in the configuration that take effect only at a restart.
      "(SELECT json_agg(name ORDER BY name) FROM pg_settings WHERE pending_restart), "
      "(SELECT json_object_agg(name, setting) FROM pg_settings WHERE name IN ('max_connections', "
      "  'max_worker_processes', 'max_wal_senders', 'max_prepared_transactions', 'max_locks_per_transaction')), " +
      std::string(archiverStatusSql()) +
      // A standby's replay paused (by pg_wal_replay_pause(), or at a parameter change
      // below the primary's hot-standby values).
      ", CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() <> 'not paused' END, "
      "(SELECT pid FROM pg_stat_wal_receiver)");
  if (!q) {
    s.error = q.error();
    return s;
  }
  s.online = true;
  const Row& r = q->rows.at(0);
  s.inRecovery = r[0] == "t";
  s.readOnly = s.inRecovery || r[1] == "on";
  s.currentLsn = r[2];
  s.receiveLsn = r[3];
  s.replayLsn = r[4];
  if (r[5]) s.replayLagSeconds = std::stod(*r[5]);
  if (r[6] && r[6]->size() >= 8) {
    s.timeline = static_cast<int>(std::stoul(r[6]->substr(0, 8), nullptr, 16));
  } else if (r[7]) {
    s.timeline = std::stoi(*r[7]);
  }
  s.walReceiverStatus = r[8];
  {
    // 'streaming' only for a receiver that has streamed a while (pg/wal_receiver_watch.h).
    std::lock_guard lock(stateMu_);
    const bool streams = receiverWatch_.streams(r[8], r[14], std::chrono::steady_clock::now());
    if (r[8] == "streaming" && !streams) s.walReceiverStatus = "starting";
  }
  if (s.role == "standby-leader") s.source = sampleSourceLag();
  s.archiver = parseArchiverStatus(r[12]);
  if (r[13]) s.replayPaused = *r[13] == "t";
  {
    std::lock_guard lock(stateMu_);
    if (!streamProblem_.empty()) s.streamProblem = streamProblem_;
  }
  if (r[10]) {
    auto names = nlohmann::json::parse(*r[10], nullptr, false);
    if (names.is_array()) {
      for (const auto& n : names) {
        if (n.is_string()) s.pendingRestart.push_back(n.get<std::string>());
      }
    }
  }
  if (r[11]) {
    auto values = nlohmann::json::parse(*r[11], nullptr, false);
    if (values.is_object()) {
      for (const auto& [k, v] : values.items()) {
        if (v.is_string()) s.hotStandbyValues[k] = std::stol(v.get<std::string>());
      }
    }
  }
  if (!r[9]) return s;
  const auto rows = nlohmann::json::parse(*r[9], nullptr, false);
  if (!rows.is_array()) {
    s.error = "pg_stat_replication could not be read: " + *r[9];
    return s;
  }
  auto text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : std::string(); };
  auto lsn = [](const nlohmann::json& v) { return v.is_string() ? std::optional(v.get<std::string>()) : std::nullopt; };
  for (const auto& row : rows) {
    if (!row.is_array() || row.size() != 7) continue;
    ReplicationRow rr;
    rr.applicationName = text(row[0]);
    rr.state = text(row[1]);
    rr.syncState = text(row[2]);
    rr.sentLsn = lsn(row[3]);
    rr.writeLsn = lsn(row[4]);
    rr.flushLsn = lsn(row[5]);
    rr.replayLsn = lsn(row[6]);
    s.replication.push_back(std::move(rr));
  }
  return s;
}

}  // namespace dugong::pg
