#include "statemachine/quorum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <random>

#include "statemachine/peer_test_support.h"

namespace dugong {

// WAL positions in failure messages as postgres writes them (found by gtest through ADL).
void PrintTo(const WalPosition& p, std::ostream* os) { *os << p.toString(); }

namespace {

using peer_test::ident;
using peer_test::peers;

// The generation's history in these tests: timeline 3, from 2 at 0/800, from 1 at 0/500.
const std::vector<TimelineHistory::Ancestor> kBase = {{1, WalPosition(0x500)}, {2, WalPosition(0x800)}};
constexpr WalPosition kInitWal(0x1000);

TakeoverReport report(uint64_t wal, int64_t generation = 7, int32_t version = 1) {
  return {generation, WalPosition(wal), TimelineHistory{3, kBase}, version};
}

// A report on timeline 4, promoted from 3 at `fork`.
TakeoverReport promoted(uint64_t wal, uint64_t fork, int64_t generation = 7) {
  auto ancestors = kBase;
  ancestors.push_back({3, WalPosition(fork)});
  return {generation, WalPosition(wal), TimelineHistory{4, ancestors}, 1};
}

// Generation 7 of primary p: ANY k (members), asyncs, initWal 0/1000 on timeline 3.
ClusterState quorumState(int k, const std::vector<std::string>& members, const std::vector<std::string>& asyncs = {}) {
  ClusterState s;
  s.generation = 7;
  s.primary = ident("p");
  s.quorum = Quorum{k, peers(members)};
  s.async = peers(asyncs);
  s.initWal = kInitWal;
  s.initTimeline = 3;
  return s;
}

QuorumPresence quorumPresence(const std::vector<std::string>& ids, const std::set<std::string>& streaming = {}) {
  return {peers(ids), streaming, {}};
}

constexpr QuorumWanted kWanted{1, 2};

TEST(QuorumTakeover, ReadQuorumMeetsEveryAcknowledgingSet) {
  EXPECT_EQ(readQuorum(2, 1), 2);
  EXPECT_EQ(readQuorum(4, 2), 3);
  EXPECT_EQ(readQuorum(1, 1), 1);
  EXPECT_EQ(readQuorum(3, 3), 1);
}

// Fewer than q = N - k + 1 reports on the generation's history: nobody takes over, and
// the reason names each member not counted, and why.
TEST(QuorumTakeover, FewerReportsThanTheQuorumMeansNoTakeover) {
  const ClusterState s = quorumState(2, {"a", "b", "c", "d"});
  TakeoverReports reports = {{"a", report(0x1100)}, {"b", report(0x1080, 6)}, {"c", report(0x1090)}};
  reports["c"].history = TimelineHistory{5, {{1, WalPosition(0x500)}, {2, WalPosition(0x800)}, {4, WalPosition(0xF00)}}};
  auto d = decideQuorumTakeover(s, reports, quorumPresence({"a", "b", "c"}), kWanted);
  EXPECT_FALSE(d.takeover);
  EXPECT_EQ(d.reason,
            "generation 7: 3 of 4 member reports needed on the generation's history; have a; b reported for "
            "generation 6, c reported timeline 5 at initWal, the generation's is 3, d is gone");
  EXPECT_EQ(d.counted, std::vector<std::string>{"a"});
  // d present but silent.
  d = decideQuorumTakeover(s, {}, quorumPresence({"a", "b", "c", "d"}), kWanted);
  EXPECT_NE(d.reason.find("have none; a has not reported, b has not reported"), std::string::npos) << d.reason;
}

// Without a recorded initTimeline, positions alone: every report for the generation counts.
TEST(QuorumTakeover, WithoutAnInitTimelinePositionsDecide) {
  ClusterState s = quorumState(1, {"a", "b"});
  s.initTimeline = 0;
  TakeoverReports reports = {{"a", report(0x1100)}, {"b", report(0x1200)}};
  reports["a"].history.timeline = 9;
  reports["a"].history.ancestors.clear();
  auto d = decideQuorumTakeover(s, reports, quorumPresence({"a", "b"}), kWanted);
  EXPECT_EQ(d.counted, (std::vector<std::string>{"a", "b"}));
  // a's timeline 9 is "later" but does not keep b's history: an operator must choose.
  EXPECT_FALSE(d.takeover);
  EXPECT_NE(d.reason.find("a's WAL (timeline 9, WAL 0/00001100) and b's (timeline 3 (from 2 at 0/00000800, from 1 at "
                          "0/00000500), WAL 0/00001200) diverged: an operator must choose"),
            std::string::npos)
      << d.reason;
}

// The most WAL takes over; equal WAL: the first in the set's order. Every counted report
// is a check of the write.
TEST(QuorumTakeover, TheMostWalTakesOverTiesByMemberOrder) {
  const ClusterState s = quorumState(1, {"a", "b", "c"}, {"e"});
  TakeoverReports reports = {{"a", report(0x1100, 7, 4)}, {"b", report(0x1300, 7, 2)}, {"c", report(0x1300, 7, 9)}};
  auto d = decideQuorumTakeover(s, reports, quorumPresence({"a", "b", "c", "e"}, {"e"}), QuorumWanted{1, 3});
  ASSERT_TRUE(d.takeover) << d.reason;
  EXPECT_EQ(d.takeover->taker.id, "b");
  EXPECT_EQ(d.takeover->takerWal, WalPosition(0x1300));
  EXPECT_EQ(d.takeover->checks, (std::vector<std::pair<std::string, int32_t>>{{"a", 4}, {"b", 2}, {"c", 9}}));
  const ClusterState& next = d.takeover->next;
  EXPECT_EQ(next.generation, 8);
  EXPECT_EQ(next.primary.id, "b");
  EXPECT_EQ(next.initWal, WalPosition(0x1300));  // k = 1, all reported: j = 1, B's own
  EXPECT_EQ(next.initTimeline, 3);
  EXPECT_EQ(peerIds(next.quorum->members), "a, c, e");
  EXPECT_EQ(next.quorum->k, 1);
  EXPECT_EQ(peerIds(next.deposed), "p");
  EXPECT_FALSE(next.sync);
  EXPECT_TRUE(ClusterState::parse(next.serialize(), ClusterState::Formats::kSyncAndQuorum).ok());
  EXPECT_EQ(d.reason,
            "generation 8: b takes over with WAL 0/00001300 (3 of 3 member reports counted, 3 needed: a, b, c); "
            "initWal 0/00001300 (the position 1 counted reports reach, at least initWal); ANY 1 (a, c, e); p is "
            "deposed");
}

// L is the j-th highest report, j = k - (N - r): with every member reporting, the k-th;
// with q reports, the first (B's own).
TEST(QuorumTakeover, InitWalIsTheJthHighestReport) {
  const ClusterState s = quorumState(2, {"a", "b", "c", "d"});
  TakeoverReports reports = {{"a", report(0x1100)}, {"b", report(0x1400)}, {"c", report(0x1300)}, {"d", report(0x1200)}};
  auto d = decideQuorumTakeover(s, reports, quorumPresence({"a", "b", "c", "d"}), QuorumWanted{2, 4});
  ASSERT_TRUE(d.takeover) << d.reason;
  EXPECT_EQ(d.takeover->taker.id, "b");
  EXPECT_EQ(d.takeover->next.initWal, WalPosition(0x1300));  // r = 4, j = 2
  EXPECT_EQ(d.takeover->takerWal, WalPosition(0x1400));
  EXPECT_EQ(d.takeover->next.quorum->k, 2);
  EXPECT_EQ(peerIds(d.takeover->next.quorum->members), "a, c, d");
  reports.erase("c");  // r = 3 = q: j = 1
  d = decideQuorumTakeover(s, reports, quorumPresence({"a", "b", "d"}), QuorumWanted{2, 4});
  ASSERT_TRUE(d.takeover) << d.reason;
  EXPECT_EQ(d.takeover->next.initWal, WalPosition(0x1400));
  EXPECT_EQ(peerIds(d.takeover->next.quorum->members), "a, d");
  // Never below initWal: every report behind it but B.
  reports = {{"a", report(0x900)}, {"b", report(0x1000)}, {"d", report(0xF00)}};
  d = decideQuorumTakeover(s, reports, quorumPresence({"a", "b", "d"}), QuorumWanted{2, 4});
  ASSERT_TRUE(d.takeover) << d.reason;
  EXPECT_EQ(d.takeover->next.initWal, kInitWal);
}

TEST(QuorumTakeover, TheMostAdvancedMustHaveCaughtUpToInitWal) {
  const ClusterState s = quorumState(1, {"a", "b"});
  auto d = decideQuorumTakeover(s, {{"a", report(0xF00)}, {"b", report(0xE00)}}, quorumPresence({"a", "b"}), kWanted);
  EXPECT_FALSE(d.takeover);
  EXPECT_EQ(d.reason,
            "generation 7: a, the most advanced member, has not caught up: its WAL 0/00000f00 is behind initWal "
            "0/00001000");
}

// A member on the old timeline past the primary's promotion keeps nothing acknowledged
// beyond the fork: B, on the primary's timeline, keeps it, and its position on B's history
// is the fork.
TEST(QuorumTakeover, AMemberPastTheForkCountsAtTheFork) {
  const ClusterState s = quorumState(2, {"a", "b", "c"});
  TakeoverReports reports = {{"a", report(0x1500)}, {"b", promoted(0x1200, 0x1040)}, {"c", promoted(0x1100, 0x1040)}};
  auto d = decideQuorumTakeover(s, reports, quorumPresence({"a", "b", "c"}), QuorumWanted{2, 3});
  ASSERT_TRUE(d.takeover) << d.reason;
  EXPECT_EQ(d.takeover->taker.id, "b");                       // a later timeline first
  EXPECT_EQ(d.takeover->next.initWal, WalPosition(0x1100));   // j = 2: positions 0/1200, 0/1100, 0/1040
  EXPECT_EQ(d.takeover->next.initTimeline, 4);
  // b and c gone: a alone is not q.
  reports = {{"a", report(0x1500)}, {"c", promoted(0x1100, 0x1040)}};
  d = decideQuorumTakeover(s, reports, quorumPresence({"a", "c"}), QuorumWanted{2, 3});
  ASSERT_TRUE(d.takeover) << d.reason;
  EXPECT_EQ(d.takeover->taker.id, "c");
  EXPECT_EQ(d.takeover->next.initWal, WalPosition(0x1100));  // j = 1: c's own
}

// A promote request's target takes over if its report is a prefix of B's history that
// reaches L; otherwise nobody does (the request expires, the primary starts again).
TEST(QuorumTakeover, APromoteTargetTakesOverOnlyIfItHoldsTheBound) {
  const ClusterState s = quorumState(2, {"a", "b", "c", "d"});
  TakeoverReports reports = {{"a", report(0x1100)}, {"b", report(0x1400)}, {"c", report(0x1300)}, {"d", report(0x1200)}};
  const auto all = quorumPresence({"a", "b", "c", "d"});
  auto d = decideQuorumTakeover(s, reports, all, QuorumWanted{2, 4}, "c");
  ASSERT_TRUE(d.takeover) << d.reason;
  EXPECT_EQ(d.takeover->taker.id, "c");
  EXPECT_EQ(d.takeover->next.initWal, WalPosition(0x1300));
  EXPECT_EQ(d.takeover->takerWal, WalPosition(0x1300));
  EXPECT_EQ(peerIds(d.takeover->next.quorum->members), "a, b, d");
  d = decideQuorumTakeover(s, reports, all, QuorumWanted{2, 4}, "d");
  EXPECT_FALSE(d.takeover);
  EXPECT_EQ(d.reason,
            "generation 7: the promote request's target d (timeline 3 (from 2 at 0/00000800, from 1 at 0/00000500), "
            "WAL 0/00001200) does not hold 0/00001300 on b's history");
  d = decideQuorumTakeover(s, reports, all, QuorumWanted{2, 4}, "e");
  EXPECT_EQ(d.reason, "generation 7: the promote request's target e has no counted report");
  auto tagged = all;
  tagged.present[2].tags.nofailover = true;
  d = decideQuorumTakeover(s, reports, tagged, QuorumWanted{2, 4}, "c");
  EXPECT_EQ(d.reason, "generation 7: the promote request's target c is tagged nofailover");
}

// B tagged nofailover (after it was made a member): the most advanced untagged member that
// holds L on B's history takes over; none: nobody.
TEST(QuorumTakeover, ATaggedMostAdvancedMemberIsPassedOverForOneThatHoldsTheBound) {
  const ClusterState s = quorumState(2, {"a", "b", "c", "d"});
  TakeoverReports reports = {{"a", report(0x1300)}, {"b", report(0x1400)}, {"c", report(0x1300)}, {"d", report(0x1200)}};
  auto now = quorumPresence({"a", "b", "c", "d"});
  now.present[1].tags.nofailover = true;
  auto d = decideQuorumTakeover(s, reports, now, QuorumWanted{2, 4});
  ASSERT_TRUE(d.takeover) << d.reason;
  EXPECT_EQ(d.takeover->taker.id, "a");  // a and c tie at L: the first in order
  EXPECT_EQ(d.takeover->next.initWal, WalPosition(0x1300));
  EXPECT_TRUE(d.takeover->next.quorum->members[0].tags.nofailover);  // b stays a member, with its tag
  now.present[0].tags.nofailover = true;
  now.present[2].tags.nofailover = true;
  d = decideQuorumTakeover(s, reports, now, QuorumWanted{2, 4});
  EXPECT_FALSE(d.takeover);
  EXPECT_EQ(d.reason,
            "generation 7: b, the most advanced member, is tagged nofailover, and no untagged member holds 0/00001300 "
            "on its history");
}

// The next set: present members but the taker and those off the history (they become the
// last asyncs), then streaming untagged asyncs up to the wanted size; a non-streaming one
// only when no other would be left; k' at most its size; never empty.
TEST(QuorumTakeover, TheNextSetKeepsThePresentMembersAndFillsFromTheAsyncs) {
  ClusterState s = quorumState(2, {"a", "b", "c"}, {"e", "f", "g"});
  s.deposed = peers({"x"});
  s.promote = {{"id", "b"}};
  TakeoverReports reports = {{"a", report(0x1200)}, {"b", report(0x1100)}, {"c", report(0x1000)}};
  reports["c"].history.timeline = 8;  // off the history
  auto now = quorumPresence({"a", "b", "c", "e", "f", "g", "p"}, {"f", "g"});
  now.present[4].tags.nofailover = true;  // f
  auto d = decideQuorumTakeover(s, reports, now, QuorumWanted{3, 3});
  ASSERT_TRUE(d.takeover) << d.reason;
  const ClusterState& next = d.takeover->next;
  EXPECT_EQ(peerIds(next.quorum->members), "b, g");  // f tagged, e not streaming
  EXPECT_EQ(next.quorum->k, 2);
  EXPECT_EQ(peerIds(next.async), "e, f, c");
  EXPECT_EQ(peerIds(next.deposed), "x, p");
  EXPECT_TRUE(next.promote.is_null());
  EXPECT_TRUE(ClusterState::parse(next.serialize(), ClusterState::Formats::kSyncAndQuorum).ok());
  // Only a non-streaming async left: it is made a member rather than none.
  d = decideQuorumTakeover(quorumState(1, {"a", "b"}, {"e"}), {{"a", report(0x1200)}, {"b", report(0x1100)}},
                           quorumPresence({"a", "b", "e"}), kWanted);
  ASSERT_TRUE(d.takeover) << d.reason;
  d = decideQuorumTakeover(quorumState(2, {"a", "b"}, {"e"}), {{"a", report(0x1200)}}, quorumPresence({"a", "e"}), kWanted);
  ASSERT_TRUE(d.takeover) << d.reason;  // k = N = 2: q = 1
  EXPECT_EQ(peerIds(d.takeover->next.quorum->members), "e");
  EXPECT_EQ(d.takeover->next.quorum->k, 1);
  // Nobody left to acknowledge: no takeover.
  d = decideQuorumTakeover(quorumState(2, {"a", "b"}), {{"a", report(0x1200)}}, quorumPresence({"a"}), kWanted);
  EXPECT_FALSE(d.takeover);
  EXPECT_EQ(d.reason,
            "generation 7: a would leave no standby to acknowledge commits (no other member present, no async that "
            "may be one)");
}

// Sync mode is the rule for N = 1: the sync's report alone decides, and the next state is
// Manatee's (format 1) with the first streaming async as its sync.
TEST(QuorumTakeover, SyncModeIsTheRuleForOneMember) {
  ClusterState s = quorumState(1, {}, {"e", "f"});
  s.quorum.reset();
  s.sync = ident("a");
  ASSERT_EQ(peerIds(quorumOf(s)->members), "a");
  auto d = decideQuorumTakeover(s, {{"a", report(0x1200)}}, quorumPresence({"a", "e", "f"}, {"f"}), QuorumWanted{2, 3});
  ASSERT_TRUE(d.takeover) << d.reason;
  const ClusterState& next = d.takeover->next;
  EXPECT_FALSE(next.quorum);
  EXPECT_EQ(next.sync->id, "f");
  EXPECT_EQ(peerIds(next.async), "e");
  EXPECT_EQ(next.serialize().find("format"), std::string::npos);
  EXPECT_NE(d.reason.find("; sync f;"), std::string::npos) << d.reason;
  s.sync.reset();
  s.oneNodeWriteMode = true;
  d = decideQuorumTakeover(s, {}, quorumPresence({"a"}), kWanted);
  EXPECT_FALSE(d.takeover);
  EXPECT_EQ(d.reason, "generation 7 is in one-node-write mode: it has no members to take over");
}

// The property of 0079 section 4.6 over random configurations: a generation whose
// acknowledged commits obey Q (each beyond initWal on k members), random WALs (behind
// initWal, past the primary's promotion on the old timeline, off the history), random
// members present and reporting, tags and promote requests. Every decision that takes
// over gives a taker whose WAL holds every acknowledged commit, and a next initWal that
// every acknowledged commit is at or before, on the taker's history (W).
TEST(QuorumTakeover, EveryTakeoverKeepsEveryAcknowledgedCommit) {
  std::mt19937_64 rng(20261129);
  auto uniform = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto chance = [&uniform](int percent) { return uniform(1, 100) <= percent; };
  int takeovers = 0;
  int withAcks = 0;
  const int trials = 4000;
  for (int trial = 0; trial < trials; ++trial) {
    const int n = static_cast<int>(uniform(1, 5));
    const int k = n == 1 ? 1 : static_cast<int>(uniform(1, n - 1));
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) ids.push_back("m" + std::to_string(i));
    ClusterState s = quorumState(k, ids, {"e", "f"});
    if (chance(20)) s.initTimeline = 0;
    // The primary's timeline: the generation's (3), or 4 from its promotion at `start`.
    const bool forked = chance(50);
    const uint64_t start = forked ? kInitWal.value() + static_cast<uint64_t>(uniform(0, 0x40)) : kInitWal.value();
    const int64_t primaryTimeline = forked ? 4 : 3;
    const uint64_t top = start + static_cast<uint64_t>(uniform(1, 0x100));
    TakeoverReports reports;
    std::vector<uint64_t> holding;  // WAL ends of the members on the primary's history
    std::vector<TakeoverReport> wals(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      TakeoverReport& r = wals[static_cast<size_t>(i)];
      const int kind = static_cast<int>(uniform(1, 100));
      if (forked && kind <= 15) {  // on the old timeline past the promotion
        r = report(start + static_cast<uint64_t>(uniform(1, 0x80)));
      } else if (s.initTimeline != 0 && kind <= 25) {  // off the history: another timeline at initWal
        r = report(static_cast<uint64_t>(uniform(0x900, 0x1200)));
        r.history = TimelineHistory{9, {{1, WalPosition(0x500)}, {2, WalPosition(0x800)}, {3, WalPosition(0xF80)}}};
      } else {
        const auto wal = static_cast<uint64_t>(uniform(static_cast<int64_t>(kInitWal.value()) - 0x80,
                                                       static_cast<int64_t>(top)));
        r = forked && wal > start ? promoted(wal, start) : report(wal);
        if (wal > start) holding.push_back(wal);
      }
      r.nodeVersion = static_cast<int32_t>(uniform(0, 9));
    }
    // Q: the latest acknowledged commit beyond the start, if any, is on k members.
    std::optional<uint64_t> acked;
    std::sort(holding.begin(), holding.end(), std::greater<>());
    if (holding.size() >= static_cast<size_t>(k) && chance(80)) {
      acked = static_cast<uint64_t>(uniform(static_cast<int64_t>(start) + 1, static_cast<int64_t>(holding[k - 1])));
      ++withAcks;
    }
    QuorumPresence presence;
    for (int i = 0; i < n; ++i) {
      if (!chance(85)) continue;
      presence.present.push_back(ident(ids[static_cast<size_t>(i)]));
      presence.present.back().tags.nofailover = chance(10);
      if (!chance(85)) continue;
      reports[ids[static_cast<size_t>(i)]] = wals[static_cast<size_t>(i)];
      if (chance(5)) reports[ids[static_cast<size_t>(i)]].generation = 6;
    }
    for (const char* a : {"e", "f"}) {
      if (chance(70)) presence.present.push_back(ident(a));
      if (chance(50)) presence.streaming.insert(a);
    }
    std::optional<std::string> target;
    if (chance(10)) target = ids[static_cast<size_t>(uniform(0, n - 1))];
    const QuorumWanted wanted{static_cast<int>(uniform(1, 3)), static_cast<int>(uniform(1, 4))};

    const QuorumDecision d = decideQuorumTakeover(s, reports, presence, wanted, target);
    if (!d.takeover) continue;
    ++takeovers;
    const QuorumTakeover& t = *d.takeover;
    // The case, written only when an assertion fails.
    auto trace = [&] {
      return "trial " + std::to_string(trial) + ": N " + std::to_string(n) + ", k " + std::to_string(k) +
             ", forked " + std::to_string(forked) + ", acked " + (acked ? WalPosition(*acked).toString() : "none") +
             ": " + d.reason;
    };
    ASSERT_TRUE(containsPeer(s.quorum->members, t.taker.id)) << trace();
    ASSERT_NE(std::find(d.counted.begin(), d.counted.end(), t.taker.id), d.counted.end()) << trace();
    ASSERT_FALSE(t.taker.tags.nofailover) << trace();
    const TakeoverReport& mine = reports.at(t.taker.id);
    ASSERT_EQ(mine.wal, t.takerWal) << trace();
    // Every commit acknowledged before the generation: at or before initWal, on its history.
    ASSERT_GE(mine.wal, kInitWal) << trace();
    ASSERT_EQ(mine.history.timelineAt(kInitWal), 3) << trace();
    // Every commit acknowledged in it: on the primary's timeline, in the taker's WAL.
    if (acked) {
      ASSERT_GE(mine.wal, WalPosition(*acked)) << trace();
      ASSERT_EQ(mine.history.timelineAt(WalPosition(*acked)), primaryTimeline) << trace();
    }
    // W for the next generation: every acknowledged commit at or before its initWal, on
    // the taker's history, which reaches it.
    const ClusterState& next = t.next;
    ASSERT_GE(next.initWal, kInitWal) << trace();
    if (acked) {
      ASSERT_GE(next.initWal, WalPosition(*acked)) << trace();
    }
    ASSERT_LE(next.initWal, mine.wal) << trace();
    ASSERT_EQ(next.initTimeline, mine.history.timelineAt(next.initWal)) << trace();
    ASSERT_EQ(next.primary.id, t.taker.id) << trace();
    ASSERT_GE(next.quorum->k, 1) << trace();
    ASSERT_LE(next.quorum->k, static_cast<int>(next.quorum->members.size())) << trace();
    if (takeovers % 8 == 0) {  // a valid state (no peer in two places): parsing costs, one in eight
      auto parsed = ClusterState::parse(next.serialize(), ClusterState::Formats::kSyncAndQuorum);
      ASSERT_TRUE(parsed.ok()) << parsed.error() << "; " << trace();
    }
  }
  // Not vacuous: many takeovers, many of them with commits acknowledged in the generation.
  EXPECT_GT(takeovers, trials / 4);
  EXPECT_GT(withAcks, trials / 4);
}

// ---- When a member starts a takeover (0079 section 4.1) ----

TEST(QuorumMember, AMemberStartsWhenThePrimaryIsGoneOrAMemberIsToBePromoted) {
  ClusterState s = quorumState(1, {"a", "b"}, {"c"});
  const auto withPrimary = quorumPresence({"p", "a", "b", "c"});
  const auto withoutPrimary = quorumPresence({"a", "b", "c"});
  // The primary present, no request: nothing; an async or a stranger: never.
  auto m = memberTakeoverStart(s, "a", withPrimary, std::nullopt, true);
  EXPECT_FALSE(m.why);
  EXPECT_FALSE(m.blocked);
  EXPECT_FALSE(memberTakeoverStart(s, "c", withoutPrimary, std::nullopt, true).why);
  EXPECT_FALSE(memberTakeoverStart(s, "c", withPrimary, "c", true).why);  // c is no member
  m = memberTakeoverStart(s, "a", withoutPrimary, std::nullopt, true);
  EXPECT_EQ(m.why, "primary p is gone");
  // Every member starts on a promote request for any member, not only its target.
  m = memberTakeoverStart(s, "a", withPrimary, "b", true);
  EXPECT_EQ(m.why, "promote request for member b (deposing p)");
  // Held back: frozen, postgres not a member yet.
  m = memberTakeoverStart(s, "a", withoutPrimary, std::nullopt, false);
  EXPECT_FALSE(m.why);
  EXPECT_EQ(m.blocked, "primary p is gone, but postgres is not running as a member");
  s.freeze = true;
  m = memberTakeoverStart(s, "b", withoutPrimary, std::nullopt, true);
  EXPECT_EQ(m.blocked, "primary p is gone, but the cluster is frozen: no takeover");
  s.freeze = nullptr;
  // Tagged nofailover: it fences and reports all the same.
  auto tagged = withoutPrimary;
  tagged.present[1].tags.nofailover = true;
  m = memberTakeoverStart(s, "b", tagged, std::nullopt, true);
  EXPECT_EQ(m.why, "primary p is gone; this member is tagged nofailover: it reports, and never takes over");
  // Sync mode: the sync is the one member.
  ClusterState sync = quorumState(1, {}, {"c"});
  sync.quorum.reset();
  sync.sync = ident("a");
  EXPECT_EQ(memberTakeoverStart(sync, "a", withoutPrimary, std::nullopt, true).why, "primary p is gone");
  EXPECT_FALSE(memberTakeoverStart(sync, "b", withoutPrimary, std::nullopt, true).why);
}

// ---- Membership steps (0079 sections 5.1 and 5.3) ----

QuorumPresence streamingAll(const std::vector<std::string>& ids) {
  return {peers(ids), std::set<std::string>(ids.begin(), ids.end()), {}};
}

QuorumWanted wantedQuorum(int k, int size) { return {k, size, ReplicationMode::kQuorum}; }

TEST(QuorumStep, ASyncStateIsReencodedFirstWhenQuorumIsWanted) {
  ClusterState s = quorumState(1, {}, {"b"});
  s.quorum.reset();
  s.sync = ident("a");
  auto st = nextMembershipStep(s, wantedQuorum(1, 2), streamingAll({"p", "a", "b"}));
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kReencode);
  EXPECT_EQ(st->order, StepOrder::kWriteOnly);
  EXPECT_FALSE(st->next.sync);
  EXPECT_EQ(st->next.quorum->k, 1);
  EXPECT_EQ(peerIds(st->next.quorum->members), "a");
  EXPECT_EQ(st->next.generation, 7);
  EXPECT_EQ(st->reason, "quorum: the sync a written as ANY 1 (a), the same rule (written only)");
  // Sync mode wanted on a sync state: nothing to do here.
  EXPECT_FALSE(nextMembershipStep(s, {1, 2, ReplicationMode::kSync}, streamingAll({"p", "a", "b"})));
}

