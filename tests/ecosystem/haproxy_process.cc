#include "tests/ecosystem/haproxy_process.h"

#include "pg/testing/pg_test_cluster.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace dugong::ecosystem {
namespace {

using namespace std::chrono_literals;

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b);
}

bool startsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Runs argv with stdout and stderr appended to `logPath`; returns the child's pid.
pid_t spawn(std::vector<std::string> args, const std::string& logPath) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  int fd = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  ::execvp(argv[0], argv.data());
  ::_exit(127);
}

}  // namespace

Result<std::string> rewriteHaproxyConfig(const std::string& sample, const std::vector<HaproxyServer>& servers,
                                         int writePort, int readPort, const std::string& statsSocket, int anyPort) {
  std::istringstream in(sample);
  std::ostringstream out;
  std::string section;
  bool rwBind = false, roBind = false, rwServers = false, roServers = false, anyServers = false;
  for (std::string line; std::getline(in, line);) {
    const std::string t = trimmed(line);
    if (!line.empty() && line[0] != ' ' && line[0] != '\t' && line[0] != '#') {
      section = t;
      out << line << "\n";
      if (section == "global") out << "    maxconn 200\n    stats socket " << statsSocket << " mode 600 level admin\n";
      continue;
    }
    if (section == "global") continue;  // chroot, user, syslog, daemon: not for a test
    const bool rw = section == "listen dugong_rw", ro = section == "listen dugong_ro",
               any = section == "listen dugong_any";
    if ((rw || ro || any) && startsWith(t, "bind ")) {
      out << "    bind 127.0.0.1:" << (rw ? writePort : ro ? readPort : anyPort) << "\n";
      if (rw) rwBind = true;
      if (ro) roBind = true;
      continue;
    }
    if ((rw || ro || any) && startsWith(t, "server ")) {
      bool& done = rw ? rwServers : ro ? roServers : anyServers;
      if (!done) {
        for (const auto& s : servers) {
          out << "    server " << s.name << " 127.0.0.1:" << s.pgPort << " check port " << s.httpPort << "\n";
        }
      }
      done = true;
      continue;
    }
    if (startsWith(t, "log ") || t == "option tcplog") continue;  // no syslog in a test
    out << line << "\n";
  }
  if (!rwBind || !roBind || !rwServers || !roServers) {
    return Error{"the sample HAProxy configuration lacks a bind or server line in listen dugong_rw or dugong_ro"};
  }
  return out.str();
}

HaproxyProcess::HaproxyProcess(const std::string& samplePath, std::vector<HaproxyServer> servers)
    : samplePath_(samplePath), servers_(std::move(servers)) {
  configPath_ = dir_.path() + "/haproxy.cfg";
  logPath_ = dir_.path() + "/haproxy.log";
  statsSocket_ = dir_.path() + "/haproxy.sock";
}

HaproxyProcess::~HaproxyProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

Result<bool> HaproxyProcess::start() {
  const std::string sample = readFile(samplePath_);
  if (sample.empty()) return Error{"cannot read " + samplePath_};
  writePort_ = dugong::testing::freeLoopbackPort();
  readPort_ = dugong::testing::freeLoopbackPort();
  anyPort_ = dugong::testing::freeLoopbackPort();
  auto config = rewriteHaproxyConfig(sample, servers_, writePort_, readPort_, statsSocket_, anyPort_);
  if (!config) return Error{config.error()};
  std::ofstream(configPath_) << config.value();
  const pid_t check = spawn({"haproxy", "-c", "-q", "-f", configPath_}, logPath_);
  int status = 0;
  ::waitpid(check, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Error{"haproxy -c rejects " + configPath_ + ":\n" + logTail()};
  }
  pid_ = spawn({"haproxy", "-db", "-f", configPath_}, logPath_);
  for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Error{"haproxy exited at start:\n" + logTail()};
    }
    if (accepts(writePort_) && accepts(readPort_)) return true;
    std::this_thread::sleep_for(50ms);
  }
  return Error{"haproxy does not listen on 127.0.0.1:" + std::to_string(writePort_) + " after 10 s:\n" + logTail()};
}

std::map<std::string, std::string> HaproxyProcess::serverStatus() const {
  std::map<std::string, std::string> out;
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", statsSocket_.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return out;
  }
  const std::string command = "show stat\n";
  std::string reply;
  if (::write(fd, command.data(), command.size()) == static_cast<ssize_t>(command.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  // CSV: pxname, svname, ... with the status in the 18th column.
  std::istringstream lines(reply);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::istringstream fields(line);
    for (std::string f; std::getline(fields, f, ',');) cols.push_back(f);
    if (cols.size() > 17 && cols[1] != "FRONTEND" && cols[1] != "BACKEND") out[cols[0] + "/" + cols[1]] = cols[17];
  }
  return out;
}

std::string HaproxyProcess::logTail() const {
  std::string all = readFile(logPath_);
  return all.size() > 4000 ? all.substr(all.size() - 4000) : all;
}

ProbeResult probeThrough(int port, const std::string& sql) {
  ProbeResult r;
  // The test clusters run with passwords (scram over TCP), as production does.
  const std::string portText = std::to_string(port);
  const char* const keys[] = {"host", "port", "user", "dbname", "password", "connect_timeout", "options", nullptr};
  const char* const values[] = {"127.0.0.1", portText.c_str(), "postgres", "postgres",
                                pg::testing::kTestSuperuserPassword, "2", "-c statement_timeout=2000", nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, 0);
  if (PQstatus(conn) != CONNECTION_OK) {
    r.error = PQerrorMessage(conn);
    PQfinish(conn);
    return r;
  }
  PGresult* who = PQexec(conn, "SELECT inet_server_port(), pg_is_in_recovery()");
  if (PQresultStatus(who) == PGRES_TUPLES_OK && PQntuples(who) == 1) {
    r.connected = true;
    r.serverPort = std::atoi(PQgetvalue(who, 0, 0));
    r.inRecovery = std::string(PQgetvalue(who, 0, 1)) == "t";
  } else {
    r.error = PQerrorMessage(conn);
  }
  PQclear(who);
  if (r.connected && !sql.empty()) {
    PGresult* res = PQexec(conn, sql.c_str());
    const auto st = PQresultStatus(res);
    r.ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!r.ok) r.error = PQerrorMessage(conn);
    PQclear(res);
  } else if (r.connected) {
    r.ok = true;
  }
  PQfinish(conn);
  return r;
}

}  // namespace dugong::ecosystem
