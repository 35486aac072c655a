// Table tests of the transition planner (pg/plan/transition.h).
#include "pg/plan/transition.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

TEST(PlanTransition, PrimaryTable) {
  struct Row {
    const char* name;
    PrimaryFacts facts;
    bool readOnly;
    bool promote;
  };
  const Row rows[] = {
      {"no sync: writable at once", {false, false, false}, false, false},
      {"no sync, promoted: writable", {false, false, true}, false, true},
      {"a new primary with a sync waits for it", {true, false, false}, true, false},
      {"a writable primary whose sync changes stays writable", {true, true, false}, false, false},
      {"a promoted standby with a sync waits for it", {true, false, true}, true, true},
      {"in recovery, even if it was writable: waits", {true, true, true}, true, true},
  };
  for (const Row& r : rows) {
    const PrimaryPlan p = planPrimary(r.facts);
    EXPECT_EQ(p.readOnly, r.readOnly) << r.name;
    EXPECT_EQ(p.promote, r.promote) << r.name;
  }
}

// Only a new cluster's first primary creates a data directory; an error reading the
// directory is never "no data".
TEST(PlanTransition, PrimaryDataDirTable) {
  struct Row {
    const char* name;
    PrimaryDirFacts facts;
    PrimaryDirStep step;
  };
  using F = DataDirFound;
  using S = PrimaryDirStep;
  auto dir = [](DataDirFound found, bool running, bool newCluster) {
    PrimaryDirFacts f;
    f.found = found;
    f.running = running;
    f.newCluster = newCluster;
    return f;
  };
  //                                                       found     running newCluster
  const Row rows[] = {
      {"set up: used as it is", dir(F::kSetUp, false, false), S::kUse},
      {"set up, new cluster: used as it is", dir(F::kSetUp, true, true), S::kUse},
      {"a new cluster with no data: bootstrapped", dir(F::kMissing, false, true), S::kBootstrap},
      {"an existing cluster's primary with no data: refused", dir(F::kMissing, false, false), S::kRefuse},
      {"no data, but postgres runs: an error", dir(F::kMissing, true, true), S::kFail},
      {"no data, existing cluster, postgres runs: an error", dir(F::kMissing, true, false), S::kFail},
      {"unreadable, new cluster: an error, not a bootstrap", dir(F::kUnreadable, false, true), S::kFail},
      {"unreadable, existing cluster: an error", dir(F::kUnreadable, false, false), S::kFail},
  };
  for (const Row& r : rows) {
    const PrimaryDirPlan p = planPrimaryDataDir(r.facts);
    EXPECT_EQ(p.step, r.step) << r.name;
    EXPECT_EQ(p.why.empty(), p.step == S::kUse || p.step == S::kBootstrap) << r.name;
  }
}

// The primary of a generation that recorded its timeline at initWal runs only on data
// that holds that history: a WAL forked off before initWal (a host restored from an older
// copy) lacks what the generation acknowledged there.
TEST(PlanTransition, PrimaryDataMustHoldTheGenerationsHistory) {
  const WalPosition initWal(0x8880);
  auto facts = [&](int64_t initTimeline, std::optional<TimelineHistory> history) {
    PrimaryDirFacts f;
    f.found = DataDirFound::kSetUp;
    f.initWal = initWal;
    f.initTimeline = initTimeline;
    f.history = std::move(history);
    if (!f.history) f.historyError = "no segment file in pg_wal";
    return f;
  };
  struct Row {
    const char* name;
    PrimaryDirFacts facts;
    PrimaryDirStep step;
  };
  const Row rows[] = {
      {"on the generation's timeline at initWal", facts(3, TimelineHistory{3, {{2, WalPosition(0x80)}}}),
       PrimaryDirStep::kUse},
      {"promoted after initWal (its own takeover)", facts(3, TimelineHistory{4, {{3, initWal}}}), PrimaryDirStep::kUse},
      {"forked off before initWal", facts(3, TimelineHistory{4, {{3, WalPosition(0x8000)}}}), PrimaryDirStep::kRefuse},
      {"another timeline altogether", facts(3, TimelineHistory{2, {}}), PrimaryDirStep::kRefuse},
      {"its history unread", facts(3, std::nullopt), PrimaryDirStep::kFail},
      {"no timeline recorded: nothing to check", facts(0, std::nullopt), PrimaryDirStep::kUse},
  };
  for (const Row& r : rows) {
    const PrimaryDirPlan p = planPrimaryDataDir(r.facts);
    EXPECT_EQ(p.step, r.step) << r.name;
    if (r.step == PrimaryDirStep::kRefuse) {
      EXPECT_NE(p.why.find("on timeline 3 at its initWal"), std::string::npos) << p.why;
    }
    if (r.step == PrimaryDirStep::kFail) {
      EXPECT_NE(p.why.find("no segment file"), std::string::npos) << p.why;
    }
  }
}

TEST(PlanTransition, StandbyTable) {
  struct Row {
    const char* name;
    StandbyFacts facts;
    StandbyStep step;
  };
  //                                running setUp inRec signal wasPri same repair other
  const Row rows[] = {
      {"streaming from the same upstream", {true, true, true, true, false, true, false, false}, StandbyStep::kRoleOnly},
      {"a new upstream", {true, true, true, true, false, false, false, false}, StandbyStep::kReload},
      {"a repair restarts", {true, true, true, true, false, true, true, false}, StandbyStep::kRestart},
      {"an ex-primary restarts", {true, true, true, true, true, true, false, false}, StandbyStep::kRestart},
      {"a running primary restarts", {true, true, false, false, false, false, false, false}, StandbyStep::kRestart},
      {"stopped", {false, true, false, true, false, true, false, false}, StandbyStep::kRestart},
      {"not set up", {true, false, true, true, false, true, false, false}, StandbyStep::kRestart},
      {"another system replaced", {true, true, true, true, false, false, false, true}, StandbyStep::kRestart},
      {"no standby.signal, new upstream: reload", {true, true, true, false, false, false, false, false},
       StandbyStep::kReload},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(planStandby(r.facts), r.step) << r.name << ": got " << standbyStepName(planStandby(r.facts));
  }
}

}  // namespace
}  // namespace dugong::pg
