#include "pg/sql.h"

#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "pg/command.h"
#include "pg/connection.h"

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

Result<std::unique_ptr<Connection>> openForQueries(const std::string& conninfo, std::chrono::milliseconds timeout) {
  auto parsed = parseConninfo(conninfo);
  if (!parsed) return Error{"cannot connect: " + parsed.error()};
  std::map<std::string, std::string> params = std::move(parsed).value();
  // A connect timeout of the query's timeout (at least 2 s, as libpq's connect_timeout)
  // per host, TCP_USER_TIMEOUT and statement_timeout of the same.
  const auto perHost =
      std::max<std::chrono::milliseconds>(std::chrono::seconds(2), std::chrono::ceil<std::chrono::seconds>(timeout));
  params["tcp_user_timeout"] = std::to_string(timeout.count());
  std::string& options = params["options"];
  options += (options.empty() ? "" : " ") + std::string("-c statement_timeout=") + std::to_string(timeout.count());
  const auto host = params.find("host") != params.end() ? params.find("host") : params.find("hostaddr");
  const auto hosts = 1 + (host == params.end() ? 0 : std::count(host->second.begin(), host->second.end(), ','));
  auto conn = Connection::open(buildConninfo(params), Connection::Clock::now() + perHost * hosts);
  if (!conn) return Error{"cannot connect: " + conn.error()};
  return conn;
}

Result<QueryResult> queryOn(Connection& conn, const std::string& sql, std::chrono::milliseconds timeout) {
  // statement_timeout does not cover everything (a commit waiting for a synchronous
  // standby): the connection cancels at the deadline.
  const auto deadline = Connection::Clock::now() + std::max(timeout, std::chrono::milliseconds(1));
  auto r = conn.query(sql, deadline);
  if (!r && r.error() == "timeout expired") {
    return Error{"query timed out after " + std::to_string(timeout.count()) + " ms and was cancelled"};
  }
  if (!r) return Error{"query failed: " + r.error()};
  return r;
}

Result<QueryResult> runQuery(const std::string& conninfo, const std::string& sql, std::chrono::milliseconds timeout) {
  const auto started = Connection::Clock::now();
  auto conn = openForQueries(conninfo, timeout);
  if (!conn) return Error{conn.error()};
  // The query's deadline counts from the call, as it always did.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(started + timeout - Connection::Clock::now());
  return queryOn(*conn.value(), sql, std::max(left, std::chrono::milliseconds(1)));
}

namespace {
std::string& verifierHelper() {
  static std::string executable;
  return executable;
}
}  // namespace

void setVerifierHelper(std::string executable) { verifierHelper() = std::move(executable); }

Result<std::string> encryptPassword(const std::string& conninfo, const std::string& user, const std::string& password,
                                    std::chrono::milliseconds timeout) {
  if (!verifierHelper().empty()) {
    CommandSpec spec;
    spec.argv = {verifierHelper(), "--scram-verifier", conninfo, user, std::to_string(timeout.count())};
    spec.env = {{"DUGONG_VERIFIER_PASSWORD", password}};
    spec.timeout = timeout + std::chrono::seconds(5);
    auto r = runCommand(spec);
    std::string out = r.output;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    if (!r.ok()) return Error{"the verifier helper failed (" + r.describe() + "): " + out};
    if (out.rfind("SCRAM-SHA-256$", 0) != 0 || out.find_first_of(" \n") != std::string::npos) {
      return Error{"the verifier helper printed no SCRAM-SHA-256 verifier"};
    }
    return out;
  }
  // libpq computes the verifier on this side (a random salt, the server's iteration
  // count); the connection only tells it what the server expects.
  auto conn = openForQueries(conninfo, timeout);
  if (!conn) return Error{conn.error()};
  char* verifier = PQencryptPasswordConn(conn.value()->native(), password.c_str(), user.c_str(), "scram-sha-256");
  if (!verifier) return Error{"cannot encrypt the password: " + std::string(PQerrorMessage(conn.value()->native()))};
  std::string out = verifier;
  PQfreemem(verifier);
  return out;
}

int runVerifierHelper(const std::string& conninfo, const std::string& user, const std::string& timeoutMs) {
  const char* password = std::getenv("DUGONG_VERIFIER_PASSWORD");
  long ms = 0;
  const auto [end, ec] = std::from_chars(timeoutMs.data(), timeoutMs.data() + timeoutMs.size(), ms);
  if (password == nullptr || ec != std::errc() || end != timeoutMs.data() + timeoutMs.size() || ms <= 0) {
    std::fputs("dugong --scram-verifier: no password in the environment, or a bad timeout\n", stderr);
    return 1;
  }
  auto v = encryptPassword(conninfo, user, password, std::chrono::milliseconds(ms));
  if (!v) {
    std::fprintf(stderr, "%s\n", v.error().c_str());
    return 1;
  }
  std::printf("%s\n", v.value().c_str());
  return std::fflush(stdout) == 0 ? 0 : 1;
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
