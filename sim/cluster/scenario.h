// A simulation run's parameters and its fault plan, all derived from one seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "statemachine/time_format.h"

namespace dugong::clustersim {

// Only faults the design claims to survive (DESIGN.md, "Safety and liveness").
enum class FaultKind {
  kCrashPeer,           // the agent and its postgres die; restarted after `duration`
  kExpireSession,       // ZooKeeper expires the peer's session (e.g. a long pause)
  kPartitionZk,         // the peer cannot reach ZooKeeper for `duration` (postgres traffic still flows)
  kCrashPostgres,       // postgres alone dies and cannot start for `duration` (the agent restarts it);
                        // one of 8 s or more (1 in 7) hits the primary, which withdraws
  kSlowPostgres,        // postgres transitions take seconds for `duration`
  kDelayNotifications,  // ZooKeeper notifications reach the peer late for `duration`
  kStallReplication,    // the peer's postgres receives no WAL for `duration`
  kFreeze,              // operator: freeze the cluster
  kUnfreeze,            // operator: unfreeze it
  kPromoteValid,        // operator: a valid promote request (sync or an async, by `variant`)
  kPromoteInvalid,      // operator: an invalid one (wrong generation, expired, bad index, ...)
  kRebuildDeposed,      // operator: rebuild a deposed peer (dugong-adm rebuild)
  kCrashAfterWrite,     // the next peer to declare a new generation dies (agent and postgres)
                        // within `variant` % 200 ms after ZooKeeper applied its write;
                        // restarted after `duration`
  kCrashPgAfterFence,   // the next peer to fence its postgres (a takeover between its fence
                        // and its state write) has that postgres crash within `variant` % 100
                        // ms after the fence; it cannot start for `duration`; when
                        // (`variant` / 100) is odd, the peer is also cut off from ZooKeeper
                        // at that moment for 200 + (`variant` / 200) % 3000 ms
  kRestartPrimaryLateSync,  // the primary (agent and postgres) dies and restarts `duration` ms
                            // after its session expires, while the sync's notifications are
                            // late by more than that (a stalled agent): the sync may take over
                            // from a primary already running again on a new session
  kCrashAgent,          // the agent alone dies (killed, out of memory); its postgres runs on,
                        // writable if it was the primary; restarted after `duration`, one
                        // time in four with the failsafe turned off (or back on)
  kCutSyncCrashPrimary,  // the sync is cut off from ZooKeeper for `duration` (its postgres
                         // streams on), and the primary's postgres dies right after the
                         // fence that replaces it (as crash-pg-after-fence, always cut off):
                         // a sync change whose write may have landed, the old sync still
                         // able to acknowledge. Or (`variant` bit 32) the primary's postgres
                         // runs on, and the primary is cut off as ZooKeeper applies that
                         // write, past its agent's shutdown of postgres but within its session
  kFlapSync,            // the sync's session is expired twice, `duration` ms apart, while the
                        // primary's postgres is slow: a sync change is begun, abandoned
                        // (the sync is back) and begun again while the primary's postgres
                        // still carries out the abandonment
  kCutOffFollower,      // the ZooKeeper server the peer talks to is cut off from its leader:
                        // it answers the peer's pings for `duration` (syncLimit x tickTime)
                        // while the leader expires the session (only a lease sees it)
  kLeaderChange,        // the ZooKeeper leader goes: every connection is closed at once, no
                        // leader for `duration` ms, then every session's timeout starts afresh
  kUnhealthyServing,    // postgres serves and commits, but the agent's health check (a fresh
                        // connection) fails for `duration` (connection slots exhausted,
                        // overload); one of 8 s or more hits the primary, which withdraws
                        // while its postgres still serves. Drawn apart (scenario.cc)
  kRestoreStaleSync,    // the sync's host goes down and its data directory is restored from a
                        // copy on another timeline that forked before the generation's
                        // initWal and runs past it (a backup of another history, its
                        // newest timeline's history file not archived), and the primary's
                        // host dies meanwhile; the sync is back `duration` ms later and
                        // must not take over with that WAL. One time in three the primary's
                        // host instead, back at once: its agent must refuse that data.
                        // Drawn apart (scenario.cc)
  kStopAgent,           // the agent's process group is stopped (SIGSTOP, Ctrl-Z) for `duration`:
                        // it steps nothing and its ZooKeeper client sends nothing; postgres
                        // runs on, and the watchdog (a session of its own) shuts a primary's
                        // down as for a dead agent; then it continues where it was. Drawn
                        // apart (scenario.cc)
  kQuorumLoss,          // the ensemble loses its quorum for `duration` ms (no leader: nothing is
                        // confirmed or written; then a leader election refreshes every session),
                        // by `variant` % 5: alone; with the link between the primary and its sync
                        // cut for a while (the failsafe's request and the replication); with the
                        // primary still cut off from ZooKeeper after the quorum is back; both; or
                        // instead the primary and its sync each cut off from ZooKeeper while it
                        // runs on, the sync back first. Drawn apart from the mix (scenario.cc)
  kRaiseMaxConnections,  // operator: max_connections raised cluster-wide (but on the host of `peer`,
                         // which keeps its own lower value in its dugong.yaml), then `dugong-adm
                         // restart --rolling` as for a raise: the standbys restart, then a
                         // switchover to the sync; the new primary runs the higher value.
                         // Drawn apart (scenario.cc)
  kPartialRecordTakeover,  // the primary dies while its sync has received part of a record and
                           // (variant) its replay lags by up to `duration` ms: the sync's
                           // takeover reads its WAL's end under a fence. Drawn apart (scenario.cc)
  kSuspendHost,  // the peer's whole host is suspended for `duration` (agent, postgres, watchdog and its
                 // ZooKeeper client frozen; the rest of the world runs on); on resuming, its clock has
                 // counted the span (CLOCK_BOOTTIME) and the agent's timers are late. By `variant`: the
                 // primary's host (two times in three), and its network back up to 2 session timeouts
                 // after the resume (one time in two). Drawn apart (scenario.cc)
  // Quorum mode only (docs/decisions/0079-quorum-commit.md section 7; faults/quorum.cc),
  // drawn apart (scenario.cc):
  kLaggingMemberPrimaryDies,  // a member's stream held for `duration` (0.2-5 s); the primary's host
                              // dies during the hold: the members hold different WAL
  kBestMemberDies,  // the primary's host dies; then the member with the most WAL dies right after
                    // its report is published or (`variant` odd) right after its takeover write
                    // lands; both restart after `duration`
  kStepInterrupted,  // the next membership step's fence holds; the primary (`variant` even) or a
                     // member of the step's set dies before the step is written; restarts after
                     // `duration`
  // Standby seeds only (docs/decisions/0083-standby-cluster.md 8.2; faults/standby.cc),
  // drawn apart, from the standby stream:
  kSourceFailover,      // the source's primary host dies; its sync is promoted after a drawn delay
  kSourceSwitchover,    // the source switches over to its sync (a clean stop of its primary)
  kSourceSyncReplaced,  // the source's async becomes its sync, the old sync its async
  kSourceCut,           // the source's hosts and its ensemble unreachable from this cluster's hosts
                        // for `duration` (source-heal after it)
  kPromoteCluster,      // the source cut off for good (its site gone), then `variant` % 4000 ms
                        // later the operator's promote-cluster --source-gone
  kPlannedPromoteCluster,  // the source demoted toward this cluster, then `variant` % 3000 ms later
                           // the operator's promote-cluster (no --source-gone); with a
                           // `duration`, the leader's stream held that long around the demotion
  kWrongSourceGone,     // the operator's promote-cluster --source-gone while the source is
                        // writable and in sight: refused (0083 6.1 N2)
};
constexpr int kFaultKinds = 37;
const char* faultName(FaultKind kind);

struct Fault {
  int index = 0;  // position in the plan; what --faults selects
  EpochMs at = 0;
  FaultKind kind = FaultKind::kCrashPeer;
  int peer = 0;           // the peer it hits (index into the peers), when it hits one
  int64_t duration = 0;   // ms, for faults that last
  uint64_t variant = 0;   // free choice for the fault (which promote, how slow, ...)

