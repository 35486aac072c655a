// The blocking Client (for tools) against a real standalone ZooKeeper.
#include "zk/client.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "zk/test_util.h"

namespace dugong::zk {
namespace {

using namespace test;
using testing::ZooKeeperCluster;

TEST(ClientTest, ReadsWhatAnEmptyClusterHas) {
  CaseZooKeeper zk;  // the run's shared server, a root of its own
  const std::string connect = zk.connectString();
  auto c = client(connect, "empty");
  auto st = c->readState();
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_FALSE(st->exists);
  auto peers = c->activePeers();
  ASSERT_TRUE(peers.ok());
  EXPECT_TRUE(peers->empty());
  auto history = c->history();
  ASSERT_TRUE(history.ok());
  EXPECT_TRUE(history->empty());
}

TEST(ClientTest, ConcurrentTestAndSetWritersLoseNoUpdate) {
  CaseZooKeeper zk;  // the run's shared server, a root of its own
  const std::string connect = zk.connectString();
  ASSERT_TRUE(client(connect, "c1")->putState(state(1), -1).ok);
  // Four writers each raise the generation 15 times with read-modify-write loops.
  constexpr int kWriters = 4;
  constexpr int kEach = 15;
  std::atomic<int> wins{0}, lost{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&] {
      auto c = Client::connect(options(connect, "c1"));
      if (!c.ok()) {
        ++errors;
        return;
      }
      for (int done = 0; done < kEach;) {
        auto cur = (*c)->readState();
        if (!cur.ok()) {
          ++errors;
          return;
        }
        auto parsed = ClusterState::parse(cur->data);
        if (!parsed.ok()) {
          ++errors;
          return;
        }
        auto w = (*c)->putState(state(parsed->generation + 1), cur->version, "raise");
        if (w.ok) {
          ++wins;
          ++done;
        } else if (w.lostRace) {
          ++lost;
        } else {
          ++errors;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wins.load(), kWriters * kEach);
  auto c = client(connect, "c1");
  auto final = c->readState();
  ASSERT_TRUE(final.ok());
  // Every win raised the generation by exactly one: no update was lost.
  EXPECT_EQ(ClusterState::parse(final->data)->generation, 1 + kWriters * kEach);
  EXPECT_EQ(final->version, kWriters * kEach);
  auto history = c->history();
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), static_cast<size_t>(1 + kWriters * kEach));
  for (size_t i = 0; i < history->size(); ++i) {
    auto rec = nlohmann::json::parse(history->at(i).data);
    EXPECT_EQ(rec["state"]["generation"], static_cast<int64_t>(i + 1)) << "history " << i;
  }
}

TEST(ClientTest, ConnectFailsWithAClearErrorWhenNoServerListens) {
  int port = dugong::testing::freeLoopbackPort();
  auto c = Client::connect(options("127.0.0.1:" + std::to_string(port), "c1"), std::chrono::milliseconds(1500));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("could not connect"), std::string::npos) << c.error();
}

TEST(ClientTest, FailsFastWhileTheServerIsDown) {
  auto zk = ZooKeeperCluster::standalone();
  auto c = Client::connect(options(zk->connectString(), "c1"), std::chrono::milliseconds(1000));
  ASSERT_TRUE(c.ok());
  zk->stop(0);
  auto st = (*c)->readState();
  ASSERT_FALSE(st.ok());
  // Either the client already knows (not connected) or the request itself fails with
  // ZCONNECTIONLOSS, depending on when it notices the server is gone.
  EXPECT_TRUE(st.error().find("not connected") != std::string::npos ||
              st.error().find("connection loss") != std::string::npos)
      << st.error();
  auto w = (*c)->putState(state(1), -1);
  EXPECT_FALSE(w.ok);
  EXPECT_FALSE(w.lostRace);
  // And recovers with the server (the C client reconnects after its own delay).
  zk->start(0);
  auto deadline = std::chrono::steady_clock::now() + kWait;
  auto again = (*c)->readState();
  while (!again.ok() && std::chrono::steady_clock::now() < deadline) again = (*c)->readState();
  EXPECT_TRUE(again.ok()) << again.error();
}

TEST(ClientTest, InvalidOptionsAreRejectedBeforeConnecting) {
  ZkOptions o;
  o.connectString = "127.0.0.1:1";
  auto c = Client::connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("cluster"), std::string::npos);
}

}  // namespace
}  // namespace dugong::zk
