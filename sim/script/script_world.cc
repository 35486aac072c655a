#include "sim/script/script_world.h"
#include "sim/world/scheduled_timer.h"
#include "sim/world/operator_actions.h"


#include <algorithm>
#include <utility>

namespace dugong::sim {
namespace {

constexpr int64_t kZkInitMs = 100;
constexpr int64_t kZkWriteMs = 100;
constexpr uint64_t kWalStep = 10;
const char* const kNodeUnderTest = "node1";
constexpr int kNodeUnderTestHost = 0;
constexpr int kOthersHost = 1;

// The simulated postgres' fixed steps (script_world.h).
simworld::PgModel scriptPgModel() {
  constexpr simworld::Latency kStep{1000, 1000};  // reconfigure, start, stop
  constexpr simworld::Latency kQuery{10, 10};     // a query, a reload
  return simworld::PgModel{.init = {100, 100}, .fence = kQuery, .walRead = kQuery, .reload = kStep, .restart = kStep,
                           .slowReload = kStep, .slowRestart = kStep, .startStop = kStep, .writes = kQuery,
                           .shutDown = kStep, .rejoin = kStep, .upstreamPoll = kQuery, .writableWrite = kQuery,
                           .healthIntervalMs = 0,
                           .readOnlyUntilSyncCaughtUp = false,  // no client here waits for it
                           .awaitsUpstreamStop = false,         // the simulated peers never stop their postgres
                           .tellsStreaming = false};
}

// The simulated ZooKeeper's fixed delays (script_world.h); no faults are injected.
simworld::ZkModel scriptZkModel() {
  return simworld::ZkModel{.connect = {kZkInitMs, kZkInitMs}, .toServer = {kZkWriteMs, kZkWriteMs}};
}

// node1's postgres, or the one of the simulated peers.
int hostOf(const std::string& id) { return id == kNodeUnderTest ? kNodeUnderTestHost : kOthersHost; }

nlohmann::json idsOf(const PeerList& peers) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : peers) a.push_back(p.id);
  return a;
}

Error usage(const std::string& cmd, const std::string& what) { return Error{cmd + ": " + what}; }

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kInfo:
      break;
  }
  return "info";
}

}  // namespace

ScriptWorld::ScriptWorld(Options options)
    : simworld::TraceSink(true),
      opts_(options),
      q_(options.startTime),
      zk_(q_, rng_, rng_, *this, scriptZkModel(), zkHooks()),
      fleet_(q_, rng_, rng_, *this, scriptPgModel(), hostOf) {
  zk_.addHost(kNodeUnderTest);
  identity(kNodeUnderTest);
  pg_.id = kNodeUnderTest;
  pg_.wal = simworld::Wal(1);  // WAL positions count records
  othersPg_.id = "the simulated peers";
  othersPg_.wal = pg_.wal;
  othersPg_.setUp = true;
  othersPg_.running = true;
  fleet_.add(pg_);
  fleet_.add(othersPg_);
}

// ---- event loop --------------------------------------------------------------------

void ScriptWorld::schedule(int64_t delayMs, std::function<void()> fn) { q_.after(delayMs, std::move(fn)); }

void ScriptWorld::advance(int64_t ms) {
  const EpochMs until = q_.now() + ms;
  while (!q_.empty() && q_.nextAt() <= until) q_.runNext();
  q_.advanceTo(until);
}

bool ScriptWorld::runUntilRest(int64_t limitMs) {
  const EpochMs limit = q_.now() + limitMs;
  while (!q_.empty()) {
    if (q_.nextAt() > limit) return false;
    q_.runNext();
  }
  return true;
}

void ScriptWorld::log(const std::string& line) {
  if (trace_) trace_(q_.now(), line);
}

// Hands an event of node1's ZooKeeper client or postgres adapter to the driver.
void ScriptWorld::deliver(const Event& event, const std::function<void()>& call) {
  std::string what = describeEvent(event);
  log("event  " + what);
  call();
}

// ---- the driver's environment --------------------------------------------------------


