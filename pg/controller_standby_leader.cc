// A standby cluster's leader (docs/decisions/0083-standby-cluster.md 3.1, 4.1): postgres
// in recovery, streaming from the cluster's source, never promoted. A `hosts` source: one
// multi-host primary_conninfo with target_session_attrs=primary (P5), which finds the
// source's writable host and follows it across its promotions (P1), no slot on the
// source's hosts (decision 0083, "Phase 2 as built"). A `pgbackrest` source streams from
// nothing: restore_command = pgbackrest archive-get of its stanza (P6); a `hosts` or
// `dugong` source with `restore` has both (decision 0083, "Phase 8 as built").
#include "pg/controller.h"
#include "pg/controller_support.h"
#include "pg/pgbackrest.h"
#include "pg/plan/transition.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

namespace dugong::pg {

Result<std::string> PgController::sourceConninfo(const SourceEndpoint& source, bool withPassword) const {
  std::string hosts, ports;
  std::map<std::string, std::string> p;
  std::string applicationName = options_.peerId;
  if (source.kind == SourceKind::kDugong && source.peer) {
    // A dugong source (0083 3.2): the one source peer chosen (its sync), in recovery, so
    // no target_session_attrs; its host and port from the pgUrl it publishes. The name it
    // shows there cannot be a dugong peer id (no '/' in one), so the source's
    // synchronous_standby_names never counts this leader, whatever the two sites' ids.
    auto url = parsePgUrl(source.peer->pgUrl);
    if (!url) return Error{"the source peer " + source.peer->id + "'s pgUrl: " + url.error()};
    hosts = url->host;
    ports = std::to_string(url->port);
    applicationName = options_.peerId + "/standby-leader";
  } else if (source.kind == SourceKind::kHosts && !source.hosts.empty()) {
    for (const HostPort& h : source.hosts) {
      hosts += (hosts.empty() ? "" : ",") + h.host;
      ports += (ports.empty() ? "" : ",") + std::to_string(h.port);
    }
    p["target_session_attrs"] = "primary";
  } else {
    return Error{"a standby leader follows a hosts source or a dugong source's peer in this dugong (docs/decisions/"
                 "0083), not " + source.describe()};
  }
  // `primary`, not `read-write`: a primary that is read-only by default (as a dugong
  // primary is until its sync has caught up) is refused by read-write (0083 P5).
  p.merge(std::map<std::string, std::string>{{"host", hosts},
                                              {"port", ports},
                                              {"user", options_.replicationUser},
                                              {"application_name", applicationName},
                                              {"connect_timeout", "5"},
                                              {"keepalives_idle", "5"},
                                              {"keepalives_interval", "2"},
                                              {"keepalives_count", "3"}});
  if (withPassword && options_.replicationPassword) p["password"] = *options_.replicationPassword;
  p.merge(clientTlsParams(options_.tls));
  return buildConninfo(p);
}

PgConfigApplied PgController::applyStandbyLeader(const PgConfig& config) {
  ManagedState previous;
  {
    std::lock_guard lock(stateMu_);
    pending_.reset();
    previous = state_;
  }
  if (!config.source) return failed("a standby leader needs a source", isRunning());
  // A dugong source with no source peer chosen by the agent yet (it has read no state of
  // the source since it started: 0083 "Phase 7 as built"): the source peer the last apply
  // followed as this source's leader, else none (in recovery, no primary_conninfo).
  const SourceEndpoint source = planLeaderEndpoint(*config.source, leaderSourceFollowed(previous));
  const bool streams = source.kind == SourceKind::kHosts || (source.kind == SourceKind::kDugong && source.peer);
  if (source.kind == SourceKind::kPgbackrest && !source.restore) {
    return failed("a pgbackrest source names no stanza", isRunning());
  }
  if (source.restore) {
    // Checked again before a command runs with them (0083 2.2): they came from the state.
    if (auto valid = validateSourceRepository(*source.restore); !valid) {
      return failed("the source's repository (stanza " + source.restore->stanza + "): " + valid.error(), isRunning());
    }
  }
  Result<std::string> conninfo = std::string();
  if (streams) conninfo = sourceConninfo(source, true);
  if (!conninfo) return failed(conninfo.error(), isRunning());
  ManagedState want;
  want.role = "standby-leader";
  want.primaryConninfo = conninfo.value();
  want.source = source.describe();
  if (source.restore) want.restoreCommand = restoreCommand(*source.restore, options_);
  recordLeaderSource(want, source);
  want.readOnly = false;

  bool running = isRunning();
  if (!isSetUp()) {
    if (!config.newCluster) {
      return refused("a standby leader of a later generation found no data directory in " + options_.dataDir +
                         ": only a new standby cluster's first leader makes one from its source. If its file "
                         "system is not mounted, put it back and restart the agent; otherwise stop this agent so "
                         "that its sync takes over, then rebuild this peer (dugong-adm rebuild)",
                     running);
    }
    if (!streams && !source.restore) {
      return failed("the first standby leader of a new standby cluster has no data directory and no source peer "
                    "chosen to copy it from yet: waiting for the source's state",
                    running);
    }
    if (running) {
      if (auto s = stop(); !s) return failed(s.error(), isRunning());
    }
    // The repository first, as the replica methods do (0083 4.1); a streaming source's
    // copy by pg_basebackup when it fails.
    std::string restoreFailure;
    bool restored = false;
    if (source.restore) {
      auto r = restoreLeaderFromRepository(*source.restore);
      restored = r.ok();
      if (!r) restoreFailure = r.error();
    }
    if (!restored && !streams) {
      return failed("the first standby leader of a new standby cluster, restoring from " + source.describe() + ": " +
                        restoreFailure,
                    false);
    }
    if (!restored) {
      if (!restoreFailure.empty()) {
        spdlog::warn("pg: restoring from the source's repository failed ({}): copying from the source instead",
                     restoreFailure);
      }
      auto command = sourceConninfo(source, false);
      if (!command) return failed(command.error(), false);
      spdlog::info("pg: the first standby leader of a new standby cluster, with no data directory yet: copying it "
                   "from the source, {} (pg_basebackup from its writable host)",
                   source.describe());
      auto b = basebackupFrom(source.describe(), {"-d", command.value()});
      if (!b) return failed(b.error(), false);
    }
    // At once: a copy of a primary without it would start writable, and would be
    // refused below by the next apply (an agent that dies before the start).
    auto sig = writeFileAsOwner(options_.dataDir + "/standby.signal", "", 0600);
    if (!sig) return failed(sig.error(), false);
    running = false;
  } else if (streams) {
    // The source must serve the database system this data directory holds: a standby of
    // another system never streams, and nothing here replaces data.
    auto local = localSystemId();
    auto remote = runQuery(conninfo.value() + " " + buildConninfo({{"replication", "true"}}), "IDENTIFY_SYSTEM",
                           options_.queryTimeout);
    if (!remote || remote->rows.empty() || !remote->rows[0][0]) {
      spdlog::warn("pg: cannot read the system identifier of the source {} ({}): following it all the same; a "
                   "source of another system is refused by its walsender",
                   source.describe(), remote ? std::string("no answer") : remote.error());
    } else if (local && *remote->rows[0][0] != local.value()) {
      return refused("refusing to follow the source " + source.describe() + ": this data directory (" +
                         options_.dataDir + ") holds database system " + local.value() + ", and the source " +
                         "serves another one, " + *remote->rows[0][0] + ". Nothing was changed. Name the right "
                         "source, or move this data directory away so that the next setup copies it from the "
                         "source",
                     running);
    }
  } else if (source.kind == SourceKind::kPgbackrest) {
    // The same for a repository: its stanza must hold this data directory's system
    // (pgbackrest archive-get would refuse each segment of another one).
    auto local = localSystemId();
    auto info = stanzaInfo(source.restore->stanza, source.restore->options);
    if (!info || info->systemId.empty()) {
      spdlog::warn("pg: cannot read the system identifier of the source {} ({}): restoring from it all the same; "
                   "archive-get refuses another system's WAL",
                   source.describe(), info ? std::string("none listed") : info.error());
    } else if (local && info->systemId != local.value()) {
      return refused("refusing to restore from the source " + source.describe() + ": this data directory (" +
                         options_.dataDir + ") holds database system " + local.value() + ", and the stanza " +
                         "holds another one, " + info->systemId + ". Nothing was changed. Name the right stanza, "
                         "or move this data directory away so that the next setup restores it from the stanza",
                     running);
    }
  }

  StandbyFacts facts;
  facts.running = running;
  facts.setUp = true;
  facts.hasStandbySignal = hasStandbySignal();
  facts.wasPrimary = previous.wasPrimary;
  facts.sameUpstream = previous.role == want.role && previous.primaryConninfo == want.primaryConninfo &&
                       previous.restoreCommand == want.restoreCommand;
  facts.inRecovery = !running;
  if (running) {
    auto q = localQuery("SELECT pg_is_in_recovery()");
    if (!q) return failed("cannot ask postgres whether it is in recovery: " + q.error(), true);
    facts.inRecovery = q->rows[0][0] == "t";
  }
  if (facts.wasPrimary || (running && !facts.inRecovery) || (!running && !facts.hasStandbySignal)) {
    // A stopped data directory without standby.signal would start writable. Only the
    // generation a demote-cluster began makes a standby leader of a former primary: its
    // history compared with the source's, rewound if it forked (controller_demotion.cc).
    if (!config.demoted) {
      return refused("this data directory last ran as a primary (it may hold WAL the source does not have): a "
                         "standby leader is made of it only by demote-cluster (docs/decisions/0083 section 5). "
                         "Nothing was changed",
                     running);
    }
    if (auto stopped = rewindForDemotion(source, running)) return *stopped;
    running = false;
    facts.running = false;
    facts.wasPrimary = false;
    facts.inRecovery = true;
  }
  if (!streams && source.kind == SourceKind::kDugong) {
    spdlog::warn("pg: standby leader of {} with no source peer chosen yet and none followed before as its leader: in "
                 "recovery, replaying what it has, streaming from nothing until the agent reads the source's state",
                 source.describe());
  }
  auto w = writeConf(want);
  if (!w) return failed(w.error(), running);
  {
    std::lock_guard lock(stateMu_);
    standbySource_ = source;
    repositoryRead_.reset();
  }
  if (running) {
    // primary_conninfo and restore_command are reloadable: the WAL receiver restarts on a
    // new one.
    auto r = reload();
    if (!r) return failed(r.error(), true);
    spdlog::info("pg: {} the source {} as standby leader",
                 planStandby(facts) == StandbyStep::kRoleOnly ? "still following" : "now following",
                 source.describe());
    return succeeded(true);
  }
  auto sig = writeFileAsOwner(options_.dataDir + "/standby.signal", "", 0600);
  if (!sig) return failed(sig.error(), false);
  auto st = start();
  if (!st) return failed(st.error(), isRunning());
  discardOldDataDir();
  spdlog::info("pg: started as standby leader, following the source {}", source.describe());
  return succeeded(true);
}

// The first leader of a new standby cluster from the source's repository (0083 4.1): the
// stanza's newest backup, `pgbackrest restore --type=standby` into an empty data
// directory. pgBackRest writes its own restore_command into postgresql.auto.conf, which
// would override dugong.conf's (and survive a fence): it is taken out, so that the managed
// one is the only one.
Result<bool> PgController::restoreLeaderFromRepository(const SourceRepository& repo) {
  auto info = stanzaInfo(repo.stanza, repo.options);
  if (!info) return Error{info.error()};
  if (info->latestBackup.empty()) {
    return Error{"the repository has no backup of stanza " + repo.stanza + " (" + info->status + ")"};
  }
  setMarker("pgbackrest restore (standby leader)");
  if (auto prep = prepareDataDir(/*wipe=*/true); !prep) return prep;
  auto argv = pgBackRestArgv(repo.stanza, repo.options, options_, "restore", {"--type=standby"});
  spdlog::info("pg: the first standby leader of a new standby cluster, with no data directory yet: restoring backup "
               "{} of stanza {}: {}",
               info->latestBackup, repo.stanza, describeArgv(argv));
  auto r = runPgBackRest(argv, options_, options_.basebackupTimeout);
  if (!r.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(options_.dataDir, ec);
    if (!ec) clearMarker();
    return Error{"pgbackrest restore " + r.describe() + ": " + pgBackRestFailure(r.output)};
  }
  const std::string autoConf = options_.dataDir + "/postgresql.auto.conf";
  std::ifstream in(autoConf);
  std::ostringstream kept;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t") != std::string::npos &&
        line.compare(line.find_first_not_of(" \t"), 15, "restore_command") == 0) {
      continue;
    }
    kept << line << "\n";
  }
  if (auto w = writeFileAsOwner(autoConf, kept.str(), 0600); !w) return Error{w.error()};
  clearMarker();
  spdlog::info("pg: pgbackrest restore finished in {} ms", r.elapsed.count());
  return true;
}

