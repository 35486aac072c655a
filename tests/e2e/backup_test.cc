// Backups with pgBackRest, with real processes and a repository in a local
// directory: archiving switched on for the whole cluster with `dugong-adm config set`,
// a full backup taken from a standby, a named restore point, a failover that keeps the
// archive without a gap, a new peer made from the repository, an ex-primary rebuilt by a
// delta restore into a copy of its old data directory, a new cluster bootstrapped
// from the repository to the restore point; and an archive command that fails, seen by
// /metrics and `dugong-adm verify`, without blocking a failover.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "pg/command.h"
#include "pg/pgbackrest.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

namespace fs = std::filesystem;

// A directory of the test's own, owned by postgres (pgBackRest runs as postgres).
class RepoDir {
 public:
  RepoDir() {
    char tmpl[] = "/tmp/dugong-backup-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    const passwd* pw = ::getpwnam("postgres");
    for (const std::string sub : {"", "/repo", "/log", "/lock"}) {
      fs::create_directories(dir_ + sub);
      if (pw) (void)::chown((dir_ + sub).c_str(), pw->pw_uid, pw->pw_gid);
    }
  }
  ~RepoDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  std::map<std::string, std::string> options() const {
    return {{"repo1-path", dir_ + "/repo"}, {"log-path", dir_ + "/log"}, {"lock-path", dir_ + "/lock"}};
  }

 private:
  std::string dir_;
};

pg::CommandResult run(std::vector<std::string> argv, const std::string& asUser = "") {
  pg::CommandSpec spec;
  spec.argv = std::move(argv);
  spec.runAsUser = asUser;
  spec.timeout = std::chrono::seconds(180);
  return pg::runCommand(spec);
}

pg::CommandResult adm(const Harness& h, std::vector<std::string> args) {
  std::vector<std::string> argv = {DUGONG_ADM_BINARY, "--zk", h.zkConnect(), "-c", h.options().cluster};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}

// The PgOptions pgBackRest needs of a peer (as its agent has them).
pg::PgOptions hostOf(Harness& h, int i) {
  pg::PgOptions o;
  o.dataDir = h.peer(i).pg->options.dataDir;
  o.port = h.peer(i).pg->options.port;
  return o;
}

pg::CommandResult pgbackrest(Harness& h, const RepoDir& repo, const std::string& stanza, int pg1,
                             const std::string& command, std::vector<std::string> extra = {}) {
  auto argv = pg::pgBackRestArgv(stanza, repo.options(), hostOf(h, pg1), command, extra);
  return pg::runPgBackRest(argv, hostOf(h, pg1), std::chrono::seconds(300));
}

// Segment numbers (across timelines) of every WAL file in the stanza's archive.
std::set<uint64_t> archivedSegments(const RepoDir& repo, const std::string& stanza) {
  std::set<uint64_t> out;
  const fs::path root = fs::path(repo.dir()) / "repo" / "archive" / stanza;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (!it->is_regular_file() || name.size() < 24 || name.find_first_not_of("0123456789ABCDEF") < 24) continue;
    out.insert(std::stoull(name.substr(8, 8), nullptr, 16) * 0x100 + std::stoull(name.substr(16, 8), nullptr, 16));
  }
  return out;
}

bool logSays(Harness& h, int i, const std::string& text) {
  return dugong::testing::fileText(h.peer(i).logPath).find(text) != std::string::npos;
}

std::string metrics(Harness& h, int i) {
  auto r = run({"/usr/bin/curl", "-s", "http://127.0.0.1:" + std::to_string(h.peer(i).httpPort) + "/metrics"});
  return r.output;
}

// SIGKILL of the primary's agent (and watchdog) and postgres; true once another peer is
// the writable primary (within two minutes).
bool killPrimaryAndAwaitAnother(Harness& h, int primary) {
  h.killAgentAndWatchdog(primary);
  h.killPostgres(primary);
  return h.waitFor(
      [&] {
        const int p = h.writablePrimary();
        return p >= 0 && p != primary;
      },
      std::chrono::seconds(120));
}