TEST(QuorumStep, NoStepWhileFrozenWithAPromoteRequestInOneNodeWriteModeOrAsWanted) {
  ClusterState s = quorumState(1, {"a", "b"}, {"c"});
  const auto all = streamingAll({"p", "a", "b", "c"});
  EXPECT_FALSE(nextMembershipStep(s, wantedQuorum(1, 2), all));
  s.freeze = true;
  EXPECT_FALSE(nextMembershipStep(s, wantedQuorum(1, 3), all));
  s.freeze = nullptr;
  s.promote = {{"id", "a"}};
  EXPECT_FALSE(nextMembershipStep(s, wantedQuorum(1, 3), all));
  ClusterState onwm = quorumState(1, {});
  onwm.quorum.reset();
  onwm.oneNodeWriteMode = true;
  EXPECT_FALSE(nextMembershipStep(onwm, wantedQuorum(1, 2), all));
}

// A gone member is removed first (reloaded, fenced, written) and dropped from the state.
TEST(QuorumStep, AGoneMemberIsRemovedFirst) {
  const ClusterState s = quorumState(1, {"a", "b", "c"}, {"d"});
  auto st = nextMembershipStep(s, wantedQuorum(1, 4), streamingAll({"p", "a", "c", "d"}));
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kRemove);
  EXPECT_EQ(st->member, "b");
  EXPECT_EQ(st->order, StepOrder::kReloadFenceThenWrite);
  EXPECT_FALSE(st->endWalsenders);
  EXPECT_EQ(peerIds(st->next.quorum->members), "a, c");
  EXPECT_EQ(peerIds(st->next.async), "d");
  EXPECT_EQ(st->reason, "quorum: b is gone: ANY 1 (a, b, c) -> ANY 1 (a, c) (reloaded, fenced, then written)");
  EXPECT_TRUE(ClusterState::parse(st->next.serialize(), ClusterState::Formats::kSyncAndQuorum).ok());
}

