#include "pg/plan/fence.h"

#include <vector>

#include "pg/plan/catch_up.h"
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

namespace {
Result<bool> checkQuorumFence(const StandbyQuorum& quorum, const FenceSeen& seen) {
  if (!waitsForQuorum(seen.syncNames, quorum)) {
    return Error{"synchronous_standby_names is '" + seen.syncNames + "', not " + renderQuorum(quorum)};
  }
  if (seen.othersWithPriority != 0) {
    return Error{"a walsender of a standby outside " + renderQuorum(quorum) + " still has a sync priority"};
  }
  if (seen.syncWithoutPriority != 0) return Error{"a member's walsender has not taken the new setting yet"};
  return true;
}
}  // namespace

Result<bool> checkFence(const FenceTarget& fence, const FenceSeen& seen) {
  if (fence.standby) {
    if (!seen.inRecovery) return Error{"postgres is no longer in recovery"};
    if (!seen.primaryConninfo.empty()) return Error{"primary_conninfo is not empty yet"};
    if (!seen.restoreCommand.empty()) return Error{"restore_command is not empty yet"};
    if (seen.walReceivers != 0) return Error{"a WAL receiver still runs"};
    return true;
  }
  if (seen.inRecovery) return Error{"postgres is in recovery"};
  if (fence.quorum) return checkQuorumFence(*fence.quorum, seen);
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
  if (fence.quorum) return "commits now wait for " + renderQuorum(*fence.quorum);
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

Result<QuorumFence> planQuorumFence(const std::optional<StandbyQuorum>& from, const StandbyQuorum& to) {
  if (auto valid = validQuorum(to); !valid) return Error{"a primary is fenced for an invalid quorum: " + valid.error()};
  QuorumFence out;
  out.target.quorum = to;
  // A walsender's k is its own copy of the setting, unobservable (0079 P3): when k grows,
  // one that has not reloaded yet would release commits under the smaller k.
  out.endWalsenders = to.k > (from ? from->k : 0);
  return out;
}

QuorumFenceNext planQuorumFenceStep(const QuorumFence& fence, const QuorumFenceProgress& at,
                                    const QuorumFenceSeen& seen, bool gaveUp) {
  QuorumFenceNext next{QuorumFenceStep::kWaitForCatchUp, at};
  if (fence.endWalsenders && seen.staleWalsenders > 0) {
    if (!at.walsendersEnded) {
      next.step = QuorumFenceStep::kEndWalsenders;
      next.progress.walsendersEnded = true;
      return next;
    }
    next.step = gaveUp ? QuorumFenceStep::kGaveUp : QuorumFenceStep::kWaitForWalsenders;
    return next;
  }
  // Every walsender that releases commits now runs the step's rule: p0 bounds every
  // commit acknowledged under the previous one.
  if (!next.progress.p0) next.progress.p0 = seen.primaryFlush;
  const int k = fence.target.quorum ? fence.target.quorum->k : 1;
  const std::optional<uint64_t> flushed = kthLatestFlush(seen.memberFlushes, k);
  if (flushed && *flushed >= *next.progress.p0) {
    next.step = QuorumFenceStep::kCaughtUp;
  } else if (gaveUp) {
    next.step = QuorumFenceStep::kGaveUp;
  }
  return next;
}

}  // namespace dugong::pg
