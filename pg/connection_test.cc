// The libpq client (pg/connection.h) against a real postgres secured as in production:
// scram-sha-256 over TCP, trust on the Unix socket; and the pool of kept connections
// (pg/connection_pool.h).
#include "pg/connection.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <thread>

#include "pg/adapter.h"
#include "pg/connection_pool.h"
#include "pg/testing/pg_test_cluster.h"

namespace dugong::pg {
namespace {
using namespace std::chrono_literals;
using testing::PgTestCluster;
using testing::PgTestNode;

// One postgres, brought up as a primary by the adapter (which sets the passwords
// through pg::encryptPassword, i.e. verifiers libpq made on this side).
class ConnectionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new PgTestCluster("dugong-conn");
    node_ = &cluster_->addNode("conn");
    loop_ = new boost::asio::io_context();
    auto created = PgAdapter::create(*loop_, node_->options);
    ASSERT_TRUE(created.ok()) << created.error();
    adapter_ = std::move(created).value().release();
    std::optional<PgConfigApplied> applied;
    adapter_->apply(PgConfig::firstPrimary(std::nullopt), [&](PgConfigApplied r) { applied = r; });
    ASSERT_TRUE(testing::runUntil(*loop_, [&] { return applied.has_value(); }, 180s));
    ASSERT_TRUE(applied->ok) << applied->error;
  }
  static void TearDownTestSuite() {
    delete adapter_;
    delete loop_;
    delete cluster_;
  }
  void SetUp() override { ASSERT_NE(adapter_, nullptr) << "postgres did not start"; }

  static std::string tcp() {
    return buildConninfo({{"host", "127.0.0.1"}, {"port", std::to_string(node_->port)}, {"dbname", "postgres"}});
  }
  static std::string socket() {
    return buildConninfo({{"host", node_->options.socketPath()},
                          {"port", std::to_string(node_->port)},
                          {"user", "postgres"},
                          {"dbname", "postgres"}});
  }

  static PgTestCluster* cluster_;
  static PgTestNode* node_;
  static boost::asio::io_context* loop_;
  static PgAdapter* adapter_;
};
PgTestCluster* ConnectionTest::cluster_ = nullptr;
PgTestNode* ConnectionTest::node_ = nullptr;
boost::asio::io_context* ConnectionTest::loop_ = nullptr;
PgAdapter* ConnectionTest::adapter_ = nullptr;

TEST_F(ConnectionTest, ScramOverTcpWithThePassword) {
  auto r = runQuery(tcp() + " user=postgres " + buildConninfo({{"password", testing::kTestSuperuserPassword}}),
                    "SELECT current_user, 42, NULL::text, 'it''s'", 10s);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->columns, (std::vector<std::string>{"current_user", "?column?", "text", "?column?"}));
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_EQ(r->rows[0], (Row{"postgres", "42", std::nullopt, "it's"}));
  // The server's own record of the session: scram over TCP (pg_hba says so for TCP).
  auto hba = runQuery(socket(), "SELECT auth_method FROM pg_hba_file_rules WHERE type = 'host' AND 'postgres' = ANY(user_name)", 10s);
  ASSERT_TRUE(hba.ok()) << hba.error();
  ASSERT_FALSE(hba->rows.empty());
  EXPECT_EQ(hba->rows[0][0], "scram-sha-256");
}

// Fresh salts (libpq's verifiers) and fresh nonces every time: every pair authenticates.
TEST_F(ConnectionTest, EveryFreshVerifierAndNonceAuthenticates) {
  const std::string password = testing::kTestSuperuserPassword;
  const std::string tcpSuper = tcp() + " user=postgres " + buildConninfo({{"password", password}});
  for (int i = 0; i < 8; ++i) {
    auto verifier = encryptPassword(socket(), "postgres", password, 5s);
    ASSERT_TRUE(verifier.ok()) << verifier.error();
    auto set = runQuery(socket(), "BEGIN TRANSACTION READ WRITE; SET LOCAL synchronous_commit = local; "
                                  "ALTER ROLE postgres WITH PASSWORD " + quoteLiteral(verifier.value()) + "; COMMIT",
                        10s);
    ASSERT_TRUE(set.ok()) << set.error();
    for (int k = 0; k < 3; ++k) {
      auto r = runQuery(tcpSuper, "SELECT 1", 10s);
      ASSERT_TRUE(r.ok()) << "verifier " << verifier.value() << ": " << r.error();
    }
  }
}

// Where the verifier is made in a helper process (the agent: its own executable), what
// the helper says is checked, and a failed helper is an error, not a password.
TEST_F(ConnectionTest, AHelperThatFailsOrPrintsNoVerifierSetsNoPassword) {
  setVerifierHelper("/bin/false");
  auto failed = encryptPassword(socket(), "postgres", testing::kTestSuperuserPassword, 5s);
  setVerifierHelper("/bin/echo");
  auto garbage = encryptPassword(socket(), "postgres", testing::kTestSuperuserPassword, 5s);
  setVerifierHelper("");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().find("the verifier helper failed (exit 1)"), std::string::npos) << failed.error();
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.error(), "the verifier helper printed no SCRAM-SHA-256 verifier");
  EXPECT_TRUE(encryptPassword(socket(), "postgres", testing::kTestSuperuserPassword, 5s).ok());
}