// k = N with a member gone: writes wait; a removal is not possible (N - 1 < k), so a
// streaming async is added (written, then reloaded), or with none k is lowered.
TEST(QuorumStep, WritesWaitingAddAnAsyncOrLowerK) {
  const ClusterState s = quorumState(2, {"a", "b"}, {"c", "d"});
  QuorumPresence now = streamingAll({"p", "a", "c", "d"});
  now.streaming.erase("c");
  auto st = nextMembershipStep(s, wantedQuorum(2, 3), now);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kAdd);
  EXPECT_EQ(st->member, "d");  // c does not stream
  EXPECT_EQ(st->order, StepOrder::kWriteThenReload);
  EXPECT_EQ(peerIds(st->next.quorum->members), "a, b, d");
  EXPECT_EQ(peerIds(st->next.async), "c");
  EXPECT_EQ(st->reason,
            "quorum: only 1 of 2 members stream, fewer than k (writes wait); adding d: ANY 2 (a, b) -> ANY 2 (a, b, d) "
            "(written, then reloaded)");
  // Then the gone member goes.
  st = nextMembershipStep(st->next, wantedQuorum(2, 3), now);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kRemove);
  EXPECT_EQ(st->member, "b");
  // No async that may be a member: k is lowered.
  now.present[3].tags.nofailover = true;  // d
  st = nextMembershipStep(s, wantedQuorum(2, 3), now);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kLowerK);
  EXPECT_EQ(st->order, StepOrder::kWriteThenReload);
  EXPECT_EQ(st->next.quorum->k, 1);
  EXPECT_EQ(peerIds(st->next.quorum->members), "a, b");
}

