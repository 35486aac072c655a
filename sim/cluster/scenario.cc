#include "sim/cluster/scenario.h"

#include <algorithm>
#include <array>
#include <utility>

#include "sim/world/rng.h"

namespace dugong::clustersim {

using simworld::Rng;

const char* faultName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kCrashPeer:
      return "crash-peer";
    case FaultKind::kExpireSession:
      return "expire-session";
    case FaultKind::kPartitionZk:
      return "partition-zk";
    case FaultKind::kCrashPostgres:
      return "crash-postgres";
    case FaultKind::kSlowPostgres:
      return "slow-postgres";
    case FaultKind::kDelayNotifications:
      return "delay-notifications";
    case FaultKind::kStallReplication:
      return "stall-replication";
    case FaultKind::kFreeze:
      return "freeze";
    case FaultKind::kUnfreeze:
      return "unfreeze";
    case FaultKind::kPromoteValid:
      return "promote-valid";
    case FaultKind::kPromoteInvalid:
      return "promote-invalid";
    case FaultKind::kRebuildDeposed:
      return "rebuild-deposed";
    case FaultKind::kCrashAfterWrite:
      return "crash-after-write";
    case FaultKind::kCrashPgAfterFence:
      return "crash-pg-after-fence";
    case FaultKind::kRestartPrimaryLateSync:
      return "restart-primary-late-sync";
    case FaultKind::kCrashAgent:
      return "crash-agent";
    case FaultKind::kCutSyncCrashPrimary:
      return "cut-sync-crash-primary";
    case FaultKind::kFlapSync:
      return "flap-sync";
    case FaultKind::kCutOffFollower:
      return "cut-off-follower";
    case FaultKind::kLeaderChange:
      return "leader-change";
    case FaultKind::kUnhealthyServing:
      return "unhealthy-serving";
    case FaultKind::kRestoreStaleSync:
      return "restore-stale-sync";
    case FaultKind::kStopAgent:
      return "stop-agent";
    case FaultKind::kQuorumLoss:
      return "quorum-loss";
    case FaultKind::kRaiseMaxConnections:
      return "raise-max-connections";
    case FaultKind::kPartialRecordTakeover:
      return "partial-record-takeover";
    case FaultKind::kSuspendHost:
      return "suspend-host";
    case FaultKind::kLaggingMemberPrimaryDies:
      return "lagging-member-primary-dies";
    case FaultKind::kBestMemberDies:
      return "best-member-dies";
    case FaultKind::kStepInterrupted:
      return "step-interrupted";
    case FaultKind::kSourceFailover:
      return "source-failover";
    case FaultKind::kSourceSwitchover:
      return "source-switchover";
    case FaultKind::kSourceSyncReplaced:
      return "source-sync-replaced";
    case FaultKind::kSourceCut:
      return "source-cut";
    case FaultKind::kPromoteCluster:
      return "promote-cluster";
    case FaultKind::kPlannedPromoteCluster:
      return "planned-promote-cluster";
    case FaultKind::kWrongSourceGone:
      return "wrong-source-gone";
  }
  return "?";
}

