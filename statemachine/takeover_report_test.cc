#include "statemachine/takeover_report.h"

#include <gtest/gtest.h>

#include "statemachine/event.h"
#include "statemachine/pg_config.h"
#include "statemachine/peer_test_support.h"

namespace dugong {
namespace {

using peer_test::ident;
using peer_test::peers;

TakeoverReport sample() {
  return {7, WalPosition(0x3000060), TimelineHistory{3, {{1, WalPosition(0x500)}, {2, WalPosition(0x800)}}}, 4, 99};
}

TEST(TakeoverReport, RoundTripsThroughItsJsonWithoutTheNodeVersion) {
  const TakeoverReport r = sample();
  EXPECT_EQ(r.toJson().dump(), R"({"generation":7,"history":[[1,"0/00000500"],[2,"0/00000800"]],"instance":99,)"
                               R"("timeline":3,"wal":"0/03000060"})");
  auto back = TakeoverReport::parse(r.toJson().dump());
  ASSERT_TRUE(back) << back.error();
  TakeoverReport expected = r;
  expected.nodeVersion = -1;  // the session's, not the member's
  EXPECT_EQ(*back, expected);
  EXPECT_EQ(r.describe(), "generation 7: timeline 3 (from 2 at 0/00000800, from 1 at 0/00000500), WAL 0/03000060");
}

TEST(TakeoverReport, AnInstanceIsOptionalAndAnEmptyHistoryIsTimelineOne) {
  auto r = TakeoverReport::parse(R"({"generation": 1, "wal": "0/10", "timeline": 1, "history": []})");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->instance, 0u);
  EXPECT_TRUE(r->history.ancestors.empty());
}

// Every refusal, with the reason it gives: a report that is not valid is not counted.
TEST(TakeoverReport, RefusesEveryMalformedReport) {
  const std::string ok = R"("wal": "0/1000", "timeline": 3, "history": [[1, "0/500"], [2, "0/800"]])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "takeover report: not JSON"},
      {"[1]", "takeover report: not an object"},
      {"{" + ok + "}", "\"generation\" must be an integer >= 1"},
      {R"({"generation": 0, )" + ok + "}", "\"generation\" must be an integer >= 1"},
      {R"({"generation": "7", )" + ok + "}", "\"generation\" must be an integer >= 1"},
      {R"({"generation": 7, "timeline": 3, "history": []})", "\"wal\" must be a string X/Y"},
      {R"({"generation": 7, "wal": 5, "timeline": 3, "history": []})", "\"wal\" must be a string X/Y"},
      {R"({"generation": 7, "wal": "nope", "timeline": 3, "history": []})", "takeover report: \"wal\": "},
      {R"({"generation": 7, "wal": "0/1000", "history": []})", "\"timeline\" must be an integer >= 1"},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 0, "history": []})", "\"timeline\" must be an integer >= 1"},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 3})", "\"history\" is missing"},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 3, "history": {}})", "\"history\" must be an array"},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 3, "history": [[0, "0/5"]]})", "\"history\" must be an array"},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 3, "history": [[1]]})", "\"history\" must be an array"},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 3, "history": [[1, "x"]]})", "\"history\": "},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 3, "history": [[2, "0/5"], [1, "0/6"]]})",
       "timelines must rise, each below the WAL's timeline 3"},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 3, "history": [[3, "0/5"]]})",
       "timelines must rise, each below the WAL's timeline 3"},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 3, "history": [[1, "0/6"], [2, "0/5"]]})",
       "ends must not decrease, nor pass the WAL's end 0/00001000"},
      {R"({"generation": 7, "wal": "0/1000", "timeline": 3, "history": [[1, "0/2000"]]})",
       "ends must not decrease, nor pass the WAL's end 0/00001000"},
      {R"({"generation": 7, )" + ok + R"(, "instance": -1})", "\"instance\" must be an integer >= 0"},
      {R"({"generation": 7, )" + ok + R"(, "instance": "1"})", "\"instance\" must be an integer >= 0"},
  };
  for (const auto& [text, error] : cases) {
    auto r = TakeoverReport::parse(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().find(error), std::string::npos) << text << " -> " << r.error();
    EXPECT_EQ(r.error().rfind("takeover report: ", 0), 0u) << r.error();
  }
}

// A data state's history is parsed by the same rule, with its own prefix (unchanged).
TEST(TakeoverReport, TheDataStatesHistoryKeepsItsErrors) {
  auto bad = PeerDataState::fromJson(
      nlohmann::json::parse(R"({"setUp": true, "systemId": "7", "timeline": 2, "wal": "0/9", "history": 3})"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "data state: \"history\" must be an array of [timeline, \"X/Y\"]");
}

TEST(PgConfig, APrimaryInQuorumModeNamesItsSetAndK) {
  PgConfig c = PgConfig::primary(std::nullopt);
  c.quorum = Quorum{1, peers({"a", "b"})};
  const auto j = c.toJson();
  EXPECT_TRUE(j["downstream"].is_null());
  EXPECT_EQ(j["quorum"]["k"], 1);
  EXPECT_EQ(j["quorum"]["members"][1]["id"], "b");
  EXPECT_FALSE(PgConfig::primary(std::nullopt).toJson().contains("quorum"));
  PgConfig same = c;
  EXPECT_TRUE(c == same);
  same.quorum->k = 2;
  EXPECT_FALSE(c == same);  // k
  same = c;
  same.quorum->members[1].pgUrl = "tcp://elsewhere";
  EXPECT_FALSE(c == same);  // a member's identity in full
  same = c;
  same.quorum->members.pop_back();
  EXPECT_FALSE(c == same);  // the set
  EXPECT_FALSE(c == PgConfig::primary(std::nullopt));  // one-node-write's "writable alone" is not a quorum
}

TEST(QuorumEvents, DescribeThemselvesInOneLine) {
  EXPECT_EQ(describeEvent(ReportPublished{true, "", 5}), "report published v5");
  EXPECT_EQ(describeEvent(ReportPublished{false, "connection loss", -1}), "report publication failed: connection loss");
  EXPECT_EQ(describeEvent(ReplicationWanted{ReplicationMode::kQuorum, 2, 4}), "replication wanted: quorum k=2 size=4");
  EXPECT_EQ(describeEvent(ReplicationWanted{}), "replication wanted: sync");
}

}  // namespace
}  // namespace dugong
