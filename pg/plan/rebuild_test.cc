// Table tests of the rebuild planner (pg/plan/rebuild.h).
#include "pg/plan/rebuild.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

TEST(PlanRebuild, StartTable) {
  const RebuildRules apply{true, true};
  const RebuildRules rejoin{true, false};
  struct Row {
    const char* name;
    RebuildFacts facts;
    RebuildRules rules;
    RebuildStep step;
  };
  const Row rows[] = {
      {"no data directory: copy", {false, false, "", false, false}, apply, RebuildStep::kBasebackup},
      {"no data directory, rejoin: nothing to use", {false, false, "", false, false}, rejoin,
       RebuildStep::kNothingToUse},
      {"another system replaced: copy", {true, true, "", true, false}, apply, RebuildStep::kBasebackup},
      {"repair of WAL already removed: copy",
       {true, false, "requested WAL segment 0001 has already been removed", true, false}, apply,
       RebuildStep::kBasebackup},
      {"repair of a fork: compare", {true, false, "forked off current database system timeline", true, false}, apply,
       RebuildStep::kCompare},
      {"ex-primary left in recovery by role none: compare", {true, false, "", true, true}, apply,
       RebuildStep::kCompare},
      {"no standby.signal (ran as primary): compare", {true, false, "", false, false}, rejoin, RebuildStep::kCompare},
      {"a standby's data directory: start as it is", {true, false, "", true, false}, apply, RebuildStep::kStartAsIs},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(planRebuildStart(r.facts, r.rules).step, r.step) << r.name;
  }
  EXPECT_EQ(planRebuildStart({true, true, "", true, false}, apply).why,
            "another database system, replaced by the operator's command");
}

TEST(PlanRebuild, RewindAtOnceOnlyWhenAllowedAndVerified) {
  EXPECT_TRUE(rewindAtOnce({true, true}, true));
  EXPECT_FALSE(rewindAtOnce({true, true}, false));
  EXPECT_FALSE(rewindAtOnce({false, true}, true));
}

TEST(PlanRebuild, AfterCompareTable) {
  const RebuildRules apply{true, true};
  const RebuildRules rejoin{true, false};
  struct Row {
    Divergence found;
    bool verified;
    bool replaceUnknown;
    RebuildRules rules;
    RebuildOutcome outcome;
  };
  const Row rows[] = {
      {Divergence::kCanFollow, true, false, rejoin, RebuildOutcome::kFollow},
      {Divergence::kCanFollow, false, false, apply, RebuildOutcome::kFollow},
      {Divergence::kRewound, true, false, rejoin, RebuildOutcome::kFollowRewound},
      // WAL the source lacks is never discarded without the operator's option.
      {Divergence::kAhead, true, false, apply, RebuildOutcome::kRefuseAhead},
      {Divergence::kAhead, true, true, apply, RebuildOutcome::kBasebackup},
      {Divergence::kAhead, false, true, apply, RebuildOutcome::kFailUnverified},
      // A diverged history is never followed: rewound or copied, or nothing changes.
      {Divergence::kDiverged, true, false, apply, RebuildOutcome::kBasebackup},
      {Divergence::kDiverged, true, false, rejoin, RebuildOutcome::kFailNoCopy},
      {Divergence::kDiverged, false, false, apply, RebuildOutcome::kFailUnverified},
      {Divergence::kUnknown, true, false, apply, RebuildOutcome::kBasebackup},
      {Divergence::kUnknown, false, false, rejoin, RebuildOutcome::kFailUnverified},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(planAfterCompare(r.found, r.verified, r.replaceUnknown, r.rules), r.outcome)
        << divergenceName(r.found) << " verified=" << r.verified << " replaceUnknown=" << r.replaceUnknown
        << " basebackup=" << r.rules.basebackup << ": got "
        << rebuildOutcomeName(planAfterCompare(r.found, r.verified, r.replaceUnknown, r.rules));
  }
}

}  // namespace
}  // namespace dugong::pg

// The crash recovery before a rewind keeps WAL the way postgres keeps unarchived WAL
// (operator review P2: its checkpoint had removed the segment pg_rewind needed).
TEST(PlanRebuild, CrashRecoveryKeepsEveryWalSegment) {
  const auto& s = dugong::pg::crashRecoverySettingsKeepingWal();
  auto value = [&](const std::string& name) -> std::string {
    for (const auto& [k, v] : s) {
      if (k == name) return v;
    }
    return "";
  };
  EXPECT_EQ(value("archive_mode"), "on");
  EXPECT_EQ(value("archive_command"), "false");
}

TEST(PlanRebuild, ARewindThatFailedBeforeCopyingChangedNothing) {
  using dugong::pg::rewindChangedTarget;
  EXPECT_FALSE(rewindChangedTarget("pg_rewind: servers diverged at WAL location 0/5000060 on timeline 1\n"
                                   "pg_rewind: error: could not open file \"pg_wal/000000010000000000000004\"\n"
                                   "pg_rewind: fatal: could not find previous WAL record at 0/4000100\n"));
  EXPECT_TRUE(rewindChangedTarget("pg_rewind: rewinding from last common checkpoint at 0/4000100 on timeline 1\n"
                                  "pg_rewind: reading source file list\npg_rewind: reading target file list\n"
                                  "pg_rewind: reading WAL in target\npg_rewind: need to copy 53 MB (total source "
                                  "directory size is 70 MB)\npg_rewind: error: could not write file\n"));
}
