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
// Quorum mode (docs/decisions/0079-quorum-commit.md), the same rule for a set:
// - A member PUBLISHES its takeover report only after its fence (PgFenced{ok}) and its
//   read under that fence (WalPositionRead of the fenced run): a report stands for a
//   member that acknowledges nothing more. It WITHDRAWS the report (PublishReport with
//   none), and waits for ReportPublished{ok}, BEFORE any ApplyPgConfig that would lift
//   the fence: no takeover write can count a member that streams again. A taker may
//   promote before its withdrawal lands: its write, which checked its report, landed.
// - A takeover's WriteClusterState carries one check per report it counted (`checks`):
//   it lands only if none was withdrawn or changed since it was read.
// - A membership step that makes postgres acknowledge less easily (remove a member,
//   raise k) FENCES first (FencePg::quorum: reload, verify, catch up) and WRITES after;
//   one that makes it acknowledge more easily (add a member, lower k) WRITES first and
//   is APPLIED only once its StateWriteFinished{ok} has been stepped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "statemachine/cluster_state.h"
#include "statemachine/event.h"
#include "statemachine/pg_config.h"
#include "statemachine/takeover_report.h"

namespace dugong {

// Test-and-set write of the cluster state; answered by StateWriteFinished.
// An election node whose data version the write checks, in the same multi-op.
struct ElectionNodeCheck {
  std::string peerId;
  int32_t version = -1;
  bool operator==(const ElectionNodeCheck&) const = default;
};

struct WriteClusterState {
  ClusterState state;
  int32_t expectedVersion = -1;  // -1: create the node, which must not exist
  std::string reason;            // one line for the log and the history
  // A quorum takeover's counted reports: the write fails (as a lost race) if one of these
  // election nodes is gone or has another version. Empty for every other write.
  std::vector<ElectionNodeCheck> checks = {};
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
// Quorum mode, a primary's membership step that makes postgres acknowledge less easily
// (0079 section 5.2): `quorum` is the rule after the step: reload `ANY k (members)`,
// verify it, end every member's walsender if `endWalsenders` (a raise of k), and wait
// until the k-th flush among the members reaches the primary's flush at the fence.
// Written after PgFenced{ok}; a failed fence is undone by applying the state's rule.
struct FencePg {
  std::optional<PeerIdentity> newSync;
  std::optional<Quorum> quorum = std::nullopt;
  bool endWalsenders = false;
};

// Quorum mode: publish this member's takeover report in its election node (none:
// withdraw it); answered by ReportPublished. See the ordering rules above.
struct PublishReport {
  std::optional<TakeoverReport> report;
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

using Action =
    std::variant<WriteClusterState, ApplyPgConfig, FencePg, ReadWal, StartTimer, LogDecision, Fatal, PublishReport>;

}  // namespace dugong
