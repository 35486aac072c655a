// Quorum mode's takeover reports in election nodes and the checked state write
// (docs/decisions/0079-quorum-commit.md 4.2, 4.4), against a real standalone ZooKeeper.
#include <gtest/gtest.h>

#include "zk/session.h"
#include "zk/test_util.h"

namespace dugong::zk {
namespace {

using namespace test;

class SessionQuorumTest : public ::testing::Test {
 protected:

  std::unique_ptr<Peer> startPeer(const std::string& id) {
    auto p = std::make_unique<Peer>(io, options(zk.connectString(), "q1"), id);
    p->start();
    EXPECT_TRUE(p->waitInit()) << id << " was not initialized";
    return p;
  }

  ReportPublished publish(Peer& p, std::optional<TakeoverReport> report) {
    std::optional<ReportPublished> answer;
    p.session().publishReport(std::move(report), [&](ReportPublished r) { answer = r; });
    EXPECT_TRUE(runUntil(io, [&] { return answer.has_value(); }));
    return answer.value_or(ReportPublished{false, "no answer", -1});
  }

  StateWriteFinished checkedPut(Peer& p, const ClusterState& s, int32_t expected,
                                const std::vector<ElectionNodeCheck>& checks) {
    std::optional<StateWriteFinished> result;
    p.session().putCheckedClusterState(s, expected, checks, [&](StateWriteFinished f) { result = f; }, "takeover");
    EXPECT_TRUE(runUntil(io, [&] { return result.has_value(); }));
    return result.value_or(StateWriteFinished{false, "no answer", false, -1});
  }

  // The reports `p` was last told of (by init or change).
  static TakeoverReports reports(const Peer& p) {
    for (auto it = p.events.rbegin(); it != p.events.rend(); ++it) {
      if (auto* i = std::get_if<ZkInitialized>(&*it)) return i->reports;
      if (auto* c = std::get_if<ActivePeersChanged>(&*it)) return c->reports;
    }
    return {};
  }

  static TakeoverReport report(int64_t generation, const std::string& wal) {
    TakeoverReport r;
    r.generation = generation;
    r.wal = WalPosition::parse(wal).value();
    r.history.timeline = 1;
    r.instance = 42;
    return r;
  }

  boost::asio::io_context io;
  CaseZooKeeper zk;  // the run's shared server, a root of its own
};

TEST_F(SessionQuorumTest, AReportIsSeenByEveryPeerWithItsNodeVersionAndCanBeWithdrawn) {
  auto a = startPeer("a");
  auto b = startPeer("b");
  const ReportPublished first = publish(*b, report(3, "0/3000060"));
  ASSERT_TRUE(first.ok) << first.error;
  for (Peer* p : {a.get(), b.get()}) {
    ASSERT_TRUE(runUntil(io, [&] { return reports(*p).count("b") > 0; }));
    TakeoverReport seen = reports(*p).at("b");
    EXPECT_EQ(seen.nodeVersion, first.nodeVersion);
    seen.nodeVersion = -1;
    EXPECT_EQ(seen, report(3, "0/3000060"));
  }
  // Published again (postgres restarted: another instance): a new version.
  TakeoverReport again = report(3, "0/3000060");
  again.instance = 43;
  const ReportPublished second = publish(*b, again);
  ASSERT_TRUE(second.ok) << second.error;
  EXPECT_GT(second.nodeVersion, first.nodeVersion);
  ASSERT_TRUE(runUntil(io, [&] { return reports(*a).count("b") && reports(*a).at("b").nodeVersion == second.nodeVersion; }));
  // The identity and the streaming flag stay beside it.
  b->session().setStreaming(false);
  ASSERT_TRUE(runUntil(io, [&] {
    const auto* c = a->last<ActivePeersChanged>();
    return c && c->notStreaming.count("b") && c->reports.count("b");
  }));
  // Withdrawn: no report, and the peer is still present.
  ASSERT_TRUE(publish(*b, std::nullopt).ok);
  ASSERT_TRUE(runUntil(io, [&] { return reports(*a).empty(); }));
  EXPECT_EQ(a->active(), (std::vector<std::string>{"a", "b"}));
  // A publication of what the node already holds answers at once with its version.
  EXPECT_TRUE(publish(*b, std::nullopt).ok);
}

TEST_F(SessionQuorumTest, AStateWriteFailsWhenACheckedElectionNodeChanged) {
  auto a = startPeer("a");
  auto b = startPeer("b");
  ASSERT_TRUE(a->put(state(1), -1).ok);
  const ReportPublished ra = publish(*a, report(1, "0/3000060"));
  const ReportPublished rb = publish(*b, report(1, "0/3000000"));
  ASSERT_TRUE(ra.ok && rb.ok);
  ASSERT_TRUE(runUntil(io, [&] { return reports(*a).size() == 2; }));

  // b's report changes after a counted it: the write does not land.
  ASSERT_TRUE(publish(*b, report(1, "0/3000100")).ok);
  StateWriteFinished lost = checkedPut(*a, state(2, "a", "b"), 0, {{"a", ra.nodeVersion}, {"b", rb.nodeVersion}});
  EXPECT_FALSE(lost.ok);
  EXPECT_TRUE(lost.lostRace) << lost.error;
  EXPECT_NE(lost.error.find("the election node of b changed"), std::string::npos) << lost.error;
  auto c = client(zk.connectString(), "q1");
  auto read = c->readState();
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_EQ(read->version, 0);  // nothing written, no history record either
  auto history = c->history();
  ASSERT_TRUE(history.ok()) << history.error();
  EXPECT_EQ(history->size(), 1u);

  // With the versions as they are now, it lands.
  ASSERT_TRUE(runUntil(io, [&] { return reports(*a).at("b").nodeVersion > rb.nodeVersion; }));
  const int32_t bNow = reports(*a).at("b").nodeVersion;
  StateWriteFinished landed = checkedPut(*a, state(2, "a", "b"), 0, {{"a", ra.nodeVersion}, {"b", bNow}});
  EXPECT_TRUE(landed.ok) << landed.error;
  EXPECT_EQ(landed.newVersion, 1);

  // b's session ends: once a sees it gone, a write checking its node fails at once.
  b.reset();
  ASSERT_TRUE(runUntil(io, [&] { return a->active() == std::vector<std::string>{"a"}; }));
  StateWriteFinished gone = checkedPut(*a, state(3, "a", "b"), 1, {{"a", ra.nodeVersion}, {"b", bNow}});
  EXPECT_FALSE(gone.ok);
  EXPECT_TRUE(gone.lostRace) << gone.error;
  EXPECT_NE(gone.error.find("b"), std::string::npos) << gone.error;
}

}  // namespace
}  // namespace dugong::zk
