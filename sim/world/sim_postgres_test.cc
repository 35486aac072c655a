// The simulated postgres of both simulators: what its adapter reports and when, and its
// contract (exactly-once callbacks, none after the adapter is gone, one transition at a
// time checked).
#include "sim/world/sim_postgres.h"
#include "sim/world/trace_lines.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dugong::simworld {
namespace sim_postgres_test {

using Lines = TraceLines;

PeerIdentity peer(const std::string& id) {
  PeerIdentity p;
  p.id = id;
  p.ip = "10.0.0.1";
  p.pgUrl = "tcp://postgres@" + id + ":5432/postgres";
  p.zoneId = id;
  return p;
}

// Fixed steps, as dugong-sim's: restart 1000 ms, 1000 more to start or stop, queries 10.
PgModel fixedModel(int64_t healthIntervalMs) {
  constexpr Latency kStep{1000, 1000};
  constexpr Latency kQuery{10, 10};
  return PgModel{.init = {100, 100}, .fence = kQuery, .walRead = kQuery, .reload = kStep, .restart = kStep,
                 .slowReload = kStep, .slowRestart = kStep, .startStop = kStep, .writes = kQuery, .shutDown = kStep,
                 .rejoin = kStep, .upstreamPoll = kQuery, .writableWrite = kQuery,
                 .healthIntervalMs = healthIntervalMs, .readOnlyUntilSyncCaughtUp = false};
}

struct Fixture {
  explicit Fixture(int64_t healthIntervalMs = 0) : fleet(q, rng, rng, lines, fixedModel(healthIntervalMs)) {
    a.id = "node1";
    b.id = "node2";
    fleet.add(a);
    fleet.add(b);
  }
  std::unique_ptr<SimPostgres> adapter(int host) {
    SimPostgresHooks h;
    h.deliver = [this](const Event&, const std::function<void()>& call) {
      ++delivered;
      call();
    };
    h.violation = [this](const std::string& invariant, const std::string&) { violations.push_back(invariant); };
    return std::make_unique<SimPostgres>(fleet, host, std::move(h));
  }
  void runAll() {
    while (!q.empty()) q.runNext();
  }

