// A standby cluster whose source is a pgBackRest repository (docs/decisions/0083 2.1, 3.1,
// 4.1, P6; "Phase 8 as built"). Without a server (StandbyRepository.*): the leader's
// restore_command, `pgbackrest archive-get` of the source's stanza, is a managed setting
// that a fence empties. On real postgres and pgBackRest (StandbyRepositoryTest.*, label
// pg): a source postgres archiving into a repository in the test's own directory; the
// leader restored from it (`pgbackrest restore --type=standby`) replays what the source
// archives after the restore, is read-only, keeps running the same way under a restarted
// controller, and stops restoring under a fence; a streaming source with `restore` is
// restored from the repository first, then streams.
#include <unistd.h>

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "pg/controller.h"
#include "pg/managed_conf.h"
#include "pg/pgbackrest.h"
#include "pg/testing/backed_up_primary.h"
#include "pg/testing/pg_test_cluster.h"
#include "tests/support/test_env.h"

namespace dugong::pg {
namespace {
using namespace std::chrono_literals;
using testing::PgTestCluster;
using testing::PgTestNode;

constexpr auto kRepositoryDeadline = 90s;

TEST(StandbyRepository, TheRestoreCommandIsArchiveGetOfTheSourcesStanza) {
  PgOptions host;
  host.dataDir = "/var/lib/pg/data";
  const SourceRepository repo{"sitea", {{"repo1-path", "/srv/pg backrest"}, {"lock-path", "/tmp/lock"}}};
  ASSERT_TRUE(validateSourceRepository(repo).ok());
  EXPECT_EQ(restoreCommand(repo, host), "/usr/bin/pgbackrest --stanza=sitea --lock-path=/tmp/lock "
                                        "'--repo1-path=/srv/pg backrest' --pg1-path=/var/lib/pg/data archive-get %f "
                                        "\"%p\"");
  EXPECT_EQ(validateSourceRepository({"", {}}).error(), "the repository's stanza is empty");
  EXPECT_EQ(validateSourceRepository({"sitea", {{"repo1-path", "/srv/it's"}}}).error(),
            "backup.repo1-path: a value may hold no newline and no single quote");
  EXPECT_EQ(validateSourceRepository({"sitea", {{"replica-methods", "pgbackrest"}}}).error(),
            "options.replica-methods: a key of the backup section, not a pgBackRest repository option");
}

// Only a standby leader renders it, after everything a host's settings say; a fence
// (replayUnhindered) empties it, so that nothing more is restored, as nothing more is
// streamed; a leader restoring only retries the repository once a second. The command
// is not in the state line (nor is the conninfo).
TEST(StandbyRepository, TheLeadersRestoreCommandIsManagedAndAFenceEmptiesIt) {
  PgOptions options;
  options.settings["restore_command"] = "cp /elsewhere/%f %p";
  ManagedState leader;
  leader.role = "standby-leader";
  leader.restoreCommand = "/usr/bin/pgbackrest --stanza=sitea archive-get %f \"%p\"";
  std::string text = renderManagedConf(options, leader);
  const auto own = text.find("restore_command = '/usr/bin/pgbackrest --stanza=sitea archive-get %f \"%p\"'\n");
  ASSERT_NE(own, std::string::npos) << text;
  EXPECT_LT(text.find("restore_command = 'cp /elsewhere/%f %p'"), own) << "the managed one comes last";
  EXPECT_NE(text.find("wal_retrieve_retry_interval = '1s'\n"), std::string::npos) << text;
  auto back = parseManagedConf(text);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->restoreCommand, "");

  leader.replayUnhindered = true;
  text = renderManagedConf(options, leader);
  EXPECT_NE(text.find("restore_command = ''\n"), std::string::npos) << text;

  leader.replayUnhindered = false;
  leader.primaryConninfo = "host=h1 port=5432";
  text = renderManagedConf(options, leader);
  EXPECT_EQ(text.find("wal_retrieve_retry_interval = '1s'"), std::string::npos) << "a streaming leader retries fast";

