#include "tests/support/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace dugong::testing {
namespace {

int connectTo(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

namespace {
int listenOnLoopback() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("tcp proxy: cannot listen: " + why);
  }
  return fd;
}
}  // namespace

TcpProxy::TcpProxy(std::string upstreamHost, int upstreamPort)
    : TcpProxy(listenOnLoopback(), [host = std::move(upstreamHost), upstreamPort] { return connectTo(host, upstreamPort); }) {}

TcpProxy::TcpProxy(int listenFd, std::function<int()> connectUpstream)
    : connectUpstream_(std::move(connectUpstream)), listenFd_(listenFd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 || ::pipe(wakeFd_) != 0) {
    ::close(listenFd_);
    throw std::runtime_error(std::string("tcp proxy: cannot listen: ") + std::strerror(errno));
  }
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  (void)!::write(wakeFd_[1], "x", 1);
  thread_.join();
  closeLinks();
  ::close(listenFd_);
  ::close(wakeFd_[0]);
  ::close(wakeFd_[1]);
}

void TcpProxy::heal() {
  healRequested_ = true;
  (void)!::write(wakeFd_[1], "x", 1);
}

void TcpProxy::closeLinks() {
  for (auto& l : links_) {
    if (l.client >= 0) ::close(l.client);
    if (l.upstream >= 0) ::close(l.upstream);
  }
  links_.clear();
}

void TcpProxy::run() {
  char buf[16384];
  while (!stop_) {
    if (healRequested_.exchange(false)) {
      closeLinks();  // both ends see the connection go and reconnect
      cut_ = false;
    }
    std::vector<pollfd> fds{{wakeFd_[0], POLLIN, 0}, {listenFd_, POLLIN, 0}};
    for (const auto& l : links_) {
      fds.push_back({l.client, POLLIN, 0});
      fds.push_back({l.upstream, POLLIN, 0});
    }
    const size_t polledLinks = links_.size();  // a link accepted below was not polled yet
    if (::poll(fds.data(), fds.size(), 200) <= 0) continue;
    if (fds[0].revents) (void)!::read(wakeFd_[0], buf, sizeof buf);
    if (fds[1].revents & POLLIN) {
      int c = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        // While cut, a new connection is accepted and never answered.
        int u = cut_ ? -1 : connectUpstream_();
        if (!cut_ && u < 0) {
          ::close(c);
        } else {
          links_.push_back({c, u});
        }
      }
    }
    std::vector<size_t> dead;
    for (size_t i = 0; i < polledLinks; ++i) {
      for (int side = 0; side < 2; ++side) {
        const pollfd& p = fds[2 + 2 * i + static_cast<size_t>(side)];
        if (p.fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(p.fd, buf, sizeof buf);
        if (n <= 0) {
          dead.push_back(i);
          break;
        }
        if (cut_) continue;  // dropped: the partition
        int to = side == 0 ? links_[i].upstream : links_[i].client;
        if (to < 0 || ::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) {
          dead.push_back(i);
          break;
        }
      }
    }
    for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
      Link& l = links_[*it];
      if (l.client >= 0) ::close(l.client);
      if (l.upstream >= 0) ::close(l.upstream);
      links_.erase(links_.begin() + static_cast<long>(*it));
    }
  }
}

}  // namespace dugong::testing
