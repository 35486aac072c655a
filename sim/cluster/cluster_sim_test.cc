// Tests of the whole-cluster simulator itself: determinism, the fault plan, shrinking,
// and the invariant checker catching hand-made violations.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "sim/cluster/checks/invariants.h"
#include "sim/cluster/runner.h"
#include "sim/cluster/scenario.h"
#include "sim/world/wal.h"

namespace dugong::clustersim {
namespace {

PeerIdentity peer(const std::string& id) { return PeerIdentity{id, "10.0.0.1", "tcp://postgres@" + id, id, {}}; }

ClusterState state(int64_t gen, const std::string& primary, const std::string& sync,
                   std::initializer_list<std::string> async, uint64_t initWal = 0) {
  ClusterState s;
  s.generation = gen;
  s.primary = peer(primary);
  s.sync = peer(sync);
  for (const auto& a : async) s.async.push_back(peer(a));
  s.initWal = WalPosition(initWal);
  return s;
}

// Absence oracle for hand-made histories: the listed peers were gone at some point.
AbsenceOracle absent(std::set<std::string> gone) {
  return [gone](const std::string& id, EpochMs, EpochMs) { return gone.count(id) > 0; };
}

// A quorum state (format 2): ANY k of `members`, no sync.
ClusterState quorumState(int64_t gen, const std::string& primary, int k, std::initializer_list<std::string> members,
                         uint64_t initWal = 0) {
  ClusterState s = state(gen, primary, "x", {}, initWal);
  s.sync.reset();
  Quorum q;
  q.k = k;
  for (const auto& m : members) q.members.push_back(peer(m));
  s.quorum = q;
  return s;
}

bool caught(const InvariantChecker& c, const std::string& invariant) {
  for (const auto& v : c.violations()) {
    if (v.invariant == invariant) return true;
  }
  return false;
}

// ---- Wal

TEST(SimWal, PrefixAndDivergence) {
  Wal a, b;
  a.append(1);
  a.append(2);
  b.copyFrom(a, 1);
  EXPECT_FALSE(b.divergedFrom(a));
  EXPECT_TRUE(b.contains(a.mark(0)));
  EXPECT_FALSE(b.contains(a.mark(1)));
  b.append(99);  // different record at index 1
  EXPECT_TRUE(b.divergedFrom(a));
  EXPECT_FALSE(b.contains(a.mark(1)));
  EXPECT_EQ(a.position().toString(), "0/00000100");
}

// Timelines as postgres keeps them: a promotion moves on to a new one; a standby that
// has everything its upstream has is on the upstream's; one that is behind is on the
// timeline of its last record; a rewind follows the source from the fork.
TEST(SimWal, TimelinesFollowPromotionsAndStreaming) {
  Wal a, b;
  a.append(1);
  a.append(2);
  b.copyFrom(a, 2);
  a.promote(2);
  EXPECT_EQ(a.history(), (TimelineHistory{2, {{1, WalPosition(0x100)}}}));
  b.copyFrom(a, SIZE_MAX);  // nothing new, but it follows the promotion
  EXPECT_EQ(b.timeline(), 2);
  a.append(3);
  a.append(4);
  b.copyFrom(a, 1);  // behind: on timeline 2, the timeline of its last record
  EXPECT_EQ(b.history(), (TimelineHistory{2, {{1, WalPosition(0x100)}}}));
  EXPECT_EQ(b.history().timelineAt(WalPosition(0x100)), 1);
  EXPECT_EQ(b.history().timelineAt(WalPosition(0x180)), 2);
  Wal c;  // written on timeline 1 past the fork
  c.append(1);
  c.append(2);
  c.append(5);
  EXPECT_EQ(c.history().timelineAt(WalPosition(0x180)), 1);
  EXPECT_EQ(c.rewindTo(a), 1u);
  EXPECT_EQ(c.timeline(), 1);
  c.copyFrom(a, SIZE_MAX);
  EXPECT_EQ(c.history(), a.history());
}

// ---- determinism and the plan

TEST(ClusterSim, SameSeedSameTrace) {
  RunResult a = runSeed(7);
  RunResult b = runSeed(7);
  EXPECT_EQ(a.traceHash, b.traceHash);
  EXPECT_EQ(a.trace.size(), b.trace.size());
  EXPECT_EQ(a.acks, b.acks);
  EXPECT_GT(a.acks, 0);
}

TEST(ClusterSim, DifferentSeedsDiffer) { EXPECT_NE(runSeed(1).traceHash, runSeed(2).traceHash); }

TEST(ClusterSim, ScenarioIsDerivedFromTheSeedOnly) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Scenario s = makeScenario(seed);
    Scenario again = makeScenario(seed);
    ASSERT_EQ(s.faults.size(), again.faults.size());
    EXPECT_GE(s.peers, 3);
    EXPECT_LE(s.peers, 6);
    for (size_t i = 0; i < s.faults.size(); ++i) {
      EXPECT_EQ(s.faults[i].index, static_cast<int>(i));
      EXPECT_EQ(s.faults[i].at, again.faults[i].at);
      EXPECT_EQ(s.faults[i].kind, again.faults[i].kind);
      EXPECT_LT(s.faults[i].at, s.faultPhaseMs);
    }
  }
}

