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
    const char* name = "";
    StandbyWalSeen seen{};
    bool fenced = true;
    bool gaveUp = false;
    StandbyWalEnd want{};
  };
  const std::vector<Row> rows = {
      {.name = "replay waits for WAL: its end is the WAL's end",
       .seen = {.startupWaitType = "Activity", .startupWait = "RecoveryWalStream", .replayed = "0/507AD90"},
       .want = StandbyWalEnd::kReplayed},
      {.name = "waits for WAL from the archive: the same",
       .seen = {.startupWaitType = "Timeout", .startupWait = "RecoveryRetrieveRetryInterval", .replayed = "0/507AD90"},
       .want = StandbyWalEnd::kReplayed},
      {.name = "waits for WAL at the deadline: the end all the same",
       .seen = {.startupWait = "RecoveryWalStream", .replayed = "0/507AD90"},
       .gaveUp = true,
       .want = StandbyWalEnd::kReplayed},
      {.name = "replay still running", .seen = {.replayed = "0/5070000"}, .want = StandbyWalEnd::kWaitForReplay},
      {.name = "replay holds a commit back (recovery_min_apply_delay, until the reload reaches it)",
       .seen = {.startupWaitType = "Timeout", .startupWait = "RecoveryApplyDelay", .replayed = "0/5070000"},
       .want = StandbyWalEnd::kWaitForReplay},
      // Safety review 2f035ac, finding 2: the received position (0/507C000 in decision
      // 0042, inside a record) is never an initWal, also not at the deadline.
      {.name = "replay still running at the deadline: the read fails",
       .seen = {.replayed = "0/5070000"},
       .gaveUp = true,
       .want = StandbyWalEnd::kReplayDidNotEnd},
      {.name = "replay held back at the deadline: the read fails",
       .seen = {.startupWaitType = "Lock", .startupWait = "relation", .replayed = "0/5070000"},
       .gaveUp = true,
       .want = StandbyWalEnd::kReplayDidNotEnd},
      {.name = "no replay position", .seen = {.startupWait = "RecoveryWalStream"}, .want = StandbyWalEnd::kWaitForReplay},
      {.name = "a query's lock holds replay back",
       .seen = {.startupWaitType = "Lock", .startupWait = "relation", .replayed = "0/5070000"},
       .want = StandbyWalEnd::kEndClientSessions},
      {.name = "a query's buffer pin holds replay back",
       .seen = {.startupWaitType = "BufferPin", .startupWait = "BufferPin", .replayed = "0/5070000"},
       .want = StandbyWalEnd::kEndClientSessions},
      {.name = "a query's snapshot holds replay back",
       .seen = {.startupWaitType = "IPC", .startupWait = "RecoveryConflictSnapshot", .replayed = "0/5070000"},
       .want = StandbyWalEnd::kEndClientSessions},
      {.name = "replay paused",
       .seen = {.startupWaitType = "IPC", .startupWait = "RecoveryPause", .paused = true, .replayed = "0/5070000"},
       .want = StandbyWalEnd::kResumeReplay},
      {.name = "pause requested while waiting for WAL: the end",
       .seen = {.startupWait = "RecoveryWalStream", .paused = true, .replayed = "0/507AD90"},
       .want = StandbyWalEnd::kReplayed},
      {.name = "not fenced: a check before the fence, never an initWal",
       .seen = {.replayed = "0/5070000"},
       .fenced = false,
       .want = StandbyWalEnd::kNotFenced},
  };
  for (const Row& r : rows) EXPECT_EQ(planStandbyWalEnd(r.seen, r.fenced, r.gaveUp), r.want) << r.name;
  EXPECT_TRUE(startupWaitsForWal("RecoveryWalStream"));
  EXPECT_TRUE(startupWaitsForWal("RecoveryRetrieveRetryInterval"));
  EXPECT_FALSE(startupWaitsForWal(""));
  EXPECT_FALSE(startupWaitsForWal("WALRead"));
  EXPECT_FALSE(startupWaitsForWal("RecoveryApplyDelay"));
  EXPECT_TRUE(startupWaitsForClients("Lock", "virtualxid"));
  EXPECT_FALSE(startupWaitsForClients("Activity", "RecoveryWalStream"));
  EXPECT_FALSE(startupWaitsForClients("IPC", "RecoveryPause"));
}

}  // namespace
}  // namespace dugong::pg
