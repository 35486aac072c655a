// Table tests of the fence planner (pg/plan/fence.h).
#include "pg/plan/fence.h"

#include <gtest/gtest.h>

#include <vector>

namespace dugong::pg {
namespace {

using Ids = std::optional<std::string>;

TEST(PlanFence, TargetTable) {
  struct Row {
    const char* name;
    FenceFrom from;
    Ids newSync;
    std::string sync;
    Ids also;
  };
  const Row rows[] = {
      {"first fence: the new sync and the one it had", {false, "b", {}}, "c", "c", "b"},
      {"fenced again for another: the sync of the last apply stays", {false, "c", "b"}, "d", "d", "b"},
      {"fenced for the sync it has: that one alone", {false, "b", {}}, "b", "b", {}},
      {"fenced again back to the sync of the last apply", {false, "c", "b"}, "b", "b", {}},
      {"no sync before: the new one alone", {false, {}, {}}, "c", "c", {}},
  };
  for (const Row& r : rows) {
    auto t = planFence(r.from, r.newSync);
    ASSERT_TRUE(t.ok()) << r.name;
    EXPECT_FALSE(t->standby) << r.name;
    EXPECT_EQ(t->syncId, r.sync) << r.name;
    EXPECT_EQ(t->alsoSyncId, r.also) << r.name;
  }
  auto standby = planFence({true, {}, {}}, std::nullopt);
  ASSERT_TRUE(standby.ok());
  EXPECT_TRUE(standby->standby);
  EXPECT_FALSE(planFence({false, "b", {}}, std::nullopt).ok()) << "a primary needs a new sync";
}

TEST(PlanFence, CheckTable) {
  const FenceTarget standby{true, "", {}};
  const FenceTarget alone{false, "c", {}};
  const FenceTarget both{false, "c", "b"};
  struct Row {
    const char* name;
    FenceTarget fence;
    FenceSeen seen;
    bool holds;
  };
  const Row rows[] = {
      {"standby: stopped streaming", standby, {true, "", 0, "", 0, 0}, true},
      {"standby: promoted meanwhile", standby, {false, "", 0, "", 0, 0}, false},
      {"standby: conninfo still set", standby, {true, "host=a", 0, "", 0, 0}, false},
      {"standby: receiver still runs", standby, {true, "", 1, "", 0, 0}, false},
      {"primary: new sync alone", alone, {false, "", 0, "\"c\"", 0, 0}, true},
      {"primary: in recovery", alone, {true, "", 0, "\"c\"", 0, 0}, false},
      {"primary: the old setting", alone, {false, "", 0, "\"b\"", 0, 0}, false},
      {"primary: another walsender keeps a priority", alone, {false, "", 0, "\"c\"", 1, 0}, false},
      {"primary: the sync's walsender has not taken it", alone, {false, "", 0, "\"c\"", 0, 1}, false},
      {"primary: both", both, {false, "", 0, "FIRST 2 (\"c\", \"b\")", 0, 0}, true},
      {"primary: only one of both", both, {false, "", 0, "\"c\"", 0, 0}, false},
      {"primary: either of both is not enough", both, {false, "", 0, "ANY 1 (\"c\", \"b\")", 0, 0}, false},
  };
  for (const Row& r : rows) {
    auto c = checkFence(r.fence, r.seen);
    EXPECT_EQ(c.ok(), r.holds) << r.name << (c.ok() ? "" : ": " + c.error());
  }
  EXPECT_EQ(describeFence(both), "commits now wait for both c and b");
}

TEST(PlanFence, StandbyWalEndTable) {
  struct Row {
    const char* name;
    StandbyWalSeen seen;
    bool gaveUp;
    StandbyWalEnd want;
  };
  const std::vector<Row> rows = {
      {"replay waits for WAL: its end is the WAL's end", {"0/507C000", "0/507AD90", true}, false,
       StandbyWalEnd::kReplayed},
      {"replay still running", {"0/507C000", "0/5070000", false}, false, StandbyWalEnd::kWaitForReplay},
      {"no replay position", {"0/507C000", "", true}, false, StandbyWalEnd::kWaitForReplay},
  };
  for (const Row& r : rows) EXPECT_EQ(planStandbyWalEnd(r.seen, r.gaveUp), r.want) << r.name;
  // Safety review 2f035ac, finding 2: the received position may end inside a record past
  // the new timeline's fork; it is never an initWal, also not at the deadline.
  EXPECT_NE(planStandbyWalEnd({"0/507C000", "0/5070000", false}, true), StandbyWalEnd::kReceived)
      << "replay still running at the deadline";
  EXPECT_TRUE(startupWaitsForWal("RecoveryWalStream"));
  EXPECT_TRUE(startupWaitsForWal("RecoveryRetrieveRetryInterval"));
  EXPECT_FALSE(startupWaitsForWal(""));
  EXPECT_FALSE(startupWaitsForWal("WALRead"));
}

}  // namespace
}  // namespace dugong::pg
