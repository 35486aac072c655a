// The password rotation of docs/operations.md ("Rotating the replication and superuser
// passwords") on a running 3-peer cluster under a careful writer (issue 40): the
// replication role's new password written into every host's replicationPasswordFile,
// set on the primary as a SCRAM verifier made on the client's side, then the agents
// restarted, sync first, then the async, then the primary; the superuser's set on the
// primary and written into every host's configuration, with no agent restart.
//
// What is asserted: every standby runs with the new password in its primary_conninfo
// and streams again after its replication connection is ended (the old password would be
// refused); the old superuser password is refused and the new one taken on every peer; a
// failover afterwards works, and the killed ex-primary rejoins by pg_rewind, which
// connects with the new password; no acknowledged row is lost. The writer uses a role of
// its own, as an application would, so that the superuser's rotation does not stop it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "pg/sql.h"
#include "tests/e2e/careful_writer.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kAppPassword = "app-password-1";
constexpr const char* kNewReplicationPassword = "replication password, rotated";
constexpr const char* kNewSuperuserPassword = "superuser password, rotated";

class PasswordRotation : public ::testing::Test {
 protected:
  void SetUp() override {
    HarnessOptions o;
    o.cluster = "pwrotate";
    // The application's role, as a DBA adds it (postgres.hba).
    o.postgresConfig = "  hba:\n    - host all app 127.0.0.1/32 scram-sha-256\n";
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    primary_ = h_->waitForHealthyCluster(2, 180s);
    ASSERT_GE(primary_, 0) << h_->describe();
    ASSERT_TRUE(setPassword(primary_, "app", kAppPassword, "CREATE ROLE app LOGIN PASSWORD "));
    for (const char* statement : {"CREATE TABLE acked (id int PRIMARY KEY)", "GRANT INSERT, SELECT ON acked TO app"}) {
      auto r = h_->sql(primary_, statement);
      ASSERT_TRUE(r.ok()) << statement << ": " << r.error();
    }
    writer_ = std::make_unique<CarefulWriter>(appConninfo());
    ASSERT_TRUE(h_->waitFor([&] { return writer_->ackedSince(1) >= 5; }, 60s)) << "the writer gets no acknowledgement";
  }
  void TearDown() override {
    if (writer_) writer_->stop();
    if (HasFailure() && h_) std::cerr << h_->describe();
  }

  // Every peer, read-write only, as the application role.
  std::string appConninfo() const {
    std::string ports;
    for (int i = 0; i < h_->size(); ++i) ports += (ports.empty() ? "" : ",") + std::to_string(h_->peer(i).pg->port);
    return "host=127.0.0.1,127.0.0.1,127.0.0.1 port=" + ports +
           " user=app dbname=postgres target_session_attrs=read-write connect_timeout=2 " +
           pg::buildConninfo({{"password", kAppPassword}});
  }

  // `statement` + the SCRAM verifier of `password` for `role`, made on this side (as
  // psql's \password does: the password reaches neither the server nor its log).
  bool setPassword(int i, const std::string& role, const std::string& password,
                   const std::string& statement) {
    auto verifier = pg::encryptPassword(h_->peer(i).pg->conninfo(), role, password, 10s);
    if (!verifier) {
      ADD_FAILURE() << "no SCRAM verifier for " << role << ": " << verifier.error();
      return false;
    }
    auto r = h_->sql(i, statement + pg::quoteLiteral(*verifier));
    if (!r) ADD_FAILURE() << "setting the password of " << role << ": " << r.error();
    return r.ok();
  }

  // A login as the superuser over TCP on peer `i` with `password`.
  bool superuserLogsIn(int i, const std::string& password) {
    const auto& o = h_->peer(i).pg->options;
    const std::string conninfo = pg::buildConninfo({{"host", "127.0.0.1"},
                                                    {"port", std::to_string(h_->peer(i).pg->port)},
                                                    {"user", o.superuser},
                                                    {"password", password},
                                                    {"dbname", "postgres"}});
    return pg::runQuery(conninfo, "SELECT 1", 5s).ok();
  }

  // The standby `i` streams (its /replica answers 200).
  bool streams(int i) { return h_->httpStatus(i, "/replica") == 200; }

