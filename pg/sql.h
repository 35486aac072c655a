// Blocking access to PostgreSQL with bounds on every step, for the adapter's worker
// threads, dugong-adm and tests, through libpq's asynchronous API (pg/connection.h). Also
// conninfo building (quoted, libpq's syntax, which pg_basebackup and pg_rewind also
// take) and parsing of a peer's pgUrl.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "statemachine/result.h"

namespace dugong::pg {

// host/port/user/database from "tcp://user@host:port/db" (user, port and db optional;
// IPv6 hosts in brackets).
struct PgUrl {
  std::string user;
  std::string host;
  int port = 5432;
  std::string database = "postgres";
};
Result<PgUrl> parsePgUrl(const std::string& url);

// A libpq conninfo string from key/value pairs, each value quoted and escaped.
std::string buildConninfo(const std::map<std::string, std::string>& params);

using Row = std::vector<std::optional<std::string>>;  // NULL = nullopt
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<Row> rows;
};

// Connects (bounded by connect_timeout), runs `sql` with statement_timeout = timeout,
// disconnects. Several statements may be given; the last result is returned.
// Errors carry the server's message.
Result<QueryResult> runQuery(const std::string& conninfo, const std::string& sql, std::chrono::milliseconds timeout);

// runQuery's two halves, for connections that are kept (pg/connection_pool.h): a
// connection set up for queries bounded by `timeout`, and one query on it.
class Connection;
Result<std::unique_ptr<Connection>> openForQueries(const std::string& conninfo, std::chrono::milliseconds timeout);
Result<QueryResult> queryOn(Connection& conn, const std::string& sql, std::chrono::milliseconds timeout);

// The SCRAM-SHA-256 verifier of `password` for role `user`, computed on this side by
// libpq (PQencryptPasswordConn: a random salt, the server's iteration count) over a
// connection made with `conninfo` within `timeout`, so that the password itself never
// reaches the server, its logs or its statement texts.
Result<std::string> encryptPassword(const std::string& conninfo, const std::string& user, const std::string& password,
                                    std::chrono::milliseconds timeout);

// Where encryptPassword runs: SCRAM's first use initialises OpenSSL's random generator
// and providers, about 2 MB of libcrypto that then stays resident in the process. With
// a helper set (the agent: its own executable), the verifier is made by
// `helper --scram-verifier CONNINFO USER TIMEOUT_MS`, the password in its environment
// (DUGONG_VERIFIER_PASSWORD, as pg_basebackup gets PGPASSWORD), never on a command line.
// Empty (the default, and dugong-adm): in this process.
void setVerifierHelper(std::string executable);
// The helper's side: the verifier on stdout, exit 0; or the reason on stderr, exit 1.
int runVerifierHelper(const std::string& conninfo, const std::string& user, const std::string& timeoutMs);

// SQL literal / identifier quoting for statements that take no parameters (CREATE ROLE).
std::string quoteLiteral(const std::string& s);
std::string quoteIdent(const std::string& s);

}  // namespace dugong::pg
