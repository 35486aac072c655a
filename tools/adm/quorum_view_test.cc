#include "tools/adm/quorum_view.h"

#include <gtest/gtest.h>

#include "ops/test_views.h"

namespace dugong::adm {
namespace {

using namespace testing;

// a primary, {b, c} its set with k = 1, d an async.
ClusterState quorumState() {
  ClusterState s = threePeers({"d"});
  s.sync.reset();
  s.quorum = Quorum{1, {peer("b"), peer("c")}};
  return s;
}

TEST(QuorumView, ShowSaysTheModeKAndTheSetAndWhatATakeoverReads) {
  EXPECT_EQ(replicationLine(quorumState()),
            "quorum: ANY 1 (b, c): a commit waits for 1 of 2 members, a takeover reads 2 of them");
  EXPECT_EQ(replicationJson(quorumState()),
            nlohmann::json({{"mode", "quorum"}, {"k", 1}, {"members", {"b", "c"}}, {"readQuorum", 2}}));
  ClusterState two = quorumState();
  two.quorum = Quorum{2, {peer("b"), peer("c"), peer("d")}};
  two.async.clear();
  EXPECT_EQ(replicationLine(two), "quorum: ANY 2 (b, c, d): a commit waits for 2 of 3 members, a takeover reads 2 of them");
  // Sync mode: the sync, as Manatee's.
  EXPECT_EQ(replicationLine(threePeers()), "sync");
  EXPECT_EQ(replicationJson(threePeers()), nlohmann::json({{"mode", "sync"}, {"sync", "b"}}));
}

TEST(QuorumView, EachMembersRowIsASynchronousStandbyWithItsPlaceInTheSet) {
  std::vector<StatusRow> rows = {{"primary", "a", {{"role", "primary"}}},
                                 {"unassigned", "c", {{"role", "unassigned"}}},
                                 {"async", "d", {{"role", "async[0]"}}}};
  labelQuorumMembers(quorumState(), rows);
  EXPECT_EQ(rows[0].cells["role"], "primary");
  EXPECT_EQ(rows[1].role, "sync");
  EXPECT_EQ(rows[1].cells["role"], "sync (member 2 of 2)");
  EXPECT_EQ(rows[2].cells["role"], "async[0]");
  std::vector<StatusRow> syncRows = {{"unassigned", "c", {{"role", "unassigned"}}}};
  labelQuorumMembers(threePeers(), syncRows);  // sync mode: nothing relabelled
  EXPECT_EQ(syncRows[0].role, "unassigned");
}

}  // namespace
}  // namespace dugong::adm
