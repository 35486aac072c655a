// The driver's environment: everything the agent's logic (agent/driver.h) needs from
// the world, as abstract interfaces. The daemon implements them on Asio, ZooKeeper and
// libpq (agent/daemon_env.h); the simulators on virtual time (tools/sim/); the driver's
// unit tests on a hand-driven fake.
//
// Contract shared by every implementation:
// - ONE loop. Every method is called on the driver's loop, and every callback runs on
//   it, never inside the call that started the operation (always later).
// - Exactly once. Each operation's callback runs exactly once, unless the object that
//   owns it is destroyed first (then never). A cancelled or restarted timer does not
//   fire for its earlier start.
// - Nothing here blocks the loop, destructors included.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "statemachine/action.h"
#include "statemachine/cluster_state.h"
#include "statemachine/event.h"
#include "statemachine/identity.h"
#include "statemachine/pg_config.h"
#include "statemachine/result.h"
#include "statemachine/time_format.h"

namespace dugong::agent {

// ---- clock and timers ---------------------------------------------------------------

class Timer {
 public:
  virtual ~Timer() = default;
  // Runs `fired` once, `delayMs` from now. Starting it again replaces the earlier start.
  virtual void start(int64_t delayMs, std::function<void()> fired) = 0;
  virtual void cancel() = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time, for the state machine (promote requests expire at a wall time).
  virtual EpochMs wallMs() const = 0;
  // A clock that never goes back, for durations (how long postgres has been down).
  virtual int64_t monotonicMs() const = 0;
  virtual std::unique_ptr<Timer> newTimer() = 0;
  // Runs `fn` on the loop soon, after the current callback returns.
  virtual void post(std::function<void()> fn) = 0;
};

// ---- the coordinator (ZooKeeper) ------------------------------------------------------

// What the coordinator tells the driver while it is a member.
struct CoordinatorCallbacks {
  // ZkInitialized (after every new session, with everything re-read), ActivePeersChanged
  // and ClusterStateChanged, in the order they happened.
  std::function<void(Event)> onEvent;
  // Room for more: a connection lost or regained while the session stays valid
  // (issue 10) becomes one more callback here, which implementations that do not
  // report it leave unset.
};

// What the status endpoint shows about the membership.
struct CoordinatorStatus {
  bool member = false;       // joined and not left
  bool connected = false;    // talking to a server now
  bool initialized = false;  // ZkInitialized was delivered for the current session
  int64_t sessionId = 0;
  std::string electionNode;
  std::string lastError;
};

class Coordinator {
 public:
  virtual ~Coordinator() = default;
  // Becomes a member: opens a session and creates this peer's election node; the
  // callbacks run until leave(). Errors (invalid options) are returned at once and
  // nothing is joined; connection problems are retried, never returned.
  virtual Result<bool> join(CoordinatorCallbacks callbacks) = 0;
  // Leaves at once (the election node goes with the session). A write in flight is
  // answered with a failure; no other callback runs afterwards. Harmless when not a
  // member.
  virtual void leave() = 0;
  // Test-and-set of the cluster state (expectedVersion -1: create), with a history
  // entry. `done` runs exactly once, also when not a member (a failure).
  virtual void putClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                               std::function<void(StateWriteFinished)> done) = 0;
  virtual CoordinatorStatus status() const = 0;
};

// ---- postgres -------------------------------------------------------------------------

class Postgres {
 public:
  virtual ~Postgres() = default;
  // Looks at the local postgres for the first time (and again after a rebuild).
  virtual void init(std::function<void(PgInitialized)> done) = 0;
  // Reconfigures and starts/stops/promotes/rebuilds postgres to match `config`.
  virtual void apply(const PgConfig& config, std::function<void(PgConfigApplied)> done) = 0;
  // FencePg (statemachine/action.h).
  virtual void fence(const std::optional<PeerIdentity>& newSync, std::function<void(PgFenced)> done) = 0;
  virtual void readWal(std::function<void(WalPositionRead)> done) = 0;
  // Checks health periodically until stopHealthCheck(); `onChange` runs for the first
  // result and then for each change between healthy and unhealthy.
  virtual void startHealthCheck(std::function<void(bool healthy, const std::string& detail)> onChange) = 0;
  virtual void stopHealthCheck() = 0;
  // Room for more: stopping and resuming writes without a transition (issue 10) is
  // one more operation of this shape: (arguments, exactly-once callback).
};

// ---- log ------------------------------------------------------------------------------

class LogSink {
 public:
  virtual ~LogSink() = default;
  // One decision or observation, in plain words.
  virtual void write(LogLevel level, const std::string& line) = 0;
};

// The driver's view of the world. Everything is owned elsewhere and outlives the driver.
struct Env {
  Clock& clock;
  Coordinator& coordinator;
  Postgres& postgres;
  LogSink& log;
};

}  // namespace dugong::agent
