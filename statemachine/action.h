// What the state machine asks the world to do. Peer::step returns a batch of these.
//
// Ordering rules, which the caller keeps by carrying actions out in the order given:
// - At most one WriteClusterState and one ApplyPgConfig are in flight: the state
//   machine emits the next one only after the previous one's completion event.
// - A takeover writes the new generation BEFORE postgres is reconfigured for the new
//   role: the ApplyPgConfig that promotes postgres is only emitted once the
//   StateWriteFinished{ok} of that generation has been stepped.
// - ReadWal answers with a WalPositionRead; no write depends on a WAL position older
//   than the read that preceded it.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "statemachine/cluster_state.h"
#include "statemachine/event.h"
#include "statemachine/pg_config.h"

namespace dugong {

// Test-and-set write of the cluster state; answered by StateWriteFinished.
struct WriteClusterState {
  ClusterState state;
  int32_t expectedVersion = -1;  // -1: create the node, which must not exist
  std::string reason;            // one line for the log and the history
};

// Reconfigure postgres, then start or stop it to match; answered by PgConfigApplied.
struct ApplyPgConfig {
  PgConfig config;
};

// Read the local WAL position; answered by WalPositionRead.
struct ReadWal {};

// Deliver TimerFired{id} after delayMs. The state machine does not start a timer with
// an id that is still pending.
struct StartTimer {
  TimerId id;
  int64_t delayMs = 0;
};

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// One decision, with its reason, in plain words.
struct LogDecision {
  LogLevel level = LogLevel::kInfo;
  std::string message;
};

// This peer cannot go on (a configuration that contradicts the cluster). The peer
// takes no further action; the agent reports the reason and stops.
struct Fatal {
  std::string reason;
};

using Action = std::variant<WriteClusterState, ApplyPgConfig, ReadWal, StartTimer, LogDecision, Fatal>;

}  // namespace dugong
