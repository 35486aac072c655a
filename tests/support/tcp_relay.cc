#include "tests/support/tcp_relay.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>

namespace dugong::testing {

TcpRelay::TcpRelay(int listenFd, std::function<int()> connectUpstream)
    : listenFd_(listenFd), connectUpstream_(std::move(connectUpstream)), thread_([this] { run(); }) {}

TcpRelay::~TcpRelay() {
  stop_ = true;
  thread_.join();
  for (auto& l : links_) {  // wakes every pump
    ::shutdown(l->client, SHUT_RDWR);
    ::shutdown(l->upstream, SHUT_RDWR);
  }
  for (auto& l : links_) {
    l->in.join();
    l->out.join();
    ::close(l->client);
    ::close(l->upstream);
  }
  ::close(listenFd_);
}

void TcpRelay::reapEndedLinks() {
  for (auto it = links_.begin(); it != links_.end();) {
    Link& l = **it;
    if (l.ended < 2) {
      ++it;
      continue;
    }
    l.in.join();
    l.out.join();
    ::close(l.client);
    ::close(l.upstream);
    it = links_.erase(it);
  }
}

void TcpRelay::run() {
  while (!stop_) {
    reapEndedLinks();
    pollfd p{listenFd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int upstream = connectUpstream_();
    if (upstream < 0) {
      ::close(client);
      continue;
    }
    auto l = std::make_unique<Link>();
    l->client = client;
    l->upstream = upstream;
    l->in = std::thread(pump, client, upstream, std::ref(l->ended));
    l->out = std::thread(pump, upstream, client, std::ref(l->ended));
    links_.push_back(std::move(l));
  }
}

// One direction until its end, which is passed on (the other direction goes on).
void TcpRelay::pump(int from, int to, std::atomic<int>& ended) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(from, buf, sizeof buf);
    if (n <= 0) break;
    ssize_t sent = 0;
    while (sent < n) {
      const ssize_t m = ::send(to, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
      if (m <= 0) {
        ::shutdown(from, SHUT_RD);  // the other side is gone: this direction ends too
        ::shutdown(to, SHUT_WR);
        ++ended;
        return;
      }
      sent += m;
    }
  }
  ::shutdown(to, SHUT_WR);
  ++ended;
}

}  // namespace dugong::testing
