// A PostgreSQL client connection on libpq's asynchronous API, every step bounded by a
// deadline: PQconnectStartParams + PQconnectPoll with poll() on PQsocket, PQsendQuery
// + PQconsumeInput/PQisBusy/PQgetResult with poll(), PQcancel at the deadline. The
// connection string is libpq's own (every key libpq knows: TLS up to verify-full,
// client certificates, every authentication method, ~/.pgpass, service files, several
// hosts, target_session_attrs), parsed by PQconninfoParse.
//
// Thread-safety: a Connection is used by one thread at a time. Its calls block that
// thread up to the deadline: they run on the adapter's worker threads, dugong-adm's
// main thread and tests, never on the Asio event loop.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "pg/sql.h"
#include "statemachine/result.h"

struct pg_conn;

namespace dugong::pg {

// The keys and values of a connection string, as PQconninfoParse reads it (only the
// keys the string sets); an unknown key or a bad syntax is an error, as for libpq.
Result<std::map<std::string, std::string>> parseConninfo(const std::string& conninfo);

class Connection {
 public:
  using Clock = std::chrono::steady_clock;
  // Connects (TLS and authentication included) before `deadline`, or returns libpq's
  // message ("timeout expired" at the deadline). Several hosts are tried in order by
  // libpq, all within the one deadline.
  static Result<std::unique_ptr<Connection>> open(const std::string& conninfo, Clock::time_point deadline);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `sql` (simple query protocol: several statements allowed; text results) and
  // returns the last statement's result, or the first error with the server's message.
  // At the deadline the server is asked to cancel (PQcancel) and "timeout expired" is
  // returned; the connection must not be used again.
  Result<QueryResult> query(const std::string& sql, Clock::time_point deadline);
  // The last query (or the startup) ended with the session idle, and nothing has
  // arrived since: no message, no end of the session (a server that ended it leaves
  // the socket readable). A connection that is not ready must not be used again.
  bool ready() const;
  // A ParameterStatus the server reported ("" if none).
  std::string parameter(const std::string& name) const;
  // Whether the session runs over TLS.
  bool usesTls() const;
  // The libpq connection, for libpq's own helpers (PQencryptPasswordConn).
  pg_conn* native() const { return conn_; }

 private:
  explicit Connection(pg_conn* conn);
  void cancel();

  pg_conn* conn_;
  bool failed_ = false;
  std::string warnings_;  // WARNING notices of the current query
};

}  // namespace dugong::pg