  ManagedState sync = leader;
  sync.role = "sync";
  text = renderManagedConf(PgOptions{}, sync);
  EXPECT_EQ(text.find("restore_command"), std::string::npos) << "only the leader restores from the source";
}

// The lag to a repository source (0083 3.5): the end of the archive's newest segment, by
// `pgbackrest info`'s "archive" list.
TEST(StandbyRepository, TheSourcesPositionIsTheEndOfTheNewestArchivedSegment) {
  auto info = parseStanzaInfo(R"([{"name": "sa", "status": {"message": "ok"},
      "db": [{"id": 1, "system-id": 7}],
      "archive": [{"database": {"id": 1}, "id": "15-1", "min": "000000010000000000000001",
                   "max": "000000020000000A000000FF"}],
      "backup": [{"label": "20261201-015001F", "database": {"id": 1}}]}])",
                              "sa");
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_EQ(info->archiveMax, "000000020000000A000000FF");
  auto end = archivedSegmentEnd(info->archiveMax, 16 * 1024 * 1024);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->wal, "B/0") << "past the last segment of log A";
  EXPECT_EQ(end->timeline, 2);
  EXPECT_EQ(archivedSegmentEnd("000000010000000000000005", 16 * 1024 * 1024)->wal, "0/6000000");
  EXPECT_EQ(archivedSegmentEnd("000000010000000000000005", 64 * 1024 * 1024)->wal, "0/18000000");
  EXPECT_FALSE(archivedSegmentEnd("000000010000000000000100", 16 * 1024 * 1024).ok()) << "no 257th segment of 16 MB";
  EXPECT_FALSE(archivedSegmentEnd("00000001000000000000000", 16 * 1024 * 1024).ok());
  EXPECT_FALSE(archivedSegmentEnd("00000001000000000000000G", 16 * 1024 * 1024).ok());
  EXPECT_FALSE(archivedSegmentEnd("000000010000000000000005", 3).ok());
  EXPECT_EQ(parseStanzaInfo(R"([{"name": "sa", "db": [], "archive": []}])", "sa")->archiveMax, "");
}

class StandbyRepositoryTest : public ::testing::Test {
 protected:
  // The repository's directories, owned by postgres; the source archiving into stanza
  // sa with a full backup; the leader's node, with no data directory.
  void SetUp() override {
    cluster_.makePgBackRestDirs();
    source_ = &cluster_.addNode("src-a");
    leader_ = &cluster_.addNode("peer-l");
    sourceController_ = std::make_unique<PgController>(source_->options);
    ASSERT_EQ(testing::startArchivingPrimary(cluster_, *sourceController_, "sa"), "");
    ASSERT_EQ(source_->value("CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)"), "");
    ASSERT_EQ(testing::takeFullBackup(cluster_, *source_, "sa"), "");
  }
  void TearDown() override { cluster_.stopAll(); }

  std::map<std::string, std::string> repoOptions() const { return testing::repositoryOptions(cluster_); }
  // A row written on the source, and its segment archived (the source switches WAL).
  static void writeAndArchive(const PgTestNode& source, int id) {
    ASSERT_EQ(source.value("INSERT INTO t VALUES (" + std::to_string(id) + ")"), "");
    ASSERT_NE(source.value("SELECT pg_switch_wal()::text").rfind("ERROR", 0), 0u);
  }
  static bool holdsRow(const PgTestNode& n, int id) {
    return n.value("SELECT count(*) FROM t WHERE id = " + std::to_string(id)) == "1";
  }

  PgTestCluster cluster_{"dugong-pg-repository"};
  PgTestNode* source_ = nullptr;
  PgTestNode* leader_ = nullptr;
  std::unique_ptr<PgController> sourceController_;
};