std::string Fault::describe() const {
  std::string s = "#" + std::to_string(index) + " " + faultName(kind);
  switch (kind) {
    case FaultKind::kFreeze:
    case FaultKind::kUnfreeze:
    case FaultKind::kPromoteValid:
    case FaultKind::kPromoteInvalid:
    case FaultKind::kRebuildDeposed:
    case FaultKind::kSourceFailover:
    case FaultKind::kSourceSwitchover:
    case FaultKind::kSourceSyncReplaced:
    case FaultKind::kWrongSourceGone:
      return s;
    case FaultKind::kPlannedPromoteCluster:
      return s + " (promote-cluster " + std::to_string(variant % 3000) + " ms after the source's demotion" +
             (duration > 0 ? ", the leader's stream held " + std::to_string(duration) + " ms" : std::string()) + ")";
    case FaultKind::kSourceCut:
      return s + " (healed after " + std::to_string(duration) + " ms)";
    case FaultKind::kPromoteCluster:
      return s + " (--source-gone " + std::to_string(variant % 4000) + " ms after the source site is gone)";
    case FaultKind::kCrashAfterWrite:
      return s + " (restarts after " + std::to_string(duration) + " ms)";
    case FaultKind::kCrashPgAfterFence:
      return s + " (postgres cannot start for " + std::to_string(duration) + " ms)";
    case FaultKind::kRestartPrimaryLateSync:
      return s + " (restarts " + std::to_string(duration) + " ms after its session expires)";
    case FaultKind::kCutSyncCrashPrimary:
      return s + " (the sync cut off for " + std::to_string(duration) + " ms)";
    case FaultKind::kFlapSync:
      return s + " (again after " + std::to_string(duration) + " ms)";
    case FaultKind::kLeaderChange:
      return s + " (an election of " + std::to_string(duration) + " ms)";
    case FaultKind::kRestoreStaleSync:
      return s + " (the sync back after " + std::to_string(duration) + " ms)";
    case FaultKind::kRaiseMaxConnections:
      return s + " (node" + std::to_string(peer + 1) + " keeps its own value)";
    case FaultKind::kPartialRecordTakeover:
      return s + " (the sync's replay " + std::to_string(duration) + " ms behind)";
    case FaultKind::kLaggingMemberPrimaryDies:
      return s + " (a member held for " + std::to_string(duration) + " ms)";
    case FaultKind::kBestMemberDies:
    case FaultKind::kStepInterrupted:
      return s + " (restarts after " + std::to_string(duration) + " ms)";
    case FaultKind::kQuorumLoss: {
      static const char* const kHow[] = {"", ", the primary-sync link cut a while", ", the primary cut off after it",
                                         ", the link cut and the primary cut off after it",
                                         " (instead: the primary and its sync cut off from ZooKeeper, the sync back first)"};
      return s + " for " + std::to_string(duration) + " ms" + kHow[variant % 5];
    }
    default:
      break;
  }
  s += " node" + std::to_string(peer + 1);
  if (duration > 0) s += " for " + std::to_string(duration) + " ms";
  return s;
}

