#include "pg/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "pg/scram.h"

namespace dugong::pg {
namespace {

using Clock = Connection::Clock;

std::optional<int> parseInt(const std::string& s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<std::string> splitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    auto comma = s.find(',', start);
    out.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string osUser() {
  if (const passwd* pw = ::getpwuid(::geteuid())) return pw->pw_name;
  return "postgres";
}

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

// Waits for `events` on fd until the deadline: true when ready.
bool waitFd(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, msLeft(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string errnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

// A non-blocking stream socket connected to `addr` before the deadline, or an error.
Result<int> connectSocket(const sockaddr* addr, socklen_t length, Clock::time_point deadline) {
  int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Error{errnoText("socket")};
  if (::connect(fd, addr, length) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) {
      std::string e = errnoText("connect");
      ::close(fd);
      return Error{e};
    }
    if (!waitFd(fd, POLLOUT, deadline)) {
      ::close(fd);
      return Error{"timeout expired"};
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      ::close(fd);
      return Error{std::string("connect: ") + std::strerror(err)};
    }
  }
  return fd;
}

void tuneTcp(int fd, const ConnectParams& p) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (p.keepalives) {
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    if (p.keepalivesIdle > 0) ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &p.keepalivesIdle, sizeof(int));
    if (p.keepalivesInterval > 0) ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &p.keepalivesInterval, sizeof(int));
    if (p.keepalivesCount > 0) ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &p.keepalivesCount, sizeof(int));
  }
  if (p.tcpUserTimeoutMs > 0) ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &p.tcpUserTimeoutMs, sizeof(int));
}

// The addresses of one host: the Unix socket in a directory, or what getaddrinfo says.
Result<std::vector<std::vector<uint8_t>>> addressesOf(const std::string& host, int port) {
  std::vector<std::vector<uint8_t>> out;
  if (!host.empty() && host[0] == '/') {
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    const std::string path = host + "/.s.PGSQL." + std::to_string(port);
    if (path.size() >= sizeof un.sun_path) return Error{"socket path " + path + " is too long"};
    std::memcpy(un.sun_path, path.c_str(), path.size() + 1);
    const auto* b = reinterpret_cast<const uint8_t*>(&un);
    out.emplace_back(b, b + sizeof un);
    return out;
  }
  // A numeric address needs no resolver (getaddrinfo reads files and asks netlink on
  // every call: most of a connection's system calls at rest).
  const auto push = [&out](const auto& addr) {
    const auto* b = reinterpret_cast<const uint8_t*>(&addr);
    out.emplace_back(b, b + sizeof addr);
  };
  sockaddr_in v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(port));
    push(v4);
    return out;
  }
  sockaddr_in6 v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(port));
    push(v6);
    return out;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) return Error{"could not translate host name \"" + host + "\" to address: " + ::gai_strerror(rc)};
  for (addrinfo* a = list; a; a = a->ai_next) {
    const auto* b = reinterpret_cast<const uint8_t*>(a->ai_addr);
    out.emplace_back(b, b + a->ai_addrlen);
  }
  ::freeaddrinfo(list);
  return out;
}

const sockaddr* asSockaddr(const std::vector<uint8_t>& a) { return reinterpret_cast<const sockaddr*>(a.data()); }

}  // namespace