// A member that acknowledges nothing is removed once k others stream, and goes last in
// the async chain.
TEST(QuorumStep, AStalledMemberIsRemovedToTheEndOfTheChain) {
  const ClusterState s = quorumState(1, {"a", "b"}, {"c"});
  QuorumPresence now = streamingAll({"p", "a", "b", "c"});
  now.stalled.insert("a");
  auto st = nextMembershipStep(s, wantedQuorum(1, 2), now);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kRemove);
  EXPECT_EQ(st->member, "a");
  EXPECT_EQ(peerIds(st->next.quorum->members), "b");
  EXPECT_EQ(peerIds(st->next.async), "c, a");
  // Then c is added back up to the size.
  st = nextMembershipStep(st->next, wantedQuorum(1, 2), now);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kAdd);
  EXPECT_EQ(st->member, "c");
  // The only other member stalled too: no removal (its fence could not end).
  now.stalled.insert("b");
  st = nextMembershipStep(s, wantedQuorum(1, 2), now);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kAdd);  // writes wait: c added first
}

// The size towards the wanted size: the first streaming async that may be a member is
// added; a larger set loses its last member.
TEST(QuorumStep, TheSetGrowsAndShrinksOneMemberAtATime) {
  const ClusterState s = quorumState(1, {"a", "b"}, {"c", "d", "e"});
  QuorumPresence now = streamingAll({"p", "a", "b", "c", "d", "e"});
  now.present[3].tags.nofailover = true;  // c
  auto st = nextMembershipStep(s, wantedQuorum(1, 3), now);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kAdd);
  EXPECT_EQ(st->member, "d");
  EXPECT_EQ(peerIds(st->next.async), "c, e");
  EXPECT_EQ(st->reason,
            "quorum: 2 members, 3 wanted; adding d: ANY 1 (a, b) -> ANY 1 (a, b, d) (written, then reloaded)");
  EXPECT_FALSE(nextMembershipStep(st->next, wantedQuorum(1, 3), now));
  st = nextMembershipStep(s, wantedQuorum(1, 1), now);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kRemove);
  EXPECT_EQ(st->member, "b");
  EXPECT_EQ(peerIds(st->next.async), "c, d, e, b");
}

