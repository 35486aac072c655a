#include "ops/promote_check.h"

#include <gtest/gtest.h>

#include "statemachine/promote_request.h"
#include "ops/test_views.h"

namespace dugong::adm {
namespace {

using namespace testing;

PromoteArgs args(const std::string& id, const std::string& role) {
  PromoteArgs a;
  a.id = id;
  a.role = role;
  return a;
}

std::string refusal(const ClusterView& v, const PromoteArgs& a) {
  auto r = buildPromoteRequest(v, a);
  return r.ok() ? std::string("(accepted)") : r.error();
}

TEST(PromoteCheck, SyncRequestIsValidForThePeers) {
  ClusterView v = healthyView(threePeers());
  auto r = buildPromoteRequest(v, args("b", "sync"));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)["id"], "b");
  EXPECT_EQ((*r)["role"], "sync");
  EXPECT_EQ((*r)["generation"], 1);
  EXPECT_FALSE(r->contains("asyncIndex"));
  EXPECT_EQ((*r)["expireTime"], formatIso8601(v.now + 60000));
  // What a peer will check: the request is valid for this state.
  EXPECT_TRUE(validatePromote(*r, v.state, v.now).ok());
}

// Quorum mode (docs/decisions/0079): any member is promoted as a sync (its stream's
// sync_state is "quorum"), when another member or an async can fill the set after it;
// a peer that is no member is refused.
TEST(PromoteCheck, AQuorumMemberIsPromotedAsASync) {
  ClusterView v = healthyView(quorumPeers(1, {"b", "d"}, {"c"}));
  for (const char* id : {"b", "d"}) {
    auto r = buildPromoteRequest(v, args(id, "sync"));
    ASSERT_TRUE(r.ok()) << id << ": " << r.error();
    EXPECT_TRUE(validatePromote(*r, v.state, v.now).ok()) << id;
  }
  EXPECT_EQ(refusal(v, args("c", "sync")), "c is not a member of the synchronous set (b, d)");
  EXPECT_EQ(refusal(v, args("c", "async")), "c is an async, which in quorum mode takes over only once it is a member "
                                            "of the synchronous set (b, d): promote a member, or raise "
                                            "replication.size first");
  ClusterView alone = healthyView(quorumPeers(1, {"b"}));
  EXPECT_EQ(refusal(alone, args("b", "sync")),
            "no other member or async is in ZooKeeper to join the synchronous set, so b would not take over");
  mutablePeer(v, "a").status["postgres"]["replication"][1]["syncState"] = "async";
  EXPECT_EQ(refusal(v, args("d", "sync")), "d does not stream synchronously from a");
}

TEST(PromoteCheck, AsyncIndexIsFoundOrChecked) {
  ClusterView v = healthyView(threePeers({"c", "d"}));
  auto r = buildPromoteRequest(v, args("d", "async"));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)["asyncIndex"], 1);
  EXPECT_TRUE(validatePromote(*r, v.state, v.now).ok());
  PromoteArgs wrong = args("d", "async");
  wrong.asyncIndex = 0;
  EXPECT_EQ(refusal(v, wrong), "d is async[1], not async[0]");
}

TEST(PromoteCheck, RefusesBadArguments) {
  ClusterView v = healthyView(threePeers());
  EXPECT_NE(refusal(v, args("a", "primary")).find("role must be"), std::string::npos);
  PromoteArgs e = args("b", "sync");
  e.expireSeconds = 0;
  EXPECT_NE(refusal(v, e).find("--expire"), std::string::npos);
  PromoteArgs i = args("b", "sync");
  i.asyncIndex = 0;
  EXPECT_NE(refusal(v, i).find("only for promoting an async"), std::string::npos);
  EXPECT_EQ(refusal(v, args("c", "sync")), "c is not the sync (the sync is b)");
  EXPECT_EQ(refusal(v, args("b", "async")), "b is not an async");
  EXPECT_EQ(refusal(v, args("nobody", "async")), "nobody is not an async");
}

TEST(PromoteCheck, RefusesWhenFrozenOrInOneNodeWriteModeOrPending) {
  ClusterView v = healthyView(threePeers());
  v.state.freeze = true;
  EXPECT_NE(refusal(v, args("b", "sync")).find("frozen"), std::string::npos);
  v.state.freeze = nullptr;
  v.state.promote = {{"id", "c"}, {"role", "async"}, {"asyncIndex", 0}, {"generation", 1},
                     {"expireTime", formatIso8601(v.now + 1000)}};
  EXPECT_NE(refusal(v, args("b", "sync")).find("pending already"), std::string::npos);
  // An expired request does not block a new one.
  v.state.promote["expireTime"] = formatIso8601(v.now - 1000);
  EXPECT_EQ(refusal(v, args("b", "sync")), "(accepted)");
  v.state.oneNodeWriteMode = true;
  EXPECT_NE(refusal(v, args("b", "sync")).find("one-node-write"), std::string::npos);
}