TEST(ClusterSim, WithoutFaultsTheClusterBecomesReadWrite) {
  WorldOptions o;
  o.onlyFaults = std::set<int>{};
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    if (makeScenario(seed).standby) continue;  // never read-write (AStandbySeedWithoutFaults...)
    RunResult r = runSeed(seed, o);
    EXPECT_TRUE(r.ok) << (r.violation ? r.violation->detail : "");
    EXPECT_TRUE(r.faultsPlanned.empty());
    EXPECT_EQ(r.generations, 1);
    ASSERT_TRUE(r.convergedAfterMs.has_value());
    EXPECT_GT(r.acks, 0);
  }
}

// The fault that restarts the primary late for its sync crashes the primary the state
// names, not another peer.
TEST(ClusterSim, RestartPrimaryLateSyncCrashesThePrimary) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 400 && checked < 3; ++seed) {
    const Scenario s = makeScenario(seed);
    for (const Fault& f : s.faults) {
      if (f.kind != FaultKind::kRestartPrimaryLateSync) continue;
      WorldOptions o;
      o.onlyFaults = std::set<int>{f.index};
      const RunResult r = runScenario(s, o);
      std::string primary;
      for (const TraceLine& line : r.trace) {
        const std::string& t = line.text;
        if (line.kind != 'F') continue;
        if (const size_t dies = t.find(": node"); t.rfind("#", 0) == 0 && dies != std::string::npos &&
                                                  t.find(" dies, ") != std::string::npos) {
          primary = t.substr(dies + 2, t.find(' ', dies + 2) - dies - 2);
        } else if (!primary.empty() && t.find(" crashes (agent and postgres)") != std::string::npos) {
          EXPECT_EQ(t.substr(0, t.find(' ')), primary) << "seed " << seed << ": " << t;
          ++checked;
          break;
        }
      }
      break;
    }
  }
  EXPECT_EQ(checked, 3) << "too few seeds with the fault and a running primary";
}

// A host suspended past its session timeout resumes with its clock (the one its agent
// reads) ahead by the whole span, and the seed passes.
TEST(ClusterSim, ASuspendedHostsClockCountsTheSpan) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 600 && checked < 3; ++seed) {
    const Scenario s = makeScenario(seed);
    for (const Fault& f : s.faults) {
      if (f.kind != FaultKind::kSuspendHost || f.duration <= s.sessionTimeoutMs) continue;
      WorldOptions o;
      o.onlyFaults = std::set<int>{f.index};
      const RunResult r = runScenario(s, o);
      EXPECT_TRUE(r.ok) << "seed " << seed << ": " << (r.violation ? r.violation->detail : "");
      for (const TraceLine& line : r.trace) {
        const std::string& t = line.text;
        const size_t reads = t.find("; its clock reads ");
        if (line.kind != 'F' || reads == std::string::npos || t.find("its agent steps what waited") == std::string::npos) {
          continue;
        }
        const int64_t span = std::stoll(t.substr(t.find(" resumes after ") + 15));
        const int64_t after = std::stoll(t.substr(reads + 18));
        const int64_t before = std::stoll(t.substr(t.find(" (", reads) + 2));
        EXPECT_EQ(after - before, span) << "seed " << seed << ": " << t;
        if (span == f.duration) ++checked;  // not cut short by the end of the faults
      }
      break;
    }
  }
  EXPECT_EQ(checked, 3) << "too few seeds with a host suspended past its session timeout";
}

