// What the world tells the state machine. The adapters (zk/, pg/, the agent's timers)
// and the simulators produce these; Peer::step consumes them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include "statemachine/data_state.h"
#include "statemachine/identity.h"
#include "statemachine/quorum.h"
#include "statemachine/standby.h"
#include "statemachine/takeover_report.h"
#include "statemachine/timeline_history.h"
#include "statemachine/wal_position.h"

namespace dugong {

// The cluster-state node as read from ZooKeeper. The state machine parses and
// validates `data` itself, so that an invalid state is never acted upon.
struct StateNode {
  bool exists = false;
  std::string data;      // the node's bytes, when it exists
  int32_t version = -1;  // the node's version, for the next test-and-set
};

// A ZooKeeper session was established (first start, or again after expiry): everything
// the peer knew of ZooKeeper is replaced. `active` is in session order.
struct ZkInitialized {
  StateNode state;
  PeerList active;
  // The data states the active peers published in their election nodes (a peer
  // publishes one only while the cluster has no state; see data_state.h).
  PeerDataStates data = {};
  // The session is one a previous run of this agent held (re-attached after an agent
  // restart): it never expired, so no takeover can have been decided on its absence.
  bool sessionKept = false;
  // The active peers that publish in their election nodes that their postgres does not
  // stream: it is not a running standby that has streamed from its configured upstream
  // since it started (a rebuild, a standby that cannot follow; docs/state-machine.md
  // "Choosing the new sync"). A peer that publishes nothing about it (an older agent, an
  // environment that does not tell) is not in the set: it counts as streaming.
  std::set<std::string> notStreaming = {};
  // Quorum mode (docs/decisions/0079-quorum-commit.md 4.2): the takeover reports the
  // active peers publish in their election nodes, by peer id, each with its node's data
  // version (TakeoverReport::nodeVersion), which a takeover's write checks. This peer's
  // own is among them: an agent restarted with its session finds its report here.
  TakeoverReports reports = {};
};

// The set of peers with a live session changed, or what they publish did. In session order.
struct ActivePeersChanged {
  PeerList active;
  PeerDataStates data = {};  // as in ZkInitialized
  std::set<std::string> notStreaming = {};  // as in ZkInitialized
  TakeoverReports reports = {};  // as in ZkInitialized
};

// The cluster-state node changed (or was deleted: exists = false).
struct ClusterStateChanged {
  StateNode state;
};

// The pg adapter looked at the local postgres for the first time.
struct PgInitialized {
  bool online = false;  // running
  bool setUp = false;   // the data directory has been set up before
};

// The last ApplyPgConfig finished.
struct PgConfigApplied {
  bool ok = false;
  std::string error;    // when !ok
  bool online = false;  // whether postgres runs now
  // When !ok: refused because the data directory holds data the cluster may need (another
  // database system, or WAL its source lacks). Retrying cannot change that; only an
  // operator can (the error says how), so the peer halts instead of retrying.
  bool refused = false;
};

// Identifies one run of postgres (e.g. its postmaster's start time); 0 when postgres
// is not running. A fence holds only as long as the run that was fenced.
using PgInstance = uint64_t;

// The last FencePg finished. On failure nothing is assumed about postgres' state.
struct PgFenced {
  bool ok = false;
  std::string error;      // when !ok
  PgInstance instance = 0;  // the run that is fenced (0: postgres is not running)
  // A standby leader's fence (it stops streaming from its source) also asks the source,
  // once streaming has stopped, what the leader's own promote-cluster check needs (0083
  // 6.2 step 1; phase 4 as built): whether it reached a writable host. Unset where the
  // fence did not ask (not a standby leader; a world that cannot tell): a promote-cluster
  // then counts the source as not reached, which only `--source-gone` lets through.
  std::optional<SourceObservation> source = std::nullopt;
};

// The last WriteClusterState finished.
struct StateWriteFinished {
  bool ok = false;
  std::string error;        // when !ok
  bool lostRace = false;    // another writer changed the state first
  int32_t newVersion = -1;  // when ok
  // Refused by the driver before it reached ZooKeeper (withdrawn, or another write of
  // its own in flight): it did not land, as a lost race.
  bool notSent = false;
};

// The last ReadWal finished.
struct WalPositionRead {
  std::optional<WalPosition> position;  // absent on error
  std::string error;
  PgInstance instance = 0;  // the run that answered
  // The timelines of the WAL up to `position`; absent where the world cannot tell (the
  // scripted simulator), and a takeover then records no initTimeline.
  std::optional<TimelineHistory> history = std::nullopt;
};

// The last PublishReport finished: this peer's election node holds the report asked for
// (or none, for a withdrawal) at data version `nodeVersion`. On failure nothing is
// assumed: the node may hold either.
struct ReportPublished {
  bool ok = false;
  std::string error;         // when !ok
  int32_t nodeVersion = -1;  // when ok
};

// What the cluster configuration wants of replication (its `replication` block, 0079
// section 2): Manatee's one sync, or a quorum of k out of `size` members. Delivered at
// start and on each change; absent, the primary keeps the state's mode, k and size.
struct ReplicationWanted {
  ReplicationMode mode = ReplicationMode::kSync;
  int k = 1;
  int size = 2;
};

// The primary's agent watches its sync's acknowledgements (the sync's walsender and its
// flush position while commits wait for it) and says when that changes. A sync that keeps
// its ZooKeeper session but acknowledges nothing (the link between the two cut, its
// postgres hung, its disk full) stalls every commit: the primary replaces it.
// In quorum mode there is one per member: `syncId` is the member this is about (commits do
// not wait on one member; its verdict is whether it acknowledges, 0079 section 6.2).
struct SyncAcknowledgement {
  std::string syncId;          // the sync (quorum mode: the member) this is about
  bool acknowledging = true;
  std::string detail;          // when not: what the agent saw, for the log and the history
};

// A standby cluster of a `dugong` source (docs/decisions/0083 3.3; phase 5 as built): what
// this agent's read-only session to the source's ensemble saw (`reachable`, the source's
// state, whether its primary has an election node), and how this cluster is named in its
// own ensemble, which a source demoted toward it names in its standby.source (0083 6.1,
// the planned case). Delivered by the agent at each change of what it sees and after
// each ZkInitialized and ClusterStateChanged (so that a fresh state machine has it).
struct SourceObserved {
  SourceObservation seen;
  std::string cluster;
  std::string chroot;
  std::string root;
};

enum class TimerId { kRetryEvaluation, kRetryPgApply };
const char* timerName(TimerId id);

struct TimerFired {
  TimerId id;
};

using Event = std::variant<ZkInitialized, ActivePeersChanged, ClusterStateChanged, PgInitialized, PgConfigApplied,
                           PgFenced, StateWriteFinished, WalPositionRead, TimerFired, SyncAcknowledgement,
                           ReportPublished, ReplicationWanted, SourceObserved>;

// One line for a trace or a log: "active [a, b]", "write ok v7", ... `stateText` names a
// state node (default: "v<version>", or "none").
std::string describeEvent(const Event& event,
                          const std::function<std::string(const StateNode&)>& stateText = nullptr);

}  // namespace dugong