// k raised (reloaded, the walsenders ended, fenced, then written) only while k + 1 < N
// and k + 1 members stream; lowered (written, then reloaded).
TEST(QuorumStep, KMovesByOneInItsOrder) {
  const ClusterState s = quorumState(1, {"a", "b", "c"});
  QuorumPresence now = streamingAll({"p", "a", "b", "c"});
  auto st = nextMembershipStep(s, wantedQuorum(2, 3), now);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kRaiseK);
  EXPECT_EQ(st->order, StepOrder::kReloadFenceThenWrite);
  EXPECT_TRUE(st->endWalsenders);
  EXPECT_EQ(st->next.quorum->k, 2);
  EXPECT_EQ(st->reason, "quorum: k 1, 2 wanted: ANY 1 (a, b, c) -> ANY 2 (a, b, c) (reloaded, fenced, then written)");
  EXPECT_FALSE(nextMembershipStep(st->next, wantedQuorum(3, 3), now));  // k + 1 = N: never raised to N
  now.streaming.erase("b");
  now.streaming.erase("c");
  EXPECT_FALSE(nextMembershipStep(s, wantedQuorum(2, 3), now));  // one streams: the fence could not end
  st = nextMembershipStep(quorumState(2, {"a", "b", "c"}), wantedQuorum(1, 3), streamingAll({"p", "a", "b", "c"}));
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, MembershipStep::Kind::kLowerK);
  EXPECT_EQ(st->order, StepOrder::kWriteThenReload);
  EXPECT_FALSE(st->endWalsenders);
  EXPECT_EQ(st->next.quorum->k, 1);
}

