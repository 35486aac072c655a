// The simulated world of dugong-sim: the agent's real driver and state machine for the
// peer under test (node1), on a simulated ZooKeeper and a simulated postgres, in
// virtual time. Everything is deterministic. The world is the driver's environment
// (driver/env.h).
//
// Conventions (shared/conformance/manatee/README.md), relied on by
// scenario scripts:
// - The N-th identity created is node<N> (or the given name), ip 10.0.0.<N>, pgUrl
//   tcp://postgres@10.0.0.<N>:5432/postgres, zoneId = id. node1 exists from the start.
// - ZooKeeper is the simulated ZooKeeper of both simulators (sim/world/
//   sim_coordinator.h) with fixed delays and no faults: each change reaches the peer on
//   the next step of the event loop; the peer's client initialises 100 ms after
//   startPeer; the peer's writes take 100 ms (a write's own notification comes just
//   before its answer).
// - Postgres is the simulated postgres of both simulators (sim/world/
//   sim_postgres.h) with fixed steps: it initialises 100 ms after startPeer (not
//   online, not set up); a reconfiguration takes 1000 ms, and 1000 ms more when it
//   starts or stops postgres; reading the WAL takes 10 ms and fails offline. When
//   postgres comes online or is reconfigured while this peer is the primary of the
//   current state, its WAL advances by 10 (the scripted clients' commits). A fence
//   (before a takeover reads initWal) takes 10 ms and moves no WAL: a fenced postgres
//   acknowledges nothing. Postgres' health check looks when it starts and after each
//   reconfiguration (it does not poll: a script runs until nothing is pending). The
//   simulated peers' postgres holds the same WAL as node1's: they stream nothing, and
//   a standby set up from them copies nothing.
// - The peer under test is configured as Manatee's peers behave: a deposed peer waits
//   for `rebuild` (rejoin: manual).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "driver/driver.h"
#include "statemachine/peer.h"
#include "sim/world/event_queue.h"
#include "sim/world/rng.h"
#include "sim/world/sim_coordinator.h"
#include "sim/world/sim_postgres.h"
#include "sim/world/trace_sink.h"
#include "sim/world/zookeeper.h"

namespace dugong::sim {

class ScriptWorld final : driver::Clock, driver::LogSink, simworld::TraceSink {
 public:
  struct Options {
    bool singleton = false;   // the peer under test runs in one-node-write mode
    EpochMs startTime = 1767225600000;  // 2026-01-01T00:00:00Z
  };
  // Called for every line the world logs (peer decisions, events, actions).
  using TraceSink = std::function<void(EpochMs now, const std::string& line)>;

  explicit ScriptWorld(Options options);

  // Runs a command; the result is JSON (null for commands that print nothing), or an
  // error message.
  Result<nlohmann::json> run(const std::string& cmd, const nlohmann::json& args);

  // Advances virtual time by `ms`, running everything due.
  void advance(int64_t ms);
  // Runs until nothing is pending; false if that takes more than `limitMs`.
  bool runUntilRest(int64_t limitMs);

  EpochMs now() const { return q_.now(); }
  void setTrace(TraceSink sink) { trace_ = std::move(sink); }

 private:
  void schedule(int64_t delayMs, std::function<void()> fn);
  // Hands an event to the driver through `call`, traced.
  void deliver(const Event& event, const std::function<void()>& call);

  // The driver's environment.
  EpochMs wallMs() const override { return q_.now(); }
  int64_t monotonicMs() const override { return q_.now(); }
  std::unique_ptr<driver::Timer> newTimer() override;
  void post(std::function<void()> fn) override { schedule(0, std::move(fn)); }
  void write(LogLevel level, const std::string& line) override;
  void record(char kind, std::string text) override;

  // Postgres
  simworld::SimPostgresHooks postgresHooks();
  // The simulated peers' postgres holds node1's WAL again.
  void mirrorWal() { othersPg_.wal = pg_.wal; }
  void setWal(uint64_t records);

  // ZooKeeper
  simworld::ZkHooks zkHooks();
  Result<nlohmann::json> writeZk(nlohmann::json state, const std::string& why);
  std::optional<ClusterState> zkState() const;
  bool simulatedPrimaryRunsCluster(const ClusterState& s) const;

  // Identities
  const PeerIdentity& identity(const std::string& id);
  std::optional<std::string> knownId(const nlohmann::json& arg) const;

  // Commands
  Result<nlohmann::json> addPeer(const nlohmann::json& args);
  Result<nlohmann::json> rmPeer(const nlohmann::json& args);
  Result<nlohmann::json> bootstrap(const nlohmann::json& args);
  Result<nlohmann::json> startPeer();
  Result<nlohmann::json> depose();
  Result<nlohmann::json> rebuild(const nlohmann::json& args);
  Result<nlohmann::json> freeze(bool on);
  Result<nlohmann::json> promote(const nlohmann::json& args);
  Result<nlohmann::json> setClusterState(const nlohmann::json& args);
  Result<nlohmann::json> catchUp();
  nlohmann::json peerView() const;
  nlohmann::json zkView(bool verbose) const;

  void log(const std::string& line);

  Options opts_;
  simworld::EventQueue q_;
  TraceSink trace_;

  std::map<std::string, PeerIdentity> identities_;
  int identityCount_ = 0;

  // Simulated ZooKeeper: node1 is its one host with a client (once started); the
  // simulated peers hold a session each, with no client. Every delay is fixed.
  simworld::Rng rng_{0};
  simworld::ZkEnsemble zk_;
  std::unique_ptr<simworld::SimCoordinator> coordinator_;  // node1's client, once started

  // Simulated postgres: node1's, and one that stands for the simulated peers'. Every
  // step is fixed.
  simworld::PgServer pg_;
  simworld::PgServer othersPg_;
  simworld::PgFleet fleet_;
  std::unique_ptr<simworld::SimPostgres> postgres_;  // node1's adapter, once started
  bool pgConfigured_ = false;                         // a configuration was applied
  uint64_t nextCommit_ = 0;

  // The peer under test: its driver, on the environment above.
  std::unique_ptr<driver::Runner> driver_;
};

}  // namespace dugong::sim