  EventQueue q;
  Rng rng{1};
  Lines lines;
  PgServer a, b;
  PgFleet fleet;
  int delivered = 0;
  std::vector<std::string> violations;
};

TEST(SimPostgres, StartsAPrimaryAfterTheRestartAndStartSteps) {
  Fixture f;
  auto pg = f.adapter(0);
  std::optional<PgConfigApplied> applied;
  int64_t at = -1;
  pg->apply(PgConfig::firstPrimary(peer("node2")), [&](PgConfigApplied r) {
    applied = r;
    at = f.q.now();
  });
  EXPECT_FALSE(applied) << "never inside the call";
  f.runAll();
  ASSERT_TRUE(applied);
  EXPECT_TRUE(applied->ok);
  EXPECT_TRUE(applied->online);
  EXPECT_EQ(at, 2000);
  EXPECT_TRUE(f.a.setUp) << "initdb";
  EXPECT_EQ(f.a.config.role, PgRole::kPrimary);
  EXPECT_EQ(pg->transitions(), 0);
}

TEST(SimPostgres, NoCallbackRunsOnceTheAdapterIsGone) {
  Fixture f;
  auto pg = f.adapter(0);
  bool called = false;
  pg->readWal([&](WalPositionRead) { called = true; });
  pg->apply(PgConfig::none(), [&](PgConfigApplied) { called = true; });
  pg.reset();
  f.runAll();
  EXPECT_FALSE(called);
  EXPECT_EQ(f.delivered, 0);
}

TEST(SimPostgres, ASecondTransitionWhileOneIsInFlightIsReported) {
  Fixture f;
  auto pg = f.adapter(0);
  int answers = 0;
  pg->apply(PgConfig::firstPrimary(peer("node2")), [&](PgConfigApplied) { ++answers; });
  pg->fence(peer("node2"), [&](PgFenced r) {
    ++answers;
    EXPECT_TRUE(r.ok) << "the fence waited for the apply lock";
  });
  f.runAll();
  EXPECT_EQ(answers, 2);
  EXPECT_EQ(f.violations, std::vector<std::string>{"two-transitions"});
}

TEST(SimPostgres, AStandbyWithNoDataDirectoryCopiesItsRestorePeer) {
  Fixture f;
  f.b.setUp = true;
  f.b.running = true;
  f.b.config = PgConfig::firstPrimary(peer("node1"));
  for (uint64_t c = 1; c <= 3; ++c) f.b.wal.append(c);
  auto pg = f.adapter(0);
  std::optional<PgConfigApplied> applied;
  pg->apply(PgConfig::standby(PgRole::kSync, peer("node2"), peer("node2")), [&](PgConfigApplied r) { applied = r; });
  f.runAll();
  ASSERT_TRUE(applied);
  EXPECT_TRUE(applied->ok);
  EXPECT_EQ(f.a.wal.size(), 3u);
  EXPECT_FALSE(f.a.wal.divergedFrom(f.b.wal));
  EXPECT_TRUE(f.a.standbySignal);
  EXPECT_TRUE(f.fleet.streamsFrom(0, 1));
  EXPECT_TRUE(f.fleet.attachedSync(1)) << "node2 names node1 its sync, and node1 streams from it";
}

TEST(SimPostgres, AStandbyStartsAtLeastAtThePrimarysValueItsCopyHolds) {
  Fixture f;
  f.b.setUp = true;
  f.b.running = true;
  f.b.config = PgConfig::firstPrimary(peer("node1"));
  f.b.runMaxConnections = f.b.controlMaxConnections = 140;  // the primary runs a raised value
  f.b.wal.append(1);
  f.a.ownMaxConnections = 100;  // this host's own, lower
  auto pg = f.adapter(0);
  std::optional<PgConfigApplied> applied;
  pg->apply(PgConfig::standby(PgRole::kAsync, peer("node2"), peer("node2")), [&](PgConfigApplied r) { applied = r; });
  f.runAll();
  ASSERT_TRUE(applied);
  EXPECT_TRUE(applied->ok) << applied->error;
  EXPECT_EQ(f.a.controlMaxConnections, 140) << "pg_basebackup copies pg_control";
  EXPECT_EQ(f.a.runMaxConnections, 140) << "raised to the floor (pg::hotStandbyStartSettings)";
  EXPECT_TRUE(f.violations.empty());
}

// A standby holding part of a record (its upstream stopped sending mid-record), its
// replay behind: before a fence its WAL ends where it received; fenced, where replay ends,
// once replay has caught up with what it received (a whole record), and its promotion's
// new timeline begins there: the position read is on the old timeline.
TEST(SimPostgres, AFencedStandbysWalEndsAtItsLastWholeRecordOnceReplayHasEnded) {
  Fixture f;
  f.a.setUp = f.a.running = f.a.standbySignal = true;
  f.a.config = PgConfig::standby(PgRole::kSync, peer("node2"), peer("node2"));
  for (uint64_t c = 1; c <= 4; ++c) f.a.wal.append(c);
  f.a.partialBytes = 0x20;
  f.a.replayedAt = 5000;
  auto pg = f.adapter(0);
  std::optional<WalPositionRead> read;
  pg->readWal([&](WalPositionRead r) { read = r; });
  f.runAll();
  ASSERT_TRUE(read && read->position);
  EXPECT_EQ(*read->position, WalPosition(4 * Wal::kRecordBytes + 0x20)) << "not fenced: what it received";
  std::optional<PgFenced> fenced;
  pg->fence(std::nullopt, [&](PgFenced r) { fenced = r; });
  f.runAll();
  ASSERT_TRUE(fenced && fenced->ok);
  read.reset();
  pg->readWal([&](WalPositionRead r) { read = r; });
  f.runAll();
  ASSERT_TRUE(read && read->position) << read->error;
  EXPECT_GE(f.q.now(), 5000) << "answered once replay had ended";
  EXPECT_EQ(*read->position, WalPosition(4 * Wal::kRecordBytes));
  std::optional<PgConfigApplied> applied;
  pg->apply(PgConfig::primary(peer("node2")), [&](PgConfigApplied r) { applied = r; });
  f.runAll();
  ASSERT_TRUE(applied && applied->ok) << applied->error;
  EXPECT_EQ(f.a.wal.timelineAt(*read->position), f.a.wal.history().timelineAt(*read->position));
  EXPECT_NE(f.a.wal.timeline(), f.a.wal.timelineAt(*read->position)) << "promoted after the position read";
}

// A replay that has not ended by promoteTimeout fails the read: never the received position.
TEST(SimPostgres, AFencedStandbyWhoseReplayDoesNotEndAnswersNoPosition) {
  Fixture f;
  f.a.setUp = f.a.running = f.a.standbySignal = true;
  f.a.config = PgConfig::standby(PgRole::kSync, peer("node2"), peer("node2"));
  f.a.wal.append(1);
  f.a.partialBytes = 0x20;
  f.a.replayedAt = 60000;
  auto pg = f.adapter(0);
  pg->fence(std::nullopt, [](PgFenced) {});
  f.runAll();
  std::optional<WalPositionRead> read;
  pg->readWal([&](WalPositionRead r) { read = r; });
  f.runAll();
  ASSERT_TRUE(read);
  EXPECT_FALSE(read->position);
  EXPECT_NE(read->error.find("replay has not reached the end"), std::string::npos) << read->error;
}

TEST(SimPostgres, AHealthCheckThatDoesNotPollLooksAfterEachApplyAndComesToRest) {
  Fixture f;
  auto pg = f.adapter(0);
  std::vector<bool> seen;
  pg->startHealthCheck([&](bool healthy, const std::string&) { seen.push_back(healthy); });
  pg->apply(PgConfig::firstPrimary(peer("node2")), [](PgConfigApplied) {});
  f.runAll();  // ends: nothing polls
  EXPECT_EQ(seen, (std::vector<bool>{false, true}));
}

TEST(SimPostgres, APollingHealthCheckFindsACrashedPostmasterAndNothingRestartsIt) {
  Fixture f(1000);
  f.a.setUp = true;
  f.a.running = true;
  f.a.config = PgConfig::firstPrimary(peer("node2"));
  auto pg = f.adapter(0);
  std::vector<bool> seen;
  pg->startHealthCheck([&](bool healthy, const std::string&) { seen.push_back(healthy); });
  while (f.q.nextAt() < 1500) f.q.runNext();
  f.fleet.crash(0, 5000);
  while (f.q.nextAt() < 10000) f.q.runNext();
  EXPECT_EQ(seen, (std::vector<bool>{true, false}));
  EXPECT_TRUE(pg->postmasterGone());
  EXPECT_FALSE(f.a.running) << "no supervisor";
  std::optional<PgConfigApplied> restarted;
  pg->apply(PgConfig::firstPrimary(peer("node2")), [&](PgConfigApplied r) { restarted = r; });
  while (!restarted) f.q.runNext();
  EXPECT_TRUE(restarted->ok) << "the driver's restart starts it once it is no longer broken";
}

// Quorum mode: a commit is released once the k-th latest flush among the standbys whose
// walsender has a priority reaches it, k being each walsender's own copy: after a reload
// that raises k, the walsenders release under the old k until each has taken the new
// rule (0-20 ms later), the staleness a step's fence must end (docs/decisions/0079 5.2).
TEST(SimPostgres, QuorumReleaseFollowsEachWalsendersRuleAndAReloadReachesThemLater) {
  EventQueue q;
  Rng rng{7};
  Lines lines;
  PgServer p, s1, s2;
  PgFleet fleet(q, rng, rng, lines, fixedModel(0));
  p.id = "node1";
  s1.id = "node2";
  s2.id = "node3";
  for (PgServer* x : {&p, &s1, &s2}) {
    fleet.add(*x);
    x->running = true;
    x->setUp = true;
  }
  p.config.role = PgRole::kPrimary;
  for (PgServer* x : {&s1, &s2}) x->config = PgConfig::standby(PgRole::kSync, peer("node1"), peer("node1"));
  for (uint64_t c = 1; c <= 3; ++c) p.wal.append(c);
  s1.wal.copyFrom(p.wal, 3);
  s2.wal.copyFrom(p.wal, 1);
  p.quorum = pg::StandbyQuorum{1, {"node2", "node3"}};
  EXPECT_EQ(fleet.quorumReleased(0), 3u);  // ANY 1: node2's flush
  fleet.reloadQuorum(0, pg::StandbyQuorum{2, {"node2", "node3"}});
  EXPECT_EQ(fleet.quorumReleased(0), 3u);  // both walsenders still run ANY 1
  q.at(21, [] {});
  q.runNext();
  EXPECT_EQ(fleet.quorumReleased(0), 1u);  // ANY 2: the second latest, node3's
  EXPECT_EQ(fleet.memberFlushes(0, {"node2", "node3"}).size(), 2u);
  fleet.reloadQuorum(0, pg::StandbyQuorum{1, {"node2"}});
  q.at(42, [] {});
  q.runNext();
  EXPECT_EQ(fleet.memberFlushes(0, {"node2", "node3"}).size(), 1u);  // node3's priority is gone
  EXPECT_EQ(fleet.quorumReleased(0), 3u);
}

}  // namespace sim_postgres_test
}  // namespace dugong::simworld