Result<ConnectParams> parseConninfo(const std::string& conninfo) {
  std::map<std::string, std::string> kv;
  size_t i = 0;
  const auto space = [&] {
    while (i < conninfo.size() && std::isspace(static_cast<unsigned char>(conninfo[i]))) ++i;
  };
  while (true) {
    space();
    if (i >= conninfo.size()) break;
    size_t keyStart = i;
    while (i < conninfo.size() && conninfo[i] != '=' && !std::isspace(static_cast<unsigned char>(conninfo[i]))) ++i;
    std::string key = conninfo.substr(keyStart, i - keyStart);
    space();
    if (i >= conninfo.size() || conninfo[i] != '=') {
      return Error{"connection string: missing \"=\" after \"" + key + "\""};
    }
    ++i;
    space();
    std::string value;
    if (i < conninfo.size() && conninfo[i] == '\'') {
      ++i;
      bool closed = false;
      while (i < conninfo.size()) {
        char c = conninfo[i++];
        if (c == '\\' && i < conninfo.size()) {
          value += conninfo[i++];
        } else if (c == '\'') {
          closed = true;
          break;
        } else {
          value += c;
        }
      }
      if (!closed) return Error{"connection string: unterminated quoted value of \"" + key + "\""};
    } else {
      while (i < conninfo.size() && !std::isspace(static_cast<unsigned char>(conninfo[i]))) {
        char c = conninfo[i++];
        if (c == '\\' && i < conninfo.size()) c = conninfo[i++];
        value += c;
      }
    }
    kv[key] = value;  // the last one wins, as in libpq
  }

  ConnectParams p;
  std::string host = envOr("PGHOST", "/var/run/postgresql"), port = envOr("PGPORT", "5432");
  p.user = envOr("PGUSER", "");
  if (const char* pw = std::getenv("PGPASSWORD")) p.password = pw;
  p.dbname = envOr("PGDATABASE", "");
  for (const auto& [k, v] : kv) {
    const auto number = [&, k = k, v = v](int* out) -> Result<bool> {
      auto n = parseInt(v);
      if (!n || *n < 0) return Error{"connection string: invalid integer value \"" + v + "\" for \"" + k + "\""};
      *out = *n;
      return true;
    };
    Result<bool> ok = true;
    int n = 0;
    if (k == "host" || k == "hostaddr") {
      host = v;
    } else if (k == "port") {
      port = v;
    } else if (k == "user") {
      p.user = v;
    } else if (k == "password") {
      p.password = v;
    } else if (k == "dbname") {
      p.dbname = v;
    } else if (k == "options") {
      p.options = v;
    } else if (k == "application_name" || (k == "fallback_application_name" && !kv.count("application_name"))) {
      p.applicationName = v;
    } else if (k == "fallback_application_name") {
    } else if (k == "replication") {
      if (v == "true" || v == "on" || v == "yes" || v == "1") {
        p.replication = "true";
      } else if (v == "database") {
        p.replication = "database";
      } else if (!(v == "false" || v == "off" || v == "no" || v == "0")) {
        return Error{"connection string: invalid replication value \"" + v + "\""};
      }
    } else if (k == "connect_timeout") {
      ok = number(&n);
      // As libpq: a timeout below 2 s is raised to 2 s (0 means none).
      if (ok) p.connectTimeout = std::chrono::seconds(n == 0 ? 0 : std::max(n, 2));
    } else if (k == "target_session_attrs") {
      if (v != "any" && v != "read-write" && v != "read-only") {
        return Error{"connection string: target_session_attrs \"" + v + "\" is not supported (any, read-write, read-only)"};
      }
      p.targetSessionAttrs = v;
    } else if (k == "keepalives") {
      ok = number(&n);
      p.keepalives = n != 0;
    } else if (k == "keepalives_idle") {
      ok = number(&p.keepalivesIdle);
    } else if (k == "keepalives_interval") {
      ok = number(&p.keepalivesInterval);
    } else if (k == "keepalives_count") {
      ok = number(&p.keepalivesCount);
    } else if (k == "tcp_user_timeout") {
      ok = number(&p.tcpUserTimeoutMs);
    } else if (k == "sslmode") {
      if (v != "disable" && v != "allow" && v != "prefer") {
        return Error{"connection string: sslmode \"" + v + "\" needs TLS, which dugong's client does not do"};
      }
    } else {
      return Error{"connection string: invalid connection option \"" + k + "\""};
    }
    if (!ok) return Error{ok.error()};
  }
  if (p.user.empty()) p.user = osUser();
  if (p.dbname.empty()) p.dbname = p.user;
  p.hosts = splitCommas(host);
  const auto ports = splitCommas(port);
  if (ports.size() != 1 && ports.size() != p.hosts.size()) {
    return Error{"connection string: " + std::to_string(ports.size()) + " ports for " +
                 std::to_string(p.hosts.size()) + " hosts"};
  }
  for (size_t h = 0; h < p.hosts.size(); ++h) {
    if (p.hosts[h].empty()) p.hosts[h] = "/var/run/postgresql";
    const std::string& text = ports[ports.size() == 1 ? 0 : h];
    auto n = text.empty() ? std::optional<int>(5432) : parseInt(text);
    if (!n || *n <= 0 || *n > 65535) return Error{"connection string: invalid port \"" + text + "\""};
    p.ports.push_back(*n);
  }
  return p;
}

// ---------------------------------------------------------------- connection

