// ZooKeeper ACLs end to end (secure by default): agents configured with
// zookeeper.auth run the cluster; the operator's dugong-adm changes it with the same
// credentials (--zk-auth-file); without them, neither dugong-adm nor any other client
// can write the cluster state.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

struct AdmRun {
  int code = -1;
  std::string out;
};

AdmRun adm(const std::string& args) {
  AdmRun r;
  FILE* f = popen((std::string(DUGONG_ADM_BINARY) + " " + args + " </dev/null 2>&1").c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int status = pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(ZooKeeperAcls, AgentsAndTheOperatorWithCredentialsWriteTheStateAndNobodyElse) {
  HarnessOptions o;
  o.cluster = "acl";
  o.zkAuth = zk::DigestAuth{"dugong", "acl-test-secret"};
  Harness h(o);
  h.startAll();
  const int primary = h.waitForHealthyCluster(2, std::chrono::seconds(180));
  ASSERT_GE(primary, 0) << h.describe();

  dugong::testing::ScratchDir dir("dugong-acl");
  const std::string authFile = dir.path() + "/zk-auth";
  std::ofstream(authFile) << "dugong:acl-test-secret\n";
  ::chmod(authFile.c_str(), 0600);
  const std::string base = "-z " + h.zkConnect() + " -c " + o.cluster + " ";

  AdmRun r = adm(base + "--zk-auth-file " + authFile + " freeze -r 'acl test'");
  EXPECT_EQ(r.code, 0) << r.out;
  auto state = h.zkState();
  ASSERT_TRUE(state.has_value());
  EXPECT_TRUE(state->frozen()) << "dugong-adm with the agents' credentials could not freeze the cluster";

  // Without credentials: dugong-adm reads, but its write is refused, and nothing changed.
  EXPECT_EQ(adm(base + "show").code, 0);
  r = adm(base + "unfreeze");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(h.zkState()->frozen()) << "an unauthenticated dugong-adm unfroze the cluster";

  // Nor can any other client write the state.
  zk::ZkOptions anonymous = h.zkOptions();
  anonymous.auth.reset();
  auto client = zk::Client::connect(anonymous, std::chrono::seconds(20));
  ASSERT_TRUE(client.ok()) << client.error();
  auto node = client.value()->readState();
  ASSERT_TRUE(node.ok()) << node.error();
  ClusterState forged = *state;
  forged.generation += 10;
  auto write = client.value()->putState(forged, node->version, "forged");
  EXPECT_FALSE(write.ok) << "an unauthenticated client wrote the cluster state";
  EXPECT_EQ(h.zkState()->generation, state->generation);
  EXPECT_FALSE(client.value()->deleteState(node->version).ok()) << "an unauthenticated client deleted the state";

  // A bad credentials file is a clear error, before anything is done.
  const std::string badFile = dir.path() + "/bad-auth";
  std::ofstream(badFile) << "no-colon-here\n";
  r = adm(base + "--zk-auth-file " + badFile + " unfreeze");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("user:password"), std::string::npos) << r.out;

  r = adm(base + "--zk-auth-file " + authFile + " unfreeze");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(h.zkState()->frozen());
  // The agents, authenticated, still run the cluster.
  EXPECT_GE(h.waitForHealthyCluster(2, std::chrono::seconds(60)), 0) << h.describe();
}

}  // namespace
}  // namespace dugong::e2e