std::optional<SourceLag> PgController::sampleSourceLag() {
  std::optional<SourceEndpoint> source;
  std::optional<SourceLag> previous;
  {
    std::lock_guard lock(stateMu_);
    source = standbySource_;
    previous = sourceLag_;
  }
  if (!source) return std::nullopt;
  LeaderReplay leader;
  auto q = localQuery(
      "SELECT pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text, "
      "(SELECT received_tli FROM pg_stat_wal_receiver), (SELECT status FROM pg_stat_wal_receiver), "
      "(SELECT sender_host || ':' || sender_port FROM pg_stat_wal_receiver), "
      "EXTRACT(EPOCH FROM (clock_timestamp() - pg_last_xact_replay_timestamp()))::float8, "
      "pg_last_xact_replay_timestamp()::text");
  if (q && !q->rows.empty()) {
    const Row& r = q->rows[0];
    leader.receivedLsn = r[0];
    leader.replayedLsn = r[1];
    if (r[2]) leader.receivedTimeline = std::stoll(*r[2]);
    leader.walReceiverStatus = r[3];
    leader.senderHost = r[4];
    if (r[5]) leader.lastReplayAgeSeconds = std::stod(*r[5]);
    leader.lastReplayTimestamp = r[6];
  }
  SourceRead read = source->kind == SourceKind::kPgbackrest ? readRepository(*source) : readSource(*source);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  SourceLag lag = computeSourceLag(source->describe(), leader, read, previous ? &*previous : nullptr, now);
  std::lock_guard lock(stateMu_);
  sourceLag_ = lag;
  return lag;
}

