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

struct PgTestNode {
  std::string id;
  int port = 0;
  std::string dir;         // the node's own directory (holds data/ and data.log)
  PgOptions options;       // small settings, the test passwords
  PeerIdentity identity;   // pgUrl tcp://postgres@127.0.0.1:<port>/postgres

  // Superuser connection string to this node (TCP, with the superuser's password).
  std::string conninfo() const;
  // Runs `sql` on this node (bounded by `timeout`, also as statement_timeout).
  Result<QueryResult> sql(const std::string& sql,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // The first value of the first row, or the error text prefixed with "ERROR: ".
  std::string value(const std::string& sql, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // The postmaster's pid from postmaster.pid, if it is alive.
  std::optional<pid_t> postmasterPid() const;
  // Sends `signal` to the postmaster; false if there is none.
  bool signalPostmaster(int signal) const;
  // pg_ctl stop -m immediate, then SIGKILL if a postmaster is left. Never fails.
  void forceStop() const;
};

class PgTestCluster {
 public:
  explicit PgTestCluster(const std::string& prefix = "dugong-pg");
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
  // The directories a test's pgBackRest repository needs under dir(): repo, log and lock,
  // owned by the postgres user (pgBackRest runs as it).
  void makePgBackRestDirs() const;
  std::deque<PgTestNode>& nodes() { return nodes_; }
  void stopAll();

 private:
  dugong::testing::ScratchDir scratch_;
  std::deque<PgTestNode> nodes_;
};

// Runs `loop` until `done()` holds or `deadline` passes. Returns done().
bool runUntil(boost::asio::io_context& loop, const std::function<bool()>& done, std::chrono::milliseconds deadline);
// Polls `condition` every 50 ms (blocking) until it holds or `deadline` passes.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds deadline);

}  // namespace dugong::pg::testing
