// What the adapter reports about the local postgres, for the tools and for HTTP.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pg/pg_archiver.h"
#include "pg/source_lag.h"

namespace dugong::pg {

// One row of pg_stat_replication (a standby streaming from this server).
struct ReplicationRow {
  std::string applicationName;
  std::string state;      // startup, catchup, streaming, ...
  std::string syncState;  // async, potential, sync, quorum
  std::optional<std::string> sentLsn, writeLsn, flushLsn, replayLsn;
  nlohmann::json toJson() const;
};

struct PgStatus {
  bool online = false;      // accepts connections
  std::string error;        // why the status is incomplete (postgres down, query failed)
  std::string role;         // the role last applied by dugong ("primary", "sync", ...; "" if none)
  std::optional<std::string> upstream;  // the id streamed from, for a standby
  std::optional<std::string> sync;      // the sync named by a primary
  bool inRecovery = false;
  bool readOnly = false;    // default_transaction_read_only, or in recovery
  bool waitingForSync = false;  // a primary kept read-only until its sync has caught up
  bool writesStopped = false;   // a primary whose writes were stopped (ZooKeeper lost)
  std::optional<int> timeline;
  std::optional<std::string> currentLsn;  // primary: pg_current_wal_lsn()
  std::optional<std::string> receiveLsn;  // standby: pg_last_wal_receive_lsn()
  std::optional<std::string> replayLsn;   // standby: pg_last_wal_replay_lsn()
  // standby: 0 when replay has reached what it received, else now() - the last replayed
  // commit's time
  std::optional<double> replayLagSeconds;
  std::optional<std::string> walReceiverStatus;  // standby: pg_stat_wal_receiver.status
  // standby: its replay is paused or pausing (pg_get_wal_replay_pause_state()): it
  // receives WAL but applies none
  bool replayPaused = false;
  // standby: why it does not stream from its upstream, with the evidence from its log
  // ("new timeline 2 forked off ... before current recovery point ..."), and since when
  std::optional<std::string> streamProblem;
  std::vector<ReplicationRow> replication;
  // Settings changed in the configuration that take effect only when postgres restarts
  // (pg_settings.pending_restart), sorted.
  std::vector<std::string> pendingRestart;
  // When this sample began (wall clock, ms since the epoch): `dugong-adm restart
  // --pending` trusts pendingRestart only from a sample begun after the cluster
  // configuration's apply (clusterConfig.appliedAt).
  int64_t sampledAtMs = 0;
  // The running values of the settings hot standby needs at least as high on a standby
  // as on its primary (pg/hot_standby.h): what `dugong-adm restart --rolling` orders by.
  std::map<std::string, long> hotStandbyValues;
  // WAL archiving (pg_stat_archiver), when archive_mode is not off.
  std::optional<ArchiverStatus> archiver;
  // A standby cluster's leader: its lag to the source (docs/decisions/0083 3.5).
  std::optional<SourceLag> source;

  nlohmann::json toJson() const;
};

}  // namespace dugong::pg