// The source's flush position over the leader's own replication conninfo, host by host
// with target_session_attrs=primary: the one that answers is the writable host the
// receiver reaches. IDENTIFY_SYSTEM (its timeline and xlogpos) needs no database access
// for the replication role.
SourceRead PgController::readSource(const SourceEndpoint& source) const {
  SourceRead read;
  std::vector<HostPort> hosts = source.hosts;
  if (source.kind == SourceKind::kDugong && source.peer) {
    // A dugong source: the peer streamed from (the source's sync, in recovery): its
    // IDENTIFY_SYSTEM gives where its WAL ends (0083 3.5: the lag adds the sync's flush).
    auto url = parsePgUrl(source.peer->pgUrl);
    if (!url) return SourceRead{url.error(), "", std::nullopt, std::nullopt};
    hosts = {HostPort{url->host, url->port}};
  }
  for (const HostPort& host : hosts) {
    SourceEndpoint one = source;
    if (one.kind == SourceKind::kHosts) one.hosts = {host};
    auto conninfo = sourceConninfo(one, true);
    if (!conninfo) {
      read.error = conninfo.error();
      break;
    }
    auto remote = runQuery(conninfo.value() + " " + buildConninfo({{"replication", "true"}, {"connect_timeout", "2"}}),
                           "IDENTIFY_SYSTEM", options_.queryTimeout);
    if (!remote) {
      read.error += (read.error.empty() ? "" : "; ") + host.toString() + ": " + remote.error();
    } else if (remote->rows.empty() || remote->rows[0].size() < 3 || !remote->rows[0][1] || !remote->rows[0][2]) {
      read.error += (read.error.empty() ? "" : "; ") + host.toString() + ": IDENTIFY_SYSTEM gave no position";
    } else {
      return SourceRead{"", host.toString(), remote->rows[0][2], std::stoll(*remote->rows[0][1])};
    }
  }
  return read;
}

