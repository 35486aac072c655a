#include "pg/controller_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <utility>

#include <spdlog/spdlog.h>

namespace dugong::pg {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A program's run for the log: one line at info when it succeeded (its output at debug),
// its output with the warning when it failed.
void logOutput(const std::string& what, const CommandResult& r) {
  std::string out = r.output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  if (r.ok()) {
    spdlog::info("pg: {} finished in {} ms", what, r.elapsed.count());
    if (!out.empty()) spdlog::debug("pg: {} printed:\n{}", what, out);
  } else {
    spdlog::warn("pg: {} failed ({}) after {} ms{}{}", what, r.describe(), r.elapsed.count(), out.empty() ? "" : ":\n",
                 out);
  }
}

std::string lastLines(const std::string& text, int n) {
  size_t pos = text.size();
  int lines = 0;
  while (pos > 0 && lines <= n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
    ++lines;
  }
  return text.substr(pos + 1);
}

// The whole line of `text` around the last occurrence of `what`, if any.
std::optional<std::string> lineWith(const std::string& text, const std::string& what) {
  const auto at = text.rfind(what);
  if (at == std::string::npos) return std::nullopt;
  auto begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  const auto end = text.find('\n', at);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The line of a standby's server log tail that says why it cannot follow its upstream.
std::optional<std::string> cannotFollowEvidence(const std::string& logTail) {
  for (const char* what : {"forked off current database system timeline", "is not in this server's history",
                           "has already been removed", "is not a child of this server's history"}) {
    if (auto line = lineWith(logTail, what)) return line;
  }
  return std::nullopt;
}

// Milliseconds since `start`, for the log.
long long msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

std::string oneLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (auto& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

Result<bool> portFree(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return true;  // not IPv4: let postgres tell
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return true;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = errno;
  ::close(fd);
  if (rc != 0 && err == EADDRINUSE) {
    return Error{"port " + std::to_string(port) + " on " + host + " is already in use by another program"};
  }
  return true;
}

// The state letter of a process in /proc/<pid>/stat (R, S, D, T, t, Z, ...), if it exists,
// and whether it is a postgres process.
std::optional<std::pair<char, bool>> procStateOf(pid_t pid) {
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return std::nullopt;
  return std::make_pair(stat[close + 2], stat.find("(postgres)") != std::string::npos);
}

// The pid in the first line of a postgres lock file (postmaster.pid, or the socket's
// .s.PGSQL.<port>.lock) while it names a live postmaster. The pid may have been reused:
// check that it is a postgres process, and not a zombie (a killed postmaster whose parent
// has not reaped it yet, which postgres itself would take for a running server).
std::optional<pid_t> postmasterOfLockFile(const std::string& lockFile) {
  std::ifstream in(lockFile);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return std::nullopt;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return std::nullopt;
  auto state = procStateOf(static_cast<pid_t>(pid));
  if (!state || state->first == 'Z' || !state->second) return std::nullopt;
  return static_cast<pid_t>(pid);
}

bool lockFileHeldByLivePostmaster(const std::string& lockFile) { return postmasterOfLockFile(lockFile).has_value(); }

std::optional<pid_t> livePostmasterPid(const std::string& dataDir) {
  return postmasterOfLockFile(dataDir + "/postmaster.pid");
}

bool processStopped(pid_t pid) {
  auto state = procStateOf(pid);
  return state && (state->first == 'T' || state->first == 't');
}

const char kDiscardCommand[] =
    "If this data is not needed, stop the agent and run `dugong-adm rebuild --config <this agent's dugong.yaml> "
    "--discard-data`; if it is, check the agent's cluster name and ZooKeeper, or set the cluster up from this peer";
const char* const kInstanceSql = "(extract(epoch from pg_postmaster_start_time()) * 1000000)::bigint::text";

PgConfigApplied failed(std::string error, bool online) {
  PgConfigApplied out;
  out.ok = false;
  out.error = std::move(error);
  out.online = online;
  return out;
}
// Data the cluster may need would be replaced: only an operator can resolve it.
PgConfigApplied refused(std::string error, bool online) {
  PgConfigApplied out = failed(std::move(error), online);
  out.refused = true;
  return out;
}
PgConfigApplied succeeded(bool online) {
  PgConfigApplied out;
  out.ok = true;
  out.online = online;
  return out;
}

}  // namespace dugong::pg