// Back to sync mode: k to 1, the set down to one, then Manatee's format.
TEST(QuorumStep, SyncModeWantedLowersKShrinksAndReencodes) {
  ClusterState s = quorumState(2, {"a", "b", "c"}, {"d"});
  const QuorumWanted sync{1, 2, ReplicationMode::kSync};
  const auto all = streamingAll({"p", "a", "b", "c", "d"});
  std::vector<std::string> kinds;
  while (auto st = nextMembershipStep(s, sync, all)) {
    kinds.push_back(st->reason);
    s = st->next;
    ASSERT_LT(kinds.size(), 10u);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{
                       "quorum: 3 members, 1 wanted; removing c: ANY 2 (a, b, c) -> ANY 2 (a, b) (reloaded, fenced, "
                       "then written)",
                       "quorum: k 2, 1 wanted: ANY 2 (a, b) -> ANY 1 (a, b) (written, then reloaded)",
                       "quorum: 2 members, 1 wanted; removing b: ANY 1 (a, b) -> ANY 1 (a) (reloaded, fenced, then "
                       "written)",
                       "quorum: sync mode wanted: ANY 1 (a) written as the sync a, the same rule (written only)"}));
  EXPECT_EQ(s.sync->id, "a");
  EXPECT_FALSE(s.quorum);
  EXPECT_EQ(peerIds(s.async), "d, c, b");
  EXPECT_EQ(s.serialize().find("format"), std::string::npos);
}