TEST(PromoteCheck, RefusesWhenTheTakeoverCouldNotHappen) {
  ClusterView v = healthyView(threePeers());
  v.active = {v.state.primary, *v.state.sync};  // the async is gone
  EXPECT_NE(refusal(v, args("b", "sync")).find("no async is in ZooKeeper"), std::string::npos);
  ClusterView w = healthyView(threePeers());
  w.active = {*w.state.sync, w.state.async[0]};  // the primary is gone
  EXPECT_NE(refusal(w, args("c", "async")).find("the primary a is not in ZooKeeper"), std::string::npos);
}

TEST(PromoteCheck, RefusesWhatWouldMakeANoFailoverPeerTheSyncOrPrimary) {
  ClusterView v = healthyView(threePeers({"c", "d"}));
  v.active[2].tags.nofailover = true;  // c, async[0], as its election node says
  EXPECT_EQ(refusal(v, args("c", "async")), "c is tagged nofailover: it is never made the sync (it could then take over)");
  EXPECT_EQ(refusal(v, args("b", "sync")), "(accepted)");  // d can become the new sync
  EXPECT_EQ(refusal(v, args("d", "async")), "(accepted)");  // moves up the chain only
  v.active[3].tags.nofailover = true;
  EXPECT_NE(refusal(v, args("b", "sync")).find("every async in ZooKeeper is tagged nofailover"), std::string::npos);
  v.active[1].tags.nofailover = true;
  EXPECT_EQ(refusal(v, args("b", "sync")), "b is tagged nofailover: it never takes over");
}

TEST(PromoteCheck, RefusesAPeerThatIsDownOrNotStreamingOrLagging) {
  ClusterView v = healthyView(threePeers());
  mutablePeer(v, "c").active = false;
  EXPECT_EQ(refusal(v, args("c", "async")), "c is not in ZooKeeper");

  v = healthyView(threePeers());
  mutablePeer(v, "c").status = nullptr;
  EXPECT_NE(refusal(v, args("c", "async")).find("its agent does not answer"), std::string::npos);

  v = healthyView(threePeers());
  mutablePeer(v, "c").status["postgres"]["online"] = false;
  EXPECT_EQ(refusal(v, args("c", "async")), "c: postgres is not online");

  v = healthyView(threePeers());
  mutablePeer(v, "b").status["postgres"]["replication"] = nlohmann::json::array();
  EXPECT_EQ(refusal(v, args("c", "async")), "c is not streaming from b");

  v = healthyView(threePeers());
  mutablePeer(v, "a").status["postgres"]["replication"] =
      nlohmann::json::array({replRow("b", "potential", "0/5000000")});  // not {x}: for a json x, clang copies it
  EXPECT_EQ(refusal(v, args("b", "sync")), "b does not stream synchronously from a");

  v = healthyView(threePeers());
  mutablePeer(v, "a").status["postgres"]["currentLsn"] = "0/7000000";
  EXPECT_NE(refusal(v, args("b", "sync")).find("b lags 33554432 bytes behind a, more than 16777216"),
            std::string::npos);
  PromoteArgs lenient = args("b", "sync");
  lenient.lagToIgnore = 64ull << 20;
  EXPECT_EQ(refusal(v, lenient), "(accepted)");
}

TEST(PromoteOutcome, TellsCarriedOutRemovedExpiredAndPending) {
  ClusterView v = healthyView(threePeers({"c", "d"}));
  auto sync = *buildPromoteRequest(v, args("b", "sync"));
  ClusterState pending = v.state;
  pending.promote = sync;
  EXPECT_EQ(promoteOutcome(sync, pending, v.now), PromoteOutcome::kPending);
  EXPECT_EQ(promoteOutcome(sync, pending, v.now + 61000), PromoteOutcome::kExpired);
  ClusterState took = v.state;
  took.generation = 2;
  took.primary = peer("b");
  took.sync = peer("c");
  took.async = {peer("d")};
  EXPECT_EQ(promoteOutcome(sync, took, v.now), PromoteOutcome::kCarriedOut);
  EXPECT_EQ(promoteOutcome(sync, v.state, v.now), PromoteOutcome::kRemoved);

  auto first = *buildPromoteRequest(v, args("c", "async"));
  ClusterState swapped = v.state;
  swapped.generation = 2;
  swapped.sync = peer("c");
  swapped.async = {peer("b"), peer("d")};
  EXPECT_EQ(promoteOutcome(first, swapped, v.now), PromoteOutcome::kCarriedOut);

  auto second = *buildPromoteRequest(v, args("d", "async"));
  ClusterState moved = v.state;
  moved.async = {peer("d"), peer("c")};
  EXPECT_EQ(promoteOutcome(second, moved, v.now), PromoteOutcome::kCarriedOut);
  EXPECT_STREQ(outcomeName(PromoteOutcome::kExpired), "expired");
}

}  // namespace
}  // namespace dugong::adm
