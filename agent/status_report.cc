#include "agent/status_report.h"

#include <sstream>

#include "dugong/version.h"
#include "agent/http_api.h"
#include "pg/lsn_bytes.h"
#include "statemachine/quorum.h"

namespace dugong::agent {
namespace {

using pg::lsnBytes;

// A standby cluster (docs/decisions/0083 3.5): "standby cluster of <source>", its leader,
// and on the leader its lag to the source. Null in a normal cluster.
nlohmann::json standbyJson(const StatusSources& s) {
  const auto& state = s.driver.peer().clusterState();
  if (!state || !state->standby) return nullptr;
  return {{"of", state->standby->source.describe()},
          {"cluster", "standby cluster of " + state->standby->source.describe()},
          {"leader", state->primary.id},
          {"promote", state->standby->promote},
          {"lag", s.postgres.source ? s.postgres.source->toJson() : nlohmann::json(nullptr)}};
}

}  // namespace

bool isWritablePrimary(const driver::Runner& driver, const pg::PgStatus& postgres) {
  return driver.peer().role() == Role::kPrimary && driver.appliedRole() == Role::kPrimary &&
         !driver.writesStopped() && postgres.online && !postgres.inRecovery && !postgres.readOnly &&
         !postgres.writesStopped;
}

bool isStreamingReplica(const driver::Runner& driver, const pg::PgStatus& postgres) {
  const Role role = driver.peer().role();
  return (role == Role::kSync || role == Role::kAsync || role == Role::kStandbyLeader) && driver.runsWantedConfig() &&
         postgres.online && postgres.inRecovery && postgres.walReceiverStatus == "streaming";
}

bool isStreamingStandbyLeader(const driver::Runner& driver, const pg::PgStatus& postgres) {
  if (driver.peer().role() != Role::kStandbyLeader) return false;
  const auto& state = driver.peer().clusterState();
  const SourceKind kind = state && state->standby ? state->standby->source.kind : SourceKind::kHosts;
  return leaderFollowsSource(kind, isStreamingReplica(driver, postgres), driver.runsWantedConfig(), postgres);
}

bool leaderFollowsSource(SourceKind kind, bool streamingReplica, bool runsWantedConfig, const pg::PgStatus& postgres) {
  if (kind != SourceKind::kPgbackrest) return streamingReplica;
  return runsWantedConfig && postgres.online && postgres.inRecovery && postgres.source &&
         postgres.source->sourceAnswered();
}

std::optional<uint64_t> replayBacklogBytes(const pg::PgStatus& postgres) {
  auto receive = lsnBytes(postgres.receiveLsn);
  auto replay = lsnBytes(postgres.replayLsn);
  if (!receive || !replay) return std::nullopt;
  return *receive > *replay ? *receive - *replay : 0;
}

nlohmann::json stateJson(const StatusSources& s) {
  const bool withdrawn = s.driver.withdrawn();
  nlohmann::json zk = {{"connected", false}, {"withdrawn", withdrawn}};
  if (s.zk.member) {
    zk = {{"connected", s.zk.connected},
          {"initialized", s.zk.initialized},
          {"sessionId", s.zk.sessionId},
          {"electionNode", s.zk.electionNode},
          {"lastError", s.zk.lastError},
          {"withdrawn", withdrawn}};
  }
  return {
      {"peer", s.driver.peer().inspect()},
      {"standby", standbyJson(s)},
      {"postgres", s.postgres.toJson()},
      {"zookeeper", zk},
      {"health",
       {{"healthy", s.driver.healthy()},
        {"writesStopped", s.driver.writesStopped()},
        {"transitionInFlight", s.driver.pgBusy()},
        {"detail", s.driver.healthy() ? "" : s.driver.unhealthyDetail()},
        {"writablePrimary", isWritablePrimary(s.driver, s.postgres)},
        {"streamingReplica", isStreamingReplica(s.driver, s.postgres)},
        {"streamingStandbyLeader", isStreamingStandbyLeader(s.driver, s.postgres)}}},
      {"rejoin",
       {{"failures", s.driver.counters().rejoinFailures}, {"lastError", s.driver.lastRejoinError()}}},
      {"hooks", s.hooks ? s.hooks->toJson() : nlohmann::json()},
      {"request", s.request},
      {"clusterConfig", s.clusterConfig},
      {"agent",
       {{"id", s.identity.id},
        {"cluster", s.cluster},
        {"version", kVersion},
        {"tags", s.identity.tags.toJson()},
        {"uptimeSeconds", s.uptimeSeconds}}},
  };
}

std::string replicationMetricsText(Role role, bool writablePrimary, const std::optional<ClusterState>& state,
                                   const pg::PgStatus& postgres) {
  std::ostringstream m;
  auto metric = [&m](const char* name, const char* help) {
    m << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n";
  };
  if (!state) return m.str();
  const bool quorum = state->quorum.has_value();
  metric("dugong_replication_mode", "1 for the replication mode of the last cluster state seen.");
  m << "dugong_replication_mode{mode=\"sync\"} " << (quorum ? 0 : 1) << "\n";
  m << "dugong_replication_mode{mode=\"quorum\"} " << (quorum ? 1 : 0) << "\n";
  if (!quorum) return m.str();
  const int members = static_cast<int>(state->quorum->members.size());
  metric("dugong_quorum_k", "Quorum mode: the members each commit waits for.");
  m << "dugong_quorum_k " << state->quorum->k << "\n";
  metric("dugong_quorum_members", "Quorum mode: the members of the synchronous set.");
  m << "dugong_quorum_members " << members << "\n";
  metric("dugong_quorum_read_quorum", "Quorum mode: the members a takeover fences and reads.");
  m << "dugong_quorum_read_quorum " << readQuorum(members, state->quorum->k) << "\n";
  if (!writablePrimary) return m.str();
  int acknowledging = 0;
  if (auto q = apiQuorum(role, state, postgres)) {
    for (const ApiQuorumMember& member : q->members) {
      acknowledging += member.state == "streaming" && member.syncState == "quorum" ? 1 : 0;
    }
  }
  metric("dugong_quorum_acknowledging_members",
         "On the quorum primary: members streaming with sync_state quorum; under dugong_quorum_k, commits wait.");
  m << "dugong_quorum_acknowledging_members " << acknowledging << "\n";
  return m.str();
}

std::string metricsText(const StatusSources& s) {
  std::ostringstream m;
  auto metric = [&m](const char* name, const char* type, const char* help) {
    m << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  };
  metric("dugong_up", "gauge", "1 while the agent runs.");
  m << "dugong_up 1\n";
  metric("dugong_build_info", "gauge", "Always 1; the version of the running agent in its label.");
  m << "dugong_build_info{version=\"" << kVersion << "\"} 1\n";
  metric("dugong_role", "gauge", "1 for this peer's current role.");
  for (Role r : {Role::kUnknown, Role::kUnassigned, Role::kPrimary, Role::kSync, Role::kAsync, Role::kDeposed,
                 Role::kStandbyLeader}) {
    m << "dugong_role{role=\"" << roleName(r) << "\"} " << (s.driver.peer().role() == r ? 1 : 0) << "\n";
  }
  metric("dugong_generation", "gauge", "Generation of the last cluster state seen.");
  m << "dugong_generation " << (s.driver.peer().clusterState() ? s.driver.peer().clusterState()->generation : 0) << "\n";
  metric("dugong_cluster_frozen", "gauge", "1 while the last cluster state seen is frozen.");
  m << "dugong_cluster_frozen "
    << (s.driver.peer().clusterState() && s.driver.peer().clusterState()->frozen() ? 1 : 0) << "\n";
  metric("dugong_zookeeper_connected", "gauge", "1 while the ZooKeeper session is connected.");
  m << "dugong_zookeeper_connected " << (s.zk.connected ? 1 : 0) << "\n";
  metric("dugong_postgres_online", "gauge", "1 while postgres accepts connections.");
  m << "dugong_postgres_online " << (s.postgres.online ? 1 : 0) << "\n";
  metric("dugong_postgres_writable", "gauge", "1 on the writable primary.");
  m << "dugong_postgres_writable " << (isWritablePrimary(s.driver, s.postgres) ? 1 : 0) << "\n";
  metric("dugong_postgres_pending_restart", "gauge",
         "Settings changed that take effect only when postgres restarts (pg_settings.pending_restart).");
  m << "dugong_postgres_pending_restart " << s.postgres.pendingRestart.size() << "\n";
  metric("dugong_archive_failing", "gauge",
         "1 while WAL archiving fails (its last attempt failed, pg_stat_archiver); 0 also with archive_mode off.");
  m << "dugong_archive_failing " << (s.postgres.archiver && s.postgres.archiver->failing ? 1 : 0) << "\n";
  if (const auto& a = s.postgres.archiver) {
    metric("dugong_archive_archived_total", "counter", "WAL segments archived since the statistics were reset.");
    m << "dugong_archive_archived_total " << a->archived << "\n";
    metric("dugong_archive_failed_total", "counter", "Failed attempts to archive a WAL segment.");
    m << "dugong_archive_failed_total " << a->failed << "\n";
    if (a->lastArchivedAgeSeconds) {
      metric("dugong_archive_last_archived_age_seconds", "gauge", "Seconds since a WAL segment was last archived.");
      m << "dugong_archive_last_archived_age_seconds " << *a->lastArchivedAgeSeconds << "\n";
    }
  }
  m << replicationMetricsText(s.driver.peer().role(), isWritablePrimary(s.driver, s.postgres),
                              s.driver.peer().clusterState(), s.postgres);
  metric("dugong_wal_position_bytes", "gauge", "WAL positions of the local postgres, as byte offsets.");
  for (auto [kind, lsn] : {std::pair{"current", &s.postgres.currentLsn}, {"receive", &s.postgres.receiveLsn},
                           {"replay", &s.postgres.replayLsn}}) {
    if (auto b = lsnBytes(*lsn)) m << "dugong_wal_position_bytes{kind=\"" << kind << "\"} " << *b << "\n";
  }
  metric("dugong_replication_lag_bytes", "gauge", "On a primary: how far each standby's replay is behind.");
  auto current = lsnBytes(s.postgres.currentLsn);
  for (const auto& row : s.postgres.replication) {
    auto replay = lsnBytes(row.replayLsn);
    if (current && replay) {
      m << "dugong_replication_lag_bytes{standby=\"" << row.applicationName << "\",sync_state=\"" << row.syncState
        << "\"} " << (*current > *replay ? *current - *replay : 0) << "\n";
    }
  }
  metric("dugong_replay_lag_seconds", "gauge", "On a standby: age of the last replayed transaction.");
  if (s.postgres.replayLagSeconds) m << "dugong_replay_lag_seconds " << *s.postgres.replayLagSeconds << "\n";
  if (const auto& src = s.postgres.source) {
    // A standby cluster's leader: its lag to the source (docs/decisions/0083 3.5).
    metric("dugong_standby_source_lag_bytes", "gauge",
           "On a standby cluster's leader: WAL the source has that it has not received (the last measure while the "
           "source does not answer).");
    if (src->lagBytes) m << "dugong_standby_source_lag_bytes " << *src->lagBytes << "\n";
    metric("dugong_standby_source_replay_lag_bytes", "gauge",
           "On a standby cluster's leader: WAL the source has that it has not replayed.");
    if (src->replayLagBytes) m << "dugong_standby_source_replay_lag_bytes " << *src->replayLagBytes << "\n";
    metric("dugong_standby_source_lag_seconds", "gauge",
           "On a standby cluster's leader: age of the last replayed transaction while replay is behind the source; 0 "
           "when caught up.");
    if (src->lagSeconds) m << "dugong_standby_source_lag_seconds " << *src->lagSeconds << "\n";
    metric("dugong_standby_source_receiving", "gauge", "On a standby cluster's leader: 1 while its WAL receiver streams.");
    m << "dugong_standby_source_receiving " << (src->receiving() ? 1 : 0) << "\n";
    metric("dugong_standby_source_reachable", "gauge",
           "On a standby cluster's leader: 1 when the source answered its last position read.");
    m << "dugong_standby_source_reachable " << (src->sourceAnswered() ? 1 : 0) << "\n";
  }
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    metric(name, "counter", help);
    m << name << " " << v << "\n";
  };
  const driver::DriverCounters& c = s.driver.counters();
  counter("dugong_postgres_transitions_total", "Postgres configurations applied.", c.transitions);
  counter("dugong_postgres_transition_failures_total", "Postgres configurations that failed to apply.",
          c.transitionFailures);
  counter("dugong_postgres_restarts_total", "Restarts of an unhealthy postgres.", c.restarts);
  counter("dugong_state_writes_total", "Cluster-state writes attempted.", c.stateWrites);
  counter("dugong_state_write_failures_total", "Cluster-state writes that failed.", c.stateWriteFailures);
  counter("dugong_zookeeper_sessions_total", "ZooKeeper session objects opened.", c.joins);
  counter("dugong_withdrawals_total", "Times the agent left ZooKeeper because postgres was unhealthy.",
          c.withdrawals);
  counter("dugong_decisions_total", "State-machine decisions logged.", c.decisions);
  counter("dugong_zookeeper_connection_losses_total", "ZooKeeper connections lost under a valid session.",
          c.connectionLosses);
  counter("dugong_write_stops_total", "Times writes were stopped because ZooKeeper was unreachable.", c.writeStops);
  counter("dugong_write_resumes_total", "Times stopped writes were resumed with the cluster unchanged.",
          c.writeResumes);
  counter("dugong_postgres_shutdowns_total",
          "Times a primary's postgres was shut down because its ZooKeeper session may have expired.", c.shutDowns);
  counter("dugong_rejoins_total", "Automatic rejoins of this deposed peer that succeeded.", c.rejoins);
  counter("dugong_rejoin_failures_total", "Automatic rejoins refused or failed (the peer stays deposed).",
          c.rejoinFailures);
  counter("dugong_handovers_total", "Planned switchovers for which this primary stopped postgres first.",
          c.handovers);
  const HookStatus hooks = s.hooks.value_or(HookStatus{});
  counter("dugong_hook_runs_total", "Hooks run (finished).", hooks.runs);
  counter("dugong_hook_failures_total", "Hooks that failed: non-zero status, killed, or not started.",
          hooks.failures);
  metric("dugong_hook_last_ok", "gauge", "1 when the last hook succeeded (absent before the first).");
  if (hooks.last) m << "dugong_hook_last_ok " << (hooks.last->ok ? 1 : 0) << "\n";
  return m.str();
}

}  // namespace dugong::agent
