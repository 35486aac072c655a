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
  const FenceTarget standby{true, "", {}, {}};
  const FenceTarget alone{false, "c", {}, {}};
  const FenceTarget both{false, "c", "b", {}};
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
      {"standby: still restores from a repository", standby,
       {true, "", 0, "", 0, 0, "pgbackrest --stanza=a archive-get %f \"%p\""}, false},
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

TEST(PlanFence, QuorumTargetTable) {
  using Q = StandbyQuorum;
  struct Row {
    const char* name;
    std::optional<Q> from;
    Q to;
    bool endWalsenders;
  };
  const Row rows[] = {
      {"a member removed: its priority 0 is observed, no walsender ended", Q{1, {"b", "c", "d"}}, Q{1, {"b", "c"}},
       false},
      {"k raised: a walsender's k is unobservable, every member's ended", Q{1, {"b", "c", "d"}}, Q{2, {"b", "c", "d"}},
       true},
      {"k lowered (a weakening reload, verified the same way)", Q{2, {"b", "c", "d"}}, Q{1, {"b", "c", "d"}}, false},
      {"a member added (the same)", Q{1, {"b", "c"}}, Q{1, {"b", "c", "d"}}, false},
      {"the sync re-encoded as ANY 1 (b)", Q{1, {"b"}}, Q{1, {"b"}}, false},
      {"from the sync to k = 2", Q{1, {"b"}}, Q{2, {"b", "c"}}, true},
      {"from no synchronous standby at all", std::nullopt, Q{1, {"b", "c"}}, true},
  };
  for (const Row& r : rows) {
    auto f = planQuorumFence(r.from, r.to);
    ASSERT_TRUE(f.ok()) << r.name << ": " << f.error();
    EXPECT_EQ(f->target.quorum, std::optional<Q>(r.to)) << r.name;
    EXPECT_FALSE(f->target.standby) << r.name;
    EXPECT_TRUE(f->target.syncId.empty()) << r.name;
    EXPECT_EQ(f->endWalsenders, r.endWalsenders) << r.name;
  }
  EXPECT_EQ(planQuorumFence(Q{1, {"b"}}, Q{2, {"b"}}).error(),
            "a primary is fenced for an invalid quorum: a quorum of 1 members cannot wait for 2");
  EXPECT_FALSE(planQuorumFence(Q{1, {"b"}}, Q{1, {"b", "B"}}).ok());
  EXPECT_EQ(describeFence(planQuorumFence(Q{1, {"b", "c", "d"}}, Q{1, {"b", "c"}})->target),
            "commits now wait for ANY 1 (\"b\", \"c\")");
}

TEST(PlanFence, QuorumCheckTable) {
  FenceTarget fence;
  fence.quorum = StandbyQuorum{1, {"b", "c"}};
  struct Row {
    const char* name = "";
    FenceSeen seen{};
    bool holds = false;
  };
  const std::vector<Row> rows = {
      {.name = "ANY 1 of exactly b and c, every walsender as it should be",
       .seen = {.syncNames = "ANY 1 (\"b\", \"c\")"},
       .holds = true},
      {.name = "in another order, other case", .seen = {.syncNames = "any 1 (C, b)"}, .holds = true},
      {.name = "in recovery", .seen = {.inRecovery = true, .syncNames = "ANY 1 (\"b\", \"c\")"}},
      {.name = "the old setting, with d", .seen = {.syncNames = "ANY 1 (\"b\", \"c\", \"d\")"}},
      {.name = "the old k", .seen = {.syncNames = "ANY 2 (\"b\", \"c\")"}},
      {.name = "FIRST is another rule", .seen = {.syncNames = "FIRST 1 (\"b\", \"c\")"}},
      {.name = "the removed member's walsender still has a priority",
       .seen = {.syncNames = "ANY 1 (\"b\", \"c\")", .othersWithPriority = 1}},
      {.name = "a member's walsender has not taken the setting",
       .seen = {.syncNames = "ANY 1 (\"b\", \"c\")", .syncWithoutPriority = 1}},
  };
  for (const Row& r : rows) {
    auto c = checkFence(fence, r.seen);
    EXPECT_EQ(c.ok(), r.holds) << r.name << (c.ok() ? "" : ": " + c.error());
  }
  EXPECT_EQ(checkFence(fence, {.syncNames = "ANY 2 (b, c)"}).error(),
            "synchronous_standby_names is 'ANY 2 (b, c)', not ANY 1 (\"b\", \"c\")");
}

