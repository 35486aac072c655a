#include "pg/pgbackrest.h"

#include <gtest/gtest.h>

#include "pg/cluster_config.h"
#include "pg/pg_archiver.h"

namespace dugong::pg {
namespace {

PgOptions host() {
  PgOptions o;
  o.dataDir = "/var/lib/dugong/data";
  o.port = 5433;
  return o;
}

TEST(PgBackRest, ArchivingOnGivesEveryPeerArchivePushWithTheStanzaAndRepository) {
  ClusterConfig c;
  c.backup = {{"archive", "on"}, {"stanza", "main"}, {"repo1-path", "/srv/backup repo"}};
  ASSERT_TRUE(validateClusterConfig(c));
  PgOptions out = withClusterConfig(host(), c);
  EXPECT_EQ(out.settings.at("archive_mode"), "on");
  EXPECT_EQ(out.settings.at("archive_command"),
            "/usr/bin/pgbackrest --stanza=main '--repo1-path=/srv/backup repo' --pg1-path=/var/lib/dugong/data "
            "archive-push %p");
  // A host's own setting wins, as for every cluster setting.
  PgOptions own = host();
  own.settings["archive_mode"] = "off";
  EXPECT_EQ(withClusterConfig(own, c).settings.at("archive_mode"), "off");
  // Off: nothing.
  c.backup["archive"] = "off";
  EXPECT_FALSE(withClusterConfig(host(), c).settings.count("archive_command"));
}

TEST(PgBackRest, TheBackupSectionSurvivesSerializationAndIsAbsentWhenEmpty) {
  ClusterConfig c;
  EXPECT_EQ(c.serialize().find("backup"), std::string::npos);
  c.backup = {{"archive", "on"}, {"stanza", "main"}, {"repo1-path", "/r"}, {"replica-methods", "pgbackrest,basebackup"}};
  auto back = ClusterConfig::parse(c.serialize());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->backup, c.backup);
  EXPECT_FALSE(ClusterConfig::parse(R"({"format": 1, "backup": {"archive": true}})"));
}

TEST(PgBackRest, TheBackupSectionIsValidated) {
  auto error = [](std::map<std::string, std::string> m) {
    auto r = BackupSettings::parse(m);
    return r ? std::string() : r.error();
  };
  EXPECT_EQ(error({{"archive", "on"}, {"stanza", "s"}, {"repo1-path", "/r"}}), "");
  EXPECT_NE(error({{"archive", "yes"}, {"stanza", "s"}}).find("on or off"), std::string::npos);
  EXPECT_NE(error({{"archive", "on"}}).find("need backup.stanza"), std::string::npos);
  EXPECT_NE(error({{"replica-methods", "pgbackrest"}}).find("need backup.stanza"), std::string::npos);
  EXPECT_NE(error({{"replica-methods", "walg,basebackup"}, {"stanza", "s"}}).find("unknown method 'walg'"),
            std::string::npos);
  // Options that pgBackRest refuses on archive-push's command line are refused here.
  EXPECT_NE(error({{"repo1-retention-full", "2"}, {"stanza", "s"}}).find("not a key"), std::string::npos);
  EXPECT_NE(error({{"stanza", "s"}, {"repo1-path", "/a'b"}}).find("single quote"), std::string::npos);
  auto s = BackupSettings::parse({{"stanza", "s"}, {"replica-methods", "pgbackrest,basebackup"}});
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->restoresReplicas());
  EXPECT_FALSE(BackupSettings{}.restoresReplicas());
}

TEST(PgBackRest, RecoveryTargetsBecomeRestoreOptions) {
  EXPECT_EQ(recoveryTargetOptions("name:before").value(),
            (std::vector<std::string>{"--type=name", "--target=before", "--target-action=promote"}));
  EXPECT_EQ(recoveryTargetOptions("lsn:0/3000060").value()[0], "--type=lsn");
  EXPECT_EQ(recoveryTargetOptions("time:2026-11-24 23:00:00+00").value()[1], "--target=2026-11-24 23:00:00+00");
  EXPECT_TRUE(recoveryTargetOptions("")->empty());
  EXPECT_FALSE(recoveryTargetOptions("xid:12"));
  EXPECT_FALSE(recoveryTargetOptions("name:"));
}

TEST(PgBackRest, InfoGivesTheSystemIdentifierAndTheNewestBackup) {
  const std::string json = R"([{"name":"other","db":[],"backup":[]},
    {"name":"main","status":{"code":0,"message":"ok"},
     "db":[{"id":1,"system-id":7441234567890123456,"version":"15"}],
     "backup":[{"label":"20261124-230000F"},{"label":"20261124-231000F_20261124-232000I"}]}])";
  auto i = parseStanzaInfo(json, "main");
  ASSERT_TRUE(i) << i.error();
  EXPECT_EQ(i->systemId, "7441234567890123456");
  EXPECT_EQ(i->latestBackup, "20261124-231000F_20261124-232000I");
  EXPECT_EQ(i->status, "ok");
  EXPECT_TRUE(parseStanzaInfo(json, "other")->latestBackup.empty());
  EXPECT_FALSE(parseStanzaInfo(json, "missing"));
  EXPECT_FALSE(parseStanzaInfo("ERROR", "main"));
}