TEST(ClusterSim, ReplayCommandNamesSeedAndFaults) {
  EXPECT_EQ(replayCommand(42, std::set<int>{3, 7}), "dugong-cluster-sim --seed 42 --faults 3,7 --trace full");
  EXPECT_EQ(replayCommand(42, std::set<int>{}), "dugong-cluster-sim --seed 42 --faults none --trace full");
  EXPECT_EQ(replayCommand(5, std::nullopt), "dugong-cluster-sim --seed 5 --trace full");
}

// A primary that acknowledges before its sync has the commit (asynchronous replication)
// loses acknowledged commits at a takeover; the simulator must notice within a few seeds,
// and shrinking must keep the failure while dropping faults.
TEST(ClusterSim, CatchesAPlantedWorldBugAndShrinksIt) {
  WorldOptions o;
  o.testingAckBeforeSync = true;
  o.checkTakeoverRules = false;  // its consequence, not the rule that warns of it first
  std::optional<RunResult> failing;
  for (uint64_t seed = 1; seed <= 60 && !failing; ++seed) {
    RunResult r = runSeed(seed, o);
    if (!r.ok) failing = std::move(r);
  }
  ASSERT_TRUE(failing.has_value()) << "acknowledging before the sync has a commit went unnoticed";
  EXPECT_EQ(failing->violation->invariant, "lost-commit");
  Shrunk s = shrink(failing->seed, *failing, o, 60);
  EXPECT_FALSE(s.result.ok);
  EXPECT_EQ(s.result.violation->invariant, "lost-commit");
  EXPECT_LE(s.faults.size(), failing->faultsPlanned.size());
  // The shrunk run replays exactly.
  WorldOptions replay = o;
  replay.onlyFaults = s.faults;
  EXPECT_EQ(runSeed(failing->seed, replay).traceHash, s.result.traceHash);
  bool hasViolationLine = false;
  for (const auto& line : relevantTrace(s.result.trace)) hasViolationLine |= line.kind == 'V';
  EXPECT_TRUE(hasViolationLine);
}

// ---- the invariant checker on hand-made histories

TEST(Invariants, LegalHistoryPasses) {
  InvariantChecker c(absent({"a"}));
  c.onStateWrite({1, 1, "a", std::nullopt, state(1, "a", "b", {"c"}), {}});
  Wal w;
  WalMark m = w.append(1);
  c.onAck(2, "a", 1, m, w, false, std::string("a"));
  c.checkCurrentPrimary(3, "a", w);
  ClusterState g2 = state(2, "b", "c", {}, 0x80);
  g2.deposed.push_back(peer("a"));
  c.onStateWrite({10, 9, "b", state(1, "a", "b", {"c"}), g2, WalPosition(0x80)});
  Wal wb = w;
  c.checkCurrentPrimary(11, "b", wb);
  EXPECT_TRUE(c.ok()) << c.violations().front().detail;
}

TEST(Invariants, CatchesALostCommit) {
  InvariantChecker c(absent({}));
  Wal primary, other;
  WalMark m = primary.append(1);
  c.onAck(1, "a", 1, m, primary, false, std::string("a"));
  other.append(2);
  c.checkCurrentPrimary(2, "b", other);
  EXPECT_TRUE(caught(c, "lost-commit"));
}

TEST(Invariants, CatchesAnAckOnAHistoryWithoutAnEarlierAck) {
  InvariantChecker c(absent({}));
  Wal a, b;
  c.onAck(1, "a", 1, a.append(1), a, false, std::string("a"));
  b.append(2);
  c.onAck(2, "b", 2, b.append(3), b, false, std::string("b"));
  EXPECT_TRUE(caught(c, "lost-commit"));
}

