#include "zk/layout.h"

#include <gtest/gtest.h>

#include "statemachine/time_format.h"
#include "zk/options.h"

namespace dugong::zk {
namespace {

TEST(Layout, PathsUnderTheRoot) {
  Layout l("/dugong/c1");
  EXPECT_EQ(l.state(), "/dugong/c1/state");
  EXPECT_EQ(l.election(), "/dugong/c1/election");
  EXPECT_EQ(l.history(), "/dugong/c1/history");
  EXPECT_EQ(l.electionPrefix("db-1"), "/dugong/c1/election/db-1-");
  EXPECT_EQ(l.historyPrefix(), "/dugong/c1/history/");
  EXPECT_EQ(l.config(), "/dugong/c1/config");
  EXPECT_EQ(l.configHistoryPrefix(), "/dugong/c1/config-history/");
  EXPECT_EQ(l.request("db-1"), "/dugong/c1/requests/db-1");
  EXPECT_EQ(l.persistentNodes(),
            (std::vector<std::string>{"/dugong", "/dugong/c1", "/dugong/c1/election", "/dugong/c1/history",
                                      "/dugong/c1/config-history", "/dugong/c1/requests"}));
}

TEST(Layout, SequenceAndPeerIdOfElectionNodes) {
  EXPECT_EQ(sequenceOf("db-1-0000000042"), 42);
  EXPECT_EQ(peerIdOf("db-1-0000000042"), "db-1");
  EXPECT_FALSE(sequenceOf("db1"));
  EXPECT_FALSE(peerIdOf("-0000000001"));
  EXPECT_FALSE(peerIdOf("db1-x"));
  EXPECT_FALSE(sequenceOf("0000000007"));
  EXPECT_EQ(sequenceOf("0000000007", true), 7);
}

TEST(Layout, ElectionNodesSortBySequenceNotByName) {
  auto sorted = sortElectionNodes({"zz-0000000003", "aa-0000000010", "junk", "mm-0000000001"});
  EXPECT_EQ(sorted, (std::vector<std::string>{"mm-0000000001", "zz-0000000003", "aa-0000000010"}));
  EXPECT_EQ(sortHistoryNodes({"0000000010", "0000000002", "x"}), (std::vector<std::string>{"0000000002", "0000000010"}));
}

TEST(Layout, DedupeKeepsTheFirstNodeOfAPeer) {
  PeerList peers = {{"a", "", "", "", {}}, {"b", "", "", "", {}}, {"a", "x", "", "", {}}};
  auto out = dedupeById(peers);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].id, "a");
  EXPECT_EQ(out[0].ip, "");
  EXPECT_EQ(out[1].id, "b");
}

TEST(Layout, HistoryRecordHoldsTimeStateAndReason) {
  auto rec = nlohmann::json::parse(historyRecord(0, R"({"generation":3})", "takeover"));
  EXPECT_EQ(rec["time"], formatIso8601(0));
  EXPECT_EQ(rec["state"]["generation"], 3);
  EXPECT_EQ(rec["reason"], "takeover");
  auto raw = nlohmann::json::parse(historyRecord(0, "{oops", ""));
  EXPECT_EQ(raw["state"], "{oops");
  EXPECT_FALSE(raw.contains("reason"));
}

TEST(Options, ValidateGivesPreciseMessages) {
  ZkOptions o;
  EXPECT_NE(o.validate().error().find("connectString"), std::string::npos);
  o.connectString = "127.0.0.1:2181";
  EXPECT_NE(o.validate().error().find("cluster"), std::string::npos);
  o.cluster = "c1";
  EXPECT_TRUE(o.validate().ok());
  EXPECT_EQ(o.effectiveRoot(), "/dugong/c1");
  o.chroot = "tenant";
  EXPECT_NE(o.validate().error().find("chroot"), std::string::npos);
  o.chroot = "/tenant";
  EXPECT_EQ(o.hosts(), "127.0.0.1:2181/tenant");
  o.connectString = "127.0.0.1:2181/x";
  EXPECT_NE(o.validate().error().find("chroot"), std::string::npos);
  o.connectString = "127.0.0.1:2181";
  o.root = "/a//b";
  EXPECT_FALSE(o.validate().ok());
  o.root = "";
  o.sessionTimeoutMs = 5;
  EXPECT_NE(o.validate().error().find("sessionTimeoutMs"), std::string::npos);
  o.sessionTimeoutMs = 2000;
  o.auth = DigestAuth{"a:b", "p"};
  EXPECT_FALSE(o.validate().ok());
}

}  // namespace
}  // namespace dugong::zk