Result<std::unique_ptr<Connection>> Connection::open(const ConnectParams& params, Clock::time_point deadline) {
  std::string errors;
  for (size_t h = 0; h < params.hosts.size(); ++h) {
    const std::string& host = params.hosts[h];
    const int port = params.ports[h];
    const std::string where = (host[0] == '/' ? "socket \"" + host + "/.s.PGSQL." + std::to_string(port) + "\""
                                              : "server at \"" + host + "\", port " + std::to_string(port));
    auto fail = [&](const std::string& why) { errors += (errors.empty() ? "" : "; ") + ("connection to " + where + " failed: " + why); };
    auto addresses = addressesOf(host, port);
    if (!addresses) {
      fail(addresses.error());
      continue;
    }
    for (const auto& address : addresses.value()) {
      auto hostDeadline = deadline;
      if (params.connectTimeout.count() > 0) hostDeadline = std::min(deadline, Clock::now() + params.connectTimeout);
      auto fd = connectSocket(asSockaddr(address), static_cast<socklen_t>(address.size()), hostDeadline);
      if (!fd) {
        fail(fd.error());
        continue;
      }
      std::unique_ptr<Connection> c(new Connection());
      c->fd_ = fd.value();
      c->address_ = address;
      if (asSockaddr(address)->sa_family != AF_UNIX) tuneTcp(c->fd_, params);
      auto ok = c->startup(params, hostDeadline);
      if (!ok) {
        fail(ok.error());
        continue;
      }
      if (params.targetSessionAttrs != "any") {
        // As PostgreSQL 14+ reports them; older servers are asked.
        bool readOnly = c->parameter("default_transaction_read_only") == "on" || c->parameter("in_hot_standby") == "on";
        if (c->parameter("default_transaction_read_only").empty()) {
          auto r = c->query("SHOW transaction_read_only", hostDeadline);
          if (!r) {
            fail(r.error());
            continue;
          }
          readOnly = !r->rows.empty() && r->rows[0][0] == "on";
        }
        if (readOnly != (params.targetSessionAttrs == "read-only")) {
          fail(readOnly ? "session is read-only" : "session is not read-only");
          continue;
        }
      }
      return c;
    }
  }
  return Error{errors.empty() ? "no host to connect to" : errors};
}

Connection::~Connection() {
  if (fd_ < 0) return;
  if (!timedOut_) {
    const std::string bye = wire::terminate();
    [[maybe_unused]] auto n = ::send(fd_, bye.data(), bye.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  ::close(fd_);
}

std::string Connection::parameter(const std::string& name) const {
  auto it = parameters_.find(name);
  return it == parameters_.end() ? "" : it->second;
}

Result<bool> Connection::send(const std::string& bytes, Clock::time_point deadline) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!waitFd(fd_, POLLOUT, deadline)) {
        timedOut_ = true;
        return Error{"timeout expired while sending"};
      }
    } else if (n < 0 && errno != EINTR) {
      return Error{errnoText("could not send data to server")};
    }
  }
  return true;
}

Result<wire::Message> Connection::receive(Clock::time_point deadline) {
  while (true) {
    auto m = reader_.next();
    if (!m) return Error{m.error()};
    if (m.value()) return std::move(*m.value());
    char buffer[16384];
    ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      reader_.feed(std::string_view(buffer, static_cast<size_t>(n)));
    } else if (n == 0) {
      return Error{"server closed the connection unexpectedly"};
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!waitFd(fd_, POLLIN, deadline)) {
        timedOut_ = true;
        return Error{"timeout expired"};
      }
    } else if (errno != EINTR) {
      return Error{errnoText("could not receive data from server")};
    }
  }
}

Result<bool> Connection::startup(const ConnectParams& params, Clock::time_point deadline) {
  std::vector<std::pair<std::string, std::string>> startupParams = {{"user", params.user}};
  if (params.replication != "true") startupParams.emplace_back("database", params.dbname);
  if (!params.replication.empty()) startupParams.emplace_back("replication", params.replication);
  if (!params.options.empty()) startupParams.emplace_back("options", params.options);
  if (!params.applicationName.empty()) startupParams.emplace_back("application_name", params.applicationName);
  startupParams.emplace_back("client_encoding", "UTF8");
  if (auto s = send(wire::startup(startupParams), deadline); !s) return s;
  std::optional<ScramClient> scram;
  const auto noPassword = [&] { return Error{"fe_sendauth: no password supplied"}; };
  while (true) {
    auto m = receive(deadline);
    if (!m) return Error{m.error()};
    wire::BodyCursor body(m->body);
    switch (m->type) {
      case 'E':
        return Error{wire::describeError(m->body)};
      case 'R': {
        const int32_t code = body.int32();
        if (code == 0) break;  // AuthenticationOk
        if (code == 3) {       // cleartext password
          if (!params.password) return noPassword();
          if (auto s = send(wire::password(*params.password), deadline); !s) return s;
        } else if (code == 10) {  // SASL: the mechanisms offered
          bool scramOffered = false;
          for (std::string mech = body.cstring(); !mech.empty() && !body.failed(); mech = body.cstring()) {
            if (mech == "SCRAM-SHA-256") scramOffered = true;
          }
          if (!scramOffered) return Error{"the server offers no SASL mechanism this client knows (SCRAM-SHA-256)"};
          if (!params.password) return noPassword();
          scram.emplace(*params.password, base64Encode(randomBytes(18)));
          if (auto s = send(wire::saslInitialResponse("SCRAM-SHA-256", scram->clientFirst()), deadline); !s) return s;
        } else if (code == 11) {  // SASLContinue: server-first-message
          if (!scram) return Error{"protocol error: SASL continue without SASL"};
          auto final = scram->clientFinal(body.remaining());
          if (!final) return Error{final.error()};
          if (auto s = send(wire::saslResponse(final.value()), deadline); !s) return s;
        } else if (code == 12) {  // SASLFinal: server-final-message
          if (!scram) return Error{"protocol error: SASL final without SASL"};
          if (auto v = scram->verifyServerFinal(body.remaining()); !v) return v;
        } else if (code == 5) {
          return Error{"the server asks for MD5 password authentication, which dugong's client does not do: store "
                       "the role's password as scram-sha-256"};
        } else {
          return Error{"authentication method " + std::to_string(code) + " is not supported"};
        }
        break;
      }
      case 'S': {
        std::string name = body.cstring();
        parameters_[name] = body.cstring();
        break;
      }
      case 'K':
        backendPid_ = body.int32();
        backendSecret_ = body.int32();
        break;
      case 'Z':
        ready_ = true;
        return true;
      case 'N':
        break;
      default:
        return Error{"protocol error: unexpected message '" + std::string(1, m->type) + "' during startup"};
    }
    if (body.failed()) return Error{"protocol error: short message '" + std::string(1, m->type) + "'"};
  }
}

