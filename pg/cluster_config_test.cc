#include "pg/cluster_config.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
  auto newer = ClusterConfig::parse(R"({"format": 3, "settings": {}})");
  ASSERT_FALSE(newer);
  EXPECT_NE(newer.error().find("newer"), std::string::npos) << newer.error();
  EXPECT_FALSE(ClusterConfig::parse("not json"));
  EXPECT_FALSE(ClusterConfig::parse(R"({"format": 1, "settings": {"work_mem": 4}})"));
  EXPECT_FALSE(ClusterConfig::parse(R"({"format": 1, "extra": true})"));
  EXPECT_FALSE(ClusterConfig::parse(R"({"settings": {}})"));
}

// The replication block (docs/decisions/0079 section 2): format 2, written only with it,
// so that a configuration without one keeps the bytes an earlier release reads.
TEST(ClusterConfig, AReplicationBlockIsFormat2AndOnlyIt) {
  ClusterConfig c;
  c.settings = {{"work_mem", "8MB"}};
  EXPECT_EQ(c.format(), 1);
  EXPECT_EQ(nlohmann::json::parse(c.serialize())["format"], 1);
  EXPECT_FALSE(nlohmann::json::parse(c.serialize()).contains("replication"));
  c.replication = ClusterReplication{ReplicationMode::kQuorum, 1, 2};
  EXPECT_EQ(c.format(), 2);
  const auto j = nlohmann::json::parse(c.serialize());
  EXPECT_EQ(j["format"], 2);
  EXPECT_EQ(j["replication"], nlohmann::json({{"mode", "quorum"}, {"k", 1}, {"size", 2}}));
  auto parsed = ClusterConfig::parse(c.serialize());
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed.value(), c);
  EXPECT_EQ(parsed->serialize(), c.serialize());
  EXPECT_EQ(parsed->replication->wanted().mode, ReplicationMode::kQuorum);
  // A format-2 node without the block reads; the block in a format-1 node does not.
  EXPECT_TRUE(ClusterConfig::parse(R"({"format": 2, "settings": {}})"));
  for (const auto& [bytes, why] : std::vector<std::pair<std::string, std::string>>{
           {R"({"format": 1, "replication": {"mode": "quorum", "k": 1, "size": 2}})", "needs format 2"},
           {R"({"format": 2, "replication": "quorum"})", "must be an object"},
           {R"({"format": 2, "replication": {"mode": "raft"}})", "expected sync or quorum"},
           {R"({"format": 2, "replication": {"mode": 2}})", "replication.mode is not a string"},
           {R"({"format": 2, "replication": {"k": "1"}})", "replication.k is not a whole number"},
           {R"({"format": 2, "replication": {"quorum": 1}})", "replication.quorum: unknown"}}) {
    auto bad = ClusterConfig::parse(bytes);
    ASSERT_FALSE(bad) << bytes;
    EXPECT_NE(bad.error().find(why), std::string::npos) << bad.error();
  }
}

TEST(ClusterConfig, ReplicationFieldsAndTheirRule) {
  ClusterReplication r;
  EXPECT_EQ(r.mode, ReplicationMode::kSync);  // the default stays Manatee's
  ASSERT_TRUE(setReplicationField(r, "mode", "quorum"));
  ASSERT_TRUE(setReplicationField(r, "k", "2"));
  ASSERT_TRUE(setReplicationField(r, "size", "3"));
  EXPECT_EQ(r, (ClusterReplication{ReplicationMode::kQuorum, 2, 3}));
  EXPECT_TRUE(validateReplication(r));
  EXPECT_FALSE(setReplicationField(r, "mode", "Quorum"));
  EXPECT_FALSE(setReplicationField(r, "k", "two"));
  EXPECT_FALSE(setReplicationField(r, "k", "2x"));
  EXPECT_FALSE(setReplicationField(r, "k", ""));
  EXPECT_FALSE(setReplicationField(r, "members", "3"));
  for (const auto& [bad, why] : std::vector<std::pair<ClusterReplication, std::string>>{
           {{ReplicationMode::kQuorum, 2, 2}, "must be below replication.size"},
           {{ReplicationMode::kQuorum, 3, 2}, "must be below replication.size"},
           {{ReplicationMode::kSync, 2, 2}, "must be below"},  // checked in sync mode too
           {{ReplicationMode::kQuorum, 0, 2}, "replication.k: 0 is outside 1..64"},
           {{ReplicationMode::kQuorum, 1, 65}, "replication.size: 65 is outside 2..64"},
           {{ReplicationMode::kQuorum, 1, 1}, "replication.size: 1 is outside 2..64"}}) {
    auto v = validateReplication(bad);
    ASSERT_FALSE(v) << bad.describe();
    EXPECT_NE(v.error().find(why), std::string::npos) << v.error();
    ClusterConfig c;
    c.replication = bad;
    EXPECT_FALSE(validateClusterConfig(c));  // the agent refuses what dugong-adm would
  }
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
  auto a = parseAssignment(" work_mem = 8MB");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first, "work_mem");
  EXPECT_EQ(a->second, "8MB");
  EXPECT_FALSE(parseAssignment("work_mem"));
  EXPECT_FALSE(parseAssignment("=1"));
  EXPECT_EQ(changedSettings({{"a", "1"}, {"b", "2"}}, {{"b", "3"}, {"c", "4"}}),
            (std::vector<std::string>{"a", "b", "c"}));
}

