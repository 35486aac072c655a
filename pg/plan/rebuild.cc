#include "pg/plan/rebuild.h"

namespace dugong::pg {

RebuildStart planRebuildStart(const RebuildFacts& facts, const RebuildRules& rules) {
  // WAL the upstream no longer has: no rewind can help.
  const bool copyToRepair = !facts.repair.empty() && facts.repair.find("has already been removed") != std::string::npos;
  if (!facts.setUp || facts.replaceOther || copyToRepair) {
    const std::string why = facts.replaceOther ? "another database system, replaced by the operator's command"
                            : copyToRepair     ? "a standby whose upstream no longer has the WAL it needs"
                                               : "no usable data directory";
    return {rules.basebackup ? RebuildStep::kBasebackup : RebuildStep::kNothingToUse, why};
  }
  // Last ran as a primary (or a standby that went past a fork): it may have WAL the
  // cluster does not have.
  if (!facts.hasStandbySignal || facts.wasPrimary || !facts.repair.empty()) return {RebuildStep::kCompare, ""};
  return {RebuildStep::kStartAsIs, ""};
}

bool rewindAtOnce(const RebuildRules& rules, bool verified) { return rules.rewind && verified; }

RebuildOutcome planAfterCompare(Divergence found, bool verified, bool replaceUnknownData, const RebuildRules& rules) {
  if (found == Divergence::kCanFollow) return RebuildOutcome::kFollow;
  if (found == Divergence::kRewound) return RebuildOutcome::kFollowRewound;
  if (found == Divergence::kAhead && !replaceUnknownData) return RebuildOutcome::kRefuseAhead;
  if (!verified) return RebuildOutcome::kFailUnverified;
  if (!rules.basebackup) return RebuildOutcome::kFailNoCopy;
  return RebuildOutcome::kBasebackup;
}

const std::vector<std::pair<std::string, std::string>>& crashRecoverySettingsKeepingWal() {
  static const std::vector<std::pair<std::string, std::string>> settings{{"archive_mode", "on"},
                                                                         {"archive_command", "false"}};
  return settings;
}

bool rewindChangedTarget(const std::string& pgRewindOutput) {
  return pgRewindOutput.find("need to copy") != std::string::npos;
}

const char* divergenceName(Divergence d) {
  switch (d) {
    case Divergence::kCanFollow: return "can follow";
    case Divergence::kDiverged: return "diverged";
    case Divergence::kAhead: return "ahead";
    case Divergence::kUnknown: return "unknown";
    case Divergence::kRewound: return "rewound";
  }
  return "?";
}

const char* rebuildOutcomeName(RebuildOutcome o) {
  switch (o) {
    case RebuildOutcome::kFollow: return "follow";
    case RebuildOutcome::kFollowRewound: return "follow-rewound";
    case RebuildOutcome::kRefuseAhead: return "refuse-ahead";
    case RebuildOutcome::kFailUnverified: return "fail-unverified";
    case RebuildOutcome::kFailNoCopy: return "fail-no-copy";
    case RebuildOutcome::kBasebackup: return "basebackup";
  }
  return "?";
}

}  // namespace dugong::pg