bool Connection::ready() const {
  if (!ready_ || fd_ < 0 || reader_.buffered() > 0) return false;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

Result<QueryResult> Connection::query(const std::string& sql, Clock::time_point deadline) {
  ready_ = false;
  if (auto s = send(wire::query(sql), deadline); !s) {
    if (timedOut_) cancel();
    return Error{s.error()};
  }
  QueryResult last;
  std::optional<std::string> firstError;
  std::string warnings;     // WARNING notices of this query, kept for an unexpected close
  bool rowsStarted = false;  // a RowDescription in the current statement
  while (true) {
    auto m = receive(deadline);
    if (!m) {
      if (timedOut_) {
        cancel();
        return Error{"timeout expired"};
      }
      // A server that ends the session (FATAL) sends its error first. One that ends it while
      // a commit waits for its sync sends only a WARNING (the commit may exist locally).
      if (firstError) return Error{*firstError};
      return Error{m.error() + warnings};
    }
    wire::BodyCursor body(m->body);
    switch (m->type) {
      case 'T': {
        last = QueryResult{};
        rowsStarted = true;
        const int16_t n = body.int16();
        for (int f = 0; f < n && !body.failed(); ++f) {
          last.columns.push_back(body.cstring());
          body.bytes(18);  // table oid, column, type oid, size, modifier, format
        }
        break;
      }
      case 'D': {
        Row row;
        const int16_t n = body.int16();
        for (int f = 0; f < n && !body.failed(); ++f) {
          const int32_t len = body.int32();
          if (len < 0) {
            row.emplace_back(std::nullopt);
          } else {
            row.emplace_back(body.bytes(static_cast<size_t>(len)));
          }
        }
        last.rows.push_back(std::move(row));
        break;
      }
      case 'C':
      case 'I':
        if (!rowsStarted) last = QueryResult{};
        rowsStarted = false;
        break;
      case 'E':
        if (!firstError) firstError = wire::describeError(m->body);
        break;
      case 'Z':
        ready_ = true;
        if (firstError) return Error{*firstError};
        return last;
      case 'G':  // COPY FROM STDIN: refused
        if (auto s = send(wire::copyFail("COPY FROM STDIN is not supported by dugong's client"), deadline); !s) {
          return Error{s.error()};
        }
        break;
      case 'S': {
        std::string name = body.cstring();
        parameters_[name] = body.cstring();
        break;
      }
      case 'N': {
        const std::string notice = wire::describeError(m->body);
        if (notice.rfind("WARNING", 0) == 0) warnings += "; " + notice;
        break;
      }
      case 'A':
      case 'H':  // COPY TO STDOUT: its data is skipped
      case 'd':
      case 'c':
        break;
      default:
        return Error{"protocol error: unexpected message '" + std::string(1, m->type) + "'"};
    }
    if (body.failed()) return Error{"protocol error: short message '" + std::string(1, m->type) + "'"};
  }
}

void Connection::cancel() {
  if (backendPid_ == 0) return;
  auto fd = connectSocket(asSockaddr(address_), static_cast<socklen_t>(address_.size()),
                          Clock::now() + std::chrono::seconds(2));
  if (!fd) return;
  const std::string request = wire::cancelRequest(backendPid_, backendSecret_);
  [[maybe_unused]] auto n = ::send(fd.value(), request.data(), request.size(), MSG_NOSIGNAL);
  // The server closes the connection when it has read the request.
  waitFd(fd.value(), POLLIN, Clock::now() + std::chrono::seconds(2));
  ::close(fd.value());
}

}  // namespace dugong::pg
