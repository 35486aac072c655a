// The Session's lease round trips against a real standalone ZooKeeper.
#include <gtest/gtest.h>

#include <vector>

#include "zk/session.h"
#include "zk/test_util.h"

namespace dugong::zk {
namespace {

using namespace test;
using testing::ZooKeeperCluster;

class SessionLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    zk = ZooKeeperCluster::standalone();
    peer = std::make_unique<Peer>(io, options(zk->connectString(), "c1", 4000), "a");
    peer->session().setLeaseCallback([this](LeaseConfirmation l) { leases.push_back(l); });
    peer->start();
    ASSERT_TRUE(peer->waitInit());
  }

  boost::asio::io_context io;
  std::unique_ptr<ZooKeeperCluster> zk;
  std::unique_ptr<Peer> peer;
  std::vector<LeaseConfirmation> leases;
};

// The new session's creation is the first confirmation (sent when the handle was opened,
// before its first init), then each answered `sync`, every tenth of the timeout.
TEST_F(SessionLeaseTest, ConfirmationsComeFromTheCreationThenFromEachRoundTrip) {
  ASSERT_TRUE(runUntil(io, [&] { return leases.size() >= 4; }));
  const auto st = peer->session().status();
  for (size_t i = 0; i < leases.size(); ++i) {
    EXPECT_EQ(leases[i].sessionId, st.sessionId);
    EXPECT_EQ(leases[i].sessionTimeoutMs, 4000);
    EXPECT_EQ(leases[i].intervalMs, 400);
    if (i > 0) {
      EXPECT_TRUE(leases[i].sentAt > leases[i - 1].sentAt) << "confirmations out of order";
    }
  }
}

// A server that answers nothing (stopped) confirms nothing; once it runs again, the same
// session is confirmed by round trips sent after it came back.
TEST_F(SessionLeaseTest, AStoppedServerConfirmsNothingUntilItRunsAgain) {
  ASSERT_TRUE(runUntil(io, [&] { return leases.size() >= 2; }));
  zk->pause(0);
  const auto pausedAt = std::chrono::steady_clock::now();
  const size_t before = leases.size();
  // Whatever was in flight at the pause: at most one answer, sent before it.
  runUntil(io, [] { return false; }, std::chrono::milliseconds(1500));
  EXPECT_LE(leases.size(), before + 1);
  for (size_t i = before; i < leases.size(); ++i) {
    EXPECT_TRUE(leases[i].sentAt < pausedAt) << "a round trip sent during the pause was confirmed";
  }
  const size_t during = leases.size();
  zk->resume(0);
  ASSERT_TRUE(runUntil(io, [&] { return leases.size() >= during + 2; }));
  EXPECT_EQ(leases.back().sessionId, leases.front().sessionId) << "a new session";
  EXPECT_TRUE(leases.back().sentAt > pausedAt);
}

}  // namespace
}  // namespace dugong::zk