namespace {

// The fault mix: relative weights.
constexpr std::array<std::pair<FaultKind, int>, kFaultKinds> kMix = {{
    {FaultKind::kCrashPeer, 18},
    {FaultKind::kExpireSession, 14},
    {FaultKind::kPartitionZk, 14},
    {FaultKind::kCrashPostgres, 10},
    {FaultKind::kSlowPostgres, 6},
    {FaultKind::kDelayNotifications, 8},
    {FaultKind::kStallReplication, 8},
    {FaultKind::kFreeze, 3},
    {FaultKind::kUnfreeze, 4},
    {FaultKind::kPromoteValid, 6},
    {FaultKind::kPromoteInvalid, 4},
    {FaultKind::kRebuildDeposed, 5},
    {FaultKind::kCrashAfterWrite, 8},
    {FaultKind::kCrashPgAfterFence, 6},
    {FaultKind::kRestartPrimaryLateSync, 5},
    {FaultKind::kCrashAgent, 10},
    {FaultKind::kCutSyncCrashPrimary, 5},
    {FaultKind::kFlapSync, 5},
    {FaultKind::kCutOffFollower, 8},
    {FaultKind::kLeaderChange, 6},
    {FaultKind::kUnhealthyServing, 0},  // drawn apart (makeScenario), as the quorum loss
    {FaultKind::kRestoreStaleSync, 0},  // drawn apart
    {FaultKind::kStopAgent, 0},  // drawn apart
    {FaultKind::kQuorumLoss, 0},  // drawn apart (makeScenario), leaving the rest of the plan as it was
    {FaultKind::kRaiseMaxConnections, 0},  // drawn apart
    {FaultKind::kPartialRecordTakeover, 0},  // drawn apart
    {FaultKind::kSuspendHost, 0},  // drawn apart
    {FaultKind::kLaggingMemberPrimaryDies, 0},  // drawn apart, quorum seeds only
    {FaultKind::kBestMemberDies, 0},  // drawn apart, quorum seeds only
    {FaultKind::kStepInterrupted, 0},  // drawn apart, quorum seeds only
    {FaultKind::kSourceFailover, 0},  // drawn apart, standby seeds only
    {FaultKind::kSourceSwitchover, 0},
    {FaultKind::kSourceSyncReplaced, 0},
    {FaultKind::kSourceCut, 0},
    {FaultKind::kPromoteCluster, 0},
    {FaultKind::kPlannedPromoteCluster, 0},
    {FaultKind::kWrongSourceGone, 0},
}};

static_assert(kMix.size() == kFaultKinds, "every fault kind has a weight");

FaultKind pickKind(Rng& rng) {
  int total = 0;
  for (const auto& [kind, weight] : kMix) total += weight;
  int64_t r = rng.between(0, total - 1);
  for (const auto& [kind, weight] : kMix) {
    if (r < weight) return kind;
    r -= weight;
  }
  return FaultKind::kCrashPeer;
}

int64_t durationFor(FaultKind kind, Rng& rng, int64_t sessionTimeoutMs) {
  switch (kind) {
    case FaultKind::kCrashPeer:
    case FaultKind::kCrashAfterWrite:
    case FaultKind::kCrashAgent:
      return rng.between(300, 12000);
    case FaultKind::kPartitionZk:
      // Either shorter than the session timeout (the session survives) or longer.
      return rng.chance(400) ? rng.between(200, sessionTimeoutMs - 200) : rng.between(sessionTimeoutMs + 200, 15000);
    case FaultKind::kCrashPostgres:
      // Now and then longer than the agent's withdrawal bound (8 s): a primary then
      // withdraws while its postgres cannot run, and must not start it again as primary.
      return rng.chance(150) ? rng.between(8000, 15000) : rng.between(100, 6000);
    case FaultKind::kCrashPgAfterFence:
      return rng.between(100, 6000);
    case FaultKind::kSlowPostgres:
      return rng.between(2000, 12000);
    case FaultKind::kDelayNotifications:
      return rng.between(1000, 10000);
    case FaultKind::kRestartPrimaryLateSync:
      return rng.between(100, 2000);
    case FaultKind::kCutSyncCrashPrimary:
      return rng.between(sessionTimeoutMs + 200, 15000);
    case FaultKind::kFlapSync:
      return rng.between(100, 2500);
    case FaultKind::kCutOffFollower:
      // syncLimit x tickTime: shorter or (the sample configuration) longer than the session.
      return rng.between(sessionTimeoutMs / 3, 3 * sessionTimeoutMs);
    case FaultKind::kLeaderChange:
      return rng.between(200, 4000);
    case FaultKind::kStallReplication:
      return rng.between(500, 15000);
    default:
      return 0;
  }
}

// A fault drawn apart from the mix, from a stream of its own (`rng`): on one peer, for as
// long as `duration` draws, at any time of the fault phase but its last second.
template <class Duration>
void addPeerFault(Scenario& s, Rng& rng, FaultKind kind, Duration duration) {
  Fault f;
  f.index = static_cast<int>(s.faults.size());
  f.kind = kind;
  f.peer = static_cast<int>(rng.between(0, s.peers - 1));
  f.duration = duration();
  f.at = rng.between(1500, std::max<int64_t>(1500, s.faultPhaseMs - 1000));
  f.variant = rng.next();
  s.faults.push_back(f);
}

}  // namespace