// GSSAPI encryption only when asked for: otherwise libpq would prefer it to the TLS
// that tls.sslmode configures.
TEST_F(ConnectionTest, NoGssapiEncryptionUnlessAsked) {
  const std::string tcpSuper =
      tcp() + " user=postgres " + buildConninfo({{"password", testing::kTestSuperuserPassword}});
  auto gssencmode = [](Connection& c) {
    std::string value;
    PQconninfoOption* options = PQconninfo(c.native());
    for (PQconninfoOption* o = options; o->keyword; ++o) {
      if (std::string(o->keyword) == "gssencmode" && o->val) value = o->val;
    }
    PQconninfoFree(options);
    return value;
  };
  auto plain = openForQueries(tcpSuper, 10s);
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_EQ(gssencmode(*plain.value()), "disable");
  auto asked = openForQueries(tcpSuper + " gssencmode=prefer", 10s);
  ASSERT_TRUE(asked.ok()) << asked.error();
  EXPECT_EQ(gssencmode(*asked.value()), "prefer");
}

TEST_F(ConnectionTest, TrustOverTheUnixSocket) {
  auto r = runQuery(socket(), "SELECT inet_server_addr() IS NULL", 10s);  // NULL on a Unix socket
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->rows.at(0).at(0), "t");
}

TEST_F(ConnectionTest, WrongOrMissingPasswordIsRefusedWithTheServersMessage) {
  auto wrong = runQuery(tcp() + " user=postgres password=guess", "SELECT 1", 10s);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().find("FATAL:  password authentication failed for user \"postgres\""), std::string::npos)
      << wrong.error();
  auto none = runQuery(tcp() + " user=postgres", "SELECT 1", 10s);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("no password supplied"), std::string::npos) << none.error();
}

TEST_F(ConnectionTest, ManyStatementsGiveTheLastResultOrTheFirstError) {
  auto r = runQuery(socket(), "SELECT 1; SELECT 2 AS two, 3 AS three; SELECT 4 WHERE false", 10s);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->columns, (std::vector<std::string>{"?column?"}));
  EXPECT_TRUE(r->rows.empty());
  auto set = runQuery(socket(), "SELECT 1; SET application_name = 'x'", 10s);
  ASSERT_TRUE(set.ok()) << set.error();
  EXPECT_TRUE(set->columns.empty());
  auto bad = runQuery(socket(), "SELECT 1; SELECT 1/0; SELECT no_such_column", 10s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("ERROR:  division by zero"), std::string::npos) << bad.error();
  auto syntax = runQuery(socket(), "SELEC 1", 10s);
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.error().find("syntax error"), std::string::npos) << syntax.error();
}

TEST_F(ConnectionTest, AQueryPastItsTimeoutIsCancelledOnTheServer) {
  // statement_timeout is set too; pg_sleep in a function body that resets it shows the
  // client's own cancel.
  auto r = runQuery(socket(), "SET statement_timeout = 0; SELECT pg_sleep(60)", 1s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("timed out"), std::string::npos) << r.error();
  EXPECT_TRUE(testing::eventually(
      [&] {
        auto left = runQuery(socket(), "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' "
                                       "AND pid <> pg_backend_pid()", 5s);
        return left.ok() && left->rows.at(0).at(0) == "0";
      },
      10s));
}

TEST_F(ConnectionTest, AServerThatNeverAnswersIsBoundedByTheConnectTimeout) {
  // A listening socket nobody accepts on: TCP connects, the startup gets no answer.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto r = runQuery("host=127.0.0.1 user=x dbname=x port=" + std::to_string(ntohs(addr.sin_port)), "SELECT 1", 1s);
  ::close(fd);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cannot connect"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("timeout expired"), std::string::npos) << r.error();
}

TEST_F(ConnectionTest, AServerThatStopsAnsweringMidQueryIsBoundedByTheDeadline) {
  // The backend and the postmaster stopped: the query gets no answer, and the cancel
  // request (to the postmaster) none either. The caller still gets its error at the
  // deadline; everything goes on once they run again.
  auto conn = openForQueries(socket(), 5s);
  ASSERT_TRUE(conn.ok()) << conn.error();
  auto pid = queryOn(*conn.value(), "SELECT pg_backend_pid()", 5s);
  ASSERT_TRUE(pid.ok()) << pid.error();
  const pid_t backend = std::stoi(pid->rows.at(0).at(0).value_or("0"));
  const auto postmaster = node_->postmasterPid();
  ASSERT_TRUE(postmaster.has_value());
  ASSERT_EQ(::kill(*postmaster, SIGSTOP), 0);
  ASSERT_EQ(::kill(backend, SIGSTOP), 0);
  auto r = queryOn(*conn.value(), "SELECT 1", 1s);
  ::kill(backend, SIGCONT);
  ::kill(*postmaster, SIGCONT);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("timed out after 1000 ms and was cancelled"), std::string::npos) << r.error();
  EXPECT_FALSE(conn.value()->ready());
  EXPECT_TRUE(testing::eventually([&] { return runQuery(socket(), "SELECT 1", 5s).ok(); }, 10s));
}