// Operator review P8: a value may end in a space, and quotes are not part of it.
TEST(ClusterConfig, ValuesAreKeptExactlyAndQuotesAreNotPartOfThem) {
  const std::pair<const char*, const char*> rows[] = {
      {"log_line_prefix=%m [%p] ", "%m [%p] "},
      {"log_line_prefix='%m [%p] '", "%m [%p] "},
      {"log_line_prefix = '%m [%p] %q%u@%d '", "%m [%p] %q%u@%d "},
      {"application_name=a b", "a b"},
      {"x.y='it''s'", "it's"},
      {"x.y=''", ""},
      {"x.y=", ""},
      {"x.y=a\\b", "a\\b"},
      {"x.y='a\\b'", "a\\b"},
  };
  for (const auto& [text, value] : rows) {
    auto a = parseAssignment(text);
    ASSERT_TRUE(a) << text << ": " << a.error();
    EXPECT_EQ(a->second, value) << text;
  }
  for (const char* bad : {"x.y='abc", "x.y='a'b'", "x.y='"}) {
    auto a = parseAssignment(bad);
    ASSERT_FALSE(a) << bad;
    EXPECT_NE(a.error().find("quote"), std::string::npos) << a.error();
  }
}

// Operator review P5.
TEST(ClusterConfig, SettingsAHostShadows) {
  PgOptions host;
  host.settings = {{"shared_buffers", "32MB"}, {"work_mem", "4MB"}};
  ClusterConfig cluster;
  cluster.settings = {{"shared_buffers", "64MB"}, {"statement_timeout", "30s"}, {"work_mem", "4MB"}};
  EXPECT_EQ(shadowedSettings(host, cluster), (std::vector<std::string>{"shared_buffers", "work_mem"}));
  EXPECT_TRUE(shadowedSettings(PgOptions{}, cluster).empty());
}

TEST(SettingsCatalog, ReadsContextsAndTypes) {
  auto c = SettingsCatalog::parse(
      "max_connections\tpostmaster\tConnections\tINTEGER\t0\t1\t262143\tSets...\t\n"
      "hot_standby_feedback\tsighup\tReplication\tBOOLEAN\tFALSE\t\t\tAllows...\t\n"
      "work_mem\tuser\tMemory\tINTEGER\t0\t64\t2147483647\tSets...\t\n");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_TRUE(c.find("max_connections")->needsRestart());
  EXPECT_FALSE(c.find("work_mem")->needsRestart());
  EXPECT_EQ(c.find("hot_standby_feedback")->type, "BOOLEAN");
  EXPECT_EQ(c.find("application_name"), nullptr);
}

TEST(SettingsCatalog, LoadsFromThePostgresBinary) {
  auto c = SettingsCatalog::load("/usr/lib/postgresql/15/bin");
  ASSERT_TRUE(c) << c.error();
  ASSERT_NE(c->find("shared_buffers"), nullptr);
  EXPECT_TRUE(c->find("shared_buffers")->needsRestart());
  EXPECT_EQ(c->find("log_min_duration_statement")->context, "superuser");
}

