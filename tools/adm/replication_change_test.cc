#include "tools/adm/replication_change.h"

#include <gtest/gtest.h>

#include "ops/test_views.h"

namespace dugong::adm {
namespace {

using namespace testing;
using pg::ClusterReplication;

const ClusterReplication kQuorum12{ReplicationMode::kQuorum, 1, 2};
const ClusterReplication kSync{ReplicationMode::kSync, 1, 2};

PresentPeer present(const std::string& id, int stateFormat, std::optional<bool> runsQuorum) {
  return PresentPeer{peer(id), stateFormat, runsQuorum};
}

// Primary a, b and c present, each reading format 2 (by its election node or its agent).
ReplicationFacts threeReaders() {
  ReplicationFacts f;
  f.primary = "a";
  f.present = {present("a", 2, true), present("b", 0, true), present("c", 2, std::nullopt)};
  return f;
}

std::string refusal(const Result<ReplicationCheck>& r) { return r ? std::string("(written)") : r.error(); }

TEST(ReplicationChange, QuorumIsWrittenWhenEveryPresentPeerReadsFormat2) {
  auto r = checkReplicationChange(std::nullopt, kQuorum12, threeReaders());
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->warnings.empty());
  // Nothing changed: nothing checked, even in one-node-write mode.
  ReplicationFacts onwm = threeReaders();
  onwm.oneNodeWriteMode = true;
  EXPECT_TRUE(checkReplicationChange(kQuorum12, kQuorum12, onwm));
}

TEST(ReplicationChange, APeerThatReadsFormat1OnlyRefusesQuorum) {
  ReplicationFacts f = threeReaders();
  f.present.push_back(present("d", 0, false));  // an agent in sync mode: it would halt
  auto r = checkReplicationChange(kSync, kQuorum12, f);
  ASSERT_FALSE(r);
  EXPECT_NE(refusal(r).find("mode quorum needs every present peer to read cluster-state format 2, and d does not"),
            std::string::npos)
      << refusal(r);
  // Its agent silent and no stateFormat published: cannot be told, refused too.
  f.present.back().runsQuorum = std::nullopt;
  EXPECT_NE(refusal(checkReplicationChange(kSync, kQuorum12, f)).find("whether d does cannot be told"),
            std::string::npos);
  // Back to sync mode needs no such reader.
  EXPECT_TRUE(checkReplicationChange(kQuorum12, kSync, f));
  // Published in its election node: enough.
  f.present.back().stateFormat = 2;
  EXPECT_TRUE(checkReplicationChange(kSync, kQuorum12, f));
}

TEST(ReplicationChange, OneNodeWriteModeRefusesAnyChange) {
  ReplicationFacts f = threeReaders();
  f.oneNodeWriteMode = true;
  for (const auto& [before, next] : std::vector<std::pair<std::optional<ClusterReplication>,
                                                          std::optional<ClusterReplication>>>{
           {std::nullopt, kQuorum12}, {kSync, kQuorum12}, {kQuorum12, kSync}, {kQuorum12, std::nullopt}}) {
    auto r = checkReplicationChange(before, next, f);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("one-node-write mode"), std::string::npos) << r.error();
  }
}

TEST(ReplicationChange, KBelowSizeIsTheRule) {
  for (const auto& bad : {ClusterReplication{ReplicationMode::kQuorum, 2, 2}, ClusterReplication{ReplicationMode::kQuorum, 0, 2}}) {
    EXPECT_FALSE(checkReplicationChange(kQuorum12, bad, threeReaders()));
  }
}

TEST(ReplicationChange, ASizeLargerThanThePeersThatMayBeMembersIsWrittenWithAWarning) {
  ReplicationFacts f = threeReaders();
  auto r = checkReplicationChange(kQuorum12, ClusterReplication{ReplicationMode::kQuorum, 1, 3}, f);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("replication.size 3 is more than the 2 present peers that may be members (b, c;"),
            std::string::npos)
      << r->warnings[0];
  // A peer tagged nofailover is never a member.
  f.present[2].identity.tags.nofailover = true;
  r = checkReplicationChange(std::nullopt, kQuorum12, f);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("more than the 1 present peers that may be members (b;"), std::string::npos)
      << r->warnings[0];
}

TEST(ReplicationChange, FactsComeFromElectionNodesAndAgents) {
  EXPECT_EQ(publishedStateFormat(R"({"id": "b", "stateFormat": 2})"), 2);
  EXPECT_EQ(publishedStateFormat(R"({"id": "b"})"), 0);
  EXPECT_EQ(publishedStateFormat(R"({"stateFormat": "2"})"), 0);
  EXPECT_EQ(publishedStateFormat("not json"), 0);
  const std::map<std::string, std::string> published = {{"a", R"({"stateFormat": 3})"}, {"b", R"({"stateFormat": 2})"}};
  EXPECT_EQ(peersNotReading({peer("a"), peer("b"), peer("c")}, published, 3), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(agentRunsQuorum(nullptr), std::nullopt);
  EXPECT_EQ(agentRunsQuorum({{"peer", {{"role", "sync"}}}}), false);
  EXPECT_EQ(agentRunsQuorum({{"peer", {{"quorum", {{"mode", "sync"}}}}}}), true);
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "b").status["peer"]["quorum"] = {{"mode", "sync"}};
  mutablePeer(v, "c").status = nullptr;
  v.state.oneNodeWriteMode = true;
  auto f = replicationFacts(v, {{"c", R"({"id": "c", "stateFormat": 2})"}});
  EXPECT_TRUE(f.oneNodeWriteMode);
  EXPECT_EQ(f.primary, "a");
  ASSERT_EQ(f.present.size(), 3u);
  EXPECT_EQ(f.present[0].runsQuorum, false);
  EXPECT_EQ(f.present[1].runsQuorum, true);
  EXPECT_EQ(f.present[2].runsQuorum, std::nullopt);
  EXPECT_EQ(f.present[2].stateFormat, 2);
}

}  // namespace
}  // namespace dugong::adm