std::unique_ptr<driver::Timer> ScriptWorld::newTimer() {
  return std::make_unique<simworld::ScheduledTimer>(q_);
}

void ScriptWorld::write(LogLevel level, const std::string& line) { log(std::string("peer   ") + levelName(level) + ": " + line); }

void ScriptWorld::record(char kind, std::string text) {
  const char* prefix = kind == 'A' ? "action " : kind == 'P' ? "pg     " : kind == 'Z' ? "zk     " : "world  ";
  log(prefix + text);
}

// What node1's postgres adapter reports goes into the driver; an apply that leaves
// node1 the running primary of the current state brings the scripted clients' commits.
simworld::SimPostgresHooks ScriptWorld::postgresHooks() {
  simworld::SimPostgresHooks h;
  h.deliver = [this](const Event& ev, const std::function<void()>& call) {
    if (const auto* a = std::get_if<PgConfigApplied>(&ev)) {
      pgConfigured_ = true;
      auto s = zkState();
      if (a->online && s && s->primary.id == kNodeUnderTest) setWal(pg_.wal.size() + kWalStep);
    }
    deliver(ev, call);
  };
  return h;
}

void ScriptWorld::setWal(uint64_t records) {
  pg_.wal.truncate(records);
  while (pg_.wal.size() < records) pg_.wal.append(++nextCommit_);
  mirrorWal();
}

// ---- simulated ZooKeeper ----------------------------------------------------------

// What node1's ZooKeeper client hears goes into the driver; every write is logged.
simworld::ZkHooks ScriptWorld::zkHooks() {
  simworld::ZkHooks h;
  h.deliver = [this](int, const Event& ev, const std::function<void()>& call) { deliver(ev, call); };
  h.identityOf = [this](const std::string& id) -> const PeerIdentity& { return identities_.at(id); };
  h.written = [this](const std::string& writer, int64_t, std::optional<WalPosition>, const std::string&) {
    log("zk     state version " + std::to_string(zk_.state().version()) + " written by " +
        (writer == kNodeUnderTest ? "peer " + writer : writer));
  };
  return h;
}

// A write by the simulator itself (a simulated peer or the operator): unconditional.
Result<nlohmann::json> ScriptWorld::writeZk(nlohmann::json state, const std::string& why) {
  const simworld::ZkStateNode& node = zk_.state();
  zk_.cas(why, state.dump(), node.exists() ? node.version() : -1, q_.now(), std::nullopt, why);
  return nlohmann::json(nullptr);
}

std::optional<ClusterState> ScriptWorld::zkState() const {
  if (!zk_.state().exists()) return std::nullopt;
  auto s = ClusterState::parse(zk_.state().data());
  if (!s) return std::nullopt;
  return s.value();
}

bool ScriptWorld::simulatedPrimaryRunsCluster(const ClusterState& s) const {
  return !s.oneNodeWriteMode && s.sync && s.primary.id != kNodeUnderTest;
}

// ---- identities -------------------------------------------------------------------

const PeerIdentity& ScriptWorld::identity(const std::string& id) {
  auto it = identities_.find(id);
  if (it != identities_.end()) return it->second;
  const int n = ++identityCount_;
  PeerIdentity p;
  p.id = id;
  p.ip = "10.0.0." + std::to_string(n);
  p.pgUrl = "tcp://postgres@" + p.ip + ":5432/postgres";
  p.zoneId = id;
  return identities_.emplace(id, p).first->second;
}

std::optional<std::string> ScriptWorld::knownId(const nlohmann::json& arg) const {
  if (!arg.is_string() || !identities_.count(arg.get<std::string>())) return std::nullopt;
  return arg.get<std::string>();
}

// ---- commands ---------------------------------------------------------------------

