// The simulated postgres servers (sim/world/sim_postgres.h): each host's server, the
// streaming between them, their stops, and what an operator does to them directly (a
// rebuild, a restart in place). The adapter of each agent run is sim_postgres.cc.
#include "sim/world/sim_postgres.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "pg/plan/catch_up.h"
#include "pg/plan/hot_standby.h"

namespace dugong::simworld {

// A start of postgres for `role`, as PostgreSQL checks it, with the settings the adapter
// writes for it (pg::hotStandbyStartSettings: a standby's own value raised to the floor its
// pg_control holds): a standby refuses to start below the primary's value its pg_control
// holds; a primary's running value is what its pg_control (and the WAL its standbys
// replay) holds from then on. The error, or empty.
std::string startWithHotStandbyFloor(PgServer& pg, PgRole role) {
  const auto settings =
      pg::hotStandbyStartSettings(pgRoleName(role), {{"max_connections", std::to_string(pg.ownMaxConnections)}},
                                  {{"max_connections", pg.controlMaxConnections}}, {});
  const long value = std::stol(settings.at("max_connections"));
  const bool standby = role == PgRole::kSync || role == PgRole::kAsync || role == PgRole::kStandbyLeader;
  if (standby && value < pg.controlMaxConnections) {
    return "hot standby is not possible because of insufficient parameter settings: max_connections = " +
           std::to_string(value) + " is a lower setting than on the primary server, where its value was " +
           std::to_string(pg.controlMaxConnections);
  }
  pg.runMaxConnections = value;
  if (role == PgRole::kPrimary) pg.controlMaxConnections = value;
  return "";
}

// A standby receives WAL from its upstream, and with it the primary's value (the
// parameter-change record its pg_control takes as it replays).
void receive(PgServer& standby, const PgServer& upstream, size_t max) {
  if (standby.wal.copyFrom(upstream.wal, max) > 0) {
    standby.controlMaxConnections = upstream.controlMaxConnections;
    standby.partialBytes = 0;  // the record's rest came
  }
}

std::string describeConfig(const PgConfig& c) {
  std::string s = pgRoleName(c.role);
  if (c.upstream) s += " from " + c.upstream->id;
  if (c.downstream) s += " sync " + c.downstream->id;
  if (c.restorePeer) s += " restore " + c.restorePeer->id;
  return s;
}

void PgServer::adapterGone() {
  transitioning = false;
  reloading = false;
  promoting = false;
  writablePending = false;
  applyLockedUntil = 0;
  queryBusyUntil = 0;
  cannotFollowSince = -1;
  repairFor = false;
  repairing = false;
}

// ---------------------------------------------------------------- between servers

int PgFleet::findHost(const std::string& id) const {
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (servers_[i]->id == id) return static_cast<int>(i);
  }
  return -1;
}

bool PgFleet::streamsFrom(int standby, int upstream) const {
  const PgServer& s = server(standby);
  const PgServer& u = server(upstream);
  return s.serving() && s.isStandby() && s.config.upstream && s.config.upstream->id == u.id && u.serving() &&
         !s.wal.divergedFrom(u.wal);
}

bool PgFleet::attachedSync(int primary) const {
  const PgServer& p = server(primary);
  if (!p.config.downstream) return false;
  int d = hostOf(p.config.downstream->id);
  return d >= 0 && streamsFrom(d, primary);
}

void PgFleet::refreshWalsenders(int primary) {
  PgServer& p = server(primary);
  const int64_t now = q_.now();
  for (int s = 0; s < size(); ++s) {
    if (s == primary) continue;
    const PgServer& standby = server(s);
    const bool streams = now >= standby.reconnectAt && streamsFrom(s, primary);
    auto it = p.walsenders.find(standby.id);
    if (!streams) {
      if (it != p.walsenders.end()) p.walsenders.erase(it);
      continue;
    }
    if (it == p.walsenders.end()) {
      PgServer::Walsender w;
      w.startedAt = now;
      w.rule = p.quorum;
      if (!w.rule && p.config.downstream) w.rule = pg::StandbyQuorum{1, {p.config.downstream->id}};
      it = p.walsenders.emplace(standby.id, std::move(w)).first;
    }
    PgServer::Walsender& w = it->second;
    if (w.next && now >= w.nextAt) {
      w.rule = std::move(w.next);
      w.next.reset();
    }
  }
}

void PgFleet::reloadQuorum(int primary, const std::optional<pg::StandbyQuorum>& rule) {
  PgServer& p = server(primary);
  refreshWalsenders(primary);
  p.quorum = rule;
  for (auto& [id, w] : p.walsenders) {
    w.next = rule;
    w.nextAt = q_.now() + rng_.between(0, 20);
  }
}

bool PgFleet::prioritized(const PgServer& primary, const std::string& id) {
  auto it = primary.walsenders.find(id);
  if (it == primary.walsenders.end() || !it->second.rule) return false;
  const auto& members = it->second.rule->members;
  return std::find(members.begin(), members.end(), id) != members.end();
}

size_t PgFleet::quorumReleased(int primary) {
  refreshWalsenders(primary);
  const PgServer& p = server(primary);
  std::vector<uint64_t> flushes;
  for (const auto& [id, w] : p.walsenders) {
    if (prioritized(p, id)) flushes.push_back(server(hostOf(id)).wal.size());
  }
  uint64_t released = 0;
  for (const auto& [id, w] : p.walsenders) {
    if (!prioritized(p, id)) continue;
    if (auto kth = pg::kthLatestFlush(flushes, w.rule->k)) released = std::max(released, *kth);
  }
  return static_cast<size_t>(released);
}