// The property of 0079 section 5.1: a random run of one generation (members that come,
// go, stall and stream; commits written and acknowledged by postgres under the rule it
// runs; the wanted configuration changing) whose steps are carried out in the order
// nextMembershipStep returns keeps Q at every moment: the latest acknowledged commit is
// flushed on at least k members of the set in ZooKeeper. Each step changes one member
// or k by one.
TEST(QuorumStep, StepsInTheirOrderKeepEveryAcknowledgedCommitOnKMembers) {
  std::mt19937_64 rng(5103);
  auto uniform = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto chance = [&uniform](int percent) { return uniform(1, 100) <= percent; };
  const std::vector<std::string> ids = {"a", "b", "c", "d", "e", "f"};
  int steps = 0;
  std::map<MembershipStep::Kind, int> kinds;
  for (int run = 0; run < 100; ++run) {
    ClusterState s = quorumState(1, {}, {"b", "c", "d", "e", "f"});
    s.quorum.reset();
    s.sync = ident("a");
    s.initWal = WalPosition(0);
    s.initTimeline = 0;
    std::map<std::string, uint64_t> flush;
    QuorumPresence now = streamingAll({"p", "a", "b", "c", "d", "e", "f"});
    uint64_t top = 0;        // the primary's WAL
    uint64_t acked = 0;      // the latest acknowledged commit
    Quorum pg = *quorumOf(s);  // the rule postgres runs
    QuorumWanted wanted = wantedQuorum(1, 2);
    std::string history;     // the run so far, for a failure's message

    auto streams = [&](const std::string& id) { return containsPeer(now.present, id) && now.streaming.count(id) > 0; };
    // Q for the state in ZooKeeper now.
    auto checkQ = [&](const std::string& when) {
      if (acked == 0) return ::testing::AssertionSuccess();
      const Quorum zk = *quorumOf(s);
      const auto holders = std::count_if(zk.members.begin(), zk.members.end(),
                                         [&](const PeerIdentity& m) { return flush[m.id] >= acked; });
      if (holders >= zk.k) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << "run " << run << ", " << when << ": commit " << acked << " on "
                                           << holders << " members of ANY " << zk.k << " (" << peerIds(zk.members)
                                           << "); " << history;
    };
    // The primary writes, the members that stream flush, postgres acknowledges under its
    // rule: the k-th highest flush among the listed members whose walsender runs.
    auto tick = [&] {
      top += static_cast<uint64_t>(uniform(0, 5));
      for (const std::string& id : ids) {
        if (streams(id) && now.stalled.count(id) == 0) {
          flush[id] = std::min(top, flush[id] + static_cast<uint64_t>(uniform(0, 6)));
        }
      }
      std::vector<uint64_t> listed;
      for (const PeerIdentity& m : pg.members) {
        if (streams(m.id)) listed.push_back(flush[m.id]);
      }
      std::sort(listed.begin(), listed.end(), std::greater<>());
      if (listed.size() >= static_cast<size_t>(pg.k)) acked = std::max(acked, listed[static_cast<size_t>(pg.k - 1)]);
    };

    for (int i = 0; i < 60; ++i) {
      // The world moves: a peer goes or comes, stalls or recovers, stops streaming.
      for (int e = static_cast<int>(uniform(0, 2)); e > 0; --e) {
        const std::string& id = ids[static_cast<size_t>(uniform(0, 5))];
        const int what = static_cast<int>(uniform(1, 4));
        if (what == 1) {
          if (containsPeer(now.present, id)) {
            now.present.erase(now.present.begin() + indexOfPeer(now.present, id));
          } else {
            now.present.push_back(ident(id));
          }
        } else if (what == 2) {
          if (!now.stalled.erase(id)) now.stalled.insert(id);
        } else if (what == 3) {
          if (!now.streaming.erase(id)) now.streaming.insert(id);
        } else if (chance(30)) {
          wanted = {static_cast<int>(uniform(1, 3)), static_cast<int>(uniform(2, 4)),
                    chance(85) ? ReplicationMode::kQuorum : ReplicationMode::kSync};
        }
      }
      for (int t = static_cast<int>(uniform(0, 3)); t > 0; --t) {
        tick();
        ASSERT_TRUE(checkQ("between steps"));
      }
      auto st = nextMembershipStep(s, wanted, now);
      if (!st) continue;
      ++steps;
      ++kinds[st->kind];
      history += st->reason + "; ";
      const Quorum before = *quorumOf(s);
      const Quorum after = *quorumOf(st->next);
      // One member or k by one, never both; the generation and the rest unchanged.
      const auto added = std::count_if(after.members.begin(), after.members.end(),
                                       [&](const PeerIdentity& m) { return !containsPeer(before.members, m.id); });
      const auto removed = std::count_if(before.members.begin(), before.members.end(),
                                         [&](const PeerIdentity& m) { return !containsPeer(after.members, m.id); });
      ASSERT_LE(added + removed + std::abs(after.k - before.k), 1) << st->reason;
      ASSERT_EQ(st->next.generation, s.generation);
      if (steps % 8 == 0) {  // a valid state: parsing costs, one in eight
        ASSERT_TRUE(ClusterState::parse(st->next.serialize(), ClusterState::Formats::kSyncAndQuorum).ok()) << st->reason;
      }
      switch (st->order) {
        case StepOrder::kWriteOnly:
          s = st->next;
          ASSERT_TRUE(checkQ("after a re-encoding"));
          break;
        case StepOrder::kWriteThenReload:
          s = st->next;
          ASSERT_TRUE(checkQ("after the write"));
          for (int t = static_cast<int>(uniform(0, 3)); t > 0; --t) {
            tick();
            ASSERT_TRUE(checkQ("written, not yet reloaded"));
          }
          pg = after;
          break;
        case StepOrder::kReloadFenceThenWrite: {
          pg = after;
          for (int t = static_cast<int>(uniform(0, 3)); t > 0; --t) {
            tick();
            ASSERT_TRUE(checkQ("reloaded, not yet written"));
          }
          // The fence: p0 the primary's flush now; the members of the new set that stream
          // catch up to it, and k of them must, or the step is abandoned (the state's
          // rule applied again).
          const uint64_t p0 = top;
          int caughtUp = 0;
          for (const PeerIdentity& m : after.members) {
            if (streams(m.id) && now.stalled.count(m.id) == 0) {
              flush[m.id] = std::max(flush[m.id], p0);
              ++caughtUp;
            }
          }
          if (caughtUp < after.k) {
            pg = before;
            history += "(abandoned) ";
            break;
          }
          s = st->next;
          ASSERT_TRUE(checkQ("after the write"));
          break;
        }
      }
      tick();
      ASSERT_TRUE(checkQ("after the step"));
    }
  }
  // Not vacuous: every kind of step taken, many times.
  EXPECT_GT(steps, 700);
  for (auto kind : {MembershipStep::Kind::kAdd, MembershipStep::Kind::kRemove, MembershipStep::Kind::kRaiseK,
                    MembershipStep::Kind::kLowerK, MembershipStep::Kind::kReencode}) {
    EXPECT_GT(kinds[kind], 20) << static_cast<int>(kind);
  }
}

}  // namespace
}  // namespace dugong