Result<nlohmann::json> ScriptWorld::run(const std::string& cmd, const nlohmann::json& args) {
  if (!args.is_array()) return usage(cmd, "args must be an array");
  auto arg = [&args](size_t i) { return i < args.size() ? args[i] : nlohmann::json(nullptr); };
  if (cmd == "echo") {
    std::string text;
    for (const auto& a : args) text += (text.empty() ? "" : " ") + (a.is_string() ? a.get<std::string>() : a.dump());
    log("echo   " + text);
    return nlohmann::json(nullptr);
  }
  if (cmd == "peer") return peerView();
  if (cmd == "zk") return zkView(arg(0) == true);
  if (cmd == "addpeer") return addPeer(args);
  if (cmd == "rmpeer") return rmPeer(args);
  if (cmd == "bootstrap") return bootstrap(args);
  if (cmd == "startPeer") return startPeer();
  if (cmd == "catchUp") return catchUp();
  if (cmd == "depose") return depose();
  if (cmd == "rebuild") return rebuild(args);
  if (cmd == "freeze") {
    if (!arg(0).is_null() && !arg(0).is_boolean()) return usage(cmd, "the argument must be true or false");
    return freeze(arg(0) != false);
  }
  if (cmd == "unfreeze") return freeze(false);
  if (cmd == "promote") return promote(args);
  if (cmd == "setClusterState") return setClusterState(args);
  return Error{"unknown command \"" + cmd +
               "\" (commands: addpeer, rmpeer, bootstrap, startPeer, peer, zk, catchUp, depose, rebuild, freeze, "
               "unfreeze, promote, setClusterState, echo)"};
}

Result<nlohmann::json> ScriptWorld::addPeer(const nlohmann::json& args) {
  std::string id;
  if (!args.empty()) {
    if (!args[0].is_string() || args[0].get<std::string>().empty()) return usage("addpeer", "id must be a string");
    id = args[0].get<std::string>();
  } else {
    do {
      id = "node" + std::to_string(identityCount_ + 1);
      if (identities_.count(id)) ++identityCount_;
    } while (identities_.count(id));
  }
  if (zk_.election().holds(id)) return usage("addpeer", id + " is already active");
  const PeerIdentity& p = identity(id);
  log("zk     " + id + " joined");
  zk_.joinWithoutClient(id);
  auto s = zkState();
  if (s && simulatedPrimaryRunsCluster(*s) && s->primary.id != id && s->sync->id != id &&
      !containsPeer(s->async, id) && !containsPeer(s->deposed, id)) {
    ClusterState next = *s;
    next.async.push_back(p);
    writeZk(next.toJson(), "simulated primary " + s->primary.id + " (adding async " + id + ")");
  }
  return nlohmann::json(nullptr);
}

Result<nlohmann::json> ScriptWorld::rmPeer(const nlohmann::json& args) {
  if (args.empty() || !args[0].is_string()) return usage("rmpeer", "which peer? (rmpeer ID)");
  const std::string id = args[0].get<std::string>();
  if (id == kNodeUnderTest) return usage("rmpeer", "refusing to remove the peer under test");
  if (!zk_.election().holds(id)) return usage("rmpeer", id + " is not active");
  auto s = zkState();
  if (s && s->primary.id == id && s->sync && s->sync->id != kNodeUnderTest) {
    return usage("rmpeer", "removing primary " + id + " would need simulated sync " + s->sync->id +
                               " to take over; use depose");
  }
  if (s && s->sync && s->sync->id == id && s->primary.id != kNodeUnderTest) {
    return usage("rmpeer", "removing sync " + id + " would need simulated primary " + s->primary.id +
                               " to take over; use depose");
  }
  log("zk     " + id + " left");
  zk_.leaveWithoutClient(id);
  if (s && simulatedPrimaryRunsCluster(*s) && containsPeer(s->async, id)) {
    ClusterState next = *s;
    next.async.erase(next.async.begin() + indexOfPeer(s->async, id));
    writeZk(next.toJson(), "simulated primary " + s->primary.id + " (removing async " + id + ")");
  }
  return nlohmann::json(nullptr);
}