std::vector<uint64_t> PgFleet::memberFlushes(int primary, const std::vector<std::string>& members,
                                             std::optional<int64_t> after) {
  refreshWalsenders(primary);
  const PgServer& p = server(primary);
  std::vector<uint64_t> out;
  for (const std::string& id : members) {
    auto it = p.walsenders.find(id);
    if (it == p.walsenders.end() || !prioritized(p, id) || (after && it->second.startedAt <= *after)) continue;
    out.push_back(server(hostOf(id)).wal.position().value());
  }
  return out;
}

void PgFleet::stream() {
  const int64_t now = q_.now();
  for (PgServer* s : servers_) {
    PgServer& pg = *s;
    if (!pg.serving() || !pg.isStandby() || !pg.config.upstream || now < pg.stalledUntil || now < pg.reconnectAt) continue;
    int u = hostOf(pg.config.upstream->id);
    if (u < 0 || !server(u).serving()) continue;
    const Wal& up = server(u).wal;
    // A standby that diverged from its upstream cannot follow it (its log says so);
    // the adapter's health check notices (SimPostgres::healthCheck).
    if (pg.wal.divergedFrom(up)) {
      if (pg.cannotFollowSince < 0) pg.cannotFollowSince = now;
      continue;
    }
    pg.cannotFollowSince = -1;
    if (up.size() <= pg.wal.size()) continue;
    size_t max = pg.config.role == PgRole::kSync ? (rng_.chance(900) ? SIZE_MAX : 1)
                                                 : static_cast<size_t>(rng_.between(0, 6));
    receive(pg, server(u), max);
  }
}

void PgFleet::cleanStop(int n) {
  PgServer& pg = server(n);
  if (pg.serving() && pg.config.role == PgRole::kPrimary) {
    for (int s = 0; s < size(); ++s) {
      if (s != n && q_.now() >= server(s).stalledUntil && streamsFrom(s, n)) receive(server(s), pg, SIZE_MAX);
    }
    // Its shutdown checkpoint removes the WAL before its redo point (the end).
    pg.rewindWalGone = true;
  }
  immediateStop(n);
  pg.stoppedUncleanly = false;  // a shutdown checkpoint: nothing to recover
}

void PgFleet::immediateStop(int n) {
  PgServer& pg = server(n);
  pg.running = false;
  pg.stoppedUncleanly = true;
  pg.waiting.clear();
  ++pg.instance;
}

void PgFleet::kill(int n) {
  PgServer& pg = server(n);
  pg.running = false;
  pg.stoppedUncleanly = true;
  if (pg.transitioning) pg.crashedInTransition = true;
  pg.waiting.clear();
  ++pg.epoch;
  ++pg.instance;
}

void PgFleet::crash(int n, int64_t brokenFor) {
  PgServer& pg = server(n);
  if (!pg.running && !pg.transitioning) return;
  trace_.trace('F', [&] { return pg.id + " postgres crashes; it cannot start for " + std::to_string(brokenFor) + " ms"; });
  kill(n);
  pg.brokenUntil = q_.now() + brokenFor;
}

std::string PgFleet::rebuildAsStandby(int n, int p, const PeerIdentity& primary) {
  PgServer& pg = server(n);
  const Wal& source = server(p).wal;
  const bool rebuilt = !pg.setUp || pg.wal.divergedFrom(source) || pg.wal.size() > source.size() || !pg.standbySignal;
  if (rebuilt) {
    pg.wal = source;
    pg.controlMaxConnections = server(p).controlMaxConnections;
    pg.setUp = true;
    pg.rewindWalGone = false;
    pg.stoppedUncleanly = false;
    trace_.trace('P', [&] {
      return pg.id + " postgres rebuilt by the operator from " + primary.id + " (" + std::to_string(pg.wal.size()) +
             " records)";
    });
  }
  pg.waiting.clear();
  pg.readOnly = true;
  pg.writablePending = false;
  pg.config = PgConfig::standby(PgRole::kAsync, primary, primary);
  pg.standbySignal = true;
  ++pg.epoch;
  if (pg.running && !rebuilt) return "";  // reloaded
  ++pg.instance;  // started
  const std::string error = startWithHotStandbyFloor(pg, PgRole::kAsync);
  pg.running = error.empty();
  return error;
}

void PgFleet::restartInPlace(int n, std::function<void(const std::string& error)> done) {
  PgServer& pg = server(n);
  const int64_t end = std::max(q_.now(), pg.applyLockedUntil) + model_.restart.draw(rng_);
  pg.applyLockedUntil = end;
  q_.at(end, [this, n, epoch = pg.epoch, done = std::move(done)] {
    PgServer& p = server(n);
    if (p.epoch != epoch || p.transitioning || !p.running) {
      return done("postgres crashed, or its agent reconfigured it, before the restart");
    }
    cleanStop(n);
    std::string error = q_.now() < p.brokenUntil ? "postgres would not start"
                                                 : startWithHotStandbyFloor(p, p.config.role);
    p.running = error.empty();
    if (p.running && p.config.role == PgRole::kPrimary) {
      // As after an apply: a later fork comes after this start's checkpoint, whose WAL
      // the stop kept (seed 78988: a rejoin refused for ever after a restarted primary).
      p.rewindWalGone = false;
      p.stoppedUncleanly = false;
    }
    ++p.epoch;
    trace_.trace('P', [&] { return p.id + " postgres restarted in place" + (error.empty() ? "" : ", does not start: " + error); });
    done(error);
  });
}

// ---------------------------------------------------------------- the adapter

}  // namespace dugong::simworld
