// The adapter's side of the cluster configuration against a real postgres: a version
// whose values postgres refuses is not applied (issue 40's second line of defence,
// behind dugong-adm's own check): dugong.conf, the kept copy and the running values
// stay those of the version applied before.
#include <gtest/gtest.h>

#include "pg/controller.h"
#include "pg/controller_support.h"
#include "pg/testing/pg_test_cluster.h"

namespace dugong::pg {
namespace {

TEST(ClusterConfigApply, AVersionPostgresRefusesIsNotApplied) {
  testing::PgTestCluster cluster("dugong-pg-config");
  testing::PgTestNode& node = cluster.addNode("n1");
  PgController c(node.options);
  ASSERT_TRUE(c.apply(PgConfig::firstPrimary(std::nullopt)).ok);
  ClusterConfig good;
  good.settings = {{"work_mem", "8MB"}, {"log_line_prefix", "%m [%p] "}};
  auto applied = c.applyClusterConfig(good);
  ASSERT_TRUE(applied) << applied.error();
  EXPECT_EQ(node.value("SHOW work_mem"), "8MB");
  EXPECT_EQ(node.value("SHOW log_line_prefix"), "%m [%p] ");
  const std::string conf = node.options.dataDir + "/" + kManagedConfName;
  const std::string confBefore = readFile(conf);
  const std::string kept = node.options.dataDir + ".dugong-cluster-config.json";  // PgController keeps it there
  const std::string keptBefore = readFile(kept);

  ClusterConfig bad = good;
  bad.settings["work_mem"] = "3TB";
  bad.settings["log_min_duration_statement"] = "250";
  auto refused = c.applyClusterConfig(bad);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("\"work_mem\": \"3TB\""), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("Value exceeds integer range"), std::string::npos) << refused.error();
  EXPECT_EQ(readFile(conf), confBefore);
  EXPECT_EQ(readFile(kept), keptBefore);
  EXPECT_EQ(node.value("SHOW work_mem"), "8MB");
  EXPECT_EQ(node.value("SHOW log_min_duration_statement"), "-1");
  // The next good version is applied as usual.
  bad.settings["work_mem"] = "16MB";
  ASSERT_TRUE(c.applyClusterConfig(bad));
  EXPECT_EQ(node.value("SHOW work_mem"), "16MB");
  EXPECT_EQ(node.value("SHOW log_min_duration_statement"), "250ms");
}

}  // namespace
}  // namespace dugong::pg
