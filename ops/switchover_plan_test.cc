#include "ops/switchover_plan.h"

#include <gtest/gtest.h>

#include "ops/test_views.h"

namespace dugong::adm {
namespace {

using namespace testing;

SwitchoverAsk ask(std::optional<std::string> candidate, std::optional<std::string> leader = std::nullopt) {
  return {std::move(candidate), std::move(leader)};
}

TEST(SwitchoverPlan, WithoutACandidateTheSyncTakesOverInOneRequest) {
  auto p = planSwitchover(threePeers(), ask(std::nullopt));
  ASSERT_TRUE(p.target) << p.refusal.reason;
  EXPECT_EQ(p.target->id, "b");
  EXPECT_EQ(p.target->role, "sync");
  EXPECT_EQ(p.target->requests, 1);
}

// Quorum mode (docs/decisions/0079): without a candidate, the first member; any member
// is a sync, one request.
TEST(SwitchoverPlan, InQuorumModeTheFirstMemberOrTheOneNamedTakesOverInOneRequest) {
  const ClusterState s = quorumPeers(1, {"b", "d"}, {"c"});
  auto p = planSwitchover(s, ask(std::nullopt));
  ASSERT_TRUE(p.target) << p.refusal.reason;
  EXPECT_EQ(p.target->id, "b");
  EXPECT_EQ(p.target->role, "sync");
  EXPECT_EQ(p.target->requests, 1);
  p = planSwitchover(s, ask("d"));
  ASSERT_TRUE(p.target) << p.refusal.reason;
  EXPECT_EQ(p.target->role, "sync");
  EXPECT_EQ(p.target->requests, 1);
  p = planSwitchover(s, ask("c"));  // an async: only once a member (peer_quorum.cc)
  ASSERT_FALSE(p.target);
  EXPECT_EQ(p.refusal.status, 409);
  EXPECT_EQ(p.refusal.reason, "c is an async, which in quorum mode takes over only once it is a member of the "
                              "synchronous set (b, d): switch over to a member, or raise replication.size first");
  p = planSwitchover(s, ask("x"));
  ASSERT_FALSE(p.target);
  EXPECT_EQ(p.refusal.reason, "no peer x in the cluster; its peers are a (primary), b (sync), d (sync), c (async)");
}

TEST(SwitchoverPlan, AsyncNTakesNPlusTwoRequests) {
  const ClusterState s = threePeers({"c", "d", "e"});
  for (auto [id, n] : {std::pair{"c", 2}, {"d", 3}, {"e", 4}}) {
    auto p = planSwitchover(s, ask(id));
    ASSERT_TRUE(p.target) << id << ": " << p.refusal.reason;
    EXPECT_EQ(p.target->role, "async");
    EXPECT_EQ(p.target->requests, n) << id;
  }
  auto sync = planSwitchover(s, ask("b", "a"));
  ASSERT_TRUE(sync.target) << sync.refusal.reason;
  EXPECT_EQ(sync.target->requests, 1);
}

TEST(SwitchoverPlan, ALeaderThatIsNotThePrimaryIsRefusedWith412) {
  auto p = planSwitchover(threePeers(), ask("c", "b"));
  ASSERT_FALSE(p.target);
  EXPECT_EQ(p.refusal.status, 412);
  EXPECT_EQ(p.refusal.reason,
            "the leader given, b, is not the primary: the primary is a (generation 1); nothing was changed");
  // Checked before anything else: also on a frozen cluster, also without a candidate.
  ClusterState frozen = threePeers();
  frozen.freeze = true;
  EXPECT_EQ(planSwitchover(frozen, ask(std::nullopt, "x")).refusal.status, 412);
}

TEST(SwitchoverPlan, RefusesWhatNoPromoteRequestCouldDo) {
  const ClusterState s = threePeers();
  auto primary = planSwitchover(s, ask("a"));
  EXPECT_FALSE(primary.target);
  EXPECT_EQ(primary.refusal.status, 409);
  EXPECT_EQ(primary.refusal.reason, "a is the primary already: nothing to switch over");

  auto unknown = planSwitchover(s, ask("zz"));
  EXPECT_FALSE(unknown.target);
  EXPECT_EQ(unknown.refusal.status, 404);
  EXPECT_EQ(unknown.refusal.reason, "no peer zz in the cluster; its peers are a (primary), b (sync), c (async)");

  ClusterState deposed = s;
  deposed.deposed.push_back(peer("d"));
  auto d = planSwitchover(deposed, ask("d"));
  EXPECT_FALSE(d.target);
  EXPECT_EQ(d.refusal.status, 409);
  EXPECT_EQ(d.refusal.reason, "d is deposed: it must be rebuilt before it can take over");

  ClusterState frozen = s;
  frozen.freeze = {{"date", "2026-11-29T10:00:00.000Z"}, {"reason", "upgrade"}};
  auto f = planSwitchover(frozen, ask("c"));
  EXPECT_FALSE(f.target);
  EXPECT_EQ(f.refusal.status, 409);
  EXPECT_NE(f.refusal.reason.find("the cluster is frozen"), std::string::npos) << f.refusal.reason;
  EXPECT_NE(f.refusal.reason.find("upgrade"), std::string::npos) << f.refusal.reason;

  ClusterState onwm = s;
  onwm.oneNodeWriteMode = true;
  onwm.sync.reset();
  onwm.async.clear();
  auto o = planSwitchover(onwm, ask(std::nullopt));
  EXPECT_FALSE(o.target);
  EXPECT_NE(o.refusal.reason.find("one-node-write mode"), std::string::npos) << o.refusal.reason;
}

}  // namespace
}  // namespace dugong::adm
