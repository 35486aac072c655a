// A client connection to PostgreSQL written against the frontend/backend protocol 3.0
// (pg/wire.h), so that the agent does not link libpq and its TLS, Kerberos and LDAP
// libraries. What the agent and dugong-adm need, no more:
// - libpq-style connection strings (key=value, values quoted with '...' and \ escapes):
//   host (a directory for the Unix socket, a name or an address; a comma-separated list
//   is tried in order), port (one, or one per host), user, password, dbname, options,
//   application_name, replication, connect_timeout (seconds), target_session_attrs
//   (any, read-write, read-only), keepalives, keepalives_idle, keepalives_interval,
//   keepalives_count, tcp_user_timeout (ms), sslmode (disable, allow or prefer: no TLS
//   is ever used). PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE fill what the
//   string leaves out; ~/.pgpass is not read.
// - authentication: trust, cleartext password, SCRAM-SHA-256 (without channel
//   binding); the server's own message when it refuses.
// - the simple query protocol (several statements allowed; text results) and the
//   cancel request.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pg/sql.h"
#include "pg/wire.h"
#include "statemachine/result.h"

namespace dugong::pg {

struct ConnectParams {
  std::vector<std::string> hosts;  // a path starting with '/' is a socket directory
  std::vector<int> ports;          // one per host
  std::string user;
  std::optional<std::string> password;
  std::string dbname;
  std::string options;
  std::string applicationName;
  std::string replication;          // "" (none), "true", "database"
  std::string targetSessionAttrs = "any";
  std::chrono::milliseconds connectTimeout{0};  // 0: none (per host)
  bool keepalives = true;
  int keepalivesIdle = 0, keepalivesInterval = 0, keepalivesCount = 0;  // 0: the system's
  int tcpUserTimeoutMs = 0;
};

// Parses a connection string; unknown keys and bad values are errors (as for libpq).
Result<ConnectParams> parseConninfo(const std::string& conninfo);

class Connection {
 public:
  using Clock = std::chrono::steady_clock;
  // Tries each host in turn; each attempt is bounded by connect_timeout and all of them
  // by `deadline`.
  static Result<std::unique_ptr<Connection>> open(const ConnectParams& params, Clock::time_point deadline);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `sql` (simple query protocol) and returns the last statement's result, or the
  // first error. At the deadline the server is asked to cancel and an error returned.
  Result<QueryResult> query(const std::string& sql, Clock::time_point deadline);
  // The last query (or the startup) ended with the server ready for the next one, and
  // nothing has arrived since: no message, no end of the session. A connection that is
  // not ready must not be used again.
  bool ready() const;
  // A ParameterStatus the server reported ("" if none).
  std::string parameter(const std::string& name) const;

 private:
  Connection() = default;
  Result<bool> startup(const ConnectParams& params, Clock::time_point deadline);
  Result<bool> send(const std::string& bytes, Clock::time_point deadline);
  // The next message, or an error (closed, deadline passed: timedOut_ set).
  Result<wire::Message> receive(Clock::time_point deadline);
  void cancel();

  int fd_ = -1;
  std::vector<uint8_t> address_;  // the sockaddr connected to, for the cancel request
  int32_t backendPid_ = 0, backendSecret_ = 0;
  std::map<std::string, std::string> parameters_;
  wire::MessageReader reader_;
  bool timedOut_ = false;
  bool ready_ = false;
};

}  // namespace dugong::pg