TEST_F(ConnectionTest, MultipleHostsAreTriedInOrder) {
  // A closed port first, then the server.
  const std::string conninfo = "host=127.0.0.1,127.0.0.1 port=1," + std::to_string(node_->port) +
                               " user=postgres dbname=postgres " +
                               buildConninfo({{"password", testing::kTestSuperuserPassword}});
  auto r = runQuery(conninfo, "SELECT inet_server_port()", 10s);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->rows.at(0).at(0), std::to_string(node_->port));
  // The primary is read-only until it has a sync: read-write refuses it by name.
  auto rw = runQuery(conninfo + " target_session_attrs=read-write", "SELECT 1", 10s);
  auto readOnly = runQuery(socket(), "SHOW default_transaction_read_only", 10s);
  ASSERT_TRUE(readOnly.ok());
  if (readOnly->rows.at(0).at(0) == "on") {
    ASSERT_FALSE(rw.ok());
    EXPECT_NE(rw.error().find("session is read-only"), std::string::npos) << rw.error();
  } else {
    EXPECT_TRUE(rw.ok()) << rw.error();
  }
}

// The pool (pg/connection_pool.h): one backend serves query after query; a session the
// server ended, a failed query or a timeout is never used again.
TEST_F(ConnectionTest, ThePoolKeepsOneSessionAndOpensAFreshOneWhenTheServerEndedIt) {
  ConnectionPool pool(socket(), 5s);
  auto pid = [&] {
    auto r = pool.query("SELECT pg_backend_pid()");
    EXPECT_TRUE(r.ok()) << r.error();
    return r.ok() ? r->rows.at(0).at(0).value_or("") : std::string();
  };
  const std::string first = pid();
  EXPECT_EQ(pid(), first);
  EXPECT_EQ(pid(), first);
  EXPECT_EQ(pool.opened(), 1u);
  // The server ends the kept session (as a restart or pg_terminate_backend does).
  auto killed = runQuery(socket(), "SELECT pg_terminate_backend(" + first + ")", 10s);
  ASSERT_TRUE(killed.ok()) << killed.error();
  ASSERT_TRUE(testing::eventually(
      [&] {
        auto left = runQuery(socket(), "SELECT count(*) FROM pg_stat_activity WHERE pid = " + first, 5s);
        return left.ok() && left->rows.at(0).at(0) == "0";
      },
      10s));
  const std::string second = pid();  // not an error: the ended session is not handed out
  EXPECT_NE(second, first);
  EXPECT_EQ(pool.opened(), 2u);
  // A failed query drops its connection.
  ASSERT_FALSE(pool.query("SELECT 1/0").ok());
  EXPECT_NE(pid(), second);
  EXPECT_EQ(pool.opened(), 3u);
}

TEST_F(ConnectionTest, ThePoolDropsAConnectionWhoseQueryTimedOut) {
  ConnectionPool pool(socket(), 1s);
  auto r = pool.query("SET statement_timeout = 0; SELECT pg_sleep(60)");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("timed out"), std::string::npos) << r.error();
  auto after = pool.query("SELECT 1");
  ASSERT_TRUE(after.ok()) << after.error();
  EXPECT_EQ(pool.opened(), 2u);
}

TEST_F(ConnectionTest, ThePoolGivesEachConcurrentQueryItsOwnSession) {
  ConnectionPool pool(socket(), 10s, 2);
  std::string a, b;
  std::thread t([&] {
    auto r = pool.query("SELECT pg_sleep(0.3), pg_backend_pid()");
    if (r.ok()) a = r->rows.at(0).at(1).value_or("");
  });
  auto r = pool.query("SELECT pg_sleep(0.3), pg_backend_pid()");
  t.join();
  ASSERT_TRUE(r.ok()) << r.error();
  b = r->rows.at(0).at(1).value_or("");
  ASSERT_FALSE(a.empty());
  EXPECT_NE(a, b);
}

TEST(Conninfo, LibpqReadsWhatBuildConninfoWrites) {
  const std::string odd = "it's a \\ secret";
  auto p = parseConninfo(buildConninfo({{"password", odd}, {"host", "/tmp/x y"}, {"sslmode", "verify-full"}}));
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p.value(),
            (std::map<std::string, std::string>{{"host", "/tmp/x y"}, {"password", odd}, {"sslmode", "verify-full"}}));
}

TEST(Conninfo, UnknownKeysAndBadSyntaxAreRefusedWithLibpqsMessage) {
  auto unknown = parseConninfo("hots=x");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("invalid connection option \"hots\""), std::string::npos) << unknown.error();
  EXPECT_FALSE(parseConninfo("host").ok());
  EXPECT_FALSE(parseConninfo("host='x").ok());
  auto r = runQuery("hots=x", "SELECT 1", 1s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cannot connect: connection string"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace dugong::pg