  // Ends every replication connection that peer `i` serves: each standby connects again
  // with the password its primary_conninfo holds now.
  void endReplicationConnections(int i) {
    auto r = h_->sql(i, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication");
    ASSERT_TRUE(r.ok()) << r.error();
  }

  std::unique_ptr<Harness> h_;
  std::unique_ptr<CarefulWriter> writer_;
  int primary_ = -1;
};

TEST_F(PasswordRotation, ReplicationAndSuperuserPasswordsUnderAWriterThenAFailover) {
  const int sync = h_->indexWithRole("sync");
  const int async = h_->indexWithRole("async");
  ASSERT_GE(sync, 0);
  ASSERT_GE(async, 0);
  const std::string replicationUser = h_->peer(primary_).pg->options.replicationUser;

  // Replication password, steps 2-4 of the procedure.
  for (int i = 0; i < h_->size(); ++i) {
    const std::string file = h_->peer(i).pg->dir + "/replication.pw";
    std::ofstream(file, std::ios::trunc) << kNewReplicationPassword << "\n";
    ::chmod(file.c_str(), 0600);
  }
  ASSERT_TRUE(setPassword(primary_, replicationUser, kNewReplicationPassword,
                          "ALTER ROLE " + pg::quoteIdent(replicationUser) + " PASSWORD "));
  for (int i : {sync, async, primary_}) {
    h_->stopAgent(i);
    h_->startAgent(i);
    if (i != primary_) {
      const std::string holdsNew = "SELECT current_setting('primary_conninfo') LIKE " +
                                   pg::quoteLiteral("%" + std::string(kNewReplicationPassword) + "%");
      EXPECT_TRUE(h_->waitFor([&] { return h_->peer(i).pg->value(holdsNew) == "t"; }, 60s))
          << h_->peer(i).id << "'s primary_conninfo does not hold the new password after its agent restarted";
    }
    ASSERT_GE(h_->waitForHealthyCluster(2, 120s), 0) << "after the restart of " << h_->peer(i).id << "'s agent\n"
                                                     << h_->describe();
  }
  EXPECT_EQ(h_->writablePrimary(), primary_) << "an agent restart moved the primary";
  // The standbys connect again, with the new password only.
  endReplicationConnections(primary_);
  endReplicationConnections(sync);
  EXPECT_TRUE(h_->waitFor([&] { return streams(sync) && streams(async); }, 60s))
      << "the standbys do not stream again with the new replication password\n"
      << h_->describe();

  // Superuser password: set on the primary (it replicates), written into every host's
  // configuration for a cluster set up again; no agent restart.
  const std::string oldSuperuserPassword = h_->peer(primary_).pg->options.superuserPassword.value_or("");
  ASSERT_TRUE(setPassword(primary_, h_->peer(primary_).pg->options.superuser, kNewSuperuserPassword,
                          "ALTER ROLE " + pg::quoteIdent(h_->peer(primary_).pg->options.superuser) + " PASSWORD "));
  for (int i = 0; i < h_->size(); ++i) {
    E2EPeer& p = h_->peer(i);
    std::string yaml = dugong::testing::fileText(p.configPath);
    const std::string line = "  superuserPassword: " + nlohmann::json(oldSuperuserPassword).dump() + "\n";
    const auto at = yaml.find(line);
    ASSERT_NE(at, std::string::npos) << p.configPath << " has no line " << line;
    yaml.replace(at, line.size(), "  superuserPassword: " + nlohmann::json(kNewSuperuserPassword).dump() + "\n");
    std::ofstream(p.configPath, std::ios::trunc) << yaml;
    p.pg->options.superuserPassword = kNewSuperuserPassword;  // the harness' own logins
  }
  for (int i = 0; i < h_->size(); ++i) {
    EXPECT_TRUE(h_->waitFor([&] { return superuserLogsIn(i, kNewSuperuserPassword); }, 30s))
        << h_->peer(i).id << " does not take the new superuser password";
    EXPECT_FALSE(superuserLogsIn(i, oldSuperuserPassword)) << h_->peer(i).id << " still takes the old one";
  }

  // A failover afterwards: kill -9 of the primary's agent and postmaster; the sync takes
  // over; the killed peer, started again, rejoins by pg_rewind with the new password.
  const int firstAfter = writer_->nextId();
  h_->killAgent(primary_);
  h_->killPostgres(primary_);
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 60s))
      << h_->peer(sync).id << " did not take over\n"
      << h_->describe();
  EXPECT_TRUE(h_->waitFor([&] { return writer_->ackedSince(firstAfter) >= 5; }, 60s))
      << "no writes after the failover";
  const size_t logBefore = dugong::testing::fileText(h_->peer(primary_).logPath).size();
  h_->startAgent(primary_);
  ASSERT_EQ(h_->waitForHealthyCluster(2, 180s), sync)
      << "the killed ex-primary " << h_->peer(primary_).id << " did not rejoin\n"
      << h_->describe();
  EXPECT_EQ(dugong::testing::fileText(h_->peer(primary_).logPath).find("password authentication failed", logBefore),
            std::string::npos)
      << h_->peer(primary_).id << " met a refused password:\n"
      << h_->logTail(primary_, 40);

  writer_->stop();
  const std::set<int> acked = writer_->acked();
  const std::set<int> there = h_->intColumn(sync, "SELECT id FROM acked");
  size_t lost = 0;
  for (int id : acked) lost += there.count(id) == 0;
  EXPECT_EQ(lost, 0u) << lost << " acknowledged rows of " << acked.size() << " are not on the new primary";
}

}  // namespace
}  // namespace dugong::e2e
