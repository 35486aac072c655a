// The scripted source of a simulated standby cluster (sim_source.h).
#include "sim/world/sim_source.h"

#include <cstdint>
#include <string>

namespace dugong::simworld {

PeerIdentity SimSource::identity(int i) {
  const std::string num = std::to_string(i + 1);
  PeerIdentity p;
  p.id = "src" + num;
  p.ip = "10.0.1." + num;
  p.pgUrl = "tcp://postgres@10.0.1." + num + ":5432/postgres";
  p.zoneId = p.id;
  return p;
}

StandbySource SimSource::standbySource() {
  StandbySource s;
  s.kind = SourceKind::kDugong;
  s.cluster = "source";
  s.zookeeper = {HostPort{"zk-src", 2181}};
  s.root = "/dugong/source";
  return s;
}

SimSource::SimSource(PgFleet& fleet, Rng& rng, TraceSink& trace, SourceModel model)
    : fleet_(fleet), rng_(rng), trace_(trace), model_(model) {
  for (int i = 0; i < kHosts; ++i) {
    PgServer& s = servers_[i];
    s.id = identity(i).id;
    s.setUp = true;
    s.running = true;
    s.readOnly = false;
    const int host = fleet_.add(s);
    if (i == 0) first_ = host;
    sessions_[i] = nextSession_++;
    election_.join(sessions_[i], s.id);
  }
  pg(0).config = PgConfig::primary(identity(1));
  pg(0).standbySignal = false;
  pg(1).config = PgConfig::standby(PgRole::kSync, identity(0), identity(0));
  pg(1).standbySignal = true;
  pg(2).config = PgConfig::standby(PgRole::kAsync, identity(1), identity(0));
  pg(2).standbySignal = true;
  current_.generation = 1;
  current_.primary = identity(0);
  current_.sync = identity(1);
  current_.async = {identity(2)};
  current_.initTimeline = 1;
  publish("set up");
}

int SimSource::indexOf(const std::string& id) const {
  for (int i = 0; i < kHosts; ++i) {
    if (servers_[i].id == id) return i;
  }
  return -1;
}

int SimSource::hostOf(const std::string& id) const {
  const int i = indexOf(id);
  return i < 0 ? -1 : first_ + i;
}

const PgServer& SimSource::server(const std::string& id) const { return servers_[indexOf(id)]; }

const Wal& SimSource::history() const {
  const PgServer& p = server(current_.primary.id);
  return p.running || !current_.sync ? p.wal : server(current_.sync->id).wal;
}

void SimSource::publish(const std::string& why) {
  changedAt_ = fleet_.now();
  state_.put(current_.serialize());
  trace_.trace('S', [&] {
    return "source state v" + std::to_string(state_.version()) + ": " + summarizeState(current_).dump() + " (" + why +
           ")";
  });
}

void SimSource::tick() {
  if (gone_ || failingOver_ || demotedAt_) return;
  PgServer& p = pg(indexOf(current_.primary.id));
  if (!p.running) return;
  const int64_t n = model_.recordsPerTick.draw(rng_);
  for (int64_t i = 0; i < n; ++i) waiting_.push_back(p.wal.append(nextRecord_++));
  acknowledgeWhatTheSyncHolds();
}

void SimSource::acknowledgeWhatTheSyncHolds() {
  if (!current_.sync) return;
  const PgServer& sync = server(current_.sync->id);
  size_t acked = 0;
  while (acked < waiting_.size() && sync.running && sync.wal.contains(waiting_[acked])) ++acked;
  acked_.insert(acked_.end(), waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(acked));
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(acked));
}

// Sync i is promoted at its last whole record: a new timeline; its upstream's tail
// beyond it is gone.
void SimSource::promote(int i) {
  PgServer& s = pg(i);
  s.wal.promote(fleet_.newTimeline());
  s.partialBytes = 0;
  s.config = PgConfig::primary(current_.async.empty() ? std::nullopt : std::optional<PeerIdentity>(current_.async.front()));
  s.standbySignal = false;
  s.readOnly = false;
  ++s.epoch;
  waiting_.clear();
}