TEST(Invariants, CatchesTwoWritersInOneGeneration) {
  InvariantChecker c(absent({}));
  Wal w;
  c.onAck(1, "a", 3, w.append(1), w, false, std::string("a"));
  c.onAck(2, "b", 3, w.append(2), w, false, std::string("a"));
  EXPECT_TRUE(caught(c, "two-writers"));
}

TEST(Invariants, CatchesADeposedPeerServing) {
  InvariantChecker c(absent({}));
  Wal w;
  c.onAck(1, "a", 1, w.append(1), w, true, std::string("a"));
  EXPECT_TRUE(caught(c, "deposed-serves"));
  InvariantChecker d(absent({}));
  d.onDeposedWritable(1, "a");
  EXPECT_TRUE(caught(d, "deposed-serves"));
}

TEST(Invariants, CatchesGenerationsGoingBackwards) {
  InvariantChecker c(absent({"a"}));
  c.onStateWrite({1, 1, "a", std::nullopt, state(1, "a", "b", {"c"}), {}});
  c.onStateWrite({2, 2, "operator", state(1, "a", "b", {"c"}), state(1, "a", "b", {"c"}), {}});
  EXPECT_TRUE(c.ok());
  c.onPeerView(3, "b", 1, 2);
  c.onPeerView(4, "b", 1, 1);
  EXPECT_TRUE(caught(c, "generation-backwards"));
  InvariantChecker z(absent({}));
  z.onStateWrite({1, 1, "a", state(4, "a", "b", {"c"}), state(4, "a", "b", {"c"}), {}});
  z.onStateWrite({2, 2, "a", state(4, "a", "b", {"c"}), state(3, "a", "b", {"c"}), {}});
  EXPECT_TRUE(caught(z, "generation-backwards"));
}

TEST(Invariants, CatchesATakeoverByAnAsync) {
  InvariantChecker c(absent({"a", "b"}));
  ClusterState next = state(2, "c", "b", {});
  next.deposed.push_back(peer("a"));
  c.onStateWrite({5, 5, "c", state(1, "a", "b", {"c"}), next, WalPosition(0)});
  EXPECT_TRUE(caught(c, "bad-takeover"));
}

// The sync read initWal (1 record) and kept streaming (no fence): the old primary
// acknowledged a second record with the new primary's copy, which the new sync need
// not have when it takes over by initWal.
TEST(Invariants, CatchesAnAcknowledgementBeyondTheNextInitWal) {
  InvariantChecker c(absent({"a"}));
  c.onStateWrite({1, 1, "a", std::nullopt, state(1, "a", "b", {"c"}), {}});
  Wal w;
  c.onAck(2, "a", 1, w.append(1), w, false, std::string("a"), "b");
  ClusterState g2 = state(2, "b", "c", {}, 0x80);
  g2.deposed.push_back(peer("a"));
  c.onStateWrite({10, 9, "b", state(1, "a", "b", {"c"}), g2, WalPosition(0x80)});
  EXPECT_TRUE(c.ok()) << c.violations().front().detail;
  c.onAck(11, "a", 1, w.append(2), w, false, std::string("a"), "b");
  EXPECT_TRUE(caught(c, "ack-beyond-initwal"));
}

// The same, found when the new generation is written after the acknowledgement.
TEST(Invariants, CatchesAnInitWalBehindAnEarlierAcknowledgement) {
  InvariantChecker c(absent({"a"}));
  c.onStateWrite({1, 1, "a", std::nullopt, state(1, "a", "b", {"c"}), {}});
  Wal w;
  w.append(1);
  c.onAck(2, "a", 1, w.append(2), w, false, std::string("a"), "b");
  ClusterState g2 = state(2, "b", "c", {}, 0x80);
  g2.deposed.push_back(peer("a"));
  c.onStateWrite({10, 9, "b", state(1, "a", "b", {"c"}), g2, WalPosition(0x80)});
  EXPECT_TRUE(caught(c, "ack-beyond-initwal"));
}

