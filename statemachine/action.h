// What the state machine asks the world to do. Peer::step returns a batch of these.
//
// Ordering rules, which the caller keeps by carrying actions out in the order given:
// - At most one WriteClusterState and one ApplyPgConfig are in flight: the state
//   machine emits the next one only after the previous one's completion event.
// - A takeover FENCES postgres, THEN reads the WAL position that becomes the new
//   generation's initWal, THEN writes the new generation, and only THEN reconfigures
//   postgres for the new role: the ApplyPgConfig that promotes postgres is emitted once
//   the StateWriteFinished{ok} of that generation has been stepped. The fence makes
//   sure no commit is acknowledged past initWal under the old topology, so a new sync
//   that has reached initWal holds every acknowledged commit.
// - ReadWal answers with a WalPositionRead; no write depends on a WAL position older
//   than the read that preceded it.
#pragma once

#include <cstdint>
#include <optional>
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

// Stop acknowledging commits under the current topology before a takeover reads its
// initWal; answered by PgFenced. On a primary: commits wait for `newSync` (it becomes
// the only synchronous standby name). On a standby: stop streaming from the upstream.
// A stopped postgres needs nothing. The fence holds until the next ApplyPgConfig, which
// the state machine emits if the takeover does not happen.
struct FencePg {
  std::optional<PeerIdentity> newSync;
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

using Action = std::variant<WriteClusterState, ApplyPgConfig, FencePg, ReadWal, StartTimer, LogDecision, Fatal>;

}  // namespace dugong