// Host i runs again as the async of the sync, rewound onto the new history first if it
// forked (a source peer is no dugong peer: its repair is the operator's, done at once).
void SimSource::rejoinAsAsync(int i) {
  PgServer& s = pg(i);
  const PgServer& sync = server(current_.sync->id);
  if (s.wal.divergedFrom(sync.wal) || s.wal.size() > sync.wal.size()) {
    const size_t discarded = s.wal.rewindTo(sync.wal);
    trace_.trace('S', [&] { return s.id + " rewound onto the source's history (" + std::to_string(discarded) + " records)"; });
  }
  s.config = PgConfig::standby(PgRole::kAsync, *current_.sync, current_.primary);
  s.standbySignal = true;
  s.running = true;
  s.readOnly = true;
  ++s.epoch;
  ++s.instance;
  sessions_[i] = nextSession_++;
  election_.join(sessions_[i], s.id);
}

bool SimSource::failover() {
  if (gone_ || failingOver_ || demotedAt_ || !current_.sync || current_.async.empty()) return false;
  const int old = indexOf(current_.primary.id);
  const int sync = indexOf(current_.sync->id);
  const int async = indexOf(current_.async.front().id);
  if (!pg(old).running || !pg(sync).running || !pg(async).running) return false;
  fleet_.kill(first_ + old);
  election_.leave(sessions_[old]);
  failingOver_ = true;
  changedAt_ = fleet_.now();
  syncChangedBeforeFailover_ = syncChangedAt_;
  lastFailoverAt_ = fleet_.now();
  trace_.trace('S', [&] { return "source primary " + pg(old).id + "'s host dies (WAL " + std::to_string(pg(old).wal.size()) + ")"; });
  const int64_t delay = model_.failoverDelay.draw(rng_);
  fleet_.queue().after(delay, [this, old, sync, async] {
    if (gone_) return;
    failingOver_ = false;
    current_.generation += 1;
    current_.deposed.clear();
    current_.primary = identity(sync);
    current_.sync = identity(async);
    current_.async.clear();
    current_.initWal = pg(sync).wal.position();
    current_.initTimeline = pg(sync).wal.timeline();
    promote(sync);
    pg(async).config = PgConfig::standby(PgRole::kSync, identity(sync), identity(sync));
    ++pg(async).epoch;
    syncChangedAt_ = fleet_.now();
    trace_.trace('S', [&] {
      return "source sync " + pg(sync).id + " promoted to timeline " + std::to_string(pg(sync).wal.timeline()) +
             " at WAL " + std::to_string(pg(sync).wal.size());
    });
    publish("failover");
    fleet_.queue().after(model_.hostBack.draw(rng_), [this, old] {
      if (gone_ || pg(old).running || failingOver_) return;
      rejoinAsAsync(old);
      current_.async = {identity(old)};
      publish(pg(old).id + " back as async");
    });
  });
  return true;
}

bool SimSource::switchover() {
  if (gone_ || failingOver_ || demotedAt_ || !current_.sync || current_.async.empty()) return false;
  const int old = indexOf(current_.primary.id);
  const int sync = indexOf(current_.sync->id);
  const int async = indexOf(current_.async.front().id);
  if (!pg(old).running || !pg(sync).running || !pg(async).running) return false;
  fleet_.cleanStop(first_ + old);  // its walsenders send everything first
  acknowledgeWhatTheSyncHolds();    // all it wrote
  current_.generation += 1;
  current_.primary = identity(sync);
  current_.sync = identity(async);
  current_.async = {identity(old)};
  current_.initWal = pg(sync).wal.position();
  current_.initTimeline = pg(sync).wal.timeline();
  promote(sync);
  pg(async).config = PgConfig::standby(PgRole::kSync, identity(sync), identity(sync));
  ++pg(async).epoch;
  election_.leave(sessions_[old]);
  rejoinAsAsync(old);
  syncChangedAt_ = fleet_.now();
  trace_.trace('S', [&] { return "source switchover to " + pg(sync).id; });
  publish("switchover");
  return true;
}

