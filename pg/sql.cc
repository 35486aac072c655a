#include "pg/sql.h"

#include <libpq-fe.h>

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <charconv>
#include <memory>

namespace dugong::pg {

Result<PgUrl> parsePgUrl(const std::string& url) {
  const std::string scheme = "tcp://";
  if (url.rfind(scheme, 0) != 0) return Error{"pgUrl '" + url + "' does not start with tcp://"};
  std::string rest = url.substr(scheme.size());
  PgUrl out;
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    if (!db.empty()) out.database = db;
  }
  auto at = authority.rfind('@');
  if (at != std::string::npos) {
    out.user = authority.substr(0, at);
    authority = authority.substr(at + 1);
  }
  std::string portText;
  if (!authority.empty() && authority[0] == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos) return Error{"pgUrl '" + url + "': unclosed '['"};
    out.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Error{"pgUrl '" + url + "': junk after the host"};
      portText = after.substr(1);
    }
  } else {
    auto colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) portText = authority.substr(colon + 1);
  }
  if (out.host.empty()) return Error{"pgUrl '" + url + "' has no host"};
  if (!portText.empty()) {
    int port = 0;
    auto [p, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
    if (ec != std::errc() || p != portText.data() + portText.size() || port <= 0 || port > 65535) {
      return Error{"pgUrl '" + url + "' has a bad port '" + portText + "'"};
    }
    out.port = port;
  }
  return out;
}

std::string buildConninfo(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out += ' ';
    out += k;
    out += "='";
    for (char c : v) {
      if (c == '\'' || c == '\\') out += '\\';
      out += c;
    }
    out += '\'';
  }
  return out;
}

namespace {
struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
std::string trimmed(const char* s) {
  std::string out = s ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}
}  // namespace

Result<QueryResult> runQuery(const std::string& conninfo, const std::string& sql, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  long long secs = std::max<long long>(2, (timeout.count() + 999) / 1000);
  std::string full = conninfo + " " +
                     buildConninfo({{"connect_timeout", std::to_string(secs)},
                                    {"tcp_user_timeout", std::to_string(timeout.count())},
                                    {"options", "-c statement_timeout=" + std::to_string(timeout.count())}});
  std::unique_ptr<PGconn, ConnDeleter> conn(PQconnectdb(full.c_str()));
  if (!conn) return Error{"libpq: out of memory"};
  if (PQstatus(conn.get()) != CONNECTION_OK) return Error{"cannot connect: " + trimmed(PQerrorMessage(conn.get()))};
  PQsetNoticeProcessor(conn.get(), [](void*, const char*) {}, nullptr);
  if (!PQsendQuery(conn.get(), sql.c_str())) return Error{"query failed: " + trimmed(PQerrorMessage(conn.get()))};
  // Wait for the whole answer within the deadline. statement_timeout does not cover
  // everything (a commit waiting for a synchronous standby), so cancel at the deadline.
  while (PQisBusy(conn.get())) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (PGcancel* cancel = PQgetCancel(conn.get())) {
        char err[256];
        PQcancel(cancel, err, sizeof err);
        PQfreeCancel(cancel);
      }
      return Error{"query timed out after " + std::to_string(timeout.count()) + " ms and was cancelled"};
    }
    pollfd p{PQsocket(conn.get()), POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (rc < 0 && errno != EINTR) return Error{"query failed: poll: " + std::string(std::strerror(errno))};
    if (!PQconsumeInput(conn.get())) return Error{"query failed: " + trimmed(PQerrorMessage(conn.get()))};
  }
  std::unique_ptr<PGresult, ResultDeleter> res;
  std::string firstError;
  while (PGresult* next = PQgetResult(conn.get())) {
    auto status = PQresultStatus(next);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK && firstError.empty()) {
      firstError = "query failed: " + trimmed(PQresultErrorMessage(next));
    }
    res.reset(next);
  }
  if (!firstError.empty()) return Error{firstError};
  if (!res) return Error{"query failed: no result"};
  QueryResult out;
  int nf = PQnfields(res.get());
  for (int f = 0; f < nf; ++f) out.columns.emplace_back(PQfname(res.get(), f));
  for (int r = 0; r < PQntuples(res.get()); ++r) {
    Row row;
    for (int f = 0; f < nf; ++f) {
      if (PQgetisnull(res.get(), r, f)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(std::string(PQgetvalue(res.get(), r, f)));
      }
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

Result<std::string> encryptPassword(const std::string& conninfo, const std::string& user, const std::string& password,
                                    std::chrono::milliseconds timeout) {
  long long secs = std::max<long long>(2, (timeout.count() + 999) / 1000);
  std::string full = conninfo + " " + buildConninfo({{"connect_timeout", std::to_string(secs)}});
  std::unique_ptr<PGconn, ConnDeleter> conn(PQconnectdb(full.c_str()));
  if (!conn) return Error{"libpq: out of memory"};
  if (PQstatus(conn.get()) != CONNECTION_OK) return Error{"cannot connect: " + trimmed(PQerrorMessage(conn.get()))};
  char* verifier = PQencryptPasswordConn(conn.get(), password.c_str(), user.c_str(), "scram-sha-256");
  if (!verifier) return Error{"cannot encrypt the password: " + trimmed(PQerrorMessage(conn.get()))};
  std::string out = verifier;
  PQfreemem(verifier);
  return out;
}

std::string quoteLiteral(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  out += '\'';
  // E'' not used: standard_conforming_strings is on by default, backslashes are literal.
  return out;
}

std::string quoteIdent(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace dugong::pg
