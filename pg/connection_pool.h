// Connections to one server kept open between the adapter's routine queries.
//
// The agent asks its local postgres something several times a second (the health
// check, the status for /state and /metrics, the primary's catch-up poll). Opening a
// connection for each made most of the agent's CPU at rest (and a postgres backend
// started and ended each time). The pool hands a kept connection out only if it is
// ready: its last query ended normally and nothing has arrived on it since (a server
// that ended the session, e.g. a restart or a terminate, leaves it readable); otherwise
// the query opens a fresh one, exactly as runQuery does. A query that fails in any way
// drops its connection. Safe to use from several threads; each query has a connection
// of its own.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pg/connection.h"
#include "pg/sql.h"
#include "statemachine/result.h"

namespace dugong::pg {

class ConnectionPool {
 public:
  // `conninfo` and `timeout` as for runQuery; at most `keep` connections stay open.
  ConnectionPool(std::string conninfo, std::chrono::milliseconds timeout, size_t keep = 3);

  // As runQuery(conninfo, sql, timeout), on a kept connection when one is ready.
  Result<QueryResult> query(const std::string& sql);
  // How many connections were opened so far (for tests and the bench).
  size_t opened() const;

 private:
  std::unique_ptr<Connection> take();
  void giveBack(std::unique_ptr<Connection> c);

  const std::string conninfo_;
  const std::chrono::milliseconds timeout_;
  const size_t keep_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
  size_t opened_ = 0;
};

}  // namespace dugong::pg