Scenario makeScenario(uint64_t seed) {
  Rng rng(seed);
  Scenario s;
  s.seed = seed;
  s.peers = static_cast<int>(rng.between(3, 6));
  s.sessionTimeoutMs = rng.between(2000, 6000);
  s.start = kStartOfTime;
  s.faultPhaseMs = rng.between(15000, 45000);
  s.convergeBoundMs = 40000 + 2 * s.sessionTimeoutMs;
  // Faults begin once the cluster has had a moment to set up, come in bursts (short
  // gaps) and lulls (long ones), and stop at the end of the fault phase.
  EpochMs t = rng.between(1500, 6000);
  int64_t meanGap = rng.between(300, 2500);
  while (t < s.faultPhaseMs) {
    Fault f;
    f.index = static_cast<int>(s.faults.size());
    f.at = t;
    f.kind = pickKind(rng);
    f.peer = static_cast<int>(rng.between(0, s.peers - 1));
    f.duration = durationFor(f.kind, rng, s.sessionTimeoutMs);
    f.variant = rng.next();
    s.faults.push_back(f);
    t += rng.between(meanGap / 4, meanGap * 2);
  }
  s.tickTimeMs = rng.between(std::max<int64_t>(50, s.sessionTimeoutMs / 20), s.sessionTimeoutMs / 2);
  s.lease = rng.chance(750);
  // The failsafe and the quorum losses come from a stream of their own, so that the rest
  // of each seed's plan is what it was before they existed.
  Rng extra(seed ^ 0xfa115afe0ddba11ULL);
  s.failsafe = s.lease && extra.chance(850);
  if (extra.chance(600)) {
    Fault f;
    f.index = static_cast<int>(s.faults.size());
    f.kind = FaultKind::kQuorumLoss;
    f.peer = 0;
    const int64_t r = extra.between(0, 99);
    f.duration = r < 50 ? extra.between(1000, 8000) : r < 85 ? extra.between(8000, 20000) : extra.between(20000, 30000);
    // Over before the faults stop: the quiet phase's bound counts from there.
    f.duration = std::min<int64_t>(f.duration, std::max<int64_t>(1000, s.faultPhaseMs - 2000));
    f.at = extra.between(1500, std::max<int64_t>(1500, s.faultPhaseMs - f.duration - 500));
    f.variant = extra.next();
    s.faults.push_back(f);
  }
  s.rejoinRewind = Rng(seed ^ 0x4e3011dea1b4c5d7ULL).chance(500);
  // A postgres that serves but fails its health check: from a stream of its own too.
  Rng serving(seed ^ 0x5e2b1e0a11c0ffeeULL);
  if (serving.chance(250)) {
    addPeerFault(s, serving, FaultKind::kUnhealthyServing,
                 [&] { return serving.chance(600) ? serving.between(9000, 16000) : serving.between(500, 6000); });
  }
  // A sync restored from a copy of another history: a stream of its own as well.
  Rng stale(seed ^ 0x57a1e5c0b1d2e3f4ULL);
  if (stale.chance(120)) {
    Fault f;
    f.index = static_cast<int>(s.faults.size());
    f.kind = FaultKind::kRestoreStaleSync;
    f.duration = stale.between(200, 3 * s.sessionTimeoutMs);
    f.at = stale.between(s.faultPhaseMs / 3, std::max<int64_t>(s.faultPhaseMs / 3, s.faultPhaseMs - 1000));
    f.variant = stale.next();
    s.faults.push_back(f);
  }
  // A stopped agent: a stream of its own.
  Rng stopped(seed ^ 0x5709a6e17c0d1f2aULL);
  if (stopped.chance(250)) {
    addPeerFault(s, stopped, FaultKind::kStopAgent, [&] { return stopped.between(200, 3 * s.sessionTimeoutMs); });
  }
  // An operator's raise of max_connections and rolling restart: a stream of its own. In
  // the first two thirds of the fault phase, so that later faults restart, rejoin and
  // rebuild standbys under the new primary's value.
  Rng raise(seed ^ 0x3a15ec0ee7102f5bULL);
  if (raise.chance(200)) {
    Fault f;
    f.index = static_cast<int>(s.faults.size());
    f.kind = FaultKind::kRaiseMaxConnections;
    f.peer = static_cast<int>(raise.between(0, s.peers - 1));
    f.at = raise.between(1500, std::max<int64_t>(1500, s.faultPhaseMs * 2 / 3));
    f.variant = raise.next();
    s.faults.push_back(f);
  }
  // A takeover from a sync holding part of a record, its replay lagging (past the
  // promotion timeout in one run in five): a stream of its own.
  Rng partial(seed ^ 0x9a27c1ad5ec0bd11ULL);
  if (partial.chance(200)) {
    Fault f;
    f.index = static_cast<int>(s.faults.size());
    f.kind = FaultKind::kPartialRecordTakeover;
    f.duration = partial.chance(200) ? partial.between(12000, 20000) : partial.between(0, 8000);
    f.at = partial.between(1500, std::max<int64_t>(1500, s.faultPhaseMs - 1000));
    f.variant = partial.next();
    s.faults.push_back(f);
  }
  // A suspended host (a laptop's lid, a VM suspended to disk): a stream of its own. Short
  // (within the lease) one time in three; otherwise past the session timeout.
  Rng suspended(seed ^ 0x2b5e7d0c4a91f36eULL);
  if (suspended.chance(250)) {
    addPeerFault(s, suspended, FaultKind::kSuspendHost, [&] {
      return suspended.chance(333) ? suspended.between(50, s.sessionTimeoutMs / 2)
                                   : suspended.between(s.sessionTimeoutMs + 200, 3 * s.sessionTimeoutMs);
    });
  }
  // Quorum mode in 40 % of the seeds, from a stream of its own: 3 peers with ANY 1 of 2,
  // or 5 peers with ANY 1 or 2 of 4, or ANY 1 of 3 (one async left in the chain). Such a
  // seed runs 3 or 5 peers whatever the draw above said: its faults hit peer `peer` modulo
  // that number.
  Rng quorum(seed ^ 0x0c0a11ed5e7b00f5ULL);
  if (quorum.chance(400)) {
    static constexpr std::array<std::array<int, 3>, 4> kShapes = {{{3, 2, 1}, {5, 4, 1}, {5, 4, 2}, {5, 3, 1}}};
    const auto& shape = kShapes[static_cast<size_t>(quorum.between(0, 3))];
    s.peers = shape[0];
    s.quorumSize = shape[1];
    s.quorumK = shape[2];
    for (Fault& f : s.faults) f.peer %= s.peers;
    // Its own faults, from a stream of their own too.
    if (quorum.chance(600)) {
      addPeerFault(s, quorum, FaultKind::kLaggingMemberPrimaryDies, [&] { return quorum.between(200, 5000); });
    }
    if (quorum.chance(400)) addPeerFault(s, quorum, FaultKind::kBestMemberDies, [&] { return quorum.between(300, 12000); });
    if (quorum.chance(400)) addPeerFault(s, quorum, FaultKind::kStepInterrupted, [&] { return quorum.between(300, 12000); });
  }
  // A standby cluster of a scripted source in half the seeds not drawn quorum (30 % of
  // all), from a stream of its own (docs/decisions/0083-standby-cluster.md 8.2), with the
  // source's own faults from that stream too.
  Rng standby(seed ^ 0x57a4db1ec0de0083ULL);
  if (s.quorumK == 0 && standby.chance(500)) {
    s.standby = true;
    auto add = [&](FaultKind kind, int64_t duration, int64_t from, int64_t to) {
      Fault f;
      f.index = static_cast<int>(s.faults.size());
      f.kind = kind;
      f.duration = duration;
      f.at = standby.between(from, std::max<int64_t>(from, to));
      f.variant = standby.next();
      s.faults.push_back(f);
    };
    const int64_t end = s.faultPhaseMs - 1000;
    const int failovers = static_cast<int>(standby.between(0, 3));
    for (int i = 0; i < failovers; ++i) add(FaultKind::kSourceFailover, 0, 2000, end);
    if (standby.chance(400)) add(FaultKind::kSourceSwitchover, 0, 2000, end);
    if (standby.chance(400)) add(FaultKind::kSourceSyncReplaced, 0, 2000, end);
    if (standby.chance(300)) add(FaultKind::kSourceCut, standby.between(500, 15000), 2000, end);
    // promote-cluster in the second half of the fault phase, one run in four.
    const bool sourceGone = standby.chance(250);
    if (sourceGone) add(FaultKind::kPromoteCluster, 0, s.faultPhaseMs / 2, end);
    // Drawn after the others (a standby seed keeps the faults above): the planned switch
    // (0083 5.3) in one run in four of the others, half of them with the leader's stream
    // held around the demotion; the operator's wrong --source-gone in one run in four.
    if (!sourceGone && standby.chance(250)) {
      add(FaultKind::kPlannedPromoteCluster, standby.chance(500) ? standby.between(500, 5000) : 0,
          s.faultPhaseMs / 2, end);
    }
    if (standby.chance(250)) add(FaultKind::kWrongSourceGone, 0, 2000, end);
  }
  return s;
}

}  // namespace dugong::clustersim