Result<nlohmann::json> ScriptWorld::bootstrap(const nlohmann::json& args) {
  if (zk_.state().exists()) return usage("bootstrap", "the cluster state already exists");
  const std::vector<std::string> active = zk_.election().active();
  if (active.size() < 2) return usage("bootstrap", "needs at least 2 active peers");
  std::string primary = active[0];
  if (!args.empty()) {
    auto id = knownId(args[0]);
    if (!id) return usage("bootstrap", "unknown primary " + args[0].dump());
    primary = *id;
  }
  std::string sync;
  if (args.size() > 1) {
    auto id = knownId(args[1]);
    if (!id || *id == primary) return usage("bootstrap", "invalid sync " + args[1].dump());
    sync = *id;
  } else {
    for (const auto& a : active) {
      if (a != primary) {
        sync = a;
        break;
      }
    }
  }
  ClusterState s;
  s.primary = identities_.at(primary);
  s.sync = identities_.at(sync);
  for (const auto& a : active) {
    if (a != primary && a != sync) s.async.push_back(identities_.at(a));
  }
  return writeZk(s.toJson(), "bootstrap");
}

Result<nlohmann::json> ScriptWorld::startPeer() {
  if (driver_) return usage("startPeer", "the peer is already started");
  driver::DriverOptions o;
  o.identity = identities_.at(kNodeUnderTest);
  o.singleton = opts_.singleton;
  o.handoverWaitMs = 5000;
  o.rejoin = RejoinPolicy::kManual;  // Manatee's: a deposed peer waits for a rebuild
  o.syncReplaceAfterMs = 0;                 // no replication modelled: no sync acknowledges
  zk_.agentStarts(kNodeUnderTestHost);
  coordinator_ = std::make_unique<simworld::SimCoordinator>(zk_, kNodeUnderTestHost);
  postgres_ = std::make_unique<simworld::SimPostgres>(fleet_, kNodeUnderTestHost, postgresHooks());
  driver_ = std::make_unique<driver::Runner>(driver::Env{*this, *coordinator_, *postgres_, *this, nullptr}, o);
  driver_->start();
  return nlohmann::json(nullptr);
}

Result<nlohmann::json> ScriptWorld::catchUp() {
  auto s = zkState();
  if (!s) return usage("catchUp", "there is no cluster state");
  setWal(s->initWal.value() / pg_.wal.recordBytes() + kWalStep);
  log("pg     WAL caught up to " + pg_.wal.position().toString());
  return nlohmann::json(nullptr);
}

Result<nlohmann::json> ScriptWorld::depose() {
  auto s = zkState();
  if (!s || !s->sync) return usage("depose", "needs a cluster state with a sync");
  if (s->async.empty()) return usage("depose", "needs an async to become the new sync");
  ClusterState next = *s;
  next.generation += 1;
  next.deposed.push_back(s->primary);
  next.primary = *s->sync;
  next.sync = s->async.front();
  next.async.erase(next.async.begin());
  next.initWal = s->initWal.plus(kWalStep);
  next.freeze = nullptr;
  next.oneNodeWriteMode = false;
  next.promote = nullptr;
  return writeZk(next.toJson(), "depose (simulated sync " + s->sync->id + " takes over)");
}

Result<nlohmann::json> ScriptWorld::rebuild(const nlohmann::json& args) {
  auto s = zkState();
  if (args.empty() || !args[0].is_string()) return usage("rebuild", "which peer? (rebuild ID)");
  const std::string id = args[0].get<std::string>();
  if (!s) return usage("rebuild", "there is no cluster state");
  auto rebuilt = simworld::rebuiltState(*s, id);
  if (!rebuilt) return usage("rebuild", rebuilt.error());
  ClusterState next = std::move(rebuilt).value();
  if (id == kNodeUnderTest) {
    // dugong-adm rebuild beside the agent: postgres first runs as a standby of the primary.
    fleet_.rebuildAsStandby(kNodeUnderTestHost, kOthersHost, s->primary);
    pgConfigured_ = true;
    if (postgres_) postgres_->lookAtHealth();
    log("pg     rebuilt by the operator as a standby of " + s->primary.id);
  }
  // A simulated primary appends the rebuilt peer as an async (a real one does when it
  // sees the peer out of deposed).
  if (s->primary.id != kNodeUnderTest) next.async.push_back(identities_.at(id));
  return writeZk(next.toJson(), "rebuild of " + id);
}