bool SimSource::replaceSync() {
  if (gone_ || failingOver_ || demotedAt_ || !current_.sync || current_.async.empty()) return false;
  const int p = indexOf(current_.primary.id);
  const int sync = indexOf(current_.sync->id);
  const int async = indexOf(current_.async.front().id);
  if (!pg(p).running || !pg(async).running) return false;
  pg(p).config.downstream = identity(async);
  pg(async).config = PgConfig::standby(PgRole::kSync, identity(p), identity(p));
  ++pg(async).epoch;
  pg(sync).config = PgConfig::standby(PgRole::kAsync, identity(async), identity(p));
  ++pg(sync).epoch;
  current_.generation += 1;
  current_.sync = identity(async);
  current_.async = {identity(sync)};
  current_.initWal = pg(p).wal.position();
  syncChangedAt_ = fleet_.now();
  trace_.trace('S', [&] { return "source sync replaced: " + pg(async).id + " becomes sync, " + pg(sync).id + " async"; });
  publish("sync replaced");
  return true;
}

std::optional<std::string> SimSource::writablePrimary() const {
  if (gone_ || demotedAt_) return std::nullopt;
  for (const PgServer& s : servers_) {
    if (s.serving() && s.config.role == PgRole::kPrimary && !s.readOnly && !s.writesStopped) return s.id;
  }
  return std::nullopt;
}

// As a dugong primary demotes (0083 5.2): writes stop, a fast shutdown whose walsenders
// send everything (its shutdown checkpoint included, the last record it writes) to the
// sync first, the standby state with `demotedAt` at that checkpoint's start, then postgres
// in recovery. Its standby leader streams from nothing here: the cluster under test is
// not a server it can stream from until it is promoted (the old site following the new
// one is demote-cluster's rewind, two dugong sites: 0083 8.1 phase 2, not built).
bool SimSource::demote(const StandbySource& toward) {
  if (gone_ || failingOver_ || demotedAt_ || !current_.sync) return false;
  const int p = indexOf(current_.primary.id);
  const int sync = indexOf(current_.sync->id);
  if (!pg(p).running || !pg(sync).running) return false;
  const DemotionPoint point{pg(p).wal.position(), pg(p).wal.timeline()};
  pg(p).wal.append(nextRecord_++);  // the shutdown checkpoint: no commit
  fleet_.cleanStop(first_ + p);
  acknowledgeWhatTheSyncHolds();
  waiting_.clear();
  demotedAt_ = point;
  SourceEndpoint none;
  none.kind = SourceKind::kDugong;
  none.cluster = toward.cluster;
  pg(p).config = PgConfig::standbyLeader(none, false);
  pg(p).config.demoted = true;
  pg(p).standbySignal = true;
  pg(p).readOnly = true;
  pg(p).running = true;
  ++pg(p).epoch;
  ++pg(p).instance;
  current_.generation += 1;
  current_.initWal = point.wal;
  current_.initTimeline = point.timeline;
  current_.standby = StandbyMode{toward, point, nullptr};
  trace_.trace('S', [&] {
    return "source demoted toward " + toward.describe() + ": its primary " + pg(p).id + "'s WAL ended at " +
           point.wal.toString() + " on timeline " + std::to_string(point.timeline) + " (" +
           std::to_string(pg(p).wal.size()) + " records)";
  });
  publish("demote-cluster");
  return true;
}

void SimSource::stopForGood() {
  for (int i = 0; i < kHosts; ++i) {
    if (pg(i).running) fleet_.kill(first_ + i);
    election_.leave(sessions_[i]);
  }
  gone_ = true;
  changedAt_ = fleet_.now();
  trace_.trace('S', [&] { return std::string("the source site is gone"); });
}

}  // namespace dugong::simworld
