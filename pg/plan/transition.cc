#include "pg/plan/transition.h"

namespace dugong::pg {

PrimaryPlan planPrimary(const PrimaryFacts& facts) {
  PrimaryPlan plan;
  plan.promote = facts.inRecovery;
  plan.readOnly = facts.hasDownstream && (facts.inRecovery || !facts.wasWritablePrimary);
  return plan;
}

StandbyStep planStandby(const StandbyFacts& facts) {
  const bool runningStandby = facts.running && facts.setUp && facts.inRecovery && !facts.wasPrimary && !facts.repair;
  if (runningStandby && facts.hasStandbySignal && facts.sameUpstream) return StandbyStep::kRoleOnly;
  if (runningStandby && !facts.replaceOther) return StandbyStep::kReload;
  return StandbyStep::kRestart;
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
