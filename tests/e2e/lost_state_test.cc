// A cluster whose state was lost (rule 8): first the state node deleted under a
// running cluster, then the whole ensemble rebuilt empty, while every peer holds the
// cluster's data. Each time the cluster is set up again from the peer with the most
// advanced WAL; no data directory is replaced (a marker file in each survives), and every
// row written is still there. The rebuilt server refuses the agents' old sessions (they
// have seen a newer zxid than it has): each agent gives its session up and opens a new one.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {
namespace {

namespace fs = std::filesystem;

std::string markerPath(Harness& h, int i) { return h.peer(i).pg->options.dataDir + "/dugong-e2e-marker"; }

void writeMarker(Harness& h, int i) {
  const std::string path = markerPath(h, i);
  std::ofstream(path) << h.peer(i).id << "\n";
  if (const passwd* pw = ::getpwnam("postgres")) (void)::chown(path.c_str(), pw->pw_uid, pw->pw_gid);
}

// The reasons of the history entries, oldest first.
std::vector<std::string> reasons(Harness& h) {
  std::vector<std::string> out;
  for (const auto& e : h.history()) {
    auto j = nlohmann::json::parse(e.data, nullptr, false);
    out.push_back(j.is_object() && j.contains("reason") && j["reason"].is_string() ? j["reason"].get<std::string>()
                                                                                     : "");
  }
  return out;
}

int setUpFromData(Harness& h) {
  int n = 0;
  for (const auto& r : reasons(h)) n += r.find("setup from the most advanced data") != std::string::npos;
  return n;
}

// Waits for a state set up again (generation 1) and a writable primary with both standbys
// streaming; returns the primary's index.
int waitForSetUpAgain(Harness& h) {
  const bool setUp = h.waitFor(
      [&] {
        auto s = h.zkState();
        return s && s->generation == 1;
      },
      std::chrono::seconds(180));
  if (!setUp) return -1;
  return h.waitForHealthyCluster(2, std::chrono::seconds(120));
}

void expectNothingReplaced(Harness& h, const std::string& systemId, int rows) {
  for (int i = 0; i < h.size(); ++i) {
    EXPECT_TRUE(fs::exists(markerPath(h, i))) << h.peer(i).id << "'s data directory was replaced\n" << h.logTail(i, 80);
    EXPECT_EQ(h.peer(i).pg->value("SELECT system_identifier::text FROM pg_control_system()"), systemId)
        << h.peer(i).id;
  }
  const int primary = h.writablePrimary();
  ASSERT_GE(primary, 0) << h.describe();
  EXPECT_EQ(h.intColumn(primary, "SELECT i FROM kept").size(), static_cast<size_t>(rows)) << "rows were lost";
}

TEST(LostClusterState, IsSetUpAgainFromTheMostAdvancedPeerWithNoDataDirectoryReplaced) {
  HarnessOptions o;
  o.cluster = "loststate";
  o.ownZooKeeper = true;  // rebuilt empty
  o.realInitdb = true;    // a replaced data directory would show another system identifier
  Harness h(o);
  h.startAll();
  const int first = h.waitForHealthyCluster(2, std::chrono::seconds(180));
  ASSERT_GE(first, 0) << h.describe();
  ASSERT_TRUE(h.sql(first, "CREATE TABLE kept (i int); INSERT INTO kept SELECT generate_series(1, 100)").ok());
  const std::string systemId = h.peer(first).pg->value("SELECT system_identifier::text FROM pg_control_system()");
  for (int i = 0; i < h.size(); ++i) writeMarker(h, i);

  // 1. The state node is deleted under the running cluster.
  {
    auto client = zk::Client::connect(h.zkOptions(), std::chrono::seconds(20));
    ASSERT_TRUE(client.ok()) << client.error();
    auto node = client.value()->readState();
    ASSERT_TRUE(node.ok() && node->exists) << (node.ok() ? "no state" : node.error());
    ASSERT_TRUE(client.value()->deleteState(node->version).ok());
  }
  int primary = waitForSetUpAgain(h);
  ASSERT_GE(primary, 0) << h.describe() << h.logTail(first, 80);
  EXPECT_EQ(setUpFromData(h), 1) << "not set up from the most advanced data";
  expectNothingReplaced(h, systemId, 100);
  ASSERT_TRUE(h.sql(primary, "INSERT INTO kept SELECT generate_series(101, 200)", std::chrono::seconds(30)).ok());
  EXPECT_EQ(h.intColumn(primary, "SELECT i FROM kept").size(), 200u);

  // 2. The ensemble rebuilt empty: no state, no history, no election nodes.
  h.rebuildZooKeeperEmpty();
  primary = waitForSetUpAgain(h);
  ASSERT_GE(primary, 0) << h.describe();
  EXPECT_EQ(setUpFromData(h), 1) << "not set up from the most advanced data";
  expectNothingReplaced(h, systemId, 200);
  ASSERT_TRUE(h.sql(primary, "INSERT INTO kept SELECT generate_series(201, 300)", std::chrono::seconds(30)).ok());
  EXPECT_EQ(h.intColumn(primary, "SELECT i FROM kept").size(), 300u);

  if (HasFailure()) {
    std::cerr << h.describe();
    for (int i = 0; i < h.size(); ++i) std::cerr << h.logTail(i, 60);
  }
}

}  // namespace
}  // namespace dugong::e2e
