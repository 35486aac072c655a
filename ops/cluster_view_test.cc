#include "ops/cluster_view.h"

#include <gtest/gtest.h>

#include "ops/test_views.h"

namespace dugong::adm {
namespace {

using namespace testing;

TEST(ListPeers, OrdersPrimarySyncAsyncsDeposedThenUnassigned) {
  ClusterState s = threePeers({"c", "d"});
  s.deposed.push_back(peer("z"));
  PeerList active = {peer("e"), peer("b"), peer("a"), peer("d")};
  active[0].zoneId = "fresh";
  auto peers = listPeers(s, active);
  ASSERT_EQ(peers.size(), 6u);
  std::vector<std::string> got;
  for (const auto& p : peers) got.push_back(p.identity.id + ":" + p.roleLabel(true) + (p.active ? "+" : "-"));
  EXPECT_EQ(got, (std::vector<std::string>{"a:primary+", "b:sync+", "c:async[0]-", "d:async[1]+", "z:deposed-",
                                           "e:unassigned+"}));
  EXPECT_EQ(peers[5].identity.zoneId, "fresh");  // identities of active peers come from ZooKeeper
}

TEST(ClusterView, KnowsTheReplicationChain) {
  ClusterView v = healthyView(threePeers({"c", "d"}));
  EXPECT_EQ(v.downstreamOf("a")->identity.id, "b");
  EXPECT_EQ(v.downstreamOf("b")->identity.id, "c");
  EXPECT_EQ(v.downstreamOf("c")->identity.id, "d");
  EXPECT_EQ(v.downstreamOf("d"), nullptr);
  EXPECT_EQ(v.upstreamOf("a"), nullptr);
  EXPECT_EQ(v.upstreamOf("b")->identity.id, "a");
  EXPECT_EQ(v.upstreamOf("c")->identity.id, "b");
  EXPECT_EQ(v.upstreamOf("d")->identity.id, "c");
}

// Quorum mode (docs/decisions/0079): every member is listed as a sync with its place in
// the set, present or not, and the async chain hangs from the first member.
TEST(ListPeers, ListsEveryQuorumMemberPresentOrNot) {
  ClusterState s = quorumPeers(1, {"b", "d"}, {"c"});
  PeerList active = {peer("a"), peer("b"), peer("c"), peer("e")};
  auto peers = listPeers(s, active);
  std::vector<std::string> got;
  for (const auto& p : peers) {
    got.push_back(p.identity.id + ":" + p.roleLabel(false) + "/" + p.roleLabel(true) + (p.active ? "+" : "-") +
                  std::to_string(p.memberIndex));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"a:primary/primary+-1", "b:sync/member+0", "d:sync/member-1",
                                           "c:async/async[0]+-1", "e:unassigned/unassigned+-1"}));
}

TEST(ClusterView, KnowsTheQuorumChainAndTheMemberCommitsWaitFor) {
  ClusterView v = healthyView(quorumPeers(1, {"b", "d"}, {"c"}));
  EXPECT_EQ(v.upstreamOf("b")->identity.id, "a");
  EXPECT_EQ(v.upstreamOf("d")->identity.id, "a");
  EXPECT_EQ(v.upstreamOf("c")->identity.id, "b");
  EXPECT_EQ(v.downstreamOf("a")->identity.id, "b");
  EXPECT_EQ(v.downstreamOf("b")->identity.id, "c");
  EXPECT_EQ(v.downstreamOf("d"), nullptr);
  // ANY 1: the latest flush; ANY 2: the second latest; a member not streaming with
  // sync_state quorum is not counted.
  PeerView& a = mutablePeer(v, "a");
  a.status["postgres"]["replication"][0]["flushLsn"] = "0/4000000";
  EXPECT_EQ(quorumWaitedMember(v)->identity.id, "d");
  v.state.quorum->k = 2;
  EXPECT_EQ(quorumWaitedMember(v)->identity.id, "b");
  a.status["postgres"]["replication"][0]["syncState"] = "async";
  EXPECT_EQ(quorumWaitedMember(v), nullptr);
  v.state.quorum->k = 1;
  EXPECT_EQ(quorumWaitedMember(v)->identity.id, "d");
  auto rows = statusRows(v);
  EXPECT_EQ(rows[0].cell("repl"), "quorum");  // the primary's row: the stream to d
  EXPECT_EQ(rows[0].cell("flush"), "0/5000000");
  EXPECT_EQ(rows[1].cell("repl"), "async");  // b's row: its stream to c
}

