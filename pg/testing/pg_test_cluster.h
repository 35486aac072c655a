// A test fixture: several real postgres instances, each with its own port on 127.0.0.1
// and its own directory under one scratch directory, run as the postgres OS user.
// Every instance is stopped when the cluster object is destroyed, also when a test
// fails (immediate stop, then SIGKILL of a postmaster that is still there).
//
// The fixture only hands out options and identities; the tests drive postgres through
// the adapter (or the end-to-end tests through agents).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "pg/options.h"
#include "pg/sql.h"
#include "statemachine/identity.h"
#include "tests/support/test_env.h"

namespace dugong::pg::testing {

// Every node is secured as in production: scram-sha-256 for the superuser over TCP and
// for the replication role, with these passwords (only test code knows them).
inline constexpr const char* kTestSuperuserPassword = "test superuser 'pw'";
inline constexpr const char* kTestReplicationPassword = "test-replication-pw";

// The connections a node's sql() keeps between its queries (pg_test_cluster.cc).
class KeptConnections;

struct PgTestNode {
  std::string id;
  int port = 0;
  std::string dir;         // the node's own directory (holds data/ and data.log)
  PgOptions options;       // small settings, the test passwords
  PeerIdentity identity;   // pgUrl tcp://postgres@127.0.0.1:<port>/postgres

  // Superuser connection string to this node (TCP, with the superuser's password).
  std::string conninfo() const;
  // Runs `sql` on this node (bounded by `timeout`, also as statement_timeout); in a
  // cluster made with Connections::kKept, on a connection kept for the node between
  // queries (record 0091): a new backend and its
  // SCRAM login cost the server about 25 ms of CPU, and tests poll. What a new
  // connection would see, this one sees too:
  // - its session is reset after each query (DISCARD ALL): no SET, no prepared
  //   statement, no advisory lock outlives the query; one that leaves a transaction open
  //   is closed (so it is rolled back, as before);
  // - one that failed, timed out, or that the server ended or wrote to (a stop, a
  //   restart, a terminate) is dropped, and the query goes to a new connection; a query
  //   whose kept connection turns out to be lost is sent once more on a new one;
  // - a query starting with SHOW goes to a new connection: it asks what the server's
  //   settings are, and a kept session takes a reload a moment after the server does;
  // - several threads may query at once: each query has a connection of its own.
  // A claim about a new session (a login, pg_hba, TLS, whether a new session may write)
  // uses sqlOnNewConnection.
  Result<QueryResult> sql(const std::string& sql,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // The first value of the first row, or the error text prefixed with "ERROR: ".
  std::string value(const std::string& sql, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // As sql() and value(), on a connection opened for this query and closed after it.
  Result<QueryResult> sqlOnNewConnection(const std::string& sql,
                                         std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  std::string valueOnNewConnection(const std::string& sql,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // Closes the kept connections that are idle (forceStop and signalPostmaster do it
  // first: a stopped or killed server has no client of the test attached).
  void disconnect() const;
  // How many connections sql() opened so far (for the fixture's own test).
  size_t connectionsOpened() const;
  // The postmaster's pid from postmaster.pid, if it is alive.
  std::optional<pid_t> postmasterPid() const;
  // Sends `signal` to the postmaster; false if there is none.
  bool signalPostmaster(int signal) const;
  // pg_ctl stop -m immediate, then SIGKILL if a postmaster is left. Never fails.
  void forceStop() const;

  // Shared by copies of the node (addNode sets it with Connections::kKept; null: none kept).
  std::shared_ptr<KeptConnections> kept;
};

class PgTestCluster {
 public:
  // Whether the nodes' sql() keeps a connection per node (PgTestNode::sql) or opens one
  // per query. The adapter tests keep them (record 0091); the end-to-end harness does not
  // say, so its queries open one each, as before.
  enum class Connections { kNewEach, kKept };
  explicit PgTestCluster(const std::string& prefix = "dugong-pg", Connections connections = Connections::kNewEach);
  ~PgTestCluster();
  PgTestCluster(const PgTestCluster&) = delete;
  PgTestCluster& operator=(const PgTestCluster&) = delete;

  // Whether a node's first primary gets a database system of its own.
  enum class System {
    kShared,  // its initdb is a copy of the run's template (pg/testing/initdb_template.h)
    kOwn,     // the real initdb (with --no-sync): for a test that needs two systems
  };
  // A new node with a free port and its own directory. References stay valid.
  PgTestNode& addNode(const std::string& id, System system = System::kShared);
  const std::string& dir() const { return scratch_.path(); }
  std::deque<PgTestNode>& nodes() { return nodes_; }
  void stopAll();

 private:
  dugong::testing::ScratchDir scratch_;
  Connections connections_;
  std::deque<PgTestNode> nodes_;
};

// Runs `loop` until `done()` holds or `deadline` passes. Returns done().
bool runUntil(boost::asio::io_context& loop, const std::function<bool()>& done, std::chrono::milliseconds deadline);
// Polls `condition` every 50 ms (blocking) until it holds or `deadline` passes.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds deadline);

}  // namespace dugong::pg::testing