Result<nlohmann::json> ScriptWorld::freeze(bool on) {
  auto s = zkState();
  if (!s) return usage(on ? "freeze" : "unfreeze", "there is no cluster state");
  ClusterState next = on ? simworld::frozenState(*s, {{"note", "frozen by simulator"}}) : simworld::unfrozenState(*s);
  return writeZk(next.toJson(), on ? "freeze" : "unfreeze");
}

Result<nlohmann::json> ScriptWorld::promote(const nlohmann::json& args) {
  auto s = zkState();
  if (!s) return usage("promote", "there is no cluster state");
  if (args.empty() || !args[0].is_object()) return usage("promote", "expects a promote object");
  nlohmann::json req = args[0];
  if (auto it = req.find("expireIn"); it != req.end()) {
    if (!it->is_number_integer()) return usage("promote", "expireIn must be a whole number of ms");
    req["expireTime"] = formatIso8601(q_.now() + it->get<int64_t>());
    req.erase("expireIn");
  }
  std::string what = "promote request " + req.dump();
  return writeZk(simworld::promoteState(*s, std::move(req)).toJson(), what);
}

Result<nlohmann::json> ScriptWorld::setClusterState(const nlohmann::json& args) {
  if (args.empty()) return usage("setClusterState", "expects a cluster state object");
  auto s = ClusterState::fromJson(args[0]);
  if (!s) return usage("setClusterState", "invalid cluster state, nothing written: " + s.error());
  // Peers named by the state become known identities, as they were given.
  PeerList named = s->async;
  named.insert(named.end(), s->deposed.begin(), s->deposed.end());
  named.push_back(s->primary);
  if (s->sync) named.push_back(*s->sync);
  for (const auto& p : named) {
    if (!identities_.count(p.id)) {
      ++identityCount_;
      identities_.emplace(p.id, p);
    }
  }
  // The primary of a cluster that exists already holds that cluster's data: its postgres
  // is set up (only a new cluster's first primary creates a data directory).
  const bool newCluster = s->generation == 1 && s->initWal == WalPosition();
  if (s->primary.id == kNodeUnderTest && !newCluster) pg_.setUp = true;
  return writeZk(args[0], "setClusterState");
}

nlohmann::json ScriptWorld::peerView() const {
  auto url = [](const std::optional<PeerIdentity>& p) { return p ? nlohmann::json(p->pgUrl) : nlohmann::json(nullptr); };
  nlohmann::json config = nullptr;
  if (pgConfigured_) {
    config = {{"role", pgRoleName(pg_.config.role)},
              {"upstream", url(pg_.config.upstream)},
              {"downstream", url(pg_.config.downstream)},
              {"restorePeer", url(pg_.config.restorePeer)}};
  }
  nlohmann::json view = {{"id", kNodeUnderTest}, {"role", "unknown"}, {"zkstate", nullptr}, {"zkpeers", nullptr}};
  if (driver_) {
    const Peer& peer = driver_->peer();
    view["role"] = roleName(peer.role());
    auto pending = peer.inspect()["pending"];
    if (!pending.empty()) view["pending"] = pending;
    if (peer.clusterState()) view["zkstate"] = summarizeState(*peer.clusterState());
    if (peer.activePeers()) view["zkpeers"] = idsOf(*peer.activePeers());
    if (auto why = peer.haltReason()) view["halted"] = *why;
  }
  view["pg"] = {{"config", config}, {"online", pg_.running}, {"xlog", pg_.wal.position().toString()}};
  return view;
}

nlohmann::json ScriptWorld::zkView(bool verbose) const {
  nlohmann::json state = nullptr;
  if (zk_.state().exists()) {
    auto s = zkState();
    state = verbose || !s ? nlohmann::json::parse(zk_.state().data()) : summarizeState(*s);
  }
  PeerList active = zk_.activePeers();
  return {{"clusterState", state}, {"activeNodes", verbose ? peersToJson(active) : idsOf(active)}};
}

}  // namespace dugong::sim
