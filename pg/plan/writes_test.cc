// Table tests of the writes planner (pg/plan/writes.h) and the catch-up planner
// (pg/plan/catch_up.h): when writes stop, shut down, resume, and come back.
#include "pg/plan/catch_up.h"
#include "pg/plan/writes.h"

#include <gtest/gtest.h>

#include <vector>

namespace dugong::pg {
namespace {

TEST(PlanWrites, StopTable) {
  struct Row {
    WritesFacts facts;
    bool evenIfDown;
    bool stop;
  };
  const Row rows[] = {
      {{true, true, false}, false, true},    // a running primary
      {{false, true, false}, false, false},  // a stopped primary accepts nothing
      {{false, true, false}, true, true},    // the shutdown marks it anyway
      {{true, false, false}, false, false},  // a standby accepts no writes
      {{false, false, false}, true, false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(mustStopWrites(r.facts, r.evenIfDown), r.stop)
        << "running=" << r.facts.running << " primary=" << r.facts.primary << " evenIfDown=" << r.evenIfDown;
  }
  EXPECT_TRUE(shutDownStops(true, false));
  EXPECT_TRUE(shutDownStops(false, true));
  EXPECT_FALSE(shutDownStops(false, false));
  EXPECT_TRUE(mustResumeWrites({true, true, true}));
  EXPECT_FALSE(mustResumeWrites({true, true, false}));
}

// The mode is sticky: only a resume lifts it, and a stop does not soften a shutdown.
TEST(PlanWrites, ModeTable) {
  EXPECT_EQ(afterStopWrites(WritesMode::kOpen), WritesMode::kStopped);
  EXPECT_EQ(afterStopWrites(WritesMode::kShutDown), WritesMode::kShutDown);
  EXPECT_EQ(afterShutDown(WritesMode::kStopped), WritesMode::kShutDown);
  EXPECT_EQ(afterResume(WritesMode::kShutDown), WritesMode::kOpen);
  EXPECT_EQ(afterResume(WritesMode::kStopped), WritesMode::kOpen);
}

// An apply of a primary while writes are stopped leaves it read-only, while shut down
// leaves it stopped; only the open mode lets its own configuration decide.
TEST(PlanWrites, PrimaryUnderEachMode) {
  const PrimaryUnderWrites open = planPrimaryUnderWrites(WritesMode::kOpen);
  EXPECT_TRUE(open.run);
  EXPECT_FALSE(open.writesStopped);
  const PrimaryUnderWrites stopped = planPrimaryUnderWrites(WritesMode::kStopped);
  EXPECT_TRUE(stopped.run);
  EXPECT_TRUE(stopped.writesStopped);
  const PrimaryUnderWrites down = planPrimaryUnderWrites(WritesMode::kShutDown);
  EXPECT_FALSE(down.run);
  EXPECT_TRUE(down.writesStopped);
}

TEST(PlanCatchUp, Table) {
  struct Row {
    const char* name;
    std::optional<uint64_t> target;
    std::optional<SyncSeen> seen;
    std::optional<uint64_t> newTarget;
    bool targetSet;
    bool writable;
  };
  const Row rows[] = {
      {"not streaming synchronously: wait", std::nullopt, std::nullopt, std::nullopt, false, false},
      {"not streaming, target kept", 100, std::nullopt, 100, false, false},
      {"first seen: the target is the primary's position", std::nullopt, SyncSeen{100, 90}, 100, true, false},
      {"first seen, already there", std::nullopt, SyncSeen{100, 100}, 100, true, true},
      {"behind the target", 100, SyncSeen{150, 99}, 100, false, false},
      {"reached the target (not the primary's later position)", 100, SyncSeen{150, 100}, 100, false, true},
  };
  for (const Row& r : rows) {
    const CatchUp c = planCatchUp(r.target, r.seen);
    EXPECT_EQ(c.target, r.newTarget) << r.name;
    EXPECT_EQ(c.targetSet, r.targetSet) << r.name;
    EXPECT_EQ(c.writable, r.writable) << r.name;
  }
}

TEST(PlanCatchUp, KthFlush) {
  EXPECT_EQ(kthLatestFlush({90, 120, 100}, 1), std::optional<uint64_t>(120));
  EXPECT_EQ(kthLatestFlush({90, 120, 100}, 2), std::optional<uint64_t>(100));
  EXPECT_EQ(kthLatestFlush({90, 120, 100}, 3), std::optional<uint64_t>(90));
  EXPECT_EQ(kthLatestFlush({100, 100, 90}, 2), std::optional<uint64_t>(100));  // two have flushed 100
  EXPECT_EQ(kthLatestFlush({90, 120}, 3), std::nullopt);
  EXPECT_EQ(kthLatestFlush({}, 1), std::nullopt);
  EXPECT_EQ(kthLatestFlush({90}, 0), std::nullopt);
}

TEST(PlanCatchUp, QuorumTable) {
  struct Row {
    const char* name = "";
    std::optional<uint64_t> target{};
    QuorumSeen seen{};
    std::optional<uint64_t> newTarget{};
    bool targetSet = false;
    bool writable = false;
  };
  const std::vector<Row> rows = {
      {.name = "no member streams synchronously: wait", .seen = {.primaryAt = 100, .k = 1}},
      {.name = "k = 2, one member streams: no target yet",
       .seen = {.primaryAt = 100, .k = 2, .memberFlushes = {100}}},
      {.name = "k = 2, two stream: the target is the primary's position",
       .seen = {.primaryAt = 100, .k = 2, .memberFlushes = {100, 90}},
       .newTarget = 100,
       .targetSet = true},
      {.name = "k = 2, both there",
       .seen = {.primaryAt = 100, .k = 2, .memberFlushes = {100, 100}},
       .newTarget = 100,
       .targetSet = true,
       .writable = true},
      {.name = "k = 2: the latest alone is not enough",
       .target = 100,
       .seen = {.primaryAt = 150, .k = 2, .memberFlushes = {150, 99, 50}},
       .newTarget = 100},
      {.name = "k = 2: the second latest reached the target (not the primary's later position)",
       .target = 100,
       .seen = {.primaryAt = 150, .k = 2, .memberFlushes = {50, 100, 150}},
       .newTarget = 100,
       .writable = true},
      {.name = "k = 1 of two: the latest is enough",
       .target = 100,
       .seen = {.primaryAt = 150, .k = 1, .memberFlushes = {40, 120}},
       .newTarget = 100,
       .writable = true},
      {.name = "fewer than k stream now: target kept, not writable",
       .target = 100,
       .seen = {.primaryAt = 150, .k = 2, .memberFlushes = {150}},
       .newTarget = 100},
  };
  for (const Row& r : rows) {
    const CatchUp c = planCatchUp(r.target, r.seen);
    EXPECT_EQ(c.target, r.newTarget) << r.name;
    EXPECT_EQ(c.targetSet, r.targetSet) << r.name;
    EXPECT_EQ(c.writable, r.writable) << r.name;
  }
  // The sync's rule is the quorum's with one member and k = 1.
  for (uint64_t flush : {90u, 100u, 110u}) {
    const CatchUp sync = planCatchUp(std::nullopt, std::optional<SyncSeen>(SyncSeen{100, flush}));
    const CatchUp quorum = planCatchUp(std::nullopt, QuorumSeen{100, 1, {flush}});
    EXPECT_EQ(sync.target, quorum.target);
    EXPECT_EQ(sync.writable, quorum.writable);
  }
}

}  // namespace
}  // namespace dugong::pg
