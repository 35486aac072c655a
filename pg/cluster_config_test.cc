#include "pg/cluster_config.h"

#include <gtest/gtest.h>

#include "pg/settings_catalog.h"

namespace dugong::pg {
namespace {

TEST(ClusterConfig, RoundTripsWithStableBytes) {
  ClusterConfig c;
  c.settings = {{"work_mem", "8MB"}, {"log_min_duration_statement", "250"}};
  c.hba = {"host app app 10.0.0.0/24 scram-sha-256"};
  auto parsed = ClusterConfig::parse(c.serialize());
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed.value(), c);
  EXPECT_EQ(parsed->serialize(), c.serialize());
}

TEST(ClusterConfig, RefusesANewerFormatAndBadFields) {
  auto newer = ClusterConfig::parse(R"({"format": 2, "settings": {}})");
  ASSERT_FALSE(newer);
  EXPECT_NE(newer.error().find("newer"), std::string::npos) << newer.error();
  EXPECT_FALSE(ClusterConfig::parse("not json"));
  EXPECT_FALSE(ClusterConfig::parse(R"({"format": 1, "settings": {"work_mem": 4}})"));
  EXPECT_FALSE(ClusterConfig::parse(R"({"format": 1, "extra": true})"));
  EXPECT_FALSE(ClusterConfig::parse(R"({"settings": {}})"));
}

TEST(ClusterConfig, ValidatedWithTheRulesOfCheck) {
  ClusterConfig c;
  c.settings = {{"port", "5433"}};
  auto managed = validateClusterConfig(c);
  ASSERT_FALSE(managed);
  EXPECT_NE(managed.error().find("managed by dugong"), std::string::npos);
  c.settings = {{"wal_level", "minimal"}};
  EXPECT_FALSE(validateClusterConfig(c));
  c.settings = {{"wal_level", "logical"}};
  EXPECT_TRUE(validateClusterConfig(c));
  c.hba = {"host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 trust"};
  EXPECT_FALSE(validateClusterConfig(c));
}

TEST(ClusterConfig, TheHostWinsOverTheCluster) {
  PgOptions host;
  host.settings = {{"work_mem", "64MB"}};
  host.extraHbaLines = {"host app app 10.0.0.5/32 reject"};
  ClusterConfig cluster;
  cluster.settings = {{"work_mem", "8MB"}, {"statement_timeout", "30s"}};
  cluster.hba = {"host app app 10.0.0.0/24 scram-sha-256"};
  PgOptions merged = withClusterConfig(host, cluster);
  EXPECT_EQ(merged.settings.at("work_mem"), "64MB");
  EXPECT_EQ(merged.settings.at("statement_timeout"), "30s");
  EXPECT_EQ(merged.extraHbaLines,
            (std::vector<std::string>{"host app app 10.0.0.5/32 reject", "host app app 10.0.0.0/24 scram-sha-256"}));
}

TEST(ClusterConfig, AssignmentsAndChanges) {
  auto a = parseAssignment(" work_mem = 8MB ");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first, "work_mem");
  EXPECT_EQ(a->second, "8MB");
  EXPECT_FALSE(parseAssignment("work_mem"));
  EXPECT_FALSE(parseAssignment("=1"));
  EXPECT_EQ(changedSettings({{"a", "1"}, {"b", "2"}}, {{"b", "3"}, {"c", "4"}}),
            (std::vector<std::string>{"a", "b", "c"}));
}

TEST(SettingsCatalog, ChecksNamesTypesAndRanges) {
  auto c = SettingsCatalog::parse(
      "max_connections\tpostmaster\tConnections\tINTEGER\t0\t1\t262143\tSets...\t\n"
      "hot_standby_feedback\tsighup\tReplication\tBOOLEAN\tFALSE\t\t\tAllows...\t\n"
      "work_mem\tuser\tMemory\tINTEGER\t0\t64\t2147483647\tSets...\t\n");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_TRUE(c.find("max_connections")->needsRestart());
  EXPECT_FALSE(c.find("work_mem")->needsRestart());
  EXPECT_TRUE(c.check("max_connections", "200"));
  EXPECT_FALSE(c.check("max_connections", "0"));
  EXPECT_FALSE(c.check("max_connections", "lots"));
  EXPECT_TRUE(c.check("work_mem", "8MB"));
  EXPECT_FALSE(c.check("work_mem", "8 parsecs"));
  EXPECT_TRUE(c.check("hot_standby_feedback", "off"));
  EXPECT_FALSE(c.check("hot_standby_feedback", "maybe"));
  EXPECT_FALSE(c.check("no_such_setting", "1"));
  EXPECT_TRUE(c.check("pg_stat_statements.max", "1000"));
}

TEST(SettingsCatalog, LoadsFromThePostgresBinary) {
  auto c = SettingsCatalog::load("/usr/lib/postgresql/15/bin");
  ASSERT_TRUE(c) << c.error();
  ASSERT_NE(c->find("shared_buffers"), nullptr);
  EXPECT_TRUE(c->find("shared_buffers")->needsRestart());
  EXPECT_EQ(c->find("log_min_duration_statement")->context, "superuser");
}

}  // namespace
}  // namespace dugong::pg
