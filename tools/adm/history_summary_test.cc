#include "tools/adm/history_summary.h"

#include <gtest/gtest.h>

#include "ops/test_views.h"

namespace dugong::adm {
namespace {

using namespace testing;

TEST(HistorySummary, FirstState) {
  EXPECT_EQ(summaryLine(std::nullopt, threePeers({"c", "d"})), "cluster set up: primary a, sync b, asyncs c, d");
  ClusterState onwm;
  onwm.primary = peer("a");
  onwm.oneNodeWriteMode = true;
  onwm.freeze = {{"date", "x"}, {"reason", "one-node-write mode set up by a"}};
  EXPECT_EQ(summaryLine(std::nullopt, onwm),
            "cluster set up: primary a in one-node-write mode; frozen: one-node-write mode set up by a");
}

TEST(HistorySummary, SyncTakeover) {
  ClusterState before = threePeers({"c", "d"});
  ClusterState after = before;
  after.generation = 2;
  after.primary = peer("b");
  after.sync = peer("c");
  after.async = {peer("d")};
  after.deposed = {peer("a")};
  EXPECT_EQ(summaryLine(before, after),
            "sync b took over as primary from a; a is deposed; async c became sync (was sync b)");
}

TEST(HistorySummary, PrimaryReplacesAGoneSync) {
  ClusterState before = threePeers({"c"});
  ClusterState after = before;
  after.generation = 2;
  after.sync = peer("c");
  after.async.clear();
  EXPECT_EQ(summaryLine(before, after), "async c became sync (was sync b); sync b removed");
}

TEST(HistorySummary, PromoteOfTheFirstAsyncSwapsItWithTheSync) {
  ClusterState before = threePeers({"c"});
  ClusterState after = before;
  after.generation = 2;
  after.sync = peer("c");
  after.async = {peer("b")};
  EXPECT_EQ(summaryLine(before, after), "async c became sync (was sync b); sync b moved to async");
}

TEST(HistorySummary, AsyncChainChanges) {
  ClusterState before = threePeers({"c", "d"});
  ClusterState after = before;
  after.async = {peer("d"), peer("c"), peer("e")};
  EXPECT_EQ(summaryLine(before, after), "async e added; async chain reordered: c, d -> d, c, e");
  after.async = {peer("d")};
  EXPECT_EQ(summaryLine(before, after), "async c removed");
}

TEST(HistorySummary, DeposedFreezePromoteAndMode) {
  ClusterState before = threePeers();
  before.deposed = {peer("z")};
  ClusterState after = before;
  after.deposed.clear();
  after.freeze = {{"date", "d"}, {"reason", "upgrade"}};
  after.promote = {{"id", "c"}, {"role", "async"}, {"asyncIndex", 0}, {"generation", 1}, {"expireTime", "T"}};
  EXPECT_EQ(summaryLine(before, after),
            "z removed from deposed; frozen: upgrade; promote requested: c as async[0] (generation 1, expires T)");
  EXPECT_EQ(summaryLine(after, before), "z is deposed; unfrozen; promote request removed");
  ClusterState rejoined = after;
  rejoined.async.push_back(peer("z"));
  EXPECT_EQ(summaryLine(before, rejoined).substr(0, 28), "async z added; z removed fro");
  ClusterState onwm = before;
  onwm.oneNodeWriteMode = true;
  onwm.sync.reset();
  onwm.async.clear();
  EXPECT_EQ(summaryLine(before, onwm), "one-node-write mode on; sync b removed; async c removed");
  ClusterState frozenTrue = before;
  frozenTrue.freeze = true;
  EXPECT_EQ(summaryLine(before, frozenTrue), "frozen: (no reason given)");
}

TEST(HistorySummary, CarriedOutPromoteRequest) {
  ClusterState before = threePeers({"c"});
  before.promote = {{"id", "b"}, {"role", "sync"}, {"generation", 1}, {"expireTime", "T"}};
  ClusterState after = before;
  after.generation = 2;
  after.primary = peer("b");
  after.sync = peer("c");
  after.async.clear();
  after.deposed = {peer("a")};
  after.promote = nullptr;
  EXPECT_EQ(summaryLine(before, after),
            "sync b took over as primary from a; a is deposed; async c became sync (was sync b); promote request "
            "carried out");
}

TEST(HistorySummary, NoChange) {
  ClusterState s = threePeers();
  EXPECT_EQ(summaryLine(s, s), "no change");
  ClusterState w = s;
  w.initWal = WalPosition(0x4000000);
  EXPECT_EQ(summaryLine(s, w), "initWal now 0/04000000");
}

// Quorum mode (docs/decisions/0079): a record of a format-2 state is read, and a change of
// mode or of the set is said as such, a member being a sync (docs/decisions/0089).
TEST(HistorySummary, QuorumModeAndBack) {
  const ClusterState sync = threePeers();        // primary a, sync b, async c
  const ClusterState one = quorumPeers(1, {"b", "c"});
  ClusterState two = quorumPeers(2, {"b", "c"});
  EXPECT_EQ(summaryLine(sync, one), "quorum mode: ANY 1 (b, c)");
  EXPECT_EQ(summaryLine(one, two), "quorum set: ANY 1 (b, c) -> ANY 2 (b, c)");
  EXPECT_EQ(summaryLine(one, sync), "sync mode: sync b");
  auto item = decodeHistoryRecord(7, nlohmann::json({{"time", "t"}, {"state", one.toJson()}}).dump());
  ASSERT_TRUE(item.state.has_value()) << item.error;
  EXPECT_EQ(summarizeHistory({item})[0], "cluster set up: primary a, quorum ANY 1 (b, c)");
}

TEST(HistoryRecords, DecodeAndSummarizeSkippingInvalidStates) {
  ClusterState first = threePeers();
  ClusterState second = first;
  second.freeze = {{"date", "d"}, {"reason", "r"}};
  std::vector<HistoryItem> items;
  items.push_back(decodeHistoryRecord(
      0, nlohmann::json({{"time", "t0"}, {"state", first.toJson()}, {"reason", "initial setup"}}).dump()));
  items.push_back(decodeHistoryRecord(1, nlohmann::json({{"time", "t1"}, {"state", {{"generation", "x"}}}}).dump()));
  items.push_back(decodeHistoryRecord(2, "not json"));
  items.push_back(decodeHistoryRecord(3, nlohmann::json({{"time", "t3"}, {"state", second.toJson()}}).dump()));
  EXPECT_EQ(items[0].time, "t0");
  EXPECT_EQ(items[0].reason, "initial setup");
  ASSERT_TRUE(items[0].state.has_value());
  EXPECT_FALSE(items[1].state.has_value());
  EXPECT_FALSE(items[2].state.has_value());
  auto lines = summarizeHistory(items);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "cluster set up: primary a, sync b, asyncs c");
  EXPECT_EQ(lines[1].substr(0, 14), "invalid state:");
  EXPECT_EQ(lines[2], "invalid state: history record is not a JSON object");
  EXPECT_EQ(lines[3], "frozen: r");  // against the last valid state
}

}  // namespace
}  // namespace dugong::adm