TEST(Backup, FromAStandbyRestoresANewClusterToARestorePointAndSurvivesAFailover) {
  RepoDir repo;
  const std::string stanza = "bkmain";
  std::string bootstrapYaml;
  {
    HarnessOptions o;
    o.cluster = stanza;
    Harness h(o);
    // Archiving for the whole cluster, before any peer starts: one switch and the
    // repository (the stanza is named after the cluster).
    auto set = adm(h, {"config", "set", "backup.archive=on", "backup.replica-methods=pgbackrest,basebackup",
                       "backup.repo1-path=" + repo.dir() + "/repo", "backup.log-path=" + repo.dir() + "/log",
                       "backup.lock-path=" + repo.dir() + "/lock"});
    ASSERT_TRUE(set.ok()) << set.output;
    h.startAll();
    int primary = h.waitForHealthyCluster(2, std::chrono::seconds(180));
    ASSERT_GE(primary, 0) << h.describe();
    for (int i = 0; i < h.size(); ++i) {
      EXPECT_EQ(h.peer(i).pg->value("SHOW archive_mode"), "on") << h.peer(i).id;
    }
    auto created = pgbackrest(h, repo, stanza, primary, "stanza-create");
    ASSERT_TRUE(created.ok()) << created.output;
    auto check = pgbackrest(h, repo, stanza, primary, "check");
    ASSERT_TRUE(check.ok()) << check.output;

    // A full backup from the sync: pg1 the primary, pg2 the standby the files come from.
    const int sync = h.indexWithRole("sync");
    const pg::PgOptions standby = hostOf(h, sync);
    auto backup = pgbackrest(h, repo, stanza, primary, "backup",
                             {"--pg2-path=" + standby.dataDir, "--pg2-socket-path=" + standby.socketPath(),
                              "--pg2-port=" + std::to_string(standby.port), "--pg2-user=postgres", "--backup-standby",
                              "--type=full", "--start-fast"});
    ASSERT_TRUE(backup.ok()) << backup.output;

    ASSERT_TRUE(h.sql(primary, "CREATE TABLE t (i int); INSERT INTO t SELECT generate_series(1, 100)").ok());
    ASSERT_TRUE(h.sql(primary, "SELECT pg_create_restore_point('before_more')").ok());
    ASSERT_TRUE(h.sql(primary, "INSERT INTO t SELECT generate_series(101, 150)").ok());
    check = pgbackrest(h, repo, stanza, primary, "check");  // switches WAL and waits for its archive
    ASSERT_TRUE(check.ok()) << check.output;

    // A new peer is made from the repository, then streams.
    const int added = h.addPeer();
    h.startAgent(added);
    ASSERT_GE(h.waitForHealthyCluster(3, std::chrono::seconds(180)), 0) << h.describe();
    EXPECT_TRUE(logSays(h, added, "data directory made by replica method pgbackrest")) << h.logTail(added, 80);
    EXPECT_EQ(h.intColumn(added, "SELECT count(*) FROM t"), (std::set<int>{150}));

    // A failover: the primary's agent and postgres are killed; the new primary archives.
    ASSERT_TRUE(killPrimaryAndAwaitAnother(h, primary)) << h.describe();
    const int next = h.writablePrimary();
    ASSERT_TRUE(h.sql(next, "INSERT INTO t SELECT generate_series(151, 160)").ok());
    check = pgbackrest(h, repo, stanza, next, "check");
    ASSERT_TRUE(check.ok()) << check.output;
    auto info = pgbackrest(h, repo, stanza, next, "info", {"--output=json"});
    ASSERT_TRUE(info.ok()) << info.output;
    auto parsed = pg::parseStanzaInfo(info.output, stanza);
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(parsed->status, "ok");
    // No gap: every segment from the first archived to the last, on one timeline or the next.
    const auto segments = archivedSegments(repo, stanza);
    ASSERT_FALSE(segments.empty());
    for (uint64_t s = *segments.begin(); s <= *segments.rbegin(); ++s) {
      EXPECT_TRUE(segments.count(s)) << "segment " << s << " is missing from the archive";
    }
    // The deposed ex-primary, as an interrupted rebuild leaves it (its data directory
    // aside, an incomplete one in place), is rebuilt from the repository: restore --delta
    // into a copy of the old directory. It streams again.
    const std::string data = h.peer(primary).pg->options.dataDir;
    fs::rename(data, data + ".dugong-old");
    fs::create_directories(data);
    std::ofstream(data + "/PG_VERSION") << "15\n";
    std::ofstream(data + ".dugong-incomplete") << "pgbackrest restore\n";
    auto rebuilt = adm(h, {"rebuild", "-y", "--config", h.peer(primary).configPath});
    ASSERT_TRUE(rebuilt.ok()) << rebuilt.output;
    EXPECT_NE(rebuilt.output.find("data directory made by replica method pgbackrest"), std::string::npos)
        << rebuilt.output;
    EXPECT_NE(rebuilt.output.find("pgbackrest restore --delta finished"), std::string::npos) << rebuilt.output;
    EXPECT_FALSE(fs::exists(data + ".dugong-old")) << "removed once the rebuilt one runs";
    h.startAgent(primary);
    ASSERT_GE(h.waitForHealthyCluster(3, std::chrono::seconds(180)), 0) << h.describe();
    EXPECT_TRUE(h.waitFor([&] { return h.intColumn(primary, "SELECT count(*) FROM t") == std::set<int>{160}; },
                          std::chrono::seconds(30)));

    bootstrapYaml = "  bootstrap:\n    method: pgbackrest\n    stanza: " + stanza + "\n    repository:\n";
    for (const auto& [k, v] : repo.options()) bootstrapYaml += "      " + k + ": " + v + "\n";
    bootstrapYaml += "    target: name:before_more\n";
  }

  // A new cluster from the repository, to the restore point: exactly the rows before it.
  HarnessOptions o;
  o.cluster = "bkrestored";
  o.peers = 2;
  o.postgresConfig = bootstrapYaml;
  Harness h(o);
  h.startAll();
  const int primary = h.waitForHealthyCluster(1, std::chrono::seconds(240));
  ASSERT_GE(primary, 0) << h.describe() << h.logTail(0, 60) << h.logTail(1, 60);
  EXPECT_EQ(h.intColumn(primary, "SELECT count(*) FROM t"), (std::set<int>{100}));
  EXPECT_EQ(h.intColumn(primary, "SELECT max(i) FROM t"), (std::set<int>{100}));
  ASSERT_TRUE(h.sql(primary, "INSERT INTO t VALUES (1000)").ok());
  const int standby = 1 - primary;
  EXPECT_TRUE(h.waitFor([&] { return h.intColumn(standby, "SELECT count(*) FROM t") == std::set<int>{101}; },
                        std::chrono::seconds(30)));
  // The recovery target does not stay behind for the data directory's next recovery.
  EXPECT_EQ(h.peer(primary).pg->value("SHOW recovery_target_name"), "");

  // Starting over: reset-state is refused while agents run; with every agent stopped and
  // the data directories removed it removes the state (with a record of it), and the
  // cluster is restored again from the repository.
  auto refused = adm(h, {"reset-state", "--yes"});
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.output.find("peers of cluster bkrestored are in ZooKeeper"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("its agent runs"), std::string::npos) << refused.output;
  EXPECT_TRUE(h.zkState());
  for (int i = 0; i < h.size(); ++i) {
    h.stopAgent(i);
    h.peer(i).pg->forceStop();
    fs::remove_all(h.peer(i).pg->options.dataDir);
  }
  const std::string record = repo.dir() + "/removed-state.json";
  pg::CommandResult reset;
  EXPECT_TRUE(h.waitFor(
      [&] {  // the stopped agents' sessions end within a session timeout
        // Every postgres is stopped: no promise can be in force, the wait can be short.
        reset = adm(h, {"reset-state", "--yes", "--promise-wait-ms", "1000", "--record", record});
        return reset.ok();
      },
      std::chrono::seconds(30)))
      << reset.output;
  EXPECT_FALSE(h.zkState());
  std::ifstream in(record);
  const auto removed = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(removed.is_object()) << record;
  EXPECT_EQ(removed["cluster"], "bkrestored");
  EXPECT_EQ(removed["state"]["primary"]["id"], h.peer(primary).id);
  h.startAll();
  const int again = h.waitForHealthyCluster(1, std::chrono::seconds(240));
  ASSERT_GE(again, 0) << h.describe();
  EXPECT_EQ(h.intColumn(again, "SELECT count(*) FROM t"), (std::set<int>{100}));
}

