// The fault phase of the cluster simulator: each fault of the scenario's plan
// (scenario.h, FaultKind) is run by its family's file here, and the quiet phase
// that follows heals everything.
//   crashes.cc         crash-peer, crash-agent, crash-after-write
//   postgres.cc        crash-postgres, slow-postgres, stall-replication, crash-pg-after-fence
//   zookeeper.cc       expire-session, partition-zk, cut-off-follower, leader-change,
//                      delay-notifications, quorum-loss
//   takeover_races.cc  restart-primary-late-sync, cut-sync-crash-primary, flap-sync,
//                      partial-record-takeover
//   operator.cc        freeze, unfreeze, promote-valid, promote-invalid, rebuild-deposed,
//                      raise-max-connections
//   suspend.cc         suspend-host
//   quorum.cc          lagging-member-primary-dies, best-member-dies, step-interrupted
//   standby.cc         source-failover, source-switchover, source-sync-replaced, source-cut
//                      (and its heal), promote-cluster
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

void World::runFault(const Fault& f) {
  ++faultsRun_;
  ++faultsRunByKind_[static_cast<size_t>(f.kind)];
  switch (f.kind) {
    case FaultKind::kCrashPeer:
      return crashPeer(f);
    case FaultKind::kCrashAfterWrite:
      return armCrashAfterWrite(f);
    case FaultKind::kCrashPgAfterFence:
      return armCrashPgAfterFence(f);
    case FaultKind::kRestartPrimaryLateSync:
      return restartPrimaryLateSync(f);
    case FaultKind::kCutSyncCrashPrimary:
      return cutSyncCrashPrimary(f);
    case FaultKind::kFlapSync:
      return flapSync(f);
    case FaultKind::kRestoreStaleSync:
      return restoreStaleSync(f);
    case FaultKind::kCrashAgent:
      return crashAgent(f);
    case FaultKind::kStopAgent:
      return stopAgentGroup(f);
    case FaultKind::kExpireSession:
      return expireSession(f);
    case FaultKind::kPartitionZk:
      return partitionZk(f);
    case FaultKind::kCutOffFollower:
      return cutOffFollower(f);
    case FaultKind::kLeaderChange:
      return leaderChange(f);
    case FaultKind::kQuorumLoss:
      return quorumLoss(f);
    case FaultKind::kCrashPostgres:
      return crashPostgres(f);
    case FaultKind::kSlowPostgres:
      return slowPostgres(f);
    case FaultKind::kUnhealthyServing:
      return unhealthyServing(f);
    case FaultKind::kDelayNotifications:
      return delayNotifications(f);
    case FaultKind::kStallReplication:
      return stallReplication(f);
    case FaultKind::kFreeze:
      return opFreeze();
    case FaultKind::kUnfreeze:
      return opUnfreeze();
    case FaultKind::kPromoteValid:
      return opPromote(true, f.variant);
    case FaultKind::kPromoteInvalid:
      return opPromote(false, f.variant);
    case FaultKind::kRebuildDeposed:
      return opRebuild(f.variant);
    case FaultKind::kRaiseMaxConnections:
      return raiseMaxConnections(f);
    case FaultKind::kPartialRecordTakeover:
      return partialRecordTakeover(f);
    case FaultKind::kSuspendHost:
      return suspendHost(f);
    case FaultKind::kLaggingMemberPrimaryDies:
      return laggingMemberPrimaryDies(f);
    case FaultKind::kBestMemberDies:
      return bestMemberDies(f);
    case FaultKind::kStepInterrupted:
      return armStepInterrupted(f);
    case FaultKind::kSourceFailover:
    case FaultKind::kSourceSwitchover:
    case FaultKind::kSourceSyncReplaced:
    case FaultKind::kSourceCut:
    case FaultKind::kPromoteCluster:
    case FaultKind::kPlannedPromoteCluster:
    case FaultKind::kWrongSourceGone:
      return sourceFault(f);
  }
}

// The faults stop: every postgres and ZooKeeper client is healed, every agent runs, and
// the operator undoes what it left (operator.cc).
void World::beginQuietPhase() {
  quiet_ = true;
  quietStart_ = now_;
  trace('Q', [&] { return std::string("faults stop; healing everything; the cluster must be read-write within " +
                 std::to_string(sc_.convergeBoundMs) + " ms"); });
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int n = static_cast<int>(i);
    Node& nd = node(n);
    nd.pg.slowUntil = 0;
    nd.pg.stalledUntil = 0;
    nd.pg.brokenUntil = 0;
    zk_.client(n).slowNotifyUntil = 0;
    resumeHost(n);
    if (zk_.client(n).partitioned) zk_.heal(n);
    if (!nd.up) startAgent(n);
  }
  healSource();
  after(0, [this] { operatorQuietTick(); });
}

}  // namespace dugong::clustersim::world_internal
