#include "pg/plan/fence.h"

#include <vector>

#include "pg/plan/standby_names.h"

namespace dugong::pg {

Result<FenceTarget> planFence(const FenceFrom& from, const std::optional<std::string>& newSyncId) {
  FenceTarget target;
  target.standby = from.standby;
  if (from.standby) return target;
  if (!newSyncId) return Error{"a primary is fenced for a new sync, and none was given"};
  target.alsoSyncId = from.alsoSyncId ? from.alsoSyncId : from.syncId;
  if (target.alsoSyncId == newSyncId) target.alsoSyncId.reset();
  target.syncId = *newSyncId;
  return target;
}

Result<bool> checkFence(const FenceTarget& fence, const FenceSeen& seen) {
  if (fence.standby) {
    if (!seen.inRecovery) return Error{"postgres is no longer in recovery"};
    if (!seen.primaryConninfo.empty()) return Error{"primary_conninfo is not empty yet"};
    if (seen.walReceivers != 0) return Error{"a WAL receiver still runs"};
    return true;
  }
  if (seen.inRecovery) return Error{"postgres is in recovery"};
  std::vector<std::string> waitFor{fence.syncId};
  if (fence.alsoSyncId) waitFor.push_back(*fence.alsoSyncId);
  if (!waitsForAll(seen.syncNames, waitFor)) {
    return Error{"synchronous_standby_names is '" + seen.syncNames + "', not " + fence.syncId +
                 (fence.alsoSyncId ? " and " + *fence.alsoSyncId + " together" : " alone")};
  }
  if (seen.othersWithPriority != 0) return Error{"a walsender of another standby still has a sync priority"};
  if (seen.syncWithoutPriority != 0) {
    return Error{"the walsender of " + fence.syncId + " has not taken the new setting yet"};
  }
  return true;
}

std::string describeFence(const FenceTarget& fence) {
  if (fence.standby) return "no longer streaming from the upstream";
  return fence.alsoSyncId ? "commits now wait for both " + fence.syncId + " and " + *fence.alsoSyncId
                          : "commits now wait for " + fence.syncId + " alone";
}

StandbyWalEnd planStandbyWalEnd(const StandbyWalSeen& seen, bool fenced, bool gaveUp) {
  if (!fenced) return StandbyWalEnd::kNotFenced;
  if (startupWaitsForWal(seen.startupWait) && !seen.replayed.empty()) return StandbyWalEnd::kReplayed;
  if (gaveUp) return StandbyWalEnd::kReplayDidNotEnd;
  if (seen.paused) return StandbyWalEnd::kResumeReplay;
  if (startupWaitsForClients(seen.startupWaitType, seen.startupWait)) return StandbyWalEnd::kEndClientSessions;
  return StandbyWalEnd::kWaitForReplay;
}

bool startupWaitsForWal(const std::string& waitEvent) {
  return waitEvent == "RecoveryWalStream" || waitEvent == "RecoveryRetrieveRetryInterval";
}

bool startupWaitsForClients(const std::string& waitEventType, const std::string& waitEvent) {
  return waitEventType == "Lock" || waitEventType == "BufferPin" || waitEvent == "RecoveryConflictSnapshot" ||
         waitEvent == "RecoveryConflictTablespace";
}

}  // namespace dugong::pg