// A primary that replaced its sync (fenced for the new one first): commits its new
// sync acknowledged beyond initWal are covered, since that sync has them.
TEST(Invariants, AcceptsAcknowledgementsByTheNewSyncBeyondInitWal) {
  InvariantChecker c(absent({"b"}));
  c.onStateWrite({1, 1, "a", std::nullopt, state(1, "a", "b", {"c"}), {}});
  Wal w;
  w.append(1);
  c.onAck(2, "a", 1, w.append(2), w, false, std::string("a"), "c");
  c.onStateWrite({10, 9, "a", state(1, "a", "b", {"c"}), state(2, "a", "c", {}, 0x80), WalPosition(0x80)});
  c.onAck(11, "a", 1, w.append(3), w, false, std::string("a"), "c");
  EXPECT_TRUE(c.ok()) << c.violations().front().detail;
}

TEST(Invariants, CatchesASyncTakeoverBehindInitWal) {
  InvariantChecker c(absent({"a"}));
  ClusterState next = state(2, "b", "c", {}, 0x80);
  next.deposed.push_back(peer("a"));
  c.onStateWrite({5, 5, "b", state(1, "a", "b", {"c"}, 0x100), next, WalPosition(0x80)});
  EXPECT_TRUE(caught(c, "bad-takeover"));
}

TEST(Invariants, CatchesASyncTakeoverWhileThePrimaryIsPresent) {
  InvariantChecker c(absent({}));
  ClusterState next = state(2, "b", "c", {});
  next.deposed.push_back(peer("a"));
  c.onStateWrite({5, 5, "b", state(1, "a", "b", {"c"}), next, WalPosition(0)});
  EXPECT_TRUE(caught(c, "bad-takeover"));
}

TEST(Invariants, AcceptsASyncTakeoverByAValidPromote) {
  InvariantChecker c(absent({}));
  ClusterState before = state(1, "a", "b", {"c"});
  before.promote = {{"id", "b"}, {"role", "sync"}, {"generation", 1}, {"expireTime", "9999999999999"}};
  ClusterState next = state(2, "b", "c", {});
  next.deposed.push_back(peer("a"));
  c.onStateWrite({5, 5, "b", before, next, WalPosition(0)});
  EXPECT_TRUE(c.ok()) << c.violations().front().detail;
}

TEST(Invariants, CatchesATakeoverOfAFrozenCluster) {
  InvariantChecker c(absent({"b"}));
  ClusterState before = state(1, "a", "b", {"c"});
  before.freeze = true;
  c.onStateWrite({5, 5, "a", before, state(2, "a", "c", {}), WalPosition(0)});
  EXPECT_TRUE(caught(c, "bad-takeover"));
}

TEST(Invariants, CatchesAPrimaryTakeoverWhileTheSyncIsPresent) {
  InvariantChecker c(absent({}));
  c.onStateWrite({5, 5, "a", state(1, "a", "b", {"c"}), state(2, "a", "c", {}), WalPosition(0)});
  EXPECT_TRUE(caught(c, "bad-takeover"));
}

// Quorum mode: within a generation the primary changes its set one member, or k by one,
// at a time (or re-encodes its sync); anything more, or by another writer, is caught.
TEST(InvariantChecker, QuorumSetChangesOneStepAtATimeByThePrimary) {
  InvariantChecker c(absent({}));
  c.onStateWrite({1, 1, "a", std::nullopt, state(1, "a", "b", {"c", "d"}), {}});
  c.onStateWrite({2, 2, "a", state(1, "a", "b", {"c", "d"}), quorumState(1, "a", 1, {"b"}), {}});
  c.onStateWrite({3, 3, "a", quorumState(1, "a", 1, {"b"}), quorumState(1, "a", 1, {"b", "c"}), {}});
  c.onStateWrite({4, 4, "a", quorumState(1, "a", 1, {"b", "c"}), quorumState(1, "a", 2, {"b", "c"}), {}});
  c.onStateWrite({5, 5, "a", quorumState(1, "a", 2, {"b", "c"}), quorumState(1, "a", 2, {"c", "b"}), {}});
  EXPECT_TRUE(c.ok()) << c.violations().front().detail;
  c.onStateWrite({6, 6, "a", quorumState(1, "a", 2, {"b", "c"}), quorumState(1, "a", 2, {"d"}), {}});
  EXPECT_TRUE(caught(c, "same-generation-change"));
  InvariantChecker k(absent({}));
  k.onStateWrite({1, 1, "a", quorumState(1, "a", 1, {"b", "c", "d"}), quorumState(1, "a", 3, {"b", "c", "d"}), {}});
  EXPECT_TRUE(caught(k, "same-generation-change"));
  InvariantChecker other(absent({}));
  other.onStateWrite({1, 1, "b", quorumState(1, "a", 1, {"b", "c"}), quorumState(1, "a", 1, {"b"}), {}});
  EXPECT_TRUE(caught(other, "same-generation-change"));
}