TEST(AgentStatus, ReadsPositionsAndToleratesGarbage) {
  ClusterView v = healthyView(threePeers());
  PeerView& a = mutablePeer(v, "a");
  a.status["postgres"]["currentLsn"] = "0/5001000";
  EXPECT_EQ(ownWal(a)->toString(), "0/05001000");
  EXPECT_EQ(*lagBytes(a, "b"), 0x1000u);
  EXPECT_FALSE(lagBytes(a, "nobody").has_value());
  EXPECT_TRUE(pgWritable(a));
  PeerView& b = mutablePeer(v, "b");
  EXPECT_FALSE(pgWritable(b));
  b.status["postgres"]["receiveLsn"] = "0/6000000";
  EXPECT_EQ(ownWal(b)->toString(), "0/06000000");
  b.status = {{"postgres", {{"online", "yes"}, {"replication", 7}}}};
  EXPECT_FALSE(pgOnline(b));
  EXPECT_FALSE(ownWal(b).has_value());
  EXPECT_FALSE(replicationRow(b, "c").has_value());
  b.status = nullptr;
  EXPECT_FALSE(b.reachable());
  EXPECT_FALSE(pgOnline(b));
}

// A refusal says whether the agent runs or only its session is left (review of 2f035ac,
// P18: "its agent runs" was printed for an agent stopped seconds before).
TEST(WhyActive, SaysWhetherTheAgentRunsOrOnlyItsSessionIsOpen) {
  PeerView p;
  p.active = true;
  p.agentError = "connection refused";
  EXPECT_NE(whyActive(p).find("session is still open"), std::string::npos) << whyActive(p);
  EXPECT_NE(whyActive(p).find("connection refused"), std::string::npos);
  EXPECT_NE(whyActive(p).find("dugong --leave"), std::string::npos);
  p.status = nlohmann::json::object();
  EXPECT_EQ(whyActive(p), "its agent runs");
}

TEST(AgentUrl, StripsTrailingSlashes) {
  PeerIdentity p = peer("a");
  EXPECT_EQ(*agentUrl(p), "http://10.0.0.1:8008");
  p.backupUrl.reset();
  EXPECT_FALSE(agentUrl(p).has_value());
}

TEST(FormatLag, MinutesAndSeconds) {
  EXPECT_EQ(formatLagSeconds(0.4), "0m00s");
  EXPECT_EQ(formatLagSeconds(65.9), "1m05s");
  EXPECT_EQ(formatLagSeconds(3600), "60m00s");
  EXPECT_EQ(formatLagSeconds(std::nullopt), "-");
}

TEST(StatusRows, DescribeReplicationToTheDownstream) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "a").status["postgres"]["currentLsn"] = "0/5000100";
  mutablePeer(v, "c").status = nullptr;
  mutablePeer(v, "c").active = false;
  auto rows = statusRows(v);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].cell("role"), "primary");
  EXPECT_EQ(rows[0].cell("pg"), "ok");
  EXPECT_EQ(rows[0].cell("repl"), "sync");
  EXPECT_EQ(rows[0].cell("replay"), "0/5000000");
  EXPECT_EQ(rows[0].cell("lagbytes"), "256");
  EXPECT_EQ(rows[0].cell("lag"), "-");  // a primary has no replay lag
  EXPECT_EQ(rows[1].cell("repl"), "async");
  EXPECT_EQ(rows[1].cell("lag"), "0m00s");
  EXPECT_EQ(rows[1].cell("timeline"), "1");
  EXPECT_EQ(rows[2].cell("pg"), "unknown");
  EXPECT_EQ(rows[2].cell("active"), "no");
  EXPECT_EQ(rows[2].cell("repl"), "-");
  EXPECT_EQ(filterRole(rows, "sync").size(), 1u);
  EXPECT_EQ(filterRole(rows, "").size(), 3u);
  EXPECT_TRUE(filterRole(rows, "deposed").empty());
}

TEST(StatusRows, TagsAsTheirPeersPublishThem) {
  ClusterState s = threePeers();
  PeerList active = {peer("a"), peer("b"), peer("c")};
  active[2].tags.nofailover = true;
  active[2].tags.noloadbalance = true;
  ClusterView v = healthyView(s);
  v.active = active;
  v.peers = listPeers(s, active);
  auto rows = statusRows(v);
  EXPECT_EQ(rows[0].cell("tags"), "-");
  EXPECT_EQ(rows[2].cell("tags"), "nofailover,noloadbalance");
}

TEST(StatusRows, EveryColumnHasACell) {
  ClusterView v = healthyView(threePeers());
  for (const auto& row : statusRows(v)) {
    for (const auto& c : allColumns()) EXPECT_TRUE(row.cells.contains(c)) << c;
  }
}

TEST(ClusterView, RoleInState) {
  ClusterState s = threePeers();
  s.deposed.push_back(peer("d"));
  EXPECT_EQ(roleInState(s, "a"), "primary");
  EXPECT_EQ(roleInState(s, "b"), "sync");
  EXPECT_EQ(roleInState(s, "c"), "async");
  EXPECT_EQ(roleInState(s, "d"), "deposed");
  EXPECT_EQ(roleInState(s, "e"), "");
}

}  // namespace
}  // namespace dugong::adm
