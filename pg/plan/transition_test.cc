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

// A leader with no source peer chosen (0083 "Phase 7 as built") keeps the one it followed
// last as this source's standby leader, and follows nothing else.
TEST(PlanTransition, LeaderEndpointTable) {
  const StandbySource siteA = *parseSourceUrl("dugong://z1:2181/dugong/siteA");
  const StandbySource siteC = *parseSourceUrl("dugong://z1:2181/dugong/siteC");
  const StandbySource hosts = *parseSourceUrl("hosts://h1:5432");
  PeerIdentity a2;
  a2.id = "a2";
  a2.pgUrl = "tcp://postgres@10.0.0.2:5432/postgres";
  PeerIdentity a3 = a2;
  a3.id = "a3";
  const SourceEndpoint unchosen = dugongEndpoint(siteA, std::nullopt);
  struct Row {
    const char* name;
    SourceEndpoint wanted;
    std::optional<SourceEndpoint> last;
    std::optional<std::string> follows;  // the source peer's id
  };
  const Row rows[] = {
      {"chosen: as wanted", dugongEndpoint(siteA, a3), dugongEndpoint(siteA, a2), "a3"},
      {"unchosen, last of this source: kept", unchosen, dugongEndpoint(siteA, a2), "a2"},
      {"unchosen, never a leader (a sync that took over): none", unchosen, std::nullopt, std::nullopt},
      {"unchosen, last of another source: none", unchosen, dugongEndpoint(siteC, a2), std::nullopt},
      {"unchosen, last a hosts source: none", unchosen, hostsEndpoint(hosts), std::nullopt},
      {"unchosen, last unchosen too: none", unchosen, unchosen, std::nullopt},
  };
  for (const Row& r : rows) {
    const SourceEndpoint got = planLeaderEndpoint(r.wanted, r.last);
    EXPECT_EQ(got.peer ? std::optional<std::string>(got.peer->id) : std::nullopt, r.follows) << r.name;
    EXPECT_EQ(got.cluster, "siteA") << r.name;
  }
  EXPECT_EQ(planLeaderEndpoint(hostsEndpoint(hosts), dugongEndpoint(siteA, a2)), hostsEndpoint(hosts));
}

}  // namespace
}  // namespace dugong::pg
