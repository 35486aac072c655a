#include "pg/plan/transition.h"

namespace dugong::pg {

PrimaryPlan planPrimary(const PrimaryFacts& facts) {
  PrimaryPlan plan;
  plan.promote = facts.inRecovery;
  plan.readOnly = facts.hasDownstream && (facts.inRecovery || !facts.wasWritablePrimary);
  return plan;
}

namespace {

PrimaryDirPlan planPrimaryHistory(const PrimaryDirFacts& facts) {
  if (facts.initTimeline == 0) return {PrimaryDirStep::kUse, ""};
  const std::string generation =
      "the generation's WAL is on timeline " + std::to_string(facts.initTimeline) + " at its initWal " +
      facts.initWal.toString();
  if (!facts.history) {
    return {PrimaryDirStep::kFail,
            "cannot tell whether the data directory holds the cluster's history (" + generation +
                "): its timelines are not known: " + facts.historyError};
  }
  const int64_t mine = facts.history->timelineAt(facts.initWal);
  if (mine == facts.initTimeline) return {PrimaryDirStep::kUse, ""};
  return {PrimaryDirStep::kRefuse,
          "the data directory holds another history than the cluster's: " + generation + ", its own on timeline " +
              std::to_string(mine) + " there (" + facts.history->describe() +
              "): it forked off before initWal and lacks commits the cluster acknowledged; not starting it as "
              "the primary"};
}

}  // namespace

PrimaryDirPlan planPrimaryDataDir(const PrimaryDirFacts& facts) {
  switch (facts.found) {
    case DataDirFound::kSetUp:
      return planPrimaryHistory(facts);
    case DataDirFound::kUnreadable:
      return {PrimaryDirStep::kFail, "cannot tell whether the data directory holds a database"};
    case DataDirFound::kMissing:
      break;
  }
  if (facts.running) return {PrimaryDirStep::kFail, "postgres runs on a data directory that is not set up"};
  if (!facts.newCluster) {
    return {PrimaryDirStep::kRefuse,
            "the data directory holds no database, but this peer is the primary of an existing cluster: not "
            "creating an empty one in its place"};
  }
  return {PrimaryDirStep::kBootstrap, ""};
}

StandbyStep planStandby(const StandbyFacts& facts) {
  const bool runningStandby = facts.running && facts.setUp && facts.inRecovery && !facts.wasPrimary && !facts.repair;
  if (runningStandby && facts.hasStandbySignal && facts.sameUpstream) return StandbyStep::kRoleOnly;
  if (runningStandby && !facts.replaceOther) return StandbyStep::kReload;
  return StandbyStep::kRestart;
}

SourceEndpoint planLeaderEndpoint(const SourceEndpoint& wanted, const std::optional<SourceEndpoint>& last) {
  if (wanted.kind != SourceKind::kDugong || wanted.peer) return wanted;
  SourceEndpoint out = wanted;
  if (last && last->kind == SourceKind::kDugong && last->cluster == wanted.cluster) out.peer = last->peer;
  return out;
}

const char* standbyStepName(StandbyStep s) {
  switch (s) {
    case StandbyStep::kRoleOnly: return "role-only";
    case StandbyStep::kReload: return "reload";
    case StandbyStep::kRestart: return "restart";
  }
  return "?";
}

}  // namespace dugong::pg