// P6 through the adapter, for a `pgbackrest` source: the leader, with no data directory,
// is restored from the stanza; it runs in recovery with restore_command = archive-get of
// that stanza and no primary_conninfo (pgBackRest's own restore_command taken out of
// postgresql.auto.conf); a row the source writes after the restore reaches it once its
// segment is archived; it refuses writes; a new controller (an agent restart) keeps the
// same postmaster and it keeps replaying; under a fence (promote-cluster's first step) its
// restore_command is empty.
TEST_F(StandbyRepositoryTest, ALeaderRestoredFromTheRepositoryReplaysWhatTheSourceArchives) {
  PgTestNode& a = *source_;
  PgTestNode& l = *leader_;
  SourceEndpoint repo;
  repo.kind = SourceKind::kPgbackrest;
  repo.restore = SourceRepository{"sa", repoOptions()};

  {
    PgController cl(l.options);
    auto r = cl.apply(PgConfig::standbyLeader(repo, true));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_TRUE(r.online);
  }
  EXPECT_EQ(l.value("SELECT pg_is_in_recovery()"), "t");
  EXPECT_EQ(l.value("SHOW primary_conninfo"), "");
  const std::string command = l.value("SHOW restore_command");
  EXPECT_NE(command.find("--stanza=sa "), std::string::npos) << command;
  EXPECT_NE(command.find(" archive-get %f \"%p\""), std::string::npos) << command;
  EXPECT_EQ(dugong::testing::fileText(l.options.dataDir + "/postgresql.auto.conf").find("restore_command"),
            std::string::npos);
  EXPECT_TRUE(testing::eventually([&] { return holdsRow(l, 1); }, kRepositoryDeadline));

  writeAndArchive(a, 2);
  EXPECT_TRUE(testing::eventually([&] { return holdsRow(l, 2); }, kRepositoryDeadline)) << "restored from the archive";
  EXPECT_NE(l.value("INSERT INTO t VALUES (9)").find("read-only"), std::string::npos);

  const auto pid = l.postmasterPid();
  PgController restarted(l.options);
  auto r = restarted.apply(PgConfig::standbyLeader(repo, false));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(l.postmasterPid(), pid) << "the same postmaster";
  EXPECT_EQ(l.value("SELECT pg_is_in_recovery()"), "t");
  writeAndArchive(a, 3);
  EXPECT_TRUE(testing::eventually([&] { return holdsRow(l, 3); }, kRepositoryDeadline));
  EXPECT_EQ(l.value("SELECT pg_is_in_recovery()"), "t");
  // The lag (0083 3.5): the archive's newest segment (read once a minute) against what
  // was replayed; once the segment that ends in the source's switch is replayed, nothing.
  std::optional<SourceLag> lag;
  EXPECT_TRUE(testing::eventually(
      [&] {
        lag = restarted.status().source;
        return lag && lag->lagBytes == std::optional<uint64_t>(0);
      },
      kRepositoryDeadline))
      << (lag ? lag->describe() + " " + lag->toJson().dump() : std::string("no lag sampled"));
  ASSERT_TRUE(lag && lag->sourceWal);
  EXPECT_EQ(lag->sourcePrimary, "stanza sa");
  EXPECT_EQ(lag->sourceError, "");

  auto fenced = restarted.fence(std::nullopt);
  ASSERT_TRUE(fenced.ok) << fenced.error;
  EXPECT_EQ(l.value("SHOW restore_command"), "") << "nothing more is restored under the fence";
  EXPECT_EQ(l.value("SELECT pg_is_in_recovery()"), "t");
}

// A `hosts` source with `restore` (0083 2.1, 4.1): the first leader is restored from the
// repository first (the replica methods' order), then streams from the source's writable
// host with the repository's archive-get as its restore_command too.
TEST_F(StandbyRepositoryTest, AStreamingSourcesLeaderIsRestoredFromItsRepositoryFirstThenStreams) {
  PgTestNode& a = *source_;
  PgTestNode& l = *leader_;
  SourceEndpoint hosts;
  hosts.kind = SourceKind::kHosts;
  hosts.hosts = {HostPort{"127.0.0.1", a.port}};
  hosts.restore = SourceRepository{"sa", repoOptions()};

  PgController cl(l.options);
  auto r = cl.apply(PgConfig::standbyLeader(hosts, true));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_NE(dugong::testing::fileText(cluster_.dir() + "/log/sa-restore.log").find("restore command begin"),
            std::string::npos)
      << "restored from the repository, not copied by pg_basebackup";
  EXPECT_NE(l.value("SHOW restore_command").find("archive-get"), std::string::npos);
  ASSERT_EQ(a.value("INSERT INTO t VALUES (2)"), "");
  EXPECT_TRUE(testing::eventually([&] { return holdsRow(l, 2); }, kRepositoryDeadline)) << "streamed: not archived yet";
  EXPECT_TRUE(testing::eventually(
      [&] { return l.value("SELECT status FROM pg_stat_wal_receiver") == "streaming"; }, kRepositoryDeadline));
  EXPECT_NE(l.value("SELECT conninfo FROM pg_stat_wal_receiver").find("target_session_attrs=primary"),
            std::string::npos);
  EXPECT_EQ(l.value("SELECT pg_is_in_recovery()"), "t");
}

}  // namespace
}  // namespace dugong::pg
