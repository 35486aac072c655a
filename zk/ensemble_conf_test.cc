// The ensemble's configuration for the primary's lease, from a real server.
#include "zk/ensemble_conf.h"

#include <gtest/gtest.h>

#include "zk/testing/zookeeper_server.h"

namespace dugong::zk {
namespace {

TEST(EnsembleConf, TheTickTimeAndSessionBoundsOfARealServer) {
  auto zk = testing::ZooKeeperCluster::standalone();  // tickTime 200, 4lw all enabled
  // A server that answers nothing first: the next one is asked.
  auto conf = readEnsembleConf("127.0.0.1:1," + zk->connectString(), std::chrono::seconds(2));
  ASSERT_TRUE(conf.has_value());
  EXPECT_EQ(conf->server, zk->connectString());
  EXPECT_EQ(conf->tickTimeMs, 200);
  EXPECT_EQ(conf->minSessionTimeoutMs, 400);
  EXPECT_EQ(conf->maxSessionTimeoutMs, 60000);
}

TEST(EnsembleConf, NoAnswerNoConf) {
  EXPECT_FALSE(readEnsembleConf("127.0.0.1:1", std::chrono::milliseconds(500)).has_value());
  EXPECT_FALSE(parseEnsembleConf("conf is not executed because it is not in the whitelist.\n").has_value());
}

}  // namespace
}  // namespace dugong::zk
