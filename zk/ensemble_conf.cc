#include "zk/ensemble_conf.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace dugong::zk {

std::optional<EnsembleConf> parseEnsembleConf(const std::string& text) {
  EnsembleConf c;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    const int value = std::atoi(line.c_str() + eq + 1);
    if (key == "tickTime") c.tickTimeMs = value;
    if (key == "minSessionTimeout") c.minSessionTimeoutMs = value;
    if (key == "maxSessionTimeout") c.maxSessionTimeoutMs = value;
  }
  if (c.tickTimeMs <= 0) return std::nullopt;
  return c;
}

namespace {

// Waits for `events` on `fd` until `deadline`; false on timeout or error.
bool await(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, static_cast<int>(left.count())) == 1 && (p.revents & events) != 0;
}

// The answer of host:port to `word`, or "" (nothing within `timeout`).
std::string ask(const std::string& host, const std::string& port, const std::string& word,
                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return "";
  std::string out;
  for (addrinfo* a = found; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const bool connected = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 || (errno == EINPROGRESS && await(fd, POLLOUT, deadline));
    int err = 0;
    socklen_t len = sizeof err;
    if (connected && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0 &&
        ::send(fd, word.data(), word.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(word.size())) {
      char buf[4096];
      while (await(fd, POLLIN, deadline)) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return out;
}

}  // namespace

std::optional<EnsembleConf> readEnsembleConf(const std::string& connectString, std::chrono::milliseconds timeout) {
  std::istringstream in(connectString);
  std::string server;
  while (std::getline(in, server, ',')) {
    const auto colon = server.rfind(':');
    if (colon == std::string::npos) continue;
    if (auto conf = parseEnsembleConf(ask(server.substr(0, colon), server.substr(colon + 1), "conf", timeout))) {
      conf->server = server;
      return conf;
    }
  }
  return std::nullopt;
}

}  // namespace dugong::zk