SourceRead PgController::readRepository(const SourceEndpoint& source) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(stateMu_);
    if (repositoryRead_ && now - repositoryReadAt_ < std::chrono::minutes(1)) return *repositoryRead_;
  }
  SourceRead read;
  const SourceRepository& repo = *source.restore;
  read.host = "stanza " + repo.stanza;
  auto info = stanzaInfo(repo.stanza, repo.options);
  auto size = localQuery("SELECT setting FROM pg_settings WHERE name = 'wal_segment_size'");
  if (!info) {
    read.error = info.error();
  } else if (info->archiveMax.empty()) {
    read.error = "the archive of stanza " + repo.stanza + " holds no WAL segment";
  } else if (!size || size->rows.empty() || !size->rows[0][0]) {
    read.error = "wal_segment_size: " + (size ? std::string("no answer") : size.error());
  } else if (auto end = archivedSegmentEnd(info->archiveMax, std::stoull(*size->rows[0][0])); !end) {
    read.error = end.error();
  } else {
    read.wal = end->wal;
    read.timeline = end->timeline;
  }
  std::lock_guard lock(stateMu_);
  repositoryRead_ = read;
  repositoryReadAt_ = now;
  return read;
}

// The leader's own check before it promotes (0083 6.2 step 1; phase 4 as built): asked
// after its fence, so nothing streams from the source any more. A host that answers with
// target_session_attrs=primary is not in recovery: a writable host this leader reaches.
std::optional<SourceObservation> PgController::observeSourceAfterFence() {
  std::optional<SourceEndpoint> source;
  {
    std::lock_guard lock(stateMu_);
    source = standbySource_;
  }
  // A dugong source is judged on the agent's read of its ensemble (SourceObserved).
  if (!source || source->kind != SourceKind::kHosts) return std::nullopt;
  const SourceRead read = readSource(*source);
  SourceObservation seen;
  if (read.error.empty()) {
    seen.reachable = true;
    if (auto host = HostPort::parse(read.host)) seen.writableHosts.push_back(host.value());
    spdlog::warn("pg: standby leader fenced; its source {} has a writable host, {}", source->describe(), read.host);
  } else {
    seen.lastSeen = "no host answered as a primary: " + read.error;
    spdlog::info("pg: standby leader fenced; no host of its source {} answered as a primary", source->describe());
  }
  return seen;
}

}  // namespace dugong::pg