TEST(Backup, AFailingArchiveCommandIsReportedAndDoesNotBlockAFailover) {
  HarnessOptions o;
  o.cluster = "bkbroken";
  Harness h(o);
  // The repository is unreachable: a path that does not exist.
  auto set = adm(h, {"config", "set", "backup.archive=on", "backup.repo1-path=/nonexistent/dugong-repo",
                     "backup.log-level-file=off"});
  ASSERT_TRUE(set.ok()) << set.output;
  h.startAll();
  const int primary = h.waitForHealthyCluster(2, std::chrono::seconds(180));
  ASSERT_GE(primary, 0) << h.describe();
  ASSERT_TRUE(h.sql(primary, "CREATE TABLE t (i int); INSERT INTO t VALUES (1); SELECT pg_switch_wal()").ok());
  EXPECT_TRUE(h.waitFor([&] { return metrics(h, primary).find("dugong_archive_failing 1") != std::string::npos; },
                        std::chrono::seconds(60)))
      << metrics(h, primary);
  auto verify = adm(h, {"verify"});
  EXPECT_FALSE(verify.ok());
  EXPECT_NE(verify.output.find("cannot archive its WAL"), std::string::npos) << verify.output;

  EXPECT_TRUE(killPrimaryAndAwaitAnother(h, primary)) << h.describe();
}

}  // namespace
}  // namespace dugong::e2e