// A quorum takeover: by a member of G's set, the old primary gone and deposed, the new set
// from G's members and asyncs; a commit acknowledged in G beyond G+1's initWal is not
// excused by any "sync" of a quorum generation (ack-beyond-initwal).
TEST(InvariantChecker, QuorumTakeoverByAMemberAndNoSyncExcuse) {
  InvariantChecker c(absent({"a"}));
  const ClusterState g1 = quorumState(1, "a", 1, {"b", "c"});
  c.onStateWrite({1, 1, "a", std::nullopt, g1, {}});
  Wal w;
  w.append(1);
  const WalMark m = w.append(2);
  c.onAck(2, "a", 1, m, w, false, std::string("a"), "its quorum");
  ClusterState g2 = quorumState(2, "b", 1, {"c"}, 0x80);
  g2.deposed.push_back(peer("a"));
  c.onStateWrite({10, 9, "b", g1, g2, WalPosition(0x100)});
  EXPECT_FALSE(caught(c, "bad-takeover")) << c.violations().front().detail;
  EXPECT_TRUE(caught(c, "ack-beyond-initwal"));
  InvariantChecker d(absent({"a"}));
  d.onStateWrite({1, 1, "a", std::nullopt, g1, {}});
  ClusterState byOutsider = quorumState(2, "d", 1, {"c"});
  byOutsider.deposed.push_back(peer("a"));
  d.onStateWrite({10, 9, "d", g1, byOutsider, WalPosition(0x100)});
  EXPECT_TRUE(caught(d, "bad-takeover"));
}

// A quorum seed without faults: the primary re-encodes its sync and steps the set up to
// the wanted size and k, in one generation, and the run passes.
TEST(ClusterSim, AQuorumSeedWithoutFaultsReachesItsWantedSetAndK) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 40 && checked < 3; ++seed) {
    const Scenario s = makeScenario(seed);
    if (s.quorumK == 0) continue;
    WorldOptions o;
    o.onlyFaults = std::set<int>{};
    const RunResult r = runScenario(s, o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << (r.violation ? r.violation->detail : "");
    EXPECT_EQ(r.generations, 1);
    std::string last;
    for (const TraceLine& line : r.trace) {
      if (line.kind == 'Z' && line.text.rfind("state v", 0) == 0) last = line.text;
    }
    const std::string want = "\"quorum\":{\"k\":" + std::to_string(s.quorumK) + ",\"members\":[";
    const size_t at = last.find(want);
    ASSERT_NE(at, std::string::npos) << "seed " << seed << ": " << last;
    const std::string members = last.substr(at + want.size(), last.find(']', at) - at - want.size());
    EXPECT_EQ(std::count(members.begin(), members.end(), ',') + 1, s.quorumSize) << "seed " << seed << ": " << last;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

}  // namespace
}  // namespace dugong::clustersim