TEST(PlanFence, QuorumStepTable) {
  const QuorumFence removal = planQuorumFence(StandbyQuorum{2, {"b", "c", "d", "e"}}, {2, {"b", "c", "d"}}).value();
  const QuorumFence raise = planQuorumFence(StandbyQuorum{1, {"b", "c", "d"}}, {2, {"b", "c", "d"}}).value();
  using P = QuorumFenceProgress;
  using S = QuorumFenceStep;
  struct Row {
    const char* name = "";
    QuorumFence fence{};
    P at{};
    QuorumFenceSeen seen{};
    bool gaveUp = false;
    S want{};
    P then{};
  };
  const std::vector<Row> rows = {
      {.name = "removal: p0 read at the first look, k = 2: one member there is not enough",
       .fence = removal,
       .seen = {.memberFlushes = {500, 400, 300}, .primaryFlush = 500},
       .want = S::kWaitForCatchUp,
       .then = {.p0 = 500}},
      {.name = "removal: the second latest reached p0 (not the primary's later position)",
       .fence = removal,
       .at = {.p0 = 500},
       .seen = {.memberFlushes = {600, 500, 300}, .primaryFlush = 700},
       .want = S::kCaughtUp,
       .then = {.p0 = 500}},
      {.name = "removal: already there at the first look",
       .fence = removal,
       .seen = {.memberFlushes = {500, 500}, .primaryFlush = 500},
       .want = S::kCaughtUp,
       .then = {.p0 = 500}},
      {.name = "removal: fewer than k members stream",
       .fence = removal,
       .at = {.p0 = 500},
       .seen = {.memberFlushes = {900}, .primaryFlush = 900},
       .want = S::kWaitForCatchUp,
       .then = {.p0 = 500}},
      {.name = "removal: needs no walsender ended, whatever started when",
       .fence = removal,
       .at = {.p0 = 500},
       .seen = {.staleWalsenders = 3, .memberFlushes = {500, 500}, .primaryFlush = 500},
       .want = S::kCaughtUp,
       .then = {.p0 = 500}},
      {.name = "removal: at the deadline, not caught up: abandoned",
       .fence = removal,
       .at = {.p0 = 500},
       .seen = {.memberFlushes = {500, 400}, .primaryFlush = 500},
       .gaveUp = true,
       .want = S::kGaveUp,
       .then = {.p0 = 500}},
      {.name = "removal: at the deadline, caught up: caught up",
       .fence = removal,
       .at = {.p0 = 500},
       .seen = {.memberFlushes = {500, 500}, .primaryFlush = 500},
       .gaveUp = true,
       .want = S::kCaughtUp,
       .then = {.p0 = 500}},
      {.name = "raise: walsenders from before the reload: end them, no p0 yet",
       .fence = raise,
       .seen = {.staleWalsenders = 3, .memberFlushes = {500, 500, 500}, .primaryFlush = 500},
       .want = S::kEndWalsenders,
       .then = {.walsendersEnded = true}},
      {.name = "raise: ended, one still there: wait, no p0 yet",
       .fence = raise,
       .at = {.walsendersEnded = true},
       .seen = {.staleWalsenders = 1, .memberFlushes = {500, 500}, .primaryFlush = 500},
       .want = S::kWaitForWalsenders,
       .then = {.walsendersEnded = true}},
      {.name = "raise: still there at the deadline: abandoned",
       .fence = raise,
       .at = {.walsendersEnded = true},
       .seen = {.staleWalsenders = 1, .memberFlushes = {500, 500}, .primaryFlush = 500},
       .gaveUp = true,
       .want = S::kGaveUp,
       .then = {.walsendersEnded = true}},
      {.name = "raise: every member's walsender is new: p0 read now",
       .fence = raise,
       .at = {.walsendersEnded = true},
       .seen = {.memberFlushes = {520, 480}, .primaryFlush = 520},
       .want = S::kWaitForCatchUp,
       .then = {.walsendersEnded = true, .p0 = 520}},
      {.name = "raise: two new walsenders' members flushed p0",
       .fence = raise,
       .at = {.walsendersEnded = true, .p0 = 520},
       .seen = {.memberFlushes = {530, 520}, .primaryFlush = 530},
       .want = S::kCaughtUp,
       .then = {.walsendersEnded = true, .p0 = 520}},
      {.name = "raise: no member's walsender runs from before (none streamed): no need to end any",
       .fence = raise,
       .seen = {.primaryFlush = 500},
       .want = S::kWaitForCatchUp,
       .then = {.p0 = 500}},
  };
  for (const Row& r : rows) {
    const QuorumFenceNext next = planQuorumFenceStep(r.fence, r.at, r.seen, r.gaveUp);
    EXPECT_EQ(next.step, r.want) << r.name;
    EXPECT_EQ(next.progress, r.then) << r.name;
  }
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