TEST(SettingsCatalog, RefusalsReadFromPostgresOutput) {
  const std::string output =
      "2026-11-29 10:52:57.744 GMT [22632] LOG:  invalid value for parameter \"work_mem\": \"3TB\"\n"
      "2026-11-29 10:52:57.744 GMT [22632] HINT:  Value exceeds integer range.\n"
      "2026-11-29 10:52:57.744 GMT [22632] LOG:  syntax error in file \"/tmp/x/postgresql.conf\" line 2, near token "
      "\"'\"\n"
      "2026-11-29 10:52:57.744 GMT [22632] FATAL:  configuration file \"/tmp/x/postgresql.conf\" contains errors\n";
  EXPECT_EQ(postgresRefusals(output, {"work_mem", "log_line_prefix"}),
            "invalid value for parameter \"work_mem\": \"3TB\" (Value exceeds integer range.); syntax error "
            "(setting log_line_prefix), near token \"'\"");
  EXPECT_EQ(postgresRefusals("FATAL:  something else\n", {}), "something else");
}

// The real postgres binary checks what the review found passed (P6) or refused (P7).
TEST(SettingsCatalog, PostgresChecksKindsUnitsRangesAndEnums) {
  const std::string bin = "/usr/lib/postgresql/15/bin";
  struct Row {
    const char* name;
    const char* value;
    const char* refusal;  // "" when postgres accepts it
  };
  const Row rows[] = {
      {.name = "work_mem", .value = "3TB", .refusal = "Value exceeds integer range"},
      {.name = "work_mem", .value = "16ms", .refusal = "invalid value for parameter \"work_mem\""},
      {.name = "work_mem", .value = "8MB", .refusal = ""},
      {.name = "work_mem", .value = "63kB", .refusal = "outside the valid range for parameter \"work_mem\""},
      {.name = "log_statement", .value = "everything", .refusal = "Available values: none, ddl, mod, all"},
      {.name = "log_statement", .value = "ddl", .refusal = ""},
      {.name = "max_connections", .value = "lots", .refusal = "invalid value for parameter \"max_connections\""},
      {.name = "max_connections", .value = "0", .refusal = "outside the valid range"},
      {.name = "hot_standby_feedback", .value = "maybe", .refusal = "requires a Boolean value"},
      {.name = "statement_timeout", .value = "1h", .refusal = ""},
      {.name = "statement_timeout", .value = "1 parsec", .refusal = "statement_timeout"},
      {.name = "checkpoint_completion_target", .value = "1.5", .refusal = "outside the valid range"},
      {.name = "no_such_setting", .value = "1", .refusal = "unrecognized configuration parameter \"no_such_setting\""},
      {.name = "application_name", .value = "a b", .refusal = ""},
      {.name = "zero_damaged_pages", .value = "off", .refusal = ""},
      {.name = "log_line_prefix", .value = "%m [%p] ", .refusal = ""},
      {.name = "search_path", .value = "\"$user\", public", .refusal = ""},
      {.name = "pg_stat_statements.max", .value = "1000", .refusal = ""},
  };
  for (const auto& row : rows) {
    auto r = checkWithPostgres({{row.name, row.value}}, bin, "postgres");
    if (std::string(row.refusal).empty()) {
      EXPECT_TRUE(r) << row.name << " = '" << row.value << "': " << r.error();
    } else {
      ASSERT_FALSE(r) << row.name << " = '" << row.value << "'";
      EXPECT_NE(r.error().find(row.refusal), std::string::npos) << row.name << ": " << r.error();
    }
  }
  // Every refused value at once, each named.
  auto both = checkWithPostgres({{"work_mem", "3TB"}, {"log_statement", "everything"}, {"a.b", "x"}}, bin, "postgres");
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().find("\"work_mem\": \"3TB\""), std::string::npos) << both.error();
  EXPECT_NE(both.error().find("\"log_statement\": \"everything\""), std::string::npos) << both.error();
  EXPECT_EQ(both.error().find("a.b"), std::string::npos) << both.error();
  auto noBinary = checkWithPostgres({{"work_mem", "8MB"}}, "/nonexistent", "postgres");
  ASSERT_FALSE(noBinary);
  EXPECT_NE(noBinary.error().find("cannot check the settings"), std::string::npos) << noBinary.error();
}

}  // namespace
}  // namespace dugong::pg