  std::string describe() const;
};

struct Scenario {
  uint64_t seed = 0;
  int peers = 3;
  int64_t sessionTimeoutMs = 3000;
  int64_t tickTimeMs = 1000;  // the ensemble's, at most half the session timeout
  // The agents' ZooKeeper clients confirm leases (agent::CoordinatorLease); one seed in
  // four runs without, as a coordinator that sends none (the driver's other rule).
  bool lease = true;
  // The failsafe (driver/failsafe.h): on in most seeds with leases.
  bool failsafe = false;
  // The agents' `rejoin`: rewind (the default) in half the seeds, follow (Manatee's
  // conservative choice) in the others; from a stream of its own.
  bool rejoinRewind = false;
  // Quorum mode (docs/decisions/0079-quorum-commit.md section 7): the agents run
  // `replication: {mode: quorum, k, size}` when quorumK > 0; sync mode (Manatee's) when 0.
  // From a stream of its own: a seed not drawn quorum keeps its plan and its run.
  int quorumK = 0;
  int quorumSize = 0;
  // A standby cluster (docs/decisions/0083-standby-cluster.md 8.2): the cluster under test
  // follows a scripted dugong source (sim/world/sim_source.h). From a stream of its own,
  // never with quorum mode (a standby state in quorum mode is not designed): a seed not
  // drawn standby keeps its plan and its run.
  bool standby = false;
  EpochMs start = 0;           // virtual wall clock at time 0
  int64_t faultPhaseMs = 0;    // faults happen in [0, faultPhaseMs)
  int64_t convergeBoundMs = 0;  // after the faults stop, read-write again within this
  std::vector<Fault> faults;
};

// Virtual time starts at 2026-01-01T00:00:00Z.
constexpr EpochMs kStartOfTime = 1767225600000;

Scenario makeScenario(uint64_t seed);

}  // namespace dugong::clustersim