namespace dugong::clustersim {
namespace {

// A standby seed (decision 0083 8.2) with no fault: the cluster follows its source, never
// acknowledges a commit, and its leader streams from the source's sync.
TEST(ClusterSim, AStandbySeedWithoutFaultsFollowsItsSourceAndWritesNothing) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 40 && checked < 3; ++seed) {
    const Scenario s = makeScenario(seed);
    if (!s.standby) continue;
    WorldOptions o;
    o.onlyFaults = std::set<int>{};
    o.trace = true;
    const RunResult r = runScenario(s, o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << (r.violation ? r.violation->detail : "");
    EXPECT_EQ(r.acks, 0) << "seed " << seed;
    EXPECT_EQ(r.generations, 1) << "seed " << seed;
    bool follows = false;
    for (const TraceLine& line : r.trace) {
      follows = follows || (line.kind == 'Q' && line.text.rfind("following the source again", 0) == 0);
    }
    EXPECT_TRUE(follows) << "seed " << seed;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

// The first standby seeds whose plan has a fault of `kind`, each run with that fault alone
// (trace kept): `check` sees each run; returns how many were run.
template <class Check>
int runStandbyFaultAlone(FaultKind kind, int wanted, Check check) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 400 && checked < wanted; ++seed) {
    const Scenario s = makeScenario(seed);
    if (!s.standby) continue;
    for (const Fault& f : s.faults) {
      if (f.kind != kind) continue;
      WorldOptions o;
      o.onlyFaults = std::set<int>{f.index};
      o.trace = true;
      check(seed, runScenario(s, o));
      ++checked;
      break;
    }
  }
  return checked;
}

bool traced(const RunResult& r, char kind, const std::string& text) {
  return std::any_of(r.trace.begin(), r.trace.end(),
                     [&](const TraceLine& line) { return line.kind == kind && line.text.find(text) != std::string::npos; });
}

// The planned switch of sites (decision 0083 5.3): the source is demoted toward this
// cluster, the operator's promote-cluster without --source-gone makes it a normal cluster
// once its leader replayed the demotion point, and it takes writes; every commit the source
// acknowledged is in its primary (site-switch-lost-commit), and the source is never
// writable beside it (two-writable-sites).
TEST(ClusterSim, ThePlannedPromoteClusterFollowsTheSourcesDemotionAndLosesNothing) {
  const int checked = runStandbyFaultAlone(FaultKind::kPlannedPromoteCluster, 3, [](uint64_t seed, const RunResult& r) {
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << (r.violation ? r.violation->detail : "");
    EXPECT_TRUE(traced(r, 'S', "source demoted toward")) << "seed " << seed;
    EXPECT_TRUE(traced(r, 'Q', "is a normal cluster from")) << "seed " << seed;
    EXPECT_TRUE(traced(r, 'Q', "(the source was demoted)")) << "seed " << seed;
    EXPECT_GT(r.acks, 0) << "seed " << seed;
  });
  EXPECT_EQ(checked, 3);
}

// The operator's wrong --source-gone while the source is writable and in sight (0083 6.1
// N2): the leader refuses it and the cluster stays a standby cluster that writes nothing.
TEST(ClusterSim, AWrongSourceGoneAgainstAVisibleWritableSourceIsRefused) {
  int refused = 0;
  const int checked = runStandbyFaultAlone(FaultKind::kWrongSourceGone, 4, [&](uint64_t seed, const RunResult& r) {
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << (r.violation ? r.violation->detail : "");
    EXPECT_EQ(r.acks, 0) << "seed " << seed;
    EXPECT_EQ(r.generations, 1) << "seed " << seed;
    if (traced(r, 'O', "promote-cluster --source-gone (wrong")) {
      EXPECT_TRUE(traced(r, 'Z', "refused by standby leader")) << "seed " << seed;
      ++refused;
    }
  });
  EXPECT_EQ(checked, 4);
  EXPECT_GT(refused, 0);
}

// About 30 % of the seeds are standby seeds, never in quorum mode, their source's faults
// within the fault phase.
TEST(ClusterSim, AboutAThirdOfTheSeedsRunAStandbyClusterNeverInQuorumMode) {
  int standby = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const Scenario s = makeScenario(seed);
    if (!s.standby) continue;
    ++standby;
    EXPECT_EQ(s.quorumK, 0) << "seed " << seed;
    for (const Fault& f : s.faults) {
      const bool source = f.kind == FaultKind::kSourceFailover || f.kind == FaultKind::kSourceSwitchover ||
                          f.kind == FaultKind::kSourceSyncReplaced || f.kind == FaultKind::kSourceCut ||
                          f.kind == FaultKind::kPromoteCluster || f.kind == FaultKind::kPlannedPromoteCluster ||
                          f.kind == FaultKind::kWrongSourceGone;
      if (source) {
        EXPECT_LT(f.at, s.faultPhaseMs) << "seed " << seed;
      }
    }
  }
  EXPECT_GT(standby, 40);
  EXPECT_LT(standby, 80);
}

}  // namespace
}  // namespace dugong::clustersim