TEST(PgBackRest, InfoGivesTheSystemOfTheNewestBackupWhenTheStanzaHoldsAnotherSinceThen) {
  // A stanza upgraded (or created again) after its last backup: db 2 is the stanza's now.
  const std::string json = R"([{"name":"main","status":{"code":0,"message":"ok"},
     "db":[{"id":1,"system-id":7441234567890123456,"version":"14"},
           {"id":2,"system-id":7449999999999999999,"version":"15"}],
     "backup":[{"label":"20261124-230000F","database":{"id":1,"repo-key":1}}]}])";
  auto i = parseStanzaInfo(json, "main");
  ASSERT_TRUE(i) << i.error();
  EXPECT_EQ(i->systemId, "7449999999999999999");
  EXPECT_EQ(i->latestBackupSystemId, "7441234567890123456");
}

// What "a backup of another database system" means for a bootstrap: its system
// identifier differs from the stanza's present one, from the pg_control in the data
// directory, or from the system the sync serves. Unknown facts refuse nothing.
TEST(PgBackRest, ABootstrapIsRefusedWhenTheBackupBelongsToAnotherSystem) {
  struct Case {
    const char* name;
    std::string stanzaNow;
    std::optional<std::string> dataDir;
    std::optional<std::string> downstream;
    std::string refusalNames;  // "" when not refused; else the identifier the refusal names beside the backup's
  };
  const std::string backup = "7000000000000000001";
  const Case cases[] = {
      {"a new cluster, nothing to compare", backup, std::nullopt, std::nullopt, ""},
      {"the same system everywhere", backup, backup, backup, ""},
      {"the stanza holds another system now", "7000000000000000002", std::nullopt, std::nullopt,
       "7000000000000000002"},
      {"the data directory holds another system", backup, "7000000000000000003", std::nullopt, "7000000000000000003"},
      {"the sync serves another system", backup, std::nullopt, "7000000000000000004", "7000000000000000004"},
      {"the data directory first", backup, "7000000000000000003", "7000000000000000004", "7000000000000000003"},
  };
  for (const auto& c : cases) {
    BootstrapSystems s;
    s.stanza = "main";
    s.backup = backup;
    s.stanzaNow = c.stanzaNow;
    s.dataDir = "/var/lib/dugong/data";
    s.dataDirSystem = c.dataDir;
    s.downstreamId = "b";
    s.downstreamSystem = c.downstream;
    auto refusal = bootstrapRefusal(s);
    if (c.refusalNames.empty()) {
      EXPECT_FALSE(refusal) << c.name << ": " << *refusal;
      continue;
    }
    ASSERT_TRUE(refusal) << c.name;
    EXPECT_NE(refusal->find(backup), std::string::npos) << c.name << ": " << *refusal;
    EXPECT_NE(refusal->find(c.refusalNames), std::string::npos) << c.name << ": " << *refusal;
    EXPECT_NE(refusal->find("Nothing was changed"), std::string::npos) << c.name << ": " << *refusal;
  }
}

// A rebuild by pgBackRest starts from a copy of the old data directory (restore --delta)
// only when the copy can help and fit.
TEST(PgBackRest, ARestoreGoesIntoACopyOfTheOldDataDirectoryWhenItHelpsAndFits) {
  struct Case {
    const char* name;
    RestoreIntoFacts facts;
    RestoreInto how;
    const char* why;  // a part of the log line
  };
  const uint64_t gb = 1ull << 30;
  const Case cases[] = {
      {"no old directory", {false, "", "1", false, 0, 0}, RestoreInto::kEmpty, "no old data directory"},
      {"same system, room", {true, "1", "1", false, gb, 2 * gb}, RestoreInto::kCopyWithDelta, "restore --delta"},
      {"just fits", {true, "1", "1", false, gb, gb}, RestoreInto::kCopyWithDelta, "1024 MB"},
      {"another system", {true, "2", "1", false, gb, 2 * gb}, RestoreInto::kEmpty, "holds database system 2"},
      {"unreadable pg_control", {true, "", "1", false, gb, 2 * gb}, RestoreInto::kEmpty, "cannot be read"},
      {"a linked pg_wal", {true, "1", "1", true, gb, 2 * gb}, RestoreInto::kEmpty, "symbolic link"},
      {"disk too full", {true, "1", "1", false, gb, gb - 1}, RestoreInto::kEmpty, "does not fit"},
  };
  for (const auto& c : cases) {
    const RestoreIntoPlan p = planRestoreInto(c.facts);
    EXPECT_EQ(p.how, c.how) << c.name << ": " << p.why;
    EXPECT_NE(p.why.find(c.why), std::string::npos) << c.name << ": " << p.why;
  }
}

TEST(PgBackRest, FailureLineIsPgBackRestsError) {
  EXPECT_EQ(pgBackRestFailure("P00   INFO: x\nP00  ERROR: [055]: unable to load info file\nP00   INFO: done\n"),
            "P00  ERROR: [055]: unable to load info file");
  EXPECT_EQ(pgBackRestFailure("a\nb\n"), "b");
}

TEST(PgArchiver, StatusReadsFailingFromPgStatArchiver) {
  auto a = parseArchiverStatus(std::string(
      R"({"mode":"on","archived":4,"failed":2,"lastArchivedWal":null,"lastFailedWal":"000000010000000000000003",)"
      R"("lastArchivedAge":null,"lastFailedAge":1.5,"failing":true})"));
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->failing);
  EXPECT_EQ(a->failed, 2);
  EXPECT_EQ(a->lastFailedWal.value(), "000000010000000000000003");
  EXPECT_FALSE(a->lastArchivedWal);
  EXPECT_EQ(a->toJson()["failing"], true);
  EXPECT_FALSE(parseArchiverStatus(std::nullopt));
}

}  // namespace
}  // namespace dugong::pg
